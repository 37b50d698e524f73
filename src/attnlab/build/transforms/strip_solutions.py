"""Student branch: replace solution code with TODOs. Needs parse_questions' labels (runs after it)."""

from __future__ import annotations

import copy

from .markers import ASSIGNMENT_LINE, BEGIN_SOLUTION, END_SOLUTION, META, SOLUTION_SUFFIX


def strip_source(source: str) -> str:
    out, inside = [], False
    for line in source.split("\n"):
        begin = BEGIN_SOLUTION.match(line)
        if begin:
            if inside:
                raise ValueError(f"nested BEGIN SOLUTION at {line.strip()!r}")
            inside = True
            indent = begin.group(1)
            out.append(f"{indent}# TODO: your code here")
            out.append(f"{indent}...")
            continue
        if END_SOLUTION.match(line):
            if not inside:
                raise ValueError("END SOLUTION without BEGIN SOLUTION")
            inside = False
            continue
        if inside:
            continue
        if SOLUTION_SUFFIX.search(line):
            assign = ASSIGNMENT_LINE.match(line)
            if assign:
                out.append(f"{assign.group(1)}{assign.group(2)} = ...  # TODO")
            else:
                indent = line[: len(line) - len(line.lstrip())]
                out.append(f"{indent}...  # TODO")
            continue
        out.append(line)
    if inside:
        raise ValueError("BEGIN SOLUTION is never closed with END SOLUTION")
    return "\n".join(out)


def strip_solutions(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get(META, {}).get("role") != "test":
            cell.source = strip_source(cell.source)
    return nb
