"""hidden: the registry of hidden tests, the run loop's scoring and messages, and per-test seeds."""

import pytest
import torch

from attnlab.grading.core.hidden import HiddenSuite, load_suite, run_suite
from attnlab.grading.core.hidden import test_seed as seed_of
from attnlab.grading.worker.api import LocalStudent

# Hidden tests are written as source and exec'd: pytest rewrites the asserts of test modules, and the
# messages a student reads come from plain Python asserts.
SUITE = '''
import torch
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.core.hidden import HiddenSuite

suite = HiddenSuite("lab99_demo")

@suite.test("double", points=2)
def double_values(student, ref, rng):
    x = torch.randn(3, generator=rng)
    assert torch.equal(student.call("double", x).output, ref.call("double", x).output), "double is wrong"

@suite.test("double", points=0.5, name="double_type")
def whatever(student, ref, rng):
    assert isinstance(student.call("double", torch.ones(1)).output, torch.Tensor)

@suite.test("Scale")
def scale_exists(student, ref, rng):
    student.create("Scale", 2)

failing = HiddenSuite("x")

@failing.test("q")
def bare_assert(student, ref, rng):
    assert False

@failing.test("q")
def student_error(student, ref, rng):
    raise StudentError("`f` raised ValueError: bad")

@failing.test("q")
def unpacking(student, ref, rng):
    a, b = (1,)

@failing.test("q")
def long_message(student, ref, rng):
    raise AssertionError("x" * 5000)
'''


def suites():
    ns = {}
    exec(compile(SUITE, "<hidden_tests.py>", "exec"), ns)
    return ns


def make_suite():
    return suites()["suite"]


REF = LocalStudent.from_code("import torch\ndef double(x):\n    return 2 * x\n"
                             "class Scale(torch.nn.Module):\n    def __init__(self, d):\n        super().__init__()\n")


def test_registration_order_names_and_points():
    suite = make_suite()
    assert [(t.question, t.name, t.points) for t in suite.tests] == [
        ("double", "double_values", 2.0), ("double", "double_type", 0.5), ("Scale", "scale_exists", 1.0)]
    assert suite.questions() == {"double": 2.5, "Scale": 1.0}
    assert list(suite.questions()) == ["double", "Scale"]  # registration order, not alphabetical
    assert all(isinstance(t.points, float) for t in suite.tests)


def test_the_decorator_returns_the_function():
    suite = HiddenSuite("x")

    def t(student, ref, rng):
        return 42

    assert suite.test("q")(t) is t


def test_duplicate_test_name_is_an_error():
    suite = make_suite()
    with pytest.raises(ValueError, match="hidden test 'double_values' is registered twice in lab99_demo"):
        @suite.test("Scale")
        def double_values(student, ref, rng):
            pass
    with pytest.raises(ValueError, match="'double_type' is registered twice"):
        suite.test("Scale", name="double_type")(lambda s, r, g: None)


@pytest.mark.parametrize("points", [0, -1])
def test_points_must_be_positive(points):
    with pytest.raises(ValueError, match="must be positive"):
        HiddenSuite("x").test("q", points=points)


def test_run_suite_full_marks_for_the_reference():
    assert run_suite(make_suite(), REF, REF, seed=1) == {
        "double": {"score": 2.5, "max_score": 2.5, "messages": ["passed: double_values", "passed: double_type"],
                   "failed": []},
        "Scale": {"score": 1.0, "max_score": 1.0, "messages": ["passed: scale_exists"], "failed": []},
    }


def test_run_suite_partial_scores_and_messages():
    wrong = LocalStudent.from_code("def double(x):\n    return x + 1\n")
    res = run_suite(make_suite(), wrong, REF, seed=1)
    assert res["double"] == {"score": 0.5, "max_score": 2.5,
                             "messages": ["failed: double_values: double is wrong", "passed: double_type"],
                             "failed": ["double_values"]}
    assert res["Scale"]["score"] == 0.0
    assert res["Scale"]["messages"] == ["failed: scale_exists: `Scale` is not defined in your notebook: define it "
                                        "with exactly this name"]


