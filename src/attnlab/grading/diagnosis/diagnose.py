"""Name the likely mistake: when hidden tests fail, find the catalogued mutant the submission behaves like.

The lab's catalogue (``catalogue.py`` in the autograder bundle, never shipped to students) lists the mistakes
students really make, each with a student-facing ``hint``. ``Recorder`` wraps the student during the grading run
and keeps, for each failed hidden test, the requests the test made (the same inputs) and the submission's
replies. Each mutant of that question (the reference code with the mutant's definitions, run in this process:
trusted code) then gets the same requests in the same order. A mutant whose replies all equal the submission's
(outputs and gradients within the hidden tests' tolerances, the same in-place changes, an error where the
submission raised one) behaves like it on those inputs. When the mutants that match all carry one hint, and no
correct variant matches, the question's feedback says ``likely mistake: <hint>``.

The submission is never called again, so the diagnosis costs only in-process mutant calls, has a time cap, and
cannot disturb the worker. It leaks nothing: the hint is fixed text written by the instructor; no input, test
source or mutant source reaches the feedback.

Use (``runner.grade_submission``)::

    recorder = Recorder(student)
    questions = run_suite(suite, recorder, ref, seed=seed, on_result=recorder.on_result, ...)
    name_mistakes(bundle, recorder, questions, budget_s=...)
"""

from __future__ import annotations

import logging
import re
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from attnlab.grading.core.checks import compare_values
from attnlab.grading.core.mutants import Catalogue, CatalogueError, Entry
from attnlab.grading.diagnosis.candidates import compiled_candidate
from attnlab.grading.worker.api import StudentAPI
from attnlab.grading.worker.wire import ObjectHandle
from attnlab.records import result_fields as fields
from attnlab.records.safe_text import clip
from attnlab.records.stub_text import NOT_WRITTEN

HINT_PREFIX = "likely mistake: "
log = logging.getLogger(__name__)
DEFAULT_BUDGET_S = 3.0
MAX_EXCHANGES = 64  # per question: enough to cover its failed tests, bounded for the time cap
# What the diagnosis keeps per submission: the failed tests' requests and replies, at most this many bytes in
# all (tensor data plus text). A real failed test records far less; a worker that answers every call with a full
# frame (``wire.MAX_FRAME_BYTES``) fills it with its first reply, and a test whose exchanges do not fit is not
# recorded (not diagnosed) rather than kept in part.
MAX_RECORDED_BYTES = 16 * 2**20


def diagnosis_budget(grading_s: float) -> float:
    """The time the diagnosis may take after ``grading_s`` seconds of grading: at most 30% more (at least half a
    second, at most ``DEFAULT_BUDGET_S``), so that naming mistakes never slows grading by more than about 1.3x.
    The diagnosis counts it on ``_clock``, the CPU time of its own thread, not the wall clock: a loaded machine
    (or a batch's other threads) slows it without cutting it short, so a submission gets the same feedback at any
    load, and its wall cost grows with the load as grading's own does (up to ``WALL_BACKSTOP`` times the cap,
    where it stops: ``Deadline``). On held-out mistakes a cap on this clock names most of them even on a loaded
    machine, where the same cap on the wall clock names far fewer (``benchmarks/README.md``, "Diagnosis coverage")."""
    return min(DEFAULT_BUDGET_S, max(0.5, 0.3 * grading_s))


def _clock() -> float:
    """The diagnosis's clock: CPU seconds of the calling thread (mutant replays run there, torch on one thread)."""
    return time.thread_time()


WALL_BACKSTOP = 10  # x the budget in wall seconds: what a diagnosis may take at most, however loaded the machine


class Deadline(NamedTuple):
    """When the diagnosis stops: ``cpu`` on ``_clock``, or ``wall`` on the monotonic clock, whichever comes first
    (the backstop: ``WALL_BACKSTOP`` times the budget, so a very loaded machine still bounds each submission's wall
    time; a diagnosis cut short names nothing it has not finished checking)."""

    cpu: float
    wall: float

    @classmethod
    def after(cls, budget_s: float) -> Deadline:
        return cls(_clock() + budget_s, time.monotonic() + WALL_BACKSTOP * budget_s)

    def passed(self) -> bool:
        return _clock() > self.cpu or time.monotonic() > self.wall


# ------------------------------------------------------------------------------------------------ recording
@dataclass
class Exchange:
    """One request a hidden test made to the submission, and its reply (or the error it raised)."""

    op: str
    payload: dict
    ok: bool
    value: Any


