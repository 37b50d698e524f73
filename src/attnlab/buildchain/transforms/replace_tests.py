"""Replace each question's public test cells by one ``grader.check("name")`` cell.

Runs after parse_questions (reads roles) and before drop_marker_cells (the END TESTS marker tells
where the check cell goes). The test sources live on in the public test files (public_tests.py).
"""

from __future__ import annotations

import copy

import nbformat

from .markers import END_TESTS, META, first_line


def check_cell(question: str):
    cell = nbformat.v4.new_code_cell(f'grader.check("{question}")')
    cell.metadata[META] = {"role": "check", "question": question}
    return cell


def replace_tests(nb):
    nb = copy.deepcopy(nb)
    cells = []
    for cell in nb.cells:
        label = cell.metadata.get(META, {})
        if label.get("role") == "test":
            continue
        if label.get("role") == "marker" and END_TESTS.match(first_line(cell.source)):
            cells.append(check_cell(label["question"]))
        cells.append(cell)
    nb.cells = cells
    return nb
