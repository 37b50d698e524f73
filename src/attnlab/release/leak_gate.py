"""The release's leak gate: nothing a student must not see reaches the student repository.

Secret lines are the lines of every lab's solution blocks (the master), hidden tests and catalogue (mutants are
near-solutions). A line is a leak when it appears in any released file (a notebook's cells, a wheel's members
included), unless a released lab's master shows it outside its solution blocks (prose, signatures, public checks:
what its student notebook shows of its own) or the kit's hand-written modules hold it (their docstrings show
hidden-test idioms). Given cells (code the build copies from an earlier lab) are not in the later lab's master: a
secret line in one is a leak unless it is a line of the master of a closed lab (``attnlab.course`` says which labs
are closed); an open lab's solution never ships.
Instructor-only files (solutions, autograder, masters, hidden tests, catalogues, references) may not appear at all.
Nor may the written questions' reference answers and rubrics, of any lab, in any file (``written_secrets``: a run of
words of a reference answer, a rubric criterion; the build gate's rule), given cells and closed labs included: they
stay with the people who mark.
"""

from __future__ import annotations

import ast
import json
import zipfile
from datetime import datetime
from pathlib import Path

from attnlab.records.bundle_names import FILES

from ..buildchain.masters import Masters
from ..buildchain.transforms.check_no_leak import (
    instructor_lines,
    shown_elsewhere,
    written_leak,
    written_secrets,
    written_shown,
)
from ..buildchain.transforms.include_given import solution_code
from ..buildchain.transforms.markers import GIVEN_PREFIX
from ..course import Course, Lab, current_time

FORBIDDEN_DIRS = {"solutions", "autograder", "instructor"}
FORBIDDEN_NAMES = set(FILES)  # the autograder bundle's files (grading/core/bundle.py)


class ReleaseLeak(ValueError):
    """Instructor material would ship to students; the message names the file and the line."""


def secret_lines(course: Course, masters: Masters | None = None) -> dict[str, str]:
    """line -> where it comes from, over every lab of the course (not only the released ones): the build gate's
    rule (``instructor_lines``, ``check_no_leak.secret_line``): secret lines that the lab's master does not show
    outside its solution blocks."""
    masters = masters or Masters(course)
    secrets: dict[str, str] = {}
    for lab in course.labs:
        master = masters.notebook(lab.id)
        for path in (lab.catalogue, lab.hidden_tests):
            if path.exists():
                secrets.update(dict.fromkeys(instructor_lines([path.read_text()], master), f"{lab.id}/{path.name}"))
        secrets.update(dict.fromkeys(masters.solution_lines(lab.id), f"{lab.id} solution"))
    return secrets


def course_written_secrets(course: Course, masters: Masters | None = None) -> dict[str, str]:
    """The written questions' secrets (``written_secrets``) of every lab of the course, each saying its lab, but
    those that any lab's master shows students (a reference may quote another lab's prose) or the kit's hand-written
    modules hold (a docstring may say what a reference answer says): those ship anyway."""
    masters = masters or Masters(course)
    secrets: dict[str, str] = {}
    shown = list(_kit_sources(course))
    for lab in course.labs:
        master = masters.notebook(lab.id)
        shown.append(written_shown(master))
        for secret, what in written_secrets(master).items():
            secrets.setdefault(secret, f"{what} ({lab.id})")
    return shown_elsewhere(secrets, "\n".join(shown))


def _given_lines(masters: Masters, lab: Lab) -> set[str]:
    """The lines a later lab's given cell shows of ``lab``'s own definitions, as ``include_given`` cuts them
    (``ast.get_source_segment``: a definition's last line loses its trailing comment). Read from the raw master,
    whose given cells are ``# GIVEN`` lines only: code that ``lab`` took from an earlier lab is not among them."""
    code = solution_code(masters.notebook(lab.id))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    return {line.strip() for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef))
            for line in (ast.get_source_segment(code, node) or "").splitlines()}


