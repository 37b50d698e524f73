"""diagnose: the grader names the likely mistake from the lab's catalogue, on the requests the failed hidden tests
made, without calling the submission again; unwritten answers give one line; no catalogue, no hint."""

import time

import pytest
import torch

from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import run_suite
from attnlab.grading.core.mutants import Catalogue, CatalogueError, Entry, student_with
from attnlab.grading.diagnosis.diagnose import (
    HINT_PREFIX,
    Deadline,
    Exchange,
    Recorder,
    _clock,
    behaves_like,
    diagnose,
    diagnosis_budget,
    name_mistakes,
)
from attnlab.grading.worker.api import LocalStudent

LAB = "lab99_demo"


@pytest.fixture(scope="module")
def lab(built_course):
    directory = built_course / "autograder" / LAB
    bundle = load_bundle(directory)
    return directory, bundle, (directory / "reference.py").read_text()


def graded(lab, source):
    directory, bundle, ref_code = lab
    recorder = Recorder(student_with(ref_code, Entry("submission", "double", source)))
    results = run_suite(bundle.suite, recorder, bundle.reference, seed=3, on_result=recorder.on_result)
    return recorder, results


def test_a_submission_that_makes_a_catalogued_mistake_gets_its_hint(lab):
    directory, bundle, _ = lab
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")  # written differently, same mistake
    assert results["double"]["score"] == 0
    name_mistakes(bundle, recorder, results)
    assert results["double"]["messages"][-1] == HINT_PREFIX + "your double adds 1 to twice the input"
    assert all(not m.startswith(HINT_PREFIX) for m in results["Scale"]["messages"])  # Scale passed


def test_another_mistake_gets_no_hint(lab):
    directory, bundle, _ = lab
    recorder, results = graded(lab, "def double(x):\n    return 3 * x\n")
    name_mistakes(bundle, recorder, results)
    assert not any(m.startswith(HINT_PREFIX) for m in results["double"]["messages"])


def test_the_recorder_is_transparent_and_keeps_only_failed_tests(lab):
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")
    assert list(recorder.failed) == ["double_values"]
    assert all(isinstance(x, Exchange) and x.op == "call" for x in recorder.failed["double_values"])
    directory, bundle, ref_code = lab
    same = student_with(ref_code, Entry("s", "double", "def double(x):\n    return 2 * x + 1\n"))
    plain = run_suite(bundle.suite, same, bundle.reference, seed=3)
    assert plain == results  # recording changes nothing in the grade


def test_the_submission_is_never_called_again(lab):
    directory, bundle, ref_code = lab

    class Counting(LocalStudent):
        calls = 0

        def _op(self, op, **payload):
            Counting.calls += 1
            return super()._op(op, **payload)

    inner = student_with(ref_code, Entry("s", "double", "def double(x):\n    return 2 * x + 1\n"))
    recorder = Recorder(Counting(inner.executor.namespace, inner.code))
    results = run_suite(bundle.suite, recorder, bundle.reference, seed=3, on_result=recorder.on_result)
    before = Counting.calls
    name_mistakes(bundle, recorder, results)
    assert Counting.calls == before and results["double"]["messages"][-1].startswith(HINT_PREFIX)


def test_errors_must_match_too():
    mutant = LocalStudent.from_code("def f(x):\n    raise ValueError('no')\n")
    fine = LocalStudent.from_code("def f(x):\n    return x\n")
    failed_call = [Exchange("call", {"name": "f", "args": [torch.ones(2)], "kwargs": {}, "grad": False,
                                     "grad_outputs": None}, False, RuntimeError("student raised"))]
    assert behaves_like(failed_call, mutant) and not behaves_like(failed_call, fine)


def test_a_mutant_matching_a_correct_variant_too_is_not_named(lab):
    directory, bundle, ref_code = lab
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")
    same = "def double(x):\n    return x * 2 + 1\n"
    catalogue = Catalogue(ref_code, (Entry("m", "double", same, hint="h"),), (Entry("v", "double", same),))
    assert diagnose(bundle.suite, catalogue, recorder, results) == {}
    catalogue = Catalogue(ref_code, (Entry("m", "double", same, hint="h"), Entry("n", "double", same, hint="other")), ())
    assert diagnose(bundle.suite, catalogue, recorder, results) == {}  # two different hints: say nothing
    catalogue = Catalogue(ref_code, (Entry("m", "double", same, hint="h"),), ())
    assert diagnose(bundle.suite, catalogue, recorder, results) == {"double": "h"}
    assert diagnose(bundle.suite, catalogue, recorder, results, budget_s=0.0) == {}  # the time cap


