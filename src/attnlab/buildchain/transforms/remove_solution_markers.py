"""Solution branch: keep the solution code, drop the marker lines around it."""

from __future__ import annotations

import copy

from .markers import BEGIN_SOLUTION, END_SOLUTION, SOLUTION_SUFFIX


def remove_markers_from_source(source: str) -> str:
    lines = [line for line in source.split("\n") if not (BEGIN_SOLUTION.match(line) or END_SOLUTION.match(line))]
    return "\n".join(SOLUTION_SUFFIX.sub("", line) for line in lines)


def remove_solution_markers(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = remove_markers_from_source(cell.source)
    return nb
