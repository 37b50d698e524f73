"""Student branch guard: no line of a solution block, and no line of a catalogue entry (mutants are
near-solutions), may reach the student notebook or the packaged public checks.

Runs on the master (labelled by parse_questions), the finished student notebook and the public test files.
"""

from __future__ import annotations

from textwrap import dedent

from .markers import BEGIN_SOLUTION, END_SOLUTION, SOLUTION_SUFFIX

GIVEN_PREFIX = "# Given (from "  # the first line include_given writes


class LeakError(ValueError):
    """Solution code would ship to students."""


def solution_lines(nb) -> set[str]:
    lines, inside = set(), False
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in cell.source.split("\n"):
            if BEGIN_SOLUTION.match(line):
                inside = True
            elif END_SOLUTION.match(line):
                inside = False
            elif inside or SOLUTION_SUFFIX.search(line):
                text = SOLUTION_SUFFIX.sub("", line).strip()
                if len(text) > 12 and not text.startswith("#"):
                    lines.add(text)
    return lines


def _significant(line: str) -> str | None:
    text = line.strip()
    return text if len(text) > 12 and not text.startswith("#") else None


def catalogue_lines(entries, master_nb) -> set[str]:
    """The lines of the catalogue entries' sources that the master does not show students anyway (a signature,
    ``super().__init__()``, a line of the given code outside the solution blocks is no secret)."""
    public: set[str] = set()
    for cell in master_nb.cells:
        public.update(t for t in map(_significant, cell.source.split("\n")) if t)
    public -= solution_lines(master_nb)
    secret: set[str] = set()
    for entry in entries:
        secret.update(t for t in map(_significant, dedent(entry.source).split("\n")) if t and t not in public)
    return secret


def check_no_leak(master_nb, student_nb, *, catalogue=(), public_files: dict[str, str] | None = None) -> None:
    """Given cells (earlier labs' code, see include_given) are meant to be there and are not checked.

    ``catalogue``: the lab's mutants and variants (``Entry`` objects); ``public_files``: the packaged public test
    files (name -> text), checked for solution and catalogue lines too.
    """
    secret = solution_lines(master_nb)
    mutants = catalogue_lines(catalogue, master_nb)
    for i, cell in enumerate(student_nb.cells):
        if cell.source.startswith(GIVEN_PREFIX):
            continue
        for line in cell.source.split("\n"):
            if line.strip() in secret:
                raise LeakError(f"student notebook cell {i} contains solution code: {line.strip()!r}; "
                                "put it inside # BEGIN SOLUTION / # END SOLUTION only once, or reword the hint")
            if line.strip() in mutants:
                raise LeakError(f"student notebook cell {i} contains a line of a catalogue entry: {line.strip()!r}; "
                                "the catalogue's mutants are near-solutions: reword the notebook or the entry")
    for name, text in (public_files or {}).items():
        for line in text.split("\n"):
            if line.strip() in secret or line.strip() in mutants:
                what = "solution code" if line.strip() in secret else "a line of a catalogue entry"
                raise LeakError(f"public check file {name} contains {what}: {line.strip()!r}; "
                                "a public check must not show the answer")
