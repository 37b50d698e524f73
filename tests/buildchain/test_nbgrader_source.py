"""nbgrader_cells and nbgrader_source: every notebook the build writes carries the same nbgrader metadata (prose
locked, solution cells, one autograded test cell per question worth its points, the ``grader.check`` cell
itself), checksums computed as nbgrader computes them; the nbgrader source differs only by nbgrader's solution
markers; nbgrader_config names the course and skips experiments."""

import copy

import nbformat
import pytest

from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.nbgrader_cells import add_checksums, checksum, nbgrader_cells
from attnlab.buildchain.transforms.nbgrader_source import nbgrader_config, nbgrader_source


def _cell(make, src, role, question=None, tags=None):
    cell = make(src)
    cell.metadata[META] = {"role": role, "question": question}
    if tags:
        cell.metadata["tags"] = tags
    return cell


@pytest.fixture
def labelled():
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [
        _cell(v4.new_markdown_cell, "# Title", "body"),
        _cell(v4.new_code_cell, "grader, device = start_lab('lab99')", "setup"),
        _cell(v4.new_code_cell, "def double(x):\n    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION", "question",
              "double"),
        _cell(v4.new_code_cell, "answer = 42  # SOLUTION", "question", "answer"),
        _cell(v4.new_code_cell, 'grader.check("double")', "check", "double"),
        _cell(v4.new_code_cell, "train_for_a_minute()", "body", tags=["otter_ignore"]),
        _cell(v4.new_code_cell, "x = 1", "body"),
    ]
    return nbgrader_cells(nb, lab_id="lab99", points={"double": 3.0, "answer": 1.0})


def test_cells_get_nbgrader_roles(labelled):
    meta = [c.metadata.get("nbgrader") for c in labelled.cells]
    assert meta[0]["locked"] is True  # prose
    assert meta[1] is None  # set-up: its install address differs between a release and the course's notebooks
    assert meta[2]["solution"] is True and meta[3]["solution"] is True and not meta[2]["grade"]
    assert meta[2]["grade_id"] == "lab99-cell-002"
    assert meta[4] == {"grade": True, "grade_id": "test_double", "locked": True, "points": 3.0,
                       "schema_version": 3, "solution": False, "task": False}
    assert meta[5] is None and meta[6] is None  # experiments and plain code: neither answer nor locked
    assert labelled.cells[4].source == 'grader.check("double")'  # the test cell is the check cell itself


def test_solution_cells_use_nbgrader_markers_and_nothing_else_changes(labelled):
    out = nbgrader_source(labelled)
    double, answer = out.cells[2], out.cells[3]
    assert double.source.split("\n") == ["def double(x):", "    ### BEGIN SOLUTION", "    return 2 * x",
                                         "    ### END SOLUTION"]
    assert answer.source.split("\n") == ["### BEGIN SOLUTION", "answer = 42", "### END SOLUTION"]
    assert [c.source for i, c in enumerate(out.cells) if i not in (2, 3)] == \
        [c.source for i, c in enumerate(labelled.cells) if i not in (2, 3)]
    assert labelled.cells[2].source.startswith("def double(x):\n    # BEGIN SOLUTION")  # input untouched


def test_checksums_are_nbgraders():
    utils = pytest.importorskip("nbgrader.utils")
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [_cell(v4.new_markdown_cell, "# Title é", "body"), _cell(v4.new_code_cell, "x = 1", "setup"),
                _cell(v4.new_code_cell, "y = 2  # SOLUTION", "question", "q"),
                _cell(v4.new_code_cell, 'grader.check("q")', "check", "q")]
    out = add_checksums(nbgrader_cells(nb, lab_id="lab99", points={"q": 2.5}))
    marked = [cell for cell in out.cells if "nbgrader" in cell.metadata]
    assert len(marked) == 3  # prose, answer, test; not the set-up cell
    for cell in marked:
        assert cell.metadata["nbgrader"]["checksum"] == utils.compute_checksum(cell)
        assert cell.metadata["nbgrader"]["cell_type"] == cell.cell_type
    changed = copy.deepcopy(out.cells[3])
    changed.source = 'grader.check("q")  # edited'
    assert checksum(changed) != out.cells[3].metadata["nbgrader"]["checksum"]


def test_config_names_the_course_and_skips_experiments():
    text = nbgrader_config("My course")
    assert "c.CourseDirectory.course_id = 'My course'" in text
    assert "c.Execute.skip_cells_with_tag = SKIP_TAG" in text and "tools_on_path()" in text
    compile(text, "nbgrader_config.py", "exec")
