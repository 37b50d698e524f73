"""nbgrader_setup: what the course's nbgrader_config.py adds to nbgrader (alembic on PATH, a notebook without test
cells refused with what to do, the skip tag kept off graded cells)."""

import os
import sys

import nbformat
import pytest

pytest.importorskip("nbgrader")

from attnlab.grading.nbgrader_setup import (  # noqa: E402
    SKIP_TAG,
    NoTestCells,
    RequireTestCells,
    sanitize_preprocessors,
    tools_on_path,
)

RESOURCES = {"nbgrader": {"assignment": "lab05_self_attention", "student": "alice", "notebook": "lab05_self_attention"}}


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _code(source, nbgrader=None, tags=None):
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    if tags:
        cell.metadata["tags"] = tags
    return cell


def test_a_notebook_without_test_cells_is_refused_with_what_to_do():
    nb = _notebook(_code("def f(): ..."), _code('grader.check("f")'))
    with pytest.raises(NoTestCells) as refused:
        RequireTestCells().preprocess(nb, RESOURCES)
    said = str(refused.value)
    assert "alice/lab05_self_attention/lab05_self_attention.ipynb" in said and "would score it 0" in said
    assert "attnlab grade lab05_self_attention" in said and "labs/lab05_self_attention/" in said


def test_graded_cells_lose_the_skip_tag_and_experiments_keep_it():
    test = _code('grader.check("f")', {"grade": True, "grade_id": "test_f", "points": 1.0}, tags=[SKIP_TAG, "x"])
    experiment = _code("train()", tags=[SKIP_TAG])
    nb, _ = RequireTestCells().preprocess(_notebook(test, experiment), RESOURCES)
    assert nb.cells[0].metadata["tags"] == ["x"] and nb.cells[1].metadata["tags"] == [SKIP_TAG]


def test_the_check_runs_before_nbgraders_own_steps():
    steps = sanitize_preprocessors()
    assert steps[0] is RequireTestCells and [s.__name__ for s in steps[1:]][-2:] == ["OverwriteCells",
                                                                                     "CheckCellMetadata"]


def test_tools_on_path_puts_this_pythons_folder_first(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    tools_on_path()
    assert os.environ["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    tools_on_path()  # once only
    assert os.environ["PATH"].count(os.path.dirname(sys.executable)) == 1