def test_unwritten_questions_get_one_line_and_no_diagnosis(lab):
    directory, bundle, _ = lab
    recorder, results = graded(lab, "def double(x):\n    raise NotImplementedError('double: not written yet')\n")
    name_mistakes(bundle, recorder, results)
    assert results["double"]["messages"] == ["double: not written yet"]


def test_no_catalogue_in_the_bundle_means_plain_messages(lab, tmp_path):
    import shutil

    directory, bundle, _ = lab
    copy = tmp_path / "bundle"
    shutil.copytree(directory, copy)
    (copy / "catalogue.py").unlink()
    assert load_bundle(copy).catalogue() is None
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")
    before = [list(q["messages"]) for q in results.values()]
    name_mistakes(load_bundle(copy), recorder, results)
    assert [q["messages"] for q in results.values()] == before


def test_the_budget_is_at_most_30_percent_of_grading():
    assert diagnosis_budget(1.0) == 0.5 and diagnosis_budget(5.0) == pytest.approx(1.5)
    assert diagnosis_budget(100.0) == 3.0


class Flooding:
    """A hostile student: every reply ``elements`` float32 (8M: as large as a frame allows), every third a huge
    error."""

    def __init__(self, elements):
        self.calls, self.elements = 0, elements

    def _op(self, op, **payload):
        self.calls += 1
        if self.calls % 3 == 0:
            raise RuntimeError("x" * 2**20)
        return {"output": torch.zeros(self.elements), "grads": {}, "param_grads": {}, "inputs_after": {}}

    def source(self, name=None):
        return ""


@pytest.mark.parametrize("elements, tests_kept", [(2**23 - 1024, 0), (2**19, 3)])  # 32 MiB, 2 MiB replies
def test_what_the_recorder_keeps_never_passes_its_byte_budget(elements, tests_kept):
    from attnlab.grading.core.hidden import HiddenSuite
    from attnlab.grading.diagnosis.diagnose import MAX_RECORDED_BYTES, recorded_bytes

    suite = HiddenSuite("lab99_flood")
    for i in range(12):
        @suite.test("q", name=f"t{i}")
        def flood(student, ref, rng):
            for _ in range(3):
                try:
                    student._op("call", name="f", args=[torch.ones(4)], kwargs={})
                except RuntimeError:
                    pass
            raise AssertionError("wrong")

    recorder = Recorder(Flooding(elements))
    results = run_suite(suite, recorder, None, seed=0, on_result=recorder.on_result)
    assert results["q"]["score"] == 0 and len(results["q"]["messages"]) == 12  # every test still graded
    kept = sum(recorded_bytes(x.payload) + recorded_bytes(x.value) for xs in recorder.failed.values() for x in xs)
    assert kept == recorder.kept_bytes <= MAX_RECORDED_BYTES
    assert len(recorder.failed) == tests_kept  # what fits is kept whole; the rest is not recorded at all
    assert all(len(xs) == 3 for xs in recorder.failed.values())
    errors = [x.value for xs in recorder.failed.values() for x in xs if not x.ok]
    assert len(errors) == tests_kept and all(isinstance(e, str) and len(e) < 2100 for e in errors)  # the text, clipped


def test_recorded_bytes_counts_tensors_text_and_containers():
    from attnlab.grading.diagnosis.diagnose import recorded_bytes

    assert recorded_bytes(torch.zeros(10, dtype=torch.float64)) == 80 + 64
    assert recorded_bytes({"a": [torch.zeros(4, dtype=torch.int32), "xyz"]}) == 16 + 3 + 1 + 5 * 64


