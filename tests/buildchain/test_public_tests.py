"""public_tests: Otter exception-format test files; each public check is named by its cell's first comment line,
runs against a copy of the notebook's globals, and fails showing its own statement and message (never the kit's
plumbing); hidden cases only reference hidden tests by name."""

import torch
from otter.test_files import ExceptionTestFile

from attnlab.buildchain.transforms.parse_questions import Question
from attnlab.buildchain.transforms.public_tests import public_test_files, render_test_file
from attnlab.kit.public_check import PublicCheck, format_result

CHECKS = [
    '# double([1, 2]) is [2, 4]\n'
    'out = double(torch.tensor([1.0, 2.0]))\n'
    'assert torch.equal(out, torch.tensor([2.0, 4.0])), "double([1, 2]) should be [2, 4]"',
    "\n# the shape is kept\nassert double(torch.zeros(3)).shape == (3,), 'keep the shape'\n",
    '# values of a worked example\n'
    'from attnlab.kit.expect import expect_close\n'
    'expect_close(double(torch.tensor([0.5, 1.5])), [1.0, 3.0], "double([0.5, 1.5])")',
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
    assert [tc.name for tc in tf.test_cases] == ["double([1, 2]) is [2, 4]", "the shape is kept",
                                                "values of a worked example"]
    assert not any(tc.hidden for tc in tf.test_cases)
    env = good_env()
    tf.run(env)
    assert tf.passed_all, [r.message for r in tf.test_case_results]
    assert "out" not in env  # the checks' own variables stay out of the notebook
    assert format_result("double", tf) == "[pass] double: all 3 checks passed"


def test_a_wrong_notebook_shows_the_check_name_its_statement_and_the_message():
    tf = load(render_test_file(QUESTION))
    tf.run({"torch": torch, "double": lambda x: x + 1})
    first, second, third = tf.test_case_results
    assert not first.passed and second.passed and not third.passed
    # plain Otter prints the test file's line where it failed: the check's own line, not the kit's plumbing
    assert 'assert torch.equal(out, torch.tensor([2.0, 4.0])), "double([1, 2]) should be [2, 4]"' in first.message
    assert "double([1, 2]) should be [2, 4]" in first.message and "PublicCheck" not in first.message
    shown = format_result("double", tf, show_source=True)
    assert shown.splitlines() == [
        "[FAIL] double: 2 of 3 checks failed",
        "[FAIL] double([1, 2]) is [2, 4]",
        '     assert torch.equal(out, torch.tensor([2.0, 4.0])), "double([1, 2]) should be [2, 4]"',
        "   double([1, 2]) should be [2, 4]",
        "[pass] the shape is kept",
        "[FAIL] values of a worked example",
        '     expect_close(double(torch.tensor([0.5, 1.5])), [1.0, 3.0], "double([0.5, 1.5])")',
        "   double([0.5, 1.5]): 2 of 2 values off, the worst at index (0,): yours 1.5, expected 1 (off by 0.5)",
    ]


def test_by_default_a_failed_check_shows_its_name_and_how_far_off_not_its_source(monkeypatch):
    monkeypatch.delenv("ATTNLAB_SHOW_SOURCE", raising=False)
    tf = load(render_test_file(QUESTION))
    tf.run({"torch": torch, "double": lambda x: x + 1})
    shown = format_result("double", tf)
    assert shown.splitlines() == [
        "[FAIL] double: 2 of 3 checks failed",
        "[FAIL] double([1, 2]) is [2, 4]",
        "   double([1, 2]) should be [2, 4]",
        "[pass] the shape is kept",
        "[FAIL] values of a worked example",
        "   double([0.5, 1.5]): 2 of 2 values off, the worst at index (0,): yours 1.5, expected 1 (off by 0.5)",
    ]
    assert shown.isascii()  # no emoji: renders where no emoji font is installed
    monkeypatch.setenv("ATTNLAB_SHOW_SOURCE", "1")
    assert "     expect_close(double(" in format_result("double", tf)
    assert "expect_close" not in format_result("double", tf, show_source=False)


def test_grader_check_passes_show_source_to_what_it_shows(monkeypatch):
    from attnlab.kit.public_check import Grader

    monkeypatch.delenv("ATTNLAB_SHOW_SOURCE", raising=False)
    tf = load(render_test_file(QUESTION))

    class Notebook:  # Otter's Notebook.check, as far as Grader uses it
        def check(self, question, global_env):
            tf.run(global_env)
            return tf

    env = {"torch": torch, "double": lambda x: x + 1}
    assert "expect_close" not in repr(Grader(Notebook()).check("double", env))
    assert "     expect_close(double(" in repr(Grader(Notebook()).check("double", env, show_source=True))


def test_a_multiline_statement_is_shown_whole():
    q = Question("f", 1.0, ['# f is 1\nassert f() == 1, (\n    "f() should be 1")'])
    tf = load(render_test_file(q))
    tf.run({"f": lambda: 2})
    shown = format_result("f", tf, show_source=True)
    assert shown.splitlines()[2:] == ['     assert f() == 1, (', '         "f() should be 1")', "   f() should be 1"]


def test_an_unwritten_answer_gives_one_line_naming_the_question_first():
    q = Question("merge", 1.0, ["# round trip\nassert merge(split(1)) == 1", "# merge alone\nassert merge(1) == 1"])

    def stub(name):
        def f(x):
            raise NotImplementedError(f"{name}: not written yet")
        return f

    tf = load(render_test_file(q))
    tf.run({"split": stub("split"), "merge": stub("merge")})
    assert format_result("merge", tf) == "[FAIL] merge: not written yet"
    tf.run({"split": stub("split"), "merge": lambda x: x})
    assert format_result("merge", tf).splitlines() == ["[FAIL] merge: 1 of 2 checks failed",
                                                       "[FAIL] round trip: split: not written yet",
                                                       "[pass] merge alone"]


def test_checks_stopped_by_an_earlier_unwritten_answer_name_it_as_such():
    # generate's checks build a MiniGPT first: with MiniGPT unwritten, the line is about generate and names MiniGPT
    q = Question("generate", 1.0, ["# greedy\nassert generate(MiniGPT(), 1) == 1",
                                   "# sampled\nassert generate(MiniGPT(), 2)"])

    class MiniGPT:
        def __init__(self):
            raise NotImplementedError("MiniGPT.__init__: not written yet")

    tf = load(render_test_file(q))
    tf.run({"MiniGPT": MiniGPT, "generate": lambda model, n: n})
    assert format_result("generate", tf) == "[FAIL] generate: its checks use MiniGPT.__init__, which is not written yet"


def test_an_unwritten_answer_gives_one_line():
    tf = load(render_test_file(QUESTION))

    def stub(x):
        raise NotImplementedError("double: not written yet")

    tf.run({"torch": torch, "double": stub})
    assert format_result("double", tf) == "[FAIL] double: not written yet"
    assert "NotImplementedError: double: not written yet" in tf.test_case_results[0].message  # plain Otter


def test_an_error_inside_the_student_code_names_its_type_and_the_check_line():
    tf = load(render_test_file(QUESTION))
    tf.run({"torch": torch})
    shown = format_result("double", tf, show_source=True)
    assert "     out = double(torch.tensor([1.0, 2.0]))\n   NameError: name 'double' is not defined" in shown
    assert "Traceback" not in shown and "check_1" not in shown and "<check" not in shown


def test_a_check_is_registered_in_linecache_so_tracebacks_show_its_lines():
    import linecache
    import traceback

    tf = load(render_test_file(QUESTION))
    check = tf.test_cases[0].body
    try:
        check.call_func({"torch": torch, "double": lambda x: x})
    except AssertionError as exc:
        text = "".join(traceback.format_exception(exc))
    assert 'assert torch.equal(out, torch.tensor([2.0, 4.0]))' in text
    assert linecache.getline(check.filename, check.first_line) == "# double([1, 2]) is [2, 4]\n"


def test_sources_that_cannot_be_raw_strings_still_work():
    q = Question("g", 1.0, ["# quotes\ns = '''a'''\nt = \"\"\"b\"\"\"\nassert g(s + t) == 'ab', 'g is the identity'"])
    tf = load(render_test_file(q))
    tf.run({"g": lambda s: s})
    assert tf.passed_all
    tf.run({"g": lambda s: s * 2})
    assert "g is the identity" in format_result("g", tf)


def test_checks_run_the_public_sources_verbatim_and_in_order():
    ns = {}
    exec(compile(render_test_file(QUESTION), "t.py", "exec"), ns)
    checks = [v for v in ns.values() if isinstance(v, PublicCheck)]
    assert [c.source for c in checks] == [c.strip("\n") for c in CHECKS]
    assert ns["OK_FORMAT"] is False and ns["name"] == "double" and ns["points"] is None


def test_hidden_cases_appear_only_when_requested():
    public = render_test_file(QUESTION)
    assert "hidden=True" not in public and "run_hidden_test" not in public
    text = render_test_file(QUESTION, [("double_values", 1.5), ("double_grad", 0.5)])
    tf = load(text)
    cases = {tc.name: tc for tc in tf.test_cases}
    assert list(cases)[3:] == ["double_values", "double_grad"]
    assert [cases[n].hidden for n in cases] == [False, False, False, True, True]
    # the question is worth what its hidden tests are worth; the public checks count nothing there
    assert [cases[n].points for n in cases] == [0, 0, 0, 1.5, 0.5]
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
    import attnlab.grading.bridges.otter_bridge as bridge

    calls = []
    monkeypatch.setattr(bridge, "run_hidden_test", lambda env, name: calls.append((env["marker"], name)))
    tf = load(render_test_file(QUESTION, [("double_values", 2.0)]))
    tf.run({**good_env(), "marker": 7})
    assert calls == [(7, "double_values")]
    assert tf.passed_all


def test_a_question_without_checks_has_no_cases():
    text = render_test_file(Question("solo", 1.0, []))
    assert load(text).test_cases == []


def test_public_test_files_one_per_question():
    files = public_test_files([QUESTION, Question("Scale", 1.0, ["# builds\nassert Scale(2)"])])
    assert sorted(files) == ["Scale.py", "double.py"]
    assert files["double.py"] == render_test_file(QUESTION)
    assert "hidden=True" not in "".join(files.values())
