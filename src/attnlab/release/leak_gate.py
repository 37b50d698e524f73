"""The release's leak gate: nothing a student must not see reaches the student repository.

Secret lines are the lines of every lab's solution blocks (the master), hidden tests and catalogue (mutants are
near-solutions). A line is a leak when it appears in any released file, the wheel's members included, unless the
released student notebooks show it themselves (prose, stubs, public checks, code given from an earlier lab) or
the kit's hand-written modules hold it (their docstrings show hidden-test idioms).
Instructor-only files (solutions, autograder, masters, hidden tests, catalogues, references) may not appear at all.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import nbformat

from ..build.transforms.check_no_leak import instructor_lines, solution_lines
from ..course import Course, Lab
from ..grading.bundle import FILES

FORBIDDEN_DIRS = {"solutions", "autograder", "instructor"}
FORBIDDEN_NAMES = set(FILES)  # the autograder bundle's files (grading/bundle.py)


class ReleaseLeak(ValueError):
    """Instructor material would ship to students; the message names the file and the line."""


def secret_lines(course: Course) -> dict[str, str]:
    """line -> where it comes from, over every lab of the course (not only the released ones); the build gate's
    rule: secret lines (``secret_line``) that the lab's master does not show outside its solution blocks."""
    from ..build.transforms.read_master import read_master

    secrets: dict[str, str] = {}
    for lab in course.labs:
        master = read_master(lab.master)
        for path in (lab.catalogue, lab.hidden_tests):
            if path.exists():
                secrets.update(dict.fromkeys(instructor_lines([path.read_text()], master), f"{lab.id}/{path.name}"))
        secrets.update(dict.fromkeys(solution_lines(master), f"{lab.id} solution"))
    return secrets


def _released_texts(out: Path):
    """(name, text) of every file under out, and of every member of the wheels in it."""
    for path in sorted(p for p in out.rglob("*") if p.is_file() and ".git" not in p.relative_to(out).parts):
        rel = path.relative_to(out).as_posix()
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as zf:
                for member in zf.namelist():
                    yield f"{rel}!{member}", zf.read(member).decode("utf-8", "replace")
        else:
            yield rel, path.read_bytes().decode("utf-8", "replace")


def _notebook_lines(out: Path, labs: list[Lab]) -> set[str]:
    lines: set[str] = set()
    for lab in labs:
        nb = nbformat.reads((out / "labs" / lab.id / f"{lab.id}.ipynb").read_text(), as_version=4)
        for cell in nb.cells:
            lines |= {line.strip() for line in cell.source.splitlines()}
    return lines


def _kit_source_lines(course: Course) -> set[str]:
    """Lines of the kit's hand-written modules (its docstrings show hidden-test idioms); the generated public
    checks are not among them, so a secret line in a check is still caught."""
    package = course.root / "src" / "attnlab"
    return {line.strip() for path in package.rglob("*.py") if "public_tests" not in path.relative_to(package).parts
            for line in path.read_text().splitlines()}


def check_release(course: Course, labs: list[Lab], out: Path) -> None:
    """Raise ``ReleaseLeak`` naming the first instructor file or secret line found in ``out``."""
    secrets = secret_lines(course)
    shown = _notebook_lines(out, labs) | _kit_source_lines(course)
    for name, text in _released_texts(out):
        parts = name.replace("!", "/").split("/")
        if set(parts) & FORBIDDEN_DIRS or parts[-1] in FORBIDDEN_NAMES:
            raise ReleaseLeak(f"release holds an instructor-only file: {name}")
        for line in text.splitlines():
            line = line.strip()
            if line in secrets and line not in shown:
                raise ReleaseLeak(f"{name} holds a line of {secrets[line]}: {line[:120]!r}; it must not reach students")