def test_a_broken_catalogue_entry_is_logged_by_name_and_the_score_stands(lab, tmp_path, caplog):
    import shutil

    directory, bundle, _ = lab
    copy = tmp_path / "broken"
    shutil.copytree(directory, copy)
    (copy / "catalogue.py").write_text(
        "from attnlab.grading.core.mutants import MOST, Entry\n"
        "MUTANTS = [Entry('typo_entry', 'double', 'def double(x)\\n    return 2 * x + 1\\n', hint='h', loses=MOST)]\n")
    broken = load_bundle(copy)
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")
    scores = {q: v["score"] for q, v in results.items()}
    with caplog.at_level("WARNING", logger="attnlab.grading.diagnosis.diagnose"):
        name_mistakes(broken, recorder, results)
    assert "catalogue entry 'typo_entry' (double) does not run after the reference: SyntaxError" in caplog.text
    assert {q: v["score"] for q, v in results.items()} == scores
    assert not any(m.startswith(HINT_PREFIX) for m in results["double"]["messages"])
    with pytest.raises(CatalogueError, match="typo_entry"):  # the diagnosis itself does not hide it
        diagnose(broken.suite, broken.catalogue(), recorder, results)


def test_a_catalogue_file_that_does_not_import_is_named(lab, tmp_path, caplog):
    import shutil

    directory, _, _ = lab
    copy = tmp_path / "unimportable"
    shutil.copytree(directory, copy)
    (copy / "catalogue.py").write_text("MUTANTS = [1]\n")
    with pytest.raises(CatalogueError, match=r"MUTANTS\[0\] is 1, not an Entry"):
        load_bundle(copy).catalogue()
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")
    with caplog.at_level("WARNING", logger="attnlab.grading.diagnosis.diagnose"):
        name_mistakes(load_bundle(copy), recorder, results)
    assert "MUTANTS[0] is 1, not an Entry" in caplog.text


