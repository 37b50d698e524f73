"""Hidden tests: a registry per lab and the loop that runs them.

A lab's ``hidden_tests.py`` builds one ``HiddenSuite`` and registers test functions on it::

    suite = HiddenSuite("lab05_self_attention")

    @suite.test("scaled_dot_product_attention", points=1)
    def sdpa_matches_reference(student, ref, rng): ...

A test gets ``student`` and ``ref`` (``StudentAPI``) and ``rng`` (a ``torch.Generator`` seeded from the
grader's secret seed and the test's name). It passes by returning, fails by raising ``AssertionError``
(or ``StudentError``) with a message a student can act on. A question's score is the sum of the points
of its passing tests.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from attnlab.grading.policy import forbidden_calls, rule_costs, rules
from attnlab.grading.source.notebook_code import definitions
from attnlab.grading.worker import call_evidence
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.reference_calls import reference_note
from attnlab.grading.worker.reference_host import ReferenceOverBudget
from attnlab.records import result_fields as fields


@dataclass(frozen=True)
class HiddenTest:
    question: str
    name: str
    points: float
    func: Callable


class HiddenSuite:
    """The hidden tests of one lab, in registration order.

    ``policy_questions``: the questions a breach of the course rules may cost (``grading/policy/rules.py`` describes the
    rules, once): each breach costs those of them it appears in or whose code uses it; None: every question;
    ``()``: none. ``allowed_imports``: modules the lab adds to the rules'
    ``DEFAULT_IMPORTS``. The lab's rules cell says the same in words. ``graded_on_reference``: question -> the graded
    functions (and classes: ``worker/module_calls.py``) its code calls that its tests run with the reference's version
    (``worker/reference_calls.py``), so that a mistake in one of them costs only its own question.
    """

    def __init__(self, lab: str, policy_questions=None, allowed_imports=(), graded_on_reference=None):
        self.lab = lab
        self.watched_calls: tuple[str, ...] = ()  # set by load_suite: call_evidence.watched_names
        self.guarded_questions: frozenset[str] | None = None  # set by load_suite: call_evidence.guarded_questions
        self.allowed_imports = tuple(allowed_imports)
        self.graded_on_reference = {q: tuple(names) for q, names in (graded_on_reference or {}).items()}
        self.tests: list[HiddenTest] = []
        self.policy_questions = None if policy_questions is None else tuple(policy_questions)

    def test(self, question: str, points: float = 1.0, name: str | None = None):
        if points <= 0:
            raise ValueError(f"points={points} must be positive")

        def register(func):
            test_name = name or func.__name__
            if any(t.name == test_name for t in self.tests):
                raise ValueError(f"hidden test {test_name!r} is registered twice in {self.lab}")
            self.tests.append(HiddenTest(question, test_name, float(points), func))
            return func

        return register

    def questions(self) -> dict[str, float]:
        """Question name -> max score, in the order the tests were registered."""
        out: dict[str, float] = {}
        for t in self.tests:
            out[t.question] = out.get(t.question, 0.0) + t.points
        return out


def test_seed(seed: int, test_name: str) -> int:
    digest = hashlib.sha256(f"{seed}:{test_name}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def run_suite(suite: HiddenSuite, student, ref, *, seed: int, questions=None,
              on_result: Callable | None = None, test_timeout: float | None = None,
              review: list | None = None) -> dict[str, dict]:
    """Run the hidden tests; returns ``{question: {"score", "max_score", "messages", "failed"}}`` (``failed``: the
    names of the failed tests, ``result_fields.FAILED``).

    ``questions`` limits the run to those names. ``on_result(test, passed, message, seconds)`` is called
    after each test (progress, logs). ``test_timeout``: the time a test may spend in student code, passed
    to students that enforce it (``RemoteStudent.set_deadline``). ``review``: a list that gets one line per
    construct of the graded cells that the course rules refuse (what a person must review), and one per question
    whose tests ran a forbidden call that the source check did not find (``call_evidence.Tracker``).
    """
    set_deadline = getattr(student, "set_deadline", lambda _: None)
    set_guard = getattr(student, "set_guard", lambda _: None)  # the worker's operation guard, per question
    results: dict[str, dict] = {}
    forbidden_met: dict[str, list] = {}  # question -> the forbidden_calls.ForbiddenUse its failed tests raised
    on_reference: dict[str, set] = {}  # question -> the reference functions its tests called (graded_on_reference)
    on_own: dict[str, dict] = {}  # question -> {name: why its stand-in fell short}: graded on the student's own since
    evidence = call_evidence.Tracker(student)  # what the worker saw run, per question
    cells = rule_costs.student_cells(student)  # the grader's own copy: read once, for the costs, notes and policy
    uses = rule_costs.uses_by_name(cells)  # the forbidden calls a question answers for
    for q, max_score in suite.questions().items():
        if questions is None or q in questions:
            results[q] = {"score": 0.0, "max_score": max_score, "messages": [], fields.FAILED: []}
    for test in suite.tests:
        if test.question not in results:
            continue
        rng = torch.Generator().manual_seed(test_seed(seed, test.name))
        start = time.monotonic()
        set_deadline(None if test_timeout is None else start + test_timeout)
        guarded = suite.guarded_questions is None or test.question in suite.guarded_questions
        set_guard(guarded)
        evidence.start()
        scope = _question_code(suite, test.question, uses)
        with forbidden_calls.question_scope(scope):
            passed, message, forbidden = _outcome(suite, test, student, ref, rng, (on_reference, on_own))
        set_deadline(None)
        evidence.stop(test.question, scope, guarded)
        entry = results[test.question]
        if passed:
            entry["score"] += test.points
            entry["messages"].append(f"passed: {test.name}")
        else:
            entry["messages"].append(f"failed: {test.name}: {message}"[:2000])
            entry[fields.FAILED].append(test.name)
            if forbidden is not None:
                entry.setdefault(fields.FORBIDDEN, []).append(test.name)
                forbidden_met.setdefault(test.question, []).append(forbidden)
        if on_result is not None:
            on_result(test, passed, message, time.monotonic() - start)
    set_guard(True)
    _redefinition_notes(results, cells)
    _reference_notes(results, on_reference, on_own)
    forbidden_costs_question(results, forbidden_met, student)
    found = apply_policy(suite, results, cells) + evidence.apply(results, forbidden_met)
    if review is not None:
        review.extend(found)
    return results


def _reference_notes(results: dict, on_reference: dict[str, set], on_own: dict[str, dict]) -> None:
    """The feedback lines of the questions graded with the reference (``reference_note``) and of those graded on the
    student's own version of a name whose stand-in could not give what their code needed (``fell_short``)."""
    for q, own in on_own.items():
        if q in results:
            for name, why in own.items():
                results[q]["messages"].insert(0, f"note: graded on your own `{name}`, not the reference's: {why}, "
                                                 "which the grader's stand-in for the reference cannot give")
    for q, used in on_reference.items():
        used = used - set(on_own.get(q, ()))
        if used and q in results:
            results[q]["messages"].insert(0, reference_note(used))
            results[q][fields.ON_REFERENCE] = sorted(used)


