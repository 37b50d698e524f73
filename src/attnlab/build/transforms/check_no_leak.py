"""Student branch guard: no line of a solution block may reach the student notebook.

Runs on the master (labelled by parse_questions) and the finished student notebook.
"""

from __future__ import annotations

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


def check_no_leak(master_nb, student_nb) -> None:
    """Given cells (earlier labs' code, see include_given) are meant to be there and are not checked."""
    secret = solution_lines(master_nb)
    for i, cell in enumerate(student_nb.cells):
        if cell.source.startswith(GIVEN_PREFIX):
            continue
        for line in cell.source.split("\n"):
            if line.strip() in secret:
                raise LeakError(f"student notebook cell {i} contains solution code: {line.strip()!r}; "
                                "put it inside # BEGIN SOLUTION / # END SOLUTION only once, or reword the hint")
