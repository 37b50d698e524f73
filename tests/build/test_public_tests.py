"""public_tests: Otter exception-format test files; public checks run against the notebook's globals,
hidden cases only reference hidden tests by name."""

import torch
from otter.test_files import ExceptionTestFile

from attnlab.build.transforms.parse_questions import Question
from attnlab.build.transforms.public_tests import public_test_files, render_test_file

CHECKS = [
    'out = double(torch.tensor([1.0, 2.0]))\n'
    'assert torch.equal(out, torch.tensor([2.0, 4.0])), "double([1, 2]) should be [2, 4]"',
    "\nassert double(torch.zeros(3)).shape == (3,), 'keep the shape'\n",
]
QUESTION = Question("double", 2.0, list(CHECKS))
HIDDEN_SOURCE_WORDS = ("compare_call", "randn", "generator=rng")


def good_env():
    return {"torch": torch, "double": lambda x: x * 2}


def load(text):
    return ExceptionTestFile.from_string(text, path="tests/double.py")


def test_public_file_loads_with_otter_and_a_correct_notebook_passes():
    tf = load(render_test_file(QUESTION))
    assert tf.name == "double"
    assert [tc.name for tc in tf.test_cases] == ["check 1", "check 2"]
    assert not any(tc.hidden for tc in tf.test_cases)
    env = good_env()
    tf.run(env)
    assert tf.passed_all, [r.message for r in tf.test_case_results]
    assert "out" not in env  # the checks' own variables stay out of the notebook


def test_a_wrong_notebook_fails_with_the_assert_message():
    tf = load(render_test_file(QUESTION))
    tf.run({"torch": torch, "double": lambda x: x + 1})
    first, second = tf.test_case_results
    assert not first.passed and "double([1, 2]) should be [2, 4]" in first.message
    assert second.passed  # the shape is right


def test_a_missing_definition_fails_with_a_name_error():
    tf = load(render_test_file(QUESTION))
    tf.run({"torch": torch})
    assert not any(r.passed for r in tf.test_case_results)
    assert "NameError" in tf.test_case_results[0].message and "double" in tf.test_case_results[0].message


def test_checks_run_the_public_sources_verbatim_and_in_order():
    ns = {}
    exec(compile(render_test_file(QUESTION), "t.py", "exec"), ns)
    assert ns["_PUBLIC"] == [c.strip("\n") for c in CHECKS]
    assert ns["OK_FORMAT"] is False and ns["name"] == "double" and ns["points"] is None


def test_hidden_cases_appear_only_when_requested():
    public = render_test_file(QUESTION)
    assert "hidden=True" not in public and "run_hidden_test" not in public
    text = render_test_file(QUESTION, [("double_values", 1.5), ("double_grad", 0.5)])
    tf = load(text)
    cases = {tc.name: tc for tc in tf.test_cases}
    assert list(cases) == ["check 1", "check 2", "double_values", "double_grad"]
    assert [cases[n].hidden for n in cases] == [False, False, True, True]
    # the question is worth what its hidden tests are worth; the public checks count nothing there
    assert [cases[n].points for n in cases] == [0, 0, 1.5, 0.5]
    assert tf.possible == 2.0
    ns = {}
    exec(compile(text, "t.py", "exec"), ns)
    assert ns["points"] == 2.0


def test_hidden_cases_hold_no_test_source_only_the_name():
    text = render_test_file(QUESTION, [("double_values", 2.0)])
    for word in HIDDEN_SOURCE_WORDS:
        assert word not in text
    assert "run_hidden_test(env, 'double_values')" in text


def test_a_hidden_case_calls_the_bridge_by_name(monkeypatch):
    import attnlab.grading.otter_bridge as bridge

    calls = []
    monkeypatch.setattr(bridge, "run_hidden_test", lambda env, name: calls.append((env["marker"], name)))
    tf = load(render_test_file(QUESTION, [("double_values", 2.0)]))
    tf.run({**good_env(), "marker": 7})
    assert calls == [(7, "double_values")]
    assert tf.passed_all


def test_a_question_without_checks_renders_an_empty_list():
    text = render_test_file(Question("solo", 1.0, []))
    assert "_PUBLIC = []" in text
    assert load(text).test_cases == []


def test_public_test_files_one_per_question():
    files = public_test_files([QUESTION, Question("Scale", 1.0, ["assert Scale(2)"])])
    assert sorted(files) == ["Scale.py", "double.py"]
    assert files["double.py"] == render_test_file(QUESTION)
    assert "hidden=True" not in "".join(files.values())