def test_warnings_a_mutant_raises_during_the_replay_stay_out_of_the_grade_output(lab, tmp_path):
    import shutil
    import warnings

    directory, _, _ = lab
    copy = tmp_path / "noisy"
    shutil.copytree(directory, copy)
    (copy / "catalogue.py").write_text(
        "from attnlab.grading.core.mutants import MOST, Entry\n"
        "SOURCE = 'import warnings\\nwarnings.warn(\"noisy import\")\\n"
        "def double(x):\\n    warnings.warn(\"noisy call\")\\n    return 2 * x + 1\\n'\n"
        "MUTANTS = [Entry('noisy', 'double', SOURCE, hint='noisy hint', loses=MOST)]\n")
    noisy = load_bundle(copy)
    recorder, results = graded(lab, "def double(x):\n    return 2 * x + 1\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        name_mistakes(noisy, recorder, results)
        assert results["double"]["messages"][-1] == HINT_PREFIX + "noisy hint"  # the replay did run the mutant
        warnings.warn("after the replay", stacklevel=1)  # the filters are back
    assert [str(w.message) for w in caught] == ["after the replay"]


def test_overlapping_quiet_blocks_restore_the_filters_once_the_last_one_leaves():
    import warnings

    from attnlab.grading.diagnosis.diagnose import quiet_warnings

    before = list(warnings.filters)
    outer = quiet_warnings()
    outer.__enter__()
    with quiet_warnings():
        pass
    assert warnings.filters[0][0] == "ignore"  # the outer replay still runs quietly
    outer.__exit__(None, None, None)
    assert warnings.filters == before


def test_a_failure_another_questions_mistake_reproduces_is_left_to_that_root_cause():

    from attnlab.grading.diagnosis.diagnose import _explained_elsewhere

    cause, effect = Entry("last_state_bug", "last_valid_state", ""), Entry("classifier_bug", "RNNClassifier", "")
    cause_x, effect_x = [Exchange("call", {}, True, 1)], [Exchange("module_call", {}, True, 2)]
    named = {"last_valid_state": ([cause], cause_x), "RNNClassifier": ([effect], effect_x)}
    hints = {"last_valid_state": "cause hint", "RNNClassifier": "effect hint"}
    later = Deadline.after(60)
    # the classifier calls last_valid_state: the cause's mutant reproduces both failures, the effect's only its own
    assert _explained_elsewhere(hints, named, lambda e, x: e is cause or x is effect_x, later) == {
        "last_valid_state": "cause hint"}
    # each reproduces the other's failure: nothing says which is the cause, both names stay
    assert _explained_elsewhere(hints, named, lambda e, x: True, later) == hints
    # neither reproduces the other's: two separate mistakes, both named
    assert _explained_elsewhere(hints, named, lambda e, x: x is named[e.question][1], later) == hints


def test_an_object_the_submission_returns_is_compared_with_the_candidates_own():
    """A loader returns the model it was given: the worker answers with its handle, numbered in its own process
    (earlier tests created objects there), so the replay maps it to the candidate's model before comparing."""
    code = "import torch\n\nclass Box(torch.nn.Module):\n    pass\n\ndef fill(box):\n    return box\n"
    student = LocalStudent.from_code(code)
    student.create("Box")  # an earlier test's object: the submission's handles are numbered apart
    box = student.create("Box")
    create = Exchange("create", {"name": "Box", "args": [], "kwargs": {}}, True, box.handle)
    payload = {"name": "fill", "args": [box.handle], "kwargs": {}, "grad": False, "grad_outputs": None}
    call = Exchange("call", payload, True, student._op("call", **payload))
    assert call.value["output"] == box.handle
    assert behaves_like([create, call], LocalStudent.from_code(code))
    other = code.replace("return box", "return Box()")  # a new object, not the one given
    assert not behaves_like([create, call], LocalStudent.from_code(other))


def test_the_cap_is_counted_in_the_diagnosing_threads_cpu_time():
    """Waiting for the CPU (a loaded machine, a batch's other threads) does not use the diagnosis's cap up."""
    start = _clock()
    time.sleep(0.3)
    assert _clock() - start < 0.1
    start = _clock()
    while _clock() - start < 0.05:  # working does
        sum(range(1000))


def test_a_diagnosis_stops_at_its_wall_backstop_however_little_cpu_it_used(monkeypatch):
    """On a machine so loaded that the diagnosing thread hardly runs, the wall clock still ends it: WALL_BACKSTOP
    times the budget."""
    from attnlab.grading.diagnosis import diagnose as d

    deadline = d.Deadline.after(0.02)
    assert not deadline.passed() and deadline.wall - deadline.cpu > 0  # both clocks set
    time.sleep(0.02 * d.WALL_BACKSTOP + 0.05)  # waiting uses no CPU: only the wall backstop can pass
    assert deadline.passed()
    monkeypatch.setattr(d, "WALL_BACKSTOP", 1000)
    assert not d.Deadline.after(0.5).passed()


def test_a_compiled_candidate_is_the_catalogue_entry_run_afresh(lab):
    """The diagnosis compiles each catalogue entry once per process (``candidates.Compiled``): a later candidate has
    ``student_with``'s source, replies as it does, and runs in a fresh namespace (a global set by one replay is gone
    in the next)."""
    from attnlab.grading.diagnosis.candidates import Compiled

    _, _, ref_code = lab
    catalogue = Catalogue(ref_code, (), ())
    counts = "CALLS = []\n\ndef double(x):\n    CALLS.append(1)\n    return 2 * x + len(CALLS)\n"
    entry = Entry("counts_calls", "double", counts)
    compiled = Compiled(size=1)
    first, again = compiled.candidate(catalogue, entry), compiled.candidate(catalogue, entry)
    assert again is not first and again.code == first.code == student_with(ref_code, entry).code
    x = torch.arange(3.0)
    for student in (first, again):  # each candidate counts its own calls from zero
        assert torch.equal(student.call("double", x).output, 2 * x + 1)
    assert len(compiled.code) == 1
    other = Entry("plus_two", "double", "def double(x):\n    return 2 * x + 2\n")
    assert torch.equal(compiled.candidate(catalogue, other).call("double", x).output, 2 * x + 2)
    assert list(compiled.code)[0][1] == "plus_two"  # at most `size` kept: the oldest went
    with pytest.raises(CatalogueError, match="broken"):
        compiled.candidate(catalogue, Entry("broken", "double", "def double(x):\n    return x +\n"))
