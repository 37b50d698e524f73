"""parse_questions: question blocks, role labels, and every authoring mistake as a MasterError."""

import copy
from pathlib import Path

import nbformat
import pytest

from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.parse_questions import MasterError, check_name, parse_questions
from attnlab.buildchain.transforms.read_master import read_master

MASTER = Path(__file__).resolve().parents[1] / "fixtures" / "course" / "instructor" / "lab99_demo" / "lab99_demo.py"


def code(src):
    return nbformat.v4.new_code_cell(src)


def md(src):
    return nbformat.v4.new_markdown_cell(src)


def raw(src):
    return nbformat.v4.new_raw_cell(src)


def nb_of(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def question(name="q", points=None, *body, tests=("# always true\nassert True",)):
    head = f"# BEGIN QUESTION\nname: {name}" + (f"\npoints: {points}" if points is not None else "")
    return [raw(head), *body, raw("# BEGIN TESTS"), *[code(t) for t in tests], raw("# END TESTS"),
            raw("# END QUESTION")]


def roles(nb):
    return [(c.metadata[META]["role"], c.metadata[META]["question"]) for c in nb.cells]


def test_fixture_master_questions_and_labels():
    master = read_master(MASTER)
    labelled, questions = parse_questions(master)
    assert [(q.name, q.points) for q in questions] == [("double", 2.0), ("Scale", 1.0)]
    assert questions[0].tests == [master.cells[6].source]
    assert questions[1].tests == ["# Scale keeps the shape\nassert Scale(3)(torch.ones(2, 3)).shape == (2, 3)"]
    assert roles(labelled) == [
        ("body", None), ("body", None),
        ("marker", "double"), ("question", "double"), ("question", "double"),
        ("marker", "double"), ("test", "double"), ("marker", "double"), ("marker", "double"),
        ("marker", "Scale"), ("question", "Scale"), ("marker", "Scale"), ("test", "Scale"),
        ("marker", "Scale"), ("marker", "Scale"),
        ("body", None),
    ]
    # the input is not touched
    assert all(META not in c.metadata for c in master.cells)


def test_points_default_to_one_and_are_floats():
    _, questions = parse_questions(nb_of(*question("a"), *question("b", 2.5)))
    assert [(q.name, q.points) for q in questions] == [("a", 1.0), ("b", 2.5)]
    assert all(isinstance(q.points, float) for q in questions)


def test_assignment_config_cell_is_a_marker_and_markers_are_case_insensitive():
    labelled, questions = parse_questions(nb_of(raw("# ASSIGNMENT CONFIG\nseed: 1"),
                                                raw("# begin question\nname: low"), code("x = 1"),
                                                raw("#  End   Question")))
    assert [q.name for q in questions] == ["low"]
    assert roles(labelled) == [("marker", None), ("marker", "low"), ("question", "low"), ("marker", "low")]


def test_several_test_cells_are_kept_in_order():
    tests = ("# one\nassert 1", "# two\nassert 2", "# three\nassert 3")
    _, (q,) = parse_questions(nb_of(*question("q", 1, tests=tests)))
    assert q.tests == list(tests)
    assert [check_name(t, i) for i, t in enumerate(q.tests)] == ["one", "two", "three"]
    assert check_name("assert 1", 3) == "check 4"  # what a cell without a name would be called


def test_a_comment_mentioning_hidden_later_in_a_test_cell_is_fine():
    _, (q,) = parse_questions(nb_of(*question("q", 1, tests=("# x is set\nx = 1\n# not hidden: a public check\nassert x",))))
    assert len(q.tests) == 1


@pytest.mark.parametrize("cells, message", [
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# BEGIN QUESTION\nname: b")],
                 r"cell 1 .*BEGIN QUESTION inside question 'a'", id="nested question"),
    pytest.param([code("x = 1"), raw("# END QUESTION")], r"cell 1 .*END QUESTION without an open question",
                 id="END QUESTION without BEGIN"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# END TESTS")], r"END TESTS without BEGIN TESTS",
                 id="END TESTS without BEGIN"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), code("x = 1")], r"question 'a' is never closed",
                 id="unclosed question"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# BEGIN TESTS"), code("# one\nassert 1")],
                 r"question 'a' is never closed", id="unclosed tests at the end"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# BEGIN TESTS"), code("# one\nassert 1"),
                  raw("# END QUESTION")],
                 r"END QUESTION .*inside BEGIN/END TESTS", id="END QUESTION inside tests"),
    pytest.param([raw("# BEGIN TESTS"), code("assert 1"), raw("# END TESTS")],
                 r"cell 0 .*BEGIN TESTS must be inside a question", id="tests outside a question"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# BEGIN TESTS"), raw("# BEGIN TESTS")],
                 r"cell 2 .*BEGIN TESTS must be inside a question, once", id="BEGIN TESTS twice"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# BEGIN TESTS"), md("the check below"),
                  raw("# END TESTS"), raw("# END QUESTION")],
                 r"cell 2 \(markdown: 'the check below'\).*only code cells", id="markdown inside tests"),
    pytest.param([raw("# BEGIN QUESTION\nname: a"), raw("# BEGIN TESTS"), raw("just a note"),
                  raw("# END TESTS"), raw("# END QUESTION")], r"only code cells", id="raw cell inside tests"),
    pytest.param(question("a", 1, tests=("# HIDDEN\nassert a() == 1",)),
                 r"cell 2 .*hidden tests do not belong in the master.*hidden_tests.py", id="hidden test cell"),
    pytest.param(question("a", 1, tests=("\n   # a Hidden check\nassert 1",)), r"hidden_tests.py",
                 id="hidden marker after blank lines"),
    pytest.param([*question("a", 1), *question("a", 2)], r"cell 5 .*question 'a' is defined twice",
                 id="duplicate names"),
    pytest.param(question("a", 1, tests=("assert a() == 1",)),
                 r"cell 2 .*starts with one comment line naming.*what it checks", id="test cell without a name"),
    pytest.param(question("a", 1, tests=("#\nassert a() == 1",)), r"starts with one comment line", id="empty name"),
    pytest.param(question("a", 1, tests=("# " + "x" * 61 + "\nassert a() == 1",)), r"61 characters; keep it to 60",
                 id="name too long"),
    pytest.param([raw("# BEGIN QUESTION\npoints: 3"), raw("# END QUESTION")], r"needs a `name:` line",
                 id="missing name"),
    pytest.param([raw("# BEGIN QUESTION"), raw("# END QUESTION")], r"needs a `name:` line", id="no config at all"),
])
def test_malformed_masters_raise_master_error(cells, message):
    with pytest.raises(MasterError, match=message):
        parse_questions(nb_of(*cells))


@pytest.mark.parametrize("config", [
    pytest.param("# BEGIN QUESTION\nname", id="not a mapping (TypeError)"),
    pytest.param("# BEGIN QUESTION\nname: [unclosed", id="invalid YAML (YAMLError)"),
    pytest.param("# BEGIN QUESTION\nname: a\npoints: two", id="points not a number (bare ValueError)"),
])
def test_malformed_question_config_is_a_master_error_that_says_where(config):
    with pytest.raises(MasterError, match=r"cell 0"):
        parse_questions(nb_of(raw(config), raw("# END QUESTION")))


def test_master_error_is_a_value_error():
    assert issubclass(MasterError, ValueError)


def test_parse_does_not_mutate_its_input():
    nb = nb_of(*question("a", 1))
    before = copy.deepcopy(nb)
    parse_questions(nb)
    assert nb == before
