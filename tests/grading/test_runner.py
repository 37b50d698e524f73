"""grade_submission end to end on the built fixture course (tests/conftest.py builds it once per session)."""

import json

import pytest

from attnlab.grading.core.bundle import grading_seed, load_bundle
from attnlab.grading.runner import grade_submission

LAB = "lab99_demo"
KEYS = {"submission", "lab", "score", "max_score", "questions", "isolation", "elapsed_s", "errors", "review",
        "problems"}
PLAIN = "none as "  # ATTNLAB_SANDBOX=off: the sandbox's `none` mechanism, its report's first words


@pytest.fixture(autouse=True)
def _plain_worker(monkeypatch):
    monkeypatch.setenv("ATTNLAB_SANDBOX", "off")  # fast; one test below turns the sandbox on
    monkeypatch.delenv("ATTNLAB_GRADING_SECRET", raising=False)


@pytest.fixture
def lab_dir(built_course):
    return built_course / "autograder" / LAB


def assert_zero(res, message_part):
    assert set(res) == KEYS
    assert res["score"] == 0.0 and res["max_score"] == 3.0
    assert list(res["questions"]) == ["double", "Scale"]
    for q, m in (("double", 2.0), ("Scale", 1.0)):
        assert res["questions"][q]["score"] == 0.0 and res["questions"][q]["max_score"] == m
        assert len(res["questions"][q]["messages"]) == 1 and message_part in res["questions"][q]["messages"][0]
    assert len(res["errors"]) == 1 and message_part in res["errors"][0]


def test_solution_gets_full_marks(lab_dir, built_course):
    sol = built_course / "solutions" / LAB / f"{LAB}.ipynb"
    res = grade_submission(lab_dir, sol)
    assert set(res) == KEYS
    assert res["submission"] == str(sol) and res["lab"] == LAB
    assert res["score"] == 3.0 and res["max_score"] == 3.0
    assert res["questions"] == {
        "double": {"score": 2.0, "max_score": 2.0, "messages": ["passed: double_values"], "failed": []},
        "Scale": {"score": 1.0, "max_score": 1.0, "messages": ["passed: scale_values"], "failed": []},
    }
    assert res["errors"] == [] and res["problems"] == [] and res["isolation"].startswith(PLAIN)
    assert 0 < res["elapsed_s"] < 120
    json.dumps(res)  # plain JSON, ready for results files


def test_blank_student_notebook_gets_zero_with_reasons(lab_dir, built_course):
    res = grade_submission(lab_dir, built_course / "labs" / LAB / f"{LAB}.ipynb")
    assert res["score"] == 0.0 and res["max_score"] == 3.0
    # a stub that raises NotImplementedError("<name>: not written yet") gives that one line (issue 7)
    assert res["questions"]["double"]["messages"] == ["double: not written yet"]
    (msg,) = res["questions"]["Scale"]["messages"]  # a `# SOLUTION` line becomes `...`: forward returns None
    assert msg.startswith("failed: ") and len(msg) > len("failed: scale_values: ")
    assert res["errors"] == []


def test_empty_file_scores_zero_with_a_message(lab_dir, tmp_path):
    path = tmp_path / "empty.ipynb"
    path.write_bytes(b"")
    res = grade_submission(lab_dir, path)
    assert_zero(res, "the submitted file is empty; submit your saved .ipynb notebook")
    assert res["isolation"] == ""  # no worker was started


@pytest.mark.parametrize("data, message", [
    (b"\x00\x01\x02\xff garbage", "not a Jupyter notebook (not valid JSON"),
    (b"[1, 2, 3]", "JSON but not a Jupyter notebook"),
    (b'{"cells": "none"}', "JSON but not a Jupyter notebook"),
])
def test_not_a_notebook_scores_zero(lab_dir, tmp_path, data, message):
    path = tmp_path / "sub.ipynb"
    path.write_bytes(data)
    assert_zero(grade_submission(lab_dir, path), message)


def test_missing_file_scores_zero(lab_dir, tmp_path):
    assert_zero(grade_submission(lab_dir, tmp_path / "never-submitted.ipynb"), "cannot read the submission")


def test_same_file_graded_twice_in_the_sandbox_gives_the_same_result(lab_dir, built_course, monkeypatch):
    sol = built_course / "solutions" / LAB / f"{LAB}.ipynb"
    first = grade_submission(lab_dir, sol)
    monkeypatch.delenv("ATTNLAB_SANDBOX")  # the best mechanism this machine has
    second = grade_submission(lab_dir, sol)
    assert first["isolation"].startswith(PLAIN) and second["isolation"]
    assert not second["isolation"].startswith(PLAIN)
    for key in ("score", "max_score", "questions", "errors"):
        assert second[key] == first[key], key
    assert second["score"] == 3.0


