"""nbgrader's cell metadata on every notebook the build writes, so that one file serves Otter, attnlab and nbgrader.

``nbgrader_cells`` runs on the common notebook (after replace_tests, drop_marker_cells and insert_setup_cell,
before the student, solution and nbgrader branches split), so the three carry the same ``metadata.nbgrader`` on the
same cells: prose locked, each cell holding a solution block a solution cell, each ``grader.check("name")`` cell an
autograded test cell (``test_<name>``) worth the question's points, each written question's answer cell
(``answer_cells``) a manually graded answer cell (``grade_id``: the question's name) worth its points.
nbgrader's autograde matches a submitted cell to its gradebook by ``grade_id``; a notebook without them scores 0
(``grading/bridges/nbgrader_setup.py`` refuses such a notebook instead). The set-up cell is left to Jupyter's lock
(``lock_cells``): its install address differs between the notebooks ``attnlab release --url`` writes and the
course's own, and a locked cell that differs from the gradebook's is "changed" for nbgrader (a warning, and its
source replaced).

``add_checksums`` runs after normalize on the student and solution branches: each of those cells gets the
``checksum`` and ``cell_type`` nbgrader's ``generate_assignment`` writes into a released notebook, computed as
``nbgrader.utils.compute_checksum`` computes them (``checksum``; tests/test_nbgrader.py compares the two), so
that nbgrader's Validate and autograde find an untouched notebook unchanged. The nbgrader source gets none:
nbgrader computes its own.
"""

from __future__ import annotations

import copy
import hashlib

from .answer_cells import ANSWER_META
from .markers import BEGIN_SOLUTION, META, SOLUTION_SUFFIX

SCHEMA_VERSION = 3  # nbgrader >= 0.9


def test_id(question: str) -> str:
    return f"test_{question}"


def nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": SCHEMA_VERSION,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def holds_solution(source: str) -> bool:
    return any(BEGIN_SOLUTION.match(line) or SOLUTION_SUFFIX.search(line) for line in source.split("\n"))


def nbgrader_cells(nb, *, lab_id: str, points: dict[str, float]):
    """``points``: question -> points (the hidden tests' total), given to the question's test cell; a written
    answer cell carries its own."""
    nb = copy.deepcopy(nb)
    for i, cell in enumerate(nb.cells):
        label = cell.metadata.get(META, {})
        if label.get("role") == "check":
            question = label["question"]
            cell.metadata["nbgrader"] = nbgrader_meta(test_id(question), grade=True, locked=True,
                                                      points=float(points[question]))
        elif label.get("role") == "answer":
            cell.metadata["nbgrader"] = nbgrader_meta(label["question"], solution=True, grade=True,
                                                      points=float(cell.metadata[ANSWER_META]["points"]))
        elif cell.cell_type == "code" and label.get("role") != "setup" and holds_solution(cell.source):
            cell.metadata["nbgrader"] = nbgrader_meta(f"{lab_id}-cell-{i:03d}", solution=True)
        elif cell.cell_type == "markdown":
            cell.metadata["nbgrader"] = nbgrader_meta(f"{lab_id}-cell-{i:03d}", locked=True)
    return nb


def checksum(cell) -> str:
    """nbgrader's checksum of a cell (``nbgrader.utils.compute_checksum``, nbgrader 0.9): MD5 of the source, the
    cell type, whether it is graded, a solution and locked, its grade_id and, for a graded cell, its points."""
    meta = cell.metadata["nbgrader"]
    solution = bool(meta.get("solution"))
    grade = bool(meta.get("grade"))
    locked = False if solution else (True if grade else bool(meta.get("locked")))  # nbgrader.utils.is_locked
    parts = [cell.source, cell.cell_type, str(grade), str(solution), str(locked), meta["grade_id"]]
    if grade:
        parts.append(str(float(meta["points"])))
    digest = hashlib.md5()
    for part in parts:
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()


def add_checksums(nb):
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata["nbgrader"]["checksum"] = checksum(cell)
            cell.metadata["nbgrader"]["cell_type"] = cell.cell_type
    return nb