LAST_GRADED = "; the last definition is graded"
REDEFINED = "note: `{name}` is defined in {first} and again, further down, in {later}" + LAST_GRADED


def _redefinition_notes(results: dict, cells: list[tuple[str, str]]) -> None:
    """The feedback line of each question whose name more than one graded cell defines: every route grades the last
    definition, the state a run of the whole notebook leaves."""
    for name, found in definitions(cells, frozenset(results)).items():
        if name in results and len(found) > 1:
            where = [cells[position][0] or "a cell" for position, _ in found]
            results[name]["messages"].insert(0, REDEFINED.format(name=name, first=where[0],
                                                                 later=" and in ".join(where[1:])))


def _question_code(suite: HiddenSuite, question: str, uses: dict[str, set[str]]) -> set[str] | None:
    """The top-level names whose code is ``question``'s (``rule_costs.question_code``), None when the student's code
    could not be read by name (every graded cell is then read)."""
    if not uses:
        return None
    return rule_costs.question_code(question, uses, suite.graded_on_reference.get(question, ()))


def _outcome(suite: HiddenSuite, test: HiddenTest, student, ref, rng, seen: tuple) -> tuple[bool, str, Any]:
    """``(passed, message, the forbidden_calls.ForbiddenUse it raised or None)`` of one test."""
    try:
        _run_test(suite, test, student, ref, rng, *seen)
        return True, "", None
    except AssertionError as exc:
        return False, str(exc) or "assertion failed", exc if isinstance(exc, forbidden_calls.ForbiddenUse) else None
    except StudentError as exc:
        return False, str(exc), None
    except Exception as exc:  # noqa: BLE001 - e.g. unpacking a wrongly shaped return value
        return False, f"could not test your code: {type(exc).__name__}: {exc}", None


def _run_test(suite: HiddenSuite, test: HiddenTest, student, ref, rng, on_reference: dict, on_own: dict) -> None:
    """Run one test, with the reference's version of the functions its question builds on where the suite says so
    and the student supports it (``StudentAPI.graded_on_reference``); records in ``on_reference`` those called.

    A test that fails after the student's code needed of a stand-in what it cannot give (``reference_shortfalls``:
    an attribute the reference does not hold, a sub-layer's own forward) runs again, on the same draws, with the
    student's own version of that name, as do the question's later tests (recorded in ``on_own``); not one that went
    over the reference's caps (``ReferenceOverBudget``: the test is lost)."""
    own = on_own.get(test.question, {})
    names = tuple(n for n in suite.graded_on_reference.get(test.question, ()) if n not in own)
    if not names or not hasattr(student, "graded_on_reference"):
        test.func(student, ref, rng)
        return
    state = rng.get_state()
    try:
        with student.graded_on_reference(names, ref) as used:
            try:
                test.func(student, ref, rng)
            finally:
                on_reference.setdefault(test.question, set()).update(used)
    except Exception as exc:
        short = {n: why for n, why in dict(getattr(student, "reference_shortfalls", None) or {}).items() if n in names}
        if not short or isinstance(exc, ReferenceOverBudget):  # over the reference's caps: lost, not regraded
            raise
        on_own.setdefault(test.question, {}).update(short)
        rng.set_state(state)
        _run_test(suite, test, student, ref, rng, on_reference, on_own)


