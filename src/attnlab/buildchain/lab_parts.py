"""``missing_parts``: what a lab needs beside its master and hidden tests (``docs/ARCHITECTURE.md``, "Add a lab"),
and is missing: the build warns for each, naming the file to write."""

from __future__ import annotations

import re

from ..course import Course, Lab

CURRICULUM = "docs/CURRICULUM.md"


def missing_parts(course: Course, lab: Lab) -> list[str]:
    """One warning per missing part of ``lab``: its catalogue, its README, its contract section in the curriculum."""
    number = re.match(r"lab(\d+)", lab.id)
    out = []
    if not lab.catalogue.exists():
        out.append(f"{lab.id} has no catalogue: write instructor/{lab.id}/catalogue.py (MUTANTS: the mistakes "
                   "students make, each with a hint; VARIANTS: correct alternatives) so the grader can name likely "
                   "mistakes and `attnlab catalogue` can check the hidden tests")
    if not (lab.master.parent / "README.md").exists():
        out.append(f"{lab.id} has no README: write instructor/{lab.id}/README.md (questions, points, contract, "
                   "timings, what the experiments show)")
    curriculum = course.root / CURRICULUM
    heading = f"## Lab {number.group(1) if number else lab.id}"
    text = curriculum.read_text(encoding="utf-8") if curriculum.exists() else ""
    if not re.search(rf"^{re.escape(heading)}\b", text, flags=re.MULTILINE):
        out.append(f"{lab.id} has no contract: add a `{heading}: <title>` section to {CURRICULUM} with the graded "
                   "names, signatures and attributes")
    return out
