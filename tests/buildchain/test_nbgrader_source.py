"""nbgrader_source: solution cells with nbgrader's markers, locked prose and set-up, one autograded test cell per
question worth its points, experiments behind %%experiment; nbgrader_config names the course."""

import nbformat
import pytest

from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.nbgrader_source import EXPERIMENT_MAGIC, nbgrader_config, nbgrader_source


def _cell(make, src, role, question=None, tags=None):
    cell = make(src)
    cell.metadata[META] = {"role": role, "question": question}
    if tags:
        cell.metadata["tags"] = tags
    return cell


@pytest.fixture
def converted():
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
    return nb, nbgrader_source(nb, lab_id="lab99", points={"double": 3.0, "answer": 1.0})


def test_solution_cells_use_nbgrader_markers(converted):
    _, out = converted
    double, answer = out.cells[2], out.cells[3]
    assert double.source.split("\n") == ["def double(x):", "    ### BEGIN SOLUTION", "    return 2 * x",
                                         "    ### END SOLUTION"]
    assert answer.source.split("\n") == ["### BEGIN SOLUTION", "answer = 42", "### END SOLUTION"]
    for cell in (double, answer):
        assert cell.metadata["nbgrader"]["solution"] is True and cell.metadata["nbgrader"]["grade"] is False


def test_check_cell_becomes_an_autograded_test_worth_the_points(converted):
    _, out = converted
    test = out.cells[4]
    meta = test.metadata["nbgrader"]
    assert meta["grade"] is True and meta["locked"] is True and meta["points"] == 3.0
    assert meta["grade_id"] == "test_double"
    assert 'require_checks(grader, "double", globals())' in test.source
    hidden = test.source.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
    assert 'run_hidden_tests(globals(), "lab99", "double")' in hidden


def test_prose_and_setup_locked_experiments_skipped_when_grading(converted):
    nb, out = converted
    assert out.cells[0].metadata["nbgrader"]["locked"] is True
    assert out.cells[1].metadata["nbgrader"]["locked"] is True
    assert "register_experiment_magic()" in out.cells[1].source
    assert out.cells[5].source == EXPERIMENT_MAGIC + "train_for_a_minute()"
    assert "nbgrader" not in out.cells[6].metadata  # plain code: neither answer nor locked
    assert nb.cells[5].source == "train_for_a_minute()"  # input untouched


def test_config_names_the_course():
    text = nbgrader_config("My course")
    assert "c.CourseDirectory.course_id = 'My course'" in text
    compile(text, "nbgrader_config.py", "exec")