def recorded_bytes(value: Any) -> int:
    """The bytes ``value`` keeps alive, roughly: tensor and array data, text, and 64 per other value."""
    total, stack, seen = 0, [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if isinstance(item, torch.Tensor):
            total += item.numel() * item.element_size()
        elif isinstance(item, np.ndarray):
            total += item.nbytes
        elif isinstance(item, (str, bytes)):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return total + 64 * seen


class Recorder(StudentAPI):
    """Wraps a student: passes every request through unchanged and keeps the exchanges of the failed tests
    (``on_result`` is ``run_suite``'s callback: it closes each test), at most ``budget`` bytes of them
    (``MAX_RECORDED_BYTES``): a test whose exchanges do not fit is dropped whole, never kept in part."""

    def __init__(self, inner: StudentAPI, budget: int = MAX_RECORDED_BYTES):
        self.inner = inner
        self.failed: dict[str, list[Exchange]] = {}  # hidden test name -> its exchanges
        self.budget, self.kept_bytes = budget, 0  # kept_bytes: of ``failed``
        self._current: list[Exchange] | None = []  # None: this test went over the budget
        self._current_bytes = 0

    def _keep(self, exchange: Exchange) -> None:
        if self._current is None:
            return
        self._current_bytes += recorded_bytes(exchange.payload) + recorded_bytes(exchange.value)
        if self.kept_bytes + self._current_bytes > self.budget:
            self._current = None  # dropped now, so that it never holds more than the budget
            return
        self._current.append(exchange)

    def set_deadline(self, deadline) -> None:
        getattr(self.inner, "set_deadline", lambda _: None)(deadline)

    def set_guard(self, on: bool) -> None:
        getattr(self.inner, "set_guard", lambda _: None)(on)

    def source(self, name: str | None = None) -> str | None:
        return self.inner.source(name)

    graded_on_reference = property(lambda self: self.inner.graded_on_reference)  # the inner's (hidden.run_suite)
    reference_shortfalls = property(lambda self: getattr(self.inner, "reference_shortfalls", {}))  # the inner's too

    def _op(self, op: str, **payload) -> Any:
        try:
            value = self.inner._op(op, **payload)
        except Exception as exc:
            self._keep(Exchange(op, payload, False, clip(str(exc))))  # the text, not the exception's frames
            raise
        self._keep(Exchange(op, payload, True, value))
        return value

    def on_result(self, test, passed: bool, message: str, seconds: float) -> None:
        if not passed and self._current is not None:
            self.failed[test.name] = self._current
            self.kept_bytes += self._current_bytes
        self._current, self._current_bytes = [], 0


# ------------------------------------------------------------------------------------------------ diagnosis
def _same(op: str, mine: Any, theirs: Any) -> bool:
    """Whether two replies to ``op`` agree, within the hidden tests' tolerances."""
    try:
        if op in ("call", "module_call") and isinstance(mine, dict) and isinstance(theirs, dict):
            compare_values(mine.get("output"), theirs.get("output"), name="output")
            for part in ("grads", "param_grads"):
                a, b = mine.get(part) or {}, theirs.get(part) or {}
                if {str(k) for k, v in a.items() if v is not None} != {str(k) for k, v in b.items() if v is not None}:
                    return False
                for k, v in b.items():
                    if v is not None:
                        compare_values(a.get(k, a.get(str(k))), v, name=part)
            return sorted(map(str, mine.get("modified") or [])) == sorted(map(str, theirs.get("modified") or []))
        compare_values(mine, theirs, name=op)
        return True
    except Exception:  # noqa: BLE001 - any difference (or unlike types) is a mismatch
        return False


def _with_handles(payload: dict, handles: dict[int, Any]) -> dict | None:
    """``payload`` with the submission's object handles (the object a call runs on, and objects passed as
    arguments) replaced by the candidate's; None when one has no counterpart."""
    missing = object()

    def mapped(value):
        if not isinstance(value, ObjectHandle):
            return value
        return handles.get(value.id, missing)

    out = dict(payload)
    if "handle" in out:
        out["handle"] = mapped(out["handle"]) if isinstance(out["handle"], ObjectHandle) else missing
    if isinstance(out.get("args"), list):
        out["args"] = [mapped(a) for a in out["args"]]
    if isinstance(out.get("kwargs"), dict):
        out["kwargs"] = {k: mapped(v) for k, v in out["kwargs"].items()}
    values = [out.get("handle"), *out.get("args", []), *out.get("kwargs", {}).values()]
    return None if any(v is missing for v in values) else out


def behaves_like(exchanges: list[Exchange], candidate: StudentAPI, deadline: Deadline | None = None) -> bool:
    """Whether ``candidate`` replies to every request of ``exchanges`` as the submission did."""
    handles: dict[int, Any] = {}
    for x in exchanges:
        if deadline is not None and deadline.passed():
            return False
        if x.op == "source":
            continue
        payload = _with_handles(x.payload, handles)
        if payload is None:
            return False
        try:
            value, ok = candidate._op(x.op, **payload), True
        except Exception:  # noqa: BLE001 - the candidate raised too: compare that with the submission
            value, ok = None, False
        if ok != x.ok:
            return False
        if not ok:
            continue
        if x.op == "create":
            handles[getattr(x.value, "id", None)] = value
        elif not _same(x.op, _returned_handle(x.value, handles), value) and not _random_reply(
                candidate, x.op, payload, value):
            return False
    return True


def _returned_handle(reply: Any, handles: dict[int, Any]) -> Any:
    """The submission's reply with the object it returned (a loader returning the model it was given answers with
    that model's handle) replaced by the candidate's counterpart: the two processes number their objects apart. An
    object without a counterpart becomes ``ObjectHandle(-1)``, which no candidate's object equals."""
    if not (isinstance(reply, dict) and isinstance(reply.get("output"), ObjectHandle)):
        return reply
    return {**reply, "output": handles.get(reply["output"].id, ObjectHandle(-1))}


def _random_reply(candidate: StudentAPI, op: str, payload: dict, value: Any) -> bool:
    """Whether a training-mode call's reply is random (dropout draws from torch's global generator, whose state
    in the submission's process the replay cannot know): the candidate, asked again, replies otherwise. Such a
    reply is no evidence either way; a correct variant then matches as well, and the diagnosis names nothing
    unless other requests tell the mistakes apart."""
    if op != "module_call" or not payload.get("train"):
        return False
    try:
        again = candidate._op(op, **payload)
    except Exception:  # noqa: BLE001 - raising now but not before: random too
        return True
    return not _same(op, value, again)


def _failed_tests(suite, questions: dict) -> dict[str, list[str]]:
    """Question -> the names of its failed hidden tests worth diagnosing (not an unwritten stub)."""
    out: dict[str, list[str]] = {}
    for test in suite.tests:
        q = questions.get(test.question)
        if q is None:
            continue
        failed = [m for m in q["messages"] if m.startswith(f"failed: {test.name}:")]
        if failed and NOT_WRITTEN not in failed[0]:
            out.setdefault(test.question, []).append(test.name)
    return out


def diagnose(suite, catalogue: Catalogue, recorder: Recorder, questions: dict, *,
             budget_s: float = DEFAULT_BUDGET_S) -> dict[str, str]:
    """Question -> the hint of the mistake the submission behaves like (questions without one are left out).
    A question whose failure a mistake named on another question explains as well (a wrong ``last_valid_state``
    breaks the classifier that calls it) keeps only that root cause: ``_explained_elsewhere``."""
    deadline = Deadline.after(budget_s)
    hints: dict[str, str] = {}
    named: dict[str, tuple[list[Entry], list[Exchange]]] = {}  # question -> its matching mutants, its exchanges

    def matches(entry: Entry, exchanges: list[Exchange]) -> bool:
        # a broken entry raises CatalogueError naming it: an instructor's bug, reported by name_mistakes
        return behaves_like(exchanges, compiled_candidate(catalogue, entry), deadline)

    for question, tests in _failed_tests(suite, questions).items():
        exchanges = [x for t in tests for x in recorder.failed.get(t, [])][:MAX_EXCHANGES]
        if not exchanges:
            continue
        matching = []
        for entry in catalogue.mutants:
            if deadline.passed():
                return _explained_elsewhere(hints, named, matches, deadline)
            if entry.question == question and entry.hint and matches(entry, exchanges):
                matching.append(entry)
        distinct = {m.hint for m in matching}
        if len(distinct) != 1:
            continue
        if any(v.question == question and matches(v, exchanges) for v in catalogue.variants):
            continue
        if not deadline.passed():
            hints[question] = distinct.pop()
            named[question] = (matching, exchanges)
    return _explained_elsewhere(hints, named, matches, deadline)


def _explained_elsewhere(hints: dict[str, str], named: dict, matches, deadline: Deadline) -> dict[str, str]:
    """``hints`` without the questions whose failure a mistake named on another question reproduces, where that
    question's own mistake does not reproduce the other's failure: the root cause is named once, where it is."""
    out = dict(hints)
    for question, (_, exchanges) in named.items():
        for other, (entries, other_exchanges) in named.items():
            if other == question or deadline.passed():
                continue
            if any(matches(e, exchanges) for e in entries) and not any(
                    matches(e, other_exchanges) for e in named[question][0]):
                out.pop(question, None)
                break
    if deadline.passed():  # unfinished: name nothing rather than a consequence as a cause
        return {q: h for q, h in out.items() if len(named) == 1}
    return out


_quiet = {"lock": threading.Lock(), "depth": 0, "saved": None}


@contextmanager
def quiet_warnings():
    """Python warnings ignored while a replay runs. ``warnings.catch_warnings`` is not thread-safe (batch grading
    replays in threads: overlapping ones could restore each other's filters and leave warnings off for good), so
    the first replay to enter saves the filters and the last to leave restores them."""
    with _quiet["lock"]:
        if _quiet["depth"] == 0:
            _quiet["saved"] = warnings.catch_warnings()
            _quiet["saved"].__enter__()
            warnings.simplefilter("ignore")
        _quiet["depth"] += 1
    try:
        yield
    finally:
        with _quiet["lock"]:
            _quiet["depth"] -= 1
            if _quiet["depth"] == 0:
                _quiet["saved"].__exit__(None, None, None)


def name_mistakes(bundle, recorder: Recorder, questions: dict, *, budget_s: float = DEFAULT_BUDGET_S) -> dict:
    """Add ``likely mistake: <hint>`` to the messages of each question the submission got wrong the way a
    catalogued mutant of ``bundle`` (``bundle.Bundle``) does (and ``mistake``: its entries and hint), and shorten
    an unwritten question's messages to its ``not written yet`` line(s) (and ``not_written``: True). Returns
    ``questions`` (changed in place). What the submission replied cannot make it raise (``behaves_like`` treats
    any odd reply as a mismatch); a broken catalogue (an instructor's bug) is
    logged as a warning naming the entry, and the score stands without hints."""
    for q in questions.values():
        failed = [m for m in q["messages"] if m.startswith("failed: ")]
        stubs = [m for m in failed if NOT_WRITTEN in m]
        if failed and len(stubs) == len(failed) and q["score"] == 0:
            q["messages"] = _not_written_lines(stubs)
            q[fields.NOT_WRITTEN] = True
    try:
        catalogue = bundle.catalogue()
        if catalogue is None:
            return questions
        with quiet_warnings():  # a mutant's UserWarnings are the replay's noise, not grade output
            hints = diagnose(bundle.suite, catalogue, recorder, questions, budget_s=budget_s)
        hints = _own_mistakes_only(hints, questions, recorder.inner)
        for question, hint in hints.items():
            questions[question]["messages"].append(HINT_PREFIX + hint)
            entries = [m.name for m in catalogue.mutants if m.question == question and m.hint == hint]
            questions[question][fields.MISTAKE] = {fields.ENTRY: ", ".join(entries), fields.HINT: hint}
    except CatalogueError as exc:
        log.warning("%s: no likely mistake named: %s", bundle.lab, exc)
    return questions


def _own_mistakes_only(hints: dict, questions: dict, student) -> dict:
    """The hints of questions whose own code is the likely cause: a question whose definition calls another graded
    name that also lost points (and was not graded with the reference's, ``result_fields.ON_REFERENCE``) fails the way
    the helper's mistake makes it fail: its hint is left out (the helper's question names the mistake)."""
    failed = {q for q, r in questions.items() if r["score"] < r["max_score"]}
    return {question: hint for question, hint in hints.items() if not any(
        re.search(rf"\b{re.escape(other)}\b", student.source(question) or "")
        for other in failed - {question, *questions.get(question, {}).get(fields.ON_REFERENCE, ())})}


def _not_written_lines(messages: list[str]) -> list[str]:
    """``failed: test: ... raised NotImplementedError: SelfAttention.forward: not written yet (in cell 3 ...)``
    -> ``SelfAttention.forward: not written yet``, once per function."""
    out: list[str] = []
    for m in messages:
        text = m.split("NotImplementedError: ", 1)[-1]
        end = text.find(NOT_WRITTEN)
        line = text[: end + len(NOT_WRITTEN)] if end >= 0 else text
        if line not in out:
            out.append(line)
    return out