def test_run_suite_messages_for_each_kind_of_failure():
    msgs = run_suite(suites()["failing"], REF, REF, seed=0)["q"]["messages"]
    assert msgs[:3] == ["failed: bare_assert: assertion failed", "failed: student_error: `f` raised ValueError: bad",
                        "failed: unpacking: could not test your code: ValueError: not enough values to unpack "
                        "(expected 2, got 1)"]
    assert len(msgs[3]) == 2000 and msgs[3].startswith("failed: long_message: xxx")


def test_run_suite_does_not_swallow_keyboard_interrupt():
    suite = HiddenSuite("x")
    suite.test("q")(lambda s, r, g: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        run_suite(suite, REF, REF, seed=0)


def test_run_suite_question_filter_and_callback():
    seen = []
    res = run_suite(make_suite(), REF, REF, seed=1, questions=["Scale"],
                    on_result=lambda test, passed, message, seconds: seen.append((test.name, passed, message,
                                                                                  seconds >= 0)))
    assert list(res) == ["Scale"]
    assert seen == [("scale_exists", True, "", True)]


def test_seeds_differ_by_test_name_and_grading_seed_and_are_stable():
    assert seed_of(1, "a") == seed_of(1, "a")
    assert seed_of(1, "a") != seed_of(1, "b")
    assert seed_of(1, "a") != seed_of(2, "a")
    # pinned: a fixed function of (seed, name), the same in every process (no hash randomization) and every
    # version, so that a regrade draws the same inputs
    assert seed_of(0, "double_values") == 6139885044529332620
    assert 0 <= seed_of(12345, "x" * 1000) < 2**63


def test_each_test_gets_its_own_generator_seeded_from_its_name():
    suite = HiddenSuite("x")
    draws = {}
    for name in ("first", "second"):
        suite.test("q", name=name)(lambda s, r, rng, name=name: draws.setdefault(name, []).append(
            torch.randint(0, 2**30, (4,), generator=rng).tolist()))
    run_suite(suite, REF, REF, seed=7)
    run_suite(suite, REF, REF, seed=7)
    assert draws["first"][0] == draws["first"][1]  # stable across runs
    assert draws["first"][0] != draws["second"][0]  # different per test
    expected = torch.randint(0, 2**30, (4,), generator=torch.Generator().manual_seed(seed_of(7, "first"))).tolist()
    assert draws["first"][0] == expected


def test_load_suite_imports_once_and_checks_the_file(tmp_path):
    path = tmp_path / "hidden_tests.py"
    path.write_text("from attnlab.grading.core.hidden import HiddenSuite\nsuite = HiddenSuite('lab01_x')\n"
                    "@suite.test('q')\ndef t(student, ref, rng):\n    pass\n")
    suite = load_suite(path)
    assert suite.lab == "lab01_x" and [t.name for t in suite.tests] == ["t"]
    assert load_suite(path) is suite  # cached: importing twice would register every test twice
    bad = tmp_path / "bad" / "hidden_tests.py"
    bad.parent.mkdir()
    bad.write_text("suite = 3\n")
    with pytest.raises(TypeError, match="must define `suite = HiddenSuite"):
        load_suite(bad)


def test_run_suite_gives_each_test_a_deadline_and_lifts_it():
    import time as _time

    from attnlab.grading.core.hidden import HiddenSuite, run_suite

    suite = HiddenSuite("labX")
    seen = []

    class Student:
        def set_deadline(self, deadline):
            seen.append(deadline)

    @suite.test("q")
    def t1(student, ref, rng):
        pass

    before = _time.monotonic()
    run_suite(suite, Student(), None, seed=0, test_timeout=5.0)
    assert len(seen) == 2 and seen[1] is None
    assert before + 5.0 <= seen[0] <= _time.monotonic() + 5.0


def test_load_suite_from_many_threads_at_once(tmp_path):
    """Batch jobs are threads: none may see the hidden tests half-imported."""
    from concurrent.futures import ThreadPoolExecutor

    from attnlab.grading.core.hidden import HiddenSuite, load_suite

    path = tmp_path / "hidden_tests.py"
    path.write_text("import time\nfrom attnlab.grading.core.hidden import HiddenSuite\ntime.sleep(0.3)\n"
                    "suite = HiddenSuite('labT')\n")
    with ThreadPoolExecutor(8) as pool:
        suites = list(pool.map(lambda _: load_suite(path), range(8)))
    assert all(isinstance(s, HiddenSuite) for s in suites) and len({id(s) for s in suites}) == 1