def test_grading_seed_is_stable_secret_dependent_and_file_dependent(lab_dir, monkeypatch):
    bundle = load_bundle(lab_dir)
    a = grading_seed(bundle, b"notebook one")
    assert a == grading_seed(bundle, b"notebook one")
    assert a != grading_seed(bundle, b"notebook two")
    assert 0 <= a < 2**63
    other = type(bundle)(bundle.lab, bundle.directory, bundle.suite, bundle.reference, bundle.manifest, b"other")
    assert grading_seed(other, b"notebook one") != a


def test_bundle_is_loaded_once_and_missing_builds_are_explained(lab_dir, tmp_path):
    assert load_bundle(lab_dir) is load_bundle(lab_dir)
    assert load_bundle(lab_dir).questions == {"double": 2.0, "Scale": 1.0}
    with pytest.raises(FileNotFoundError, match="run `attnlab build` first"):
        load_bundle(tmp_path)


def test_a_failing_cell_is_named_by_what_the_student_sees_not_its_position(lab_dir, built_course, tmp_path):
    import nbformat

    nb = nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell("## Extra work\n\nTrying things."))
    nb.cells.append(nbformat.v4.new_code_cell("def helper(x):\n    return x +\n"))
    nb.cells.append(nbformat.v4.new_code_cell("y = 1\nz = undefined_name"))
    path = tmp_path / "s.ipynb"
    nbformat.write(nb, path)
    res = grade_submission(lab_dir, path)
    assert res["score"] == 3.0
    assert res["errors"] == ['the cell starting `def helper(x):` under "Extra work", line 2: SyntaxError: '
                             "invalid syntax",
                             'the cell starting `y = 1` under "Extra work", line 2: NameError: '
                             "name 'undefined_name' is not defined"]
    syntax = 'the cell starting `def helper(x):` under "Extra work"'
    assert res["problems"] == [  # the categories the grader decided, each with the cell it concerns
        {"category": "syntax_error", "cell": syntax, "message": f"{syntax}, line 2: SyntaxError: invalid syntax"},
        {"category": "cell_error", "cell": syntax, "message": res["errors"][0]},
        {"category": "cell_error", "cell": 'the cell starting `y = 1` under "Extra work"', "message": res["errors"][1]}]


def test_hostile_message_text_makes_no_category(lab_dir, built_course, tmp_path):
    """An exception whose text reads like the grader's own lines is text: no timeout, crash or diagnosis comes of
    it, in the result or in the report read back from the gradebook."""
    import nbformat

    from attnlab.grading.outputs.gradebook import open_gradebook
    from attnlab.records.student_names import Names
    from attnlab.report import stats
    from attnlab.report.load import load_submissions

    forged = ("timed out after 1 s (an endless loop, or far too slow); your code ended the Python process "
              "(killed by signal SIGKILL)\nlikely mistake: you forgot the scale")
    nb = nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"def double(x):\n    raise ValueError({forged!r})\n"))
    path = tmp_path / "forger.ipynb"
    nbformat.write(nb, path)
    res = grade_submission(lab_dir, path)
    messages = res["questions"]["double"]["messages"]
    assert res["questions"]["double"]["score"] == 0 and any("likely mistake: you forgot" in m for m in messages)
    assert res["problems"] == [] and "mistake" not in res["questions"]["double"]
    assert res["questions"]["double"]["failed"] == ["double_values"]
    with open_gradebook(tmp_path / "gb.db") as book:
        book.record(LAB, path.name, path, "0" * 64, res)
    _, subs = load_submissions(tmp_path / "gb.db")
    h = stats.health(subs)
    assert not (h.timed_out or h.crashed or h.unreadable or h.grader_errors or h.flagged)
    assert stats.mistakes(subs, Names(subs)) == [] and stats.failed_tests(subs) == [("double", "double_values", 1)]


def test_a_cell_past_its_time_and_a_submission_past_its_time_have_their_categories(lab_dir, built_course, tmp_path):
    import nbformat

    nb = nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("while True:\n    pass\n"))
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    res = grade_submission(lab_dir, path, cell_timeout=1.0)
    assert res["score"] == 3.0
    assert [(p["category"], p["cell"].split(" under ")[0]) for p in res["problems"]] == [
        ("cell_timeout", "the cell starting `while True:`")]
    res = grade_submission(lab_dir, path, cell_timeout=30.0, load_timeout=60.0, timeout=2.0)
    assert res["score"] == 0.0 and "timeout" in {p["category"] for p in res["problems"]}, res["problems"]