def closed_lab_lines(course: Course, now: datetime, masters: Masters) -> set[str]:
    """Every line of the masters of the labs closed at ``now``, solutions included, and of their definitions as a
    given cell shows them: a later lab's given cell may show them. The raw master holds ``# GIVEN`` lines, not the
    code they stand for, so an open lab's code that a closed lab gives is not among them."""
    lines: set[str] = set()
    for lab in course.labs:
        if not lab.is_open(now):
            lines |= ({line.strip() for line in masters.text(lab.id).splitlines()} | masters.solution_lines(lab.id)
                      | _given_lines(masters, lab))
    return lines


def _released_files(out: Path):
    """(name, bytes) of every file under out, and of every member of the wheels in it (``x.whl!member``)."""
    for path in sorted(p for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts):
        rel = path.relative_to(out).as_posix()
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    yield f"{rel}!{member}", zf.read(member)
        else:
            yield rel, path.read_bytes()


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


def _cell_source(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    return "".join(source) if isinstance(source, list) else str(source)


def _texts(name: str, data: bytes):
    """(where, text, given) to scan in one released file: a notebook cell by cell (its JSON quotes every line, so
    the raw file would hide them), the rest of the notebook's strings after; any other file whole."""
    text = data.decode("utf-8", "replace")
    try:
        nb = json.loads(text) if name.endswith(".ipynb") else None
    except ValueError:
        nb = None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        yield name, text, False
        return
    for i, cell in enumerate(cells):
        source = _cell_source(cell)
        yield f"{name} cell {i}", source, source.startswith(GIVEN_PREFIX)
    rest = {**nb, "cells": [{k: v for k, v in c.items() if k != "source"} if isinstance(c, dict) else c
                            for c in cells]}
    yield name, "\n".join(_strings(rest)), False


def _shown_lines(labs: list[Lab], masters: Masters) -> set[str]:
    """Lines the released labs' masters show outside their solution blocks (prose, signatures, public checks): what
    their student notebooks show of their own. Not read from the release itself, so a planted line is no excuse;
    a given cell's code is not in the master (only its ``# GIVEN`` line is)."""
    lines: set[str] = set()
    for lab in labs:
        lines |= {line.strip() for line in masters.text(lab.id).splitlines()} - masters.solution_lines(lab.id)
    return lines


def _kit_sources(course: Course) -> list[str]:
    """The texts of the kit's hand-written modules (its docstrings show hidden-test idioms); the generated public
    checks are not among them, so a secret in a check is still caught."""
    package = course.root / "src" / "attnlab"
    return [path.read_text() for path in sorted(package.rglob("*.py"))
            if "public_tests" not in path.relative_to(package).parts]


def _kit_source_lines(course: Course) -> set[str]:
    """Lines of the kit's hand-written modules (``_kit_sources``)."""
    return {line.strip() for text in _kit_sources(course) for line in text.splitlines()}


def _check_name(name: str) -> None:
    parts = name.replace("!", "/").split("/")
    if set(parts) & FORBIDDEN_DIRS or parts[-1] in FORBIDDEN_NAMES:
        raise ReleaseLeak(f"release holds an instructor-only file: {name}")


def check_release(course: Course, labs: list[Lab], out: Path, *, now: datetime | None = None,
                  masters: Masters | None = None) -> None:
    """Raise ``ReleaseLeak`` naming the first instructor file or secret line found in ``out``; ``now`` (default:
    the current time) says which labs are closed; ``masters``: the run's masters, read once."""
    masters = masters or Masters(course)
    secrets = secret_lines(course, masters)
    written = course_written_secrets(course, masters)
    shown = _shown_lines(labs, masters) | _kit_source_lines(course)
    published = closed_lab_lines(course, now or current_time(), masters)
    for name, data in _released_files(out):
        _check_name(name)
        for where, text, given in _texts(name, data):
            secret = written_leak(text, written)
            if secret:
                raise ReleaseLeak(f"{where} holds {written[secret]}: {secret[:120]!r}; the reference answers and "
                                  "rubrics must not reach students")
            for line in text.splitlines():
                line = line.strip()
                if line in secrets and line not in shown and not (given and line in published):
                    raise ReleaseLeak(f"{where} holds a line of {secrets[line]}: {line[:120]!r}; it must not "
                                      "reach students")
