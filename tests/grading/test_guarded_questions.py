"""The operation guard only where a question's checks can ask (``call_evidence.guarded_questions``): the grader reads
from the hidden tests which questions' tests name a check about forbidden names, and the worker's guard, whose cost
falls on every torch call, runs only for those questions' graded calls. What it reads must cover every question
that asks (checked on every lab whose suite watches names, with the reference), and a question that asks while the
guard was off is flagged for a person, never passed silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab.course import load_course
from attnlab.grading.core import hidden
from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import HiddenTest
from attnlab.grading.worker import call_evidence

ROOT = Path(__file__).resolve().parents[2]

SOURCE = '''
from attnlab.grading.policy import forbidden_calls
from attnlab.grading.core import checks
FORBIDDEN = ["layer_norm"]
CHECK = forbidden_calls.assert_not_used
def rules(student):
    forbidden_calls.assert_not_used(student, FORBIDDEN, why="")
def helper(student):
    return rules(student)
def direct(student, ref, rng):
    forbidden_calls.assert_not_used(student, FORBIDDEN, why="")
def through_helpers(student, ref, rng):
    checks.assert_close(1, 1)
    helper(student)
def through_alias(student, ref, rng):
    CHECK(student, FORBIDDEN)
def values_only(student, ref, rng):
    checks.assert_close(len(FORBIDDEN), 1)
'''


def _tests(*names: str) -> list[HiddenTest]:
    def named(name):
        def func(student, ref, rng):
            return None
        func.__name__ = name
        return func
    return [HiddenTest(f"q_{n}", n, 1.0, named(n)) for n in names]


def test_questions_whose_tests_reach_a_check_are_guarded():
    tests = _tests("direct", "through_helpers", "through_alias", "values_only")
    assert call_evidence.guarded_questions(SOURCE, tests) == {"q_direct", "q_through_helpers", "q_through_alias"}


def test_what_cannot_be_read_guards_every_question():
    assert call_evidence.guarded_questions("def broken(:\n", _tests("direct")) is None
    assert call_evidence.guarded_questions(SOURCE, _tests("direct", "defined_elsewhere")) is None


WATCHING = [lab.id for lab in load_course(ROOT).labs if load_bundle(lab.autograder_dir).suite.watched_calls]


@pytest.mark.parametrize("lab_id", WATCHING)
def test_every_question_that_asks_is_guarded(lab_id, monkeypatch):
    bundle = load_bundle(load_course(ROOT).lab(lab_id).autograder_dir)
    trackers = []

    class Kept(call_evidence.Tracker):
        def __init__(self, student):
            super().__init__(student)
            trackers.append(self)

    monkeypatch.setattr(call_evidence, "Tracker", Kept)
    hidden.run_suite(bundle.suite, bundle.reference, bundle.reference, seed=0)
    asking = {q for q, names in trackers[0].asked.items() if names}
    assert asking, f"{lab_id} watches names, yet no question asked about them"
    assert asking <= bundle.suite.guarded_questions, asking - bundle.suite.guarded_questions


class _Guarded:
    """A student with the guard's switch, as ``RemoteStudent`` has it: records what it was set to."""

    def __init__(self, inner):
        self.inner, self.settings = inner, []

    def set_guard(self, on: bool) -> None:
        self.settings.append(on)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_question_that_asks_with_the_guard_off_is_flagged(monkeypatch):
    bundle = load_bundle(load_course(ROOT).lab("lab07").autograder_dir)
    monkeypatch.setattr(bundle.suite, "guarded_questions", frozenset())  # a reading that missed every check
    student, review = _Guarded(bundle.reference), []
    results = hidden.run_suite(bundle.suite, student, bundle.reference, seed=0, review=review)
    assert set(student.settings[:-1]) == {False} and student.settings[-1] is True  # off per test, on again after
    flagged = [line for line in review if "without the worker's operation guard" in line]
    assert {line.split("'s tests")[0] for line in flagged} == {"layer_norm", "TransformerEncoderBlock"}, review
    assert all(q["score"] == q["max_score"] for q in results.values() if q.get("kind") != "written")