def forbidden_costs_question(results: dict[str, dict], met: dict[str, list], student) -> None:
    """A lab's forbidden library call costs the whole question whose code holds it, as the notebook says, whichever
    of the question's hidden tests met it: a question whose test raised ``forbidden_calls.ForbiddenUse`` (``met``) in its own
    code (the question's definition and the helpers it calls, not the graded names it is graded on the reference for:
    ``forbidden_calls.question_scope``; or, read without that scope, its own definition) gets 0, its first message
    naming the call from the exception's ``hits``. A call in another question's code costs that question only."""
    for q, raised in met.items():
        entry = results[q]
        names = {name for exc in raised for name in exc.names}
        try:
            own = (any(getattr(exc, "scoped", False) for exc in raised)  # found in this question's code only
                   or (forbidden_calls.forbidden_uses(student.source(q), names) if names else True))
        except Exception:  # noqa: BLE001 - a student without that definition: the tests' verdict stands
            own = False
        if not own or entry["score"] == 0.0:
            continue
        hits = list(dict.fromkeys(hit for exc in raised for hit in exc.hits))
        found = ", ".join(hits[:5]) if hits else "a forbidden library function"
        entry["messages"].insert(0, (
            f"failed: the lab forbids this library call, so it costs the whole question "
            f"({entry['score']:g} of {entry['max_score']:g} points set to 0): found {found}; "
            "write the computation yourself"))
        entry["score"] = 0.0


def apply_policy(suite: HiddenSuite, results: dict[str, dict], cells: list[tuple[str, str]]) -> list[str]:
    """Zero, for each construct of the graded ``cells`` (``rule_costs.student_cells``) that the course rules
    (``grading/policy/rules.py``) refuse, the questions it costs (``rule_costs``: the question it appears in or whose code
    uses it, among those the lab ties to the rules), naming the construct and the rule; a construct that is only
    suspicious costs nothing. Returns one review line per construct."""
    hits = rules.breaches(cells, suite.allowed_imports)
    if not hits:
        return []
    tied = [q for q in results if suite.policy_questions is None or q in suite.policy_questions]
    uses = rule_costs.uses_by_name(cells)
    lines, costs = [], {}
    for hit in hits:
        lost = [] if hit.review_only else rule_costs.costed_questions(hit.scope, tied, uses)
        for q in lost:
            costs.setdefault(q, []).append(hit)
        what = f"{', '.join(lost)} set to 0" if lost else "no points lost"
        lines.append(f"the lab's rules ({what}): {hit}")
    for q, found in costs.items():
        shown = "; ".join(map(str, found[:5])) + (f"; and {len(found) - 5} more" if len(found) > 5 else "")
        results[q]["score"] = 0.0
        results[q]["messages"].insert(0, (
            f"failed: the lab's rules: this question's code uses {shown}. The graded cells may use only the "
            "imports and public functions the lab names, with no reflection and no names computed at run "
            "time (the course rules in the notebook's opening); rewrite that code (a person will review it)"))
    return lines


_IMPORT_LOCK = threading.Lock()  # batch jobs are threads: one import at a time, never half-imported


def load_suite(path: str | Path) -> HiddenSuite:
    """Import a ``hidden_tests.py`` file (trusted) and return its ``suite``; safe from several threads."""
    with _IMPORT_LOCK:
        return _load_suite(Path(path))


def import_file(path: Path, module_name: str, *, what: str):
    """Import the Python file ``path`` as ``module_name`` (registered in ``sys.modules``) and return it;
    ``what`` names the file in the error when it cannot be imported."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"cannot import {what}{path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _load_suite(path: Path) -> HiddenSuite:
    mod_name = f"_attnlab_hidden_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]}"
    if mod_name in sys.modules:
        return sys.modules[mod_name].suite
    module = import_file(path, mod_name, what="hidden tests from ")
    suite = getattr(module, "suite", None)
    if not isinstance(suite, HiddenSuite):
        raise TypeError(f"{path} must define `suite = HiddenSuite(...)`")
    suite.watched_calls = call_evidence.suite_watch(path, module)  # what the worker watches run
    suite.guarded_questions = call_evidence.guarded_questions(path.read_text(), suite.tests)  # where its ops guard
    return suite
