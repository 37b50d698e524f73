"""A conversation with the reference that cannot shift (issue 43, part 2): every request, reply, callback and answer
carries an id, checked on both sides; an answer the grader cannot send (a meta-device tensor, one over the frame
budget) is a refusal of that one callback, and the later questions of the notebook are graded right."""

import pytest
import torch

from attnlab.grading.core.hidden import HiddenSuite, run_suite
from attnlab.grading.worker import wire
from attnlab.grading.worker.api import LocalStudent
from attnlab.grading.worker.callback_answers import answer_frame
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.reference_calls import ReferenceCalls
from attnlab.grading.worker.remote import WorkerDied

from .test_api import recording_student

CODE = '''
import torch

def attend(x, kind=0):
    if kind == 1:
        return torch.empty(3, device="meta")  # cannot be packed: a meta tensor has no data
    if kind == 2:
        return torch.zeros(5_000_000, dtype=torch.float64)  # 40 MB: over the frame budget
    return 2 * x

def layer(x, kind=0):
    return attend(x, kind) + 1

def other(x):
    return x - 1
'''


def _suite() -> HiddenSuite:
    suite = HiddenSuite("protocol", graded_on_reference={q: ("attend",) for q in ("meta", "oversized", "layer")})

    def check(kind):
        def test(student, ref, rng):
            x = torch.randn(2, 3, generator=rng, dtype=torch.float64)
            got = student.call("layer", x, kind).output
            torch.testing.assert_close(got, 2 * x + 1)
        return test

    suite.test("meta", name="meta_answer")(check(1))
    suite.test("oversized", name="oversized_answer")(check(2))
    suite.test("layer", points=2, name="layer_right")(check(0))

    @suite.test("other", name="other_right")
    def other_right(student, ref, rng):
        x = torch.randn(4, generator=rng)
        torch.testing.assert_close(student.call("other", x).output, x - 1)

    return suite


@pytest.fixture(scope="module")
def remote():
    yield from recording_student([{"index": 0, "source": CODE}], cell_timeout=30, load_timeout=120, call_timeout=120)


def test_an_answer_that_cannot_be_packed_costs_only_its_test_and_later_questions_are_graded_right(remote):
    starts = remote.starts
    results = run_suite(_suite(), remote, LocalStudent.from_code(CODE), seed=0)
    for q in ("meta", "oversized"):
        assert results[q]["score"] == 0, results[q]
        assert "could not send the reference `attend`'s answer" in " ".join(results[q]["messages"]), results[q]
    assert "device" in " ".join(results["meta"]["messages"])
    assert "exceeds the limit" in " ".join(results["oversized"]["messages"])
    assert results["layer"]["score"] == results["layer"]["max_score"] == 2.0, results["layer"]
    assert results["layer"]["graded_on_reference"] == ["attend"]
    assert results["other"]["score"] == 1.0
    assert remote.starts == starts and not remote.problems  # no restart, nothing recorded against the worker


@pytest.mark.parametrize("value, refused", [
    (torch.empty(2, device="meta"), "meta"),
    (torch.zeros(5_000_000, dtype=torch.float64), "exceeds the limit"),
    (torch.zeros(2, dtype=torch.float64).to_sparse(), "sparse"),
    ([object()], "cannot send a value"),
])
def test_every_answer_is_validated_and_packed_before_it_is_sent(value, refused):
    class Answers(ReferenceCalls):
        def answer(self, message):
            return {"ok": True, "value": value}

    calls = Answers({})
    reply = wire.unpack_body(answer_frame(calls, {"callback": {"name": "attend"}, "id": 7})[8:])
    assert reply["ok"] is False and reply["id"] == 7 and refused in reply["error"], reply
    assert calls.refused and refused in calls.refused[-1]
    raising = ReferenceCalls({})
    raising.answer = lambda message: 1 / 0  # an exception out of answer itself: refused too, with the id
    reply = wire.unpack_body(answer_frame(raising, {"callback": {}, "id": 8})[8:])
    assert reply == {"ok": False, "id": 8, "type": "RuntimeError", "error": reply["error"]}
    assert "ZeroDivisionError" in reply["error"]


def _forging(remote, field: str, monkeypatch):
    """Make the grader's next frames that hold ``field`` carry another id."""
    write = remote._write

    def forge(data, *a):
        message = wire.unpack_body(bytes(data)[8:], budget=False)
        if isinstance(message, dict) and field in message:
            data = wire.pack({**message, "id": message["id"] + 100})
        return write(data, *a)

    monkeypatch.setattr(remote, "_write", forge)


def test_an_answer_with_another_id_is_refused_by_the_worker(remote, monkeypatch):
    ref, x = LocalStudent.from_code(CODE), torch.ones(2)
    _forging(remote, "ok", monkeypatch)
    starts = remote.starts
    with remote.graded_on_reference(["attend"], ref):
        with pytest.raises(StudentError, match="the conversation is out of step, refused"):
            remote.call("layer", x)
    monkeypatch.undo()
    assert remote.call("other", x).output.tolist() == [0.0, 0.0] and remote.starts == starts


def test_a_reply_with_another_id_restarts_the_worker_with_a_message(remote, monkeypatch):
    x = torch.ones(2)
    _forging(remote, "op", monkeypatch)
    with pytest.raises(WorkerDied, match="while the grader waited for request .*out of step"):
        remote.call("other", x)
    monkeypatch.undo()
    starts = remote.starts
    assert remote.call("other", x).output.tolist() == [0.0, 0.0] and remote.starts == starts + 1
