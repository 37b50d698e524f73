"""Written questions: each reference answer becomes the question's one answer cell, framed for Otter's PDF export.

Runs on the common notebook after drop_marker_cells (which drops the BEGIN/END SOLUTION raw cells around a
reference) and before nbgrader_cells (which makes the answer cell nbgrader's manually graded answer cell). The
reference's Markdown cells (role ``reference``) become ONE Markdown cell, role ``answer``, whose metadata says
which question it answers and its points (``ANSWER_META``: the grader finds a student's answer by it). It still
holds the reference: the solution and nbgrader-source branches keep it, the student branch (``strip_solutions``)
replaces it with ``PLACEHOLDER``, and nbgrader's release writes the same placeholder (``ClearSolutions.text_stub``,
nbgrader_source.py). The rubric never reaches a notebook: it lives in the configuration cell, a marker.

As Otter Assign frames a manual question, a Markdown cell holding only ``EXPORT_BEGIN`` comes before the prompt and
one holding ``EXPORT_END`` after the answer (role ``export``, locked like all prose; invisible in Jupyter): Otter
Export's filtering (``otter export --filtering``, and Otter's Gradescope autograder with a PDF upload) keeps exactly
the written questions' prompts and answers, one per page with ``--pagebreaks``.
"""

from __future__ import annotations

import copy

import nbformat

from .markers import META

ANSWER_META = "attnlab"  # cell.metadata["attnlab"] == {"written": name, "points": points}
EXPORT_BEGIN = "<!-- BEGIN QUESTION -->"  # Otter Export's filtering comments (otter/export/exporters/utils.py)
EXPORT_END = "<!-- END QUESTION -->"


def answer_cell(name: str, points: float, source: str):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata[ANSWER_META] = {"written": name, "points": points}
    cell.metadata[META] = {"role": "answer", "question": name}
    return cell


def _export_cell(comment: str, name: str):
    cell = nbformat.v4.new_markdown_cell(comment)
    cell.metadata[META] = {"role": "export", "question": name}
    return cell


def answer_cells(nb, points: dict[str, float]):
    """``points``: written question -> its points. The reference cells of each become one answer cell, and the
    question (prompt and answer) is framed by Otter's export comments."""
    nb = copy.deepcopy(nb)
    cells, opened, answered = [], set(), set()
    for cell in nb.cells:
        label = cell.metadata.get(META, {})
        name = label.get("question")
        if name not in points or label.get("role") not in ("question", "reference"):
            cells.append(cell)
        elif label["role"] == "question":
            if name not in opened:
                opened.add(name)
                cells.append(_export_cell(EXPORT_BEGIN, name))
            cells.append(cell)
        elif name not in answered:
            answered.add(name)
            reference = [c.source.strip("\n") for c in nb.cells
                         if c.metadata.get(META, {}) == {"role": "reference", "question": name}]
            cells += [answer_cell(name, points[name], "\n\n".join(reference)), _export_cell(EXPORT_END, name)]
    nb.cells = cells
    return nb
