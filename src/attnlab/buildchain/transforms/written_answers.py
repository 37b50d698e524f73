"""Written questions: each reference answer becomes the question's one answer cell.

Runs on the common notebook after drop_marker_cells (which drops the BEGIN/END SOLUTION raw cells around a
reference) and before nbgrader_cells (which makes the answer cell nbgrader's manually graded answer cell). The
reference's Markdown cells (role ``reference``) become ONE Markdown cell, role ``answer``, whose metadata says
which question it answers and its points (``ANSWER_META``: the grader finds a student's answer by it). It still
holds the reference: the solution and nbgrader-source branches keep it, the student branch (``strip_solutions``)
replaces it with ``PLACEHOLDER``, and nbgrader's release writes the same placeholder (``ClearSolutions.text_stub``,
nbgrader_source.py). The rubric never reaches a notebook: it lives in the configuration cell, a marker.
"""

from __future__ import annotations

import copy

import nbformat

from .markers import META

PLACEHOLDER = "_Type your answer here, replacing this text._"  # one owner: the build, nbgrader's stub, the grader
ANSWER_META = "attnlab"  # cell.metadata["attnlab"] == {"written": name, "points": points}


def answer_cell(name: str, points: float, source: str):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata[ANSWER_META] = {"written": name, "points": points}
    cell.metadata[META] = {"role": "answer", "question": name}
    return cell


def written_answers(nb, points: dict[str, float]):
    """``points``: written question -> its points. The reference cells of each become one answer cell."""
    nb = copy.deepcopy(nb)
    cells, done = [], set()
    for cell in nb.cells:
        label = cell.metadata.get(META, {})
        if label.get("role") != "reference":
            cells.append(cell)
            continue
        name = label["question"]
        if name not in done:
            done.add(name)
            reference = [c.source.strip("\n") for c in nb.cells
                         if c.metadata.get(META, {}) == {"role": "reference", "question": name}]
            cells.append(answer_cell(name, points[name], "\n\n".join(reference)))
    nb.cells = cells
    return nb
