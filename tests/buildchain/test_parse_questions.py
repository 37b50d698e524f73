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


# ------------------------------------------------------------------------------------------------ written questions
def written(name="w", points=2, rubric=None, body=None):
    rubric = rubric if rubric is not None else ('  - criterion: "names the number"\n    points: 1.5\n'
                                                '  - criterion: "says why"\n    points: 0.5\n'
                                                '  - criterion: "no number of their own"\n    points: -1')
    head = f"# BEGIN QUESTION\nname: {name}\nmanual: true\npoints: {points}\nrubric:\n{rubric}"
    body = body if body is not None else [md("Explain your plot."), raw("# BEGIN SOLUTION"), md("The reference."),
                                          md("Its second part."), raw("# END SOLUTION")]
    return [raw(head), *body, raw("# END QUESTION")]


def test_a_written_question_has_its_prompt_reference_rubric_and_labels():
    labelled, questions = parse_questions(nb_of(md("intro"), *written(), *question("code", 1, code("x = 1"))))
    w, c = questions
    assert (w.name, w.points, w.manual, w.tests) == ("w", 2.0, True, [])
    assert w.rubric == [("names the number", 1.5), ("says why", 0.5), ("no number of their own", -1.0)]
    assert (w.prompt, w.reference) == ("Explain your plot.", "The reference.\n\nIts second part.")
    assert (c.manual, c.rubric, c.prompt, c.reference) == (False, [], "", "")
    assert roles(labelled)[:8] == [("body", None), ("marker", "w"), ("question", "w"), ("marker", "w"),
                                   ("reference", "w"), ("reference", "w"), ("marker", "w"), ("marker", "w")]


@pytest.mark.parametrize("cells, message", [
    pytest.param(written(body=[md("p"), code("x = 1"), raw("# BEGIN SOLUTION"), md("r"), raw("# END SOLUTION")]),
                 r"cell 2 \(code.*written question 'w' \(manual: true\) holds Markdown cells only", id="code cell"),
    pytest.param(written(body=[md("p"), raw("# BEGIN TESTS"), code("# c\nassert 1"), raw("# END TESTS")]),
                 r"cell 2 .*holds Markdown cells only", id="tests"),
    pytest.param(written(body=[md("p")]), r"written question 'w' needs a Markdown prompt and a reference answer",
                 id="no reference"),
    pytest.param(written(body=[raw("# BEGIN SOLUTION"), md("r"), raw("# END SOLUTION")]),
                 r"needs a Markdown prompt", id="no prompt"),
    pytest.param(written(body=[md("p"), raw("# BEGIN SOLUTION"), md("r")]),
                 r"reference answer of 'w' is never closed", id="unclosed reference"),
    pytest.param(written(body=[md("p"), raw("# END SOLUTION")]), r"END SOLUTION without BEGIN SOLUTION",
                 id="END SOLUTION alone"),
    pytest.param(written(body=[md("p"), raw("# BEGIN SOLUTION"), md("r"), raw("# END SOLUTION"),
                               raw("# BEGIN SOLUTION"), md("r2"), raw("# END SOLUTION")]),
                 r"one reference answer", id="two references"),
    pytest.param(written(body=[md("p"), raw("# BEGIN SOLUTION"), md("r"), raw("# END SOLUTION"), md("more")]),
                 r"a cell after the reference answer of 'w'", id="prompt after the reference"),
    pytest.param(written(points=3), r"positive rubric items of 'w' add up to 2 points but the question is worth 3",
                 id="rubric does not add up"),
    pytest.param(written(points=0, rubric='  - criterion: "x"\n    points: -1'), r"worth 0 points.*> 0",
                 id="no points"),
    pytest.param(written(rubric="  []"), r"needs a `rubric:` list", id="empty rubric"),
    pytest.param(written(rubric='  - criterion: "x"'), r"rubric item 1 of 'w' is .*points: N", id="item without points"),
    pytest.param(written(rubric='  - points: 2'), r"rubric item 1 of 'w'", id="item without criterion"),
    pytest.param(written(rubric='  - criterion: "x"\n    points: yes'), r"rubric item 1", id="points not a number"),
    pytest.param([raw("# BEGIN QUESTION\nname: w\nmanual: yes please"), raw("# END QUESTION")],
                 r"manual='yes please'; write `manual: true`", id="manual not a boolean"),
    pytest.param([raw('# BEGIN QUESTION\nname: c\nrubric:\n  - criterion: "x"\n    points: 1'), raw("# BEGIN TESTS"),
                  code("# c\nassert 1"), raw("# END TESTS"), raw("# END QUESTION")],
                 r"question 'c' has a rubric but no `manual: true`", id="rubric on a code question"),
])
def test_malformed_written_questions_raise_master_error(cells, message):
    with pytest.raises(MasterError, match=message):
        parse_questions(nb_of(*cells))
