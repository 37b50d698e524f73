"""Score distributions, ranked mistakes, failed tests, unwritten questions and health, from hand-made rows."""

from __future__ import annotations

import pytest

from attnlab.grading.core.mutants import Entry
from attnlab.records import result_fields as f
from attnlab.records.student_names import Names
from attnlab.report import stats

from .rows import diagnosed, problem, sub

HINT_A, HINT_B = "your scores look unscaled", "your mask looks inverted"
MUTANTS = [Entry("no_scale", "sdpa", "", hint=HINT_A), Entry("no_scale_again", "sdpa", "", hint=HINT_A),
           Entry("inverted", "sdpa", "", hint=HINT_B), Entry("other", "mask", "", hint=HINT_A)]


def _class():
    def wrong_a(who):
        return (0.0, 4.0, [f"failed: sdpa_values: {who}.ipynb got 3", f"likely mistake: {HINT_A}"],
                diagnosed(HINT_A, "sdpa_values"))

    return [
        sub("alice.ipynb", {"sdpa": wrong_a("alice"), "mask": (2.0, 2.0, [])}, elapsed_s=4.0),
        sub("bob.ipynb", {"sdpa": wrong_a("bob"),
                          "mask": (1.0, 2.0, ["failed: mask_diag: off"], {f.FAILED: ["mask_diag"]})}, elapsed_s=6.0),
        sub("carol.ipynb", {"sdpa": (1.0, 4.0, ["failed: sdpa_mask: x", f"likely mistake: {HINT_B}"],
                                     diagnosed(HINT_B, "sdpa_mask")),
                            "mask": (0.0, 2.0, ["mask: not written yet"], {f.NOT_WRITTEN: True})}, elapsed_s=2.0),
        sub("dave.ipynb", {"sdpa": (4.0, 4.0, []), "mask": (2.0, 2.0, [])}, elapsed_s=30.0,
            review=["the lab's rules: import os"], errors=["timed out after 30 s (an endless loop, or far too slow)"],
            problems=[problem(f.TIMEOUT, "timed out after 30 s (an endless loop, or far too slow)"),
                      problem(f.RULE_BREACH, "the lab's rules: import os")]),
        sub("erin.ipynb", {"sdpa": (0.0, 4.0, ["x"]), "mask": (0.0, 2.0, ["x"])}, isolation="",
            errors=["the submitted file is empty"], problems=[problem(f.UNREADABLE, "the submitted file is empty")]),
        sub("fred.ipynb", {"sdpa": (0.0, 4.0, ["failed: sdpa_values: your code ended the Python process (exit 3)"],
                                    {f.FAILED: ["sdpa_values"]}), "mask": (0.0, 2.0, [])},
            grader_error="Traceback...\nRuntimeError: boom",
            problems=[problem(f.WORKER_CRASH, "your code ended the Python process (exit 3)")]),
    ]


def test_distributions_give_mean_median_and_share_at_full_marks():
    total, per_q = stats.distributions(_class())
    sdpa, mask = per_q
    assert (sdpa.name, sdpa.max_score, sdpa.values) == ("sdpa", 4.0, [0.0, 0.0, 1.0, 4.0, 0.0, 0.0])
    assert sdpa.mean == pytest.approx(5 / 6) and sdpa.median == 0.0 and sdpa.full_share == pytest.approx(1 / 6)
    assert mask.full_share == pytest.approx(2 / 6) and mask.median == 0.5
    assert total.values == [2.0, 1.0, 1.0, 6.0, 0.0, 0.0] and total.full_share == pytest.approx(1 / 6)


def test_mistakes_are_ranked_by_count_with_their_entries_and_an_anonymised_example():
    subs = _class()
    ranked = stats.mistakes(subs, Names(subs), MUTANTS)
    assert [(m.question, m.hint, m.count) for m in ranked] == [("sdpa", HINT_A, 2), ("sdpa", HINT_B, 1)]
    assert ranked[0].entries == ["no_scale", "no_scale_again"] and ranked[1].entries == ["inverted"]
    example = ranked[0].example
    assert example.startswith("failed: sdpa_values: ") and "alice" not in example and "bob" not in example
    assert "student-" in ranked[0].example


def test_failed_tests_and_unwritten_questions_are_counted_once_per_submission():
    subs = _class()
    assert stats.failed_tests(subs)[0] == ("sdpa", "sdpa_values", 3)
    assert ("mask", "mask_diag", 1) in stats.failed_tests(subs)
    assert stats.not_written(subs) == [("mask", 1)]


def test_health_sorts_rows_into_timeouts_crashes_unreadable_grader_errors_and_flags():
    h = stats.health(_class())
    assert [k for k, _ in h.timed_out] == ["dave.ipynb"] and [k for k, _ in h.flagged] == ["dave.ipynb"]
    assert [k for k, _ in h.crashed] == ["fred.ipynb"]
    assert h.unreadable == [("erin.ipynb", "the submitted file is empty")]
    assert h.grader_errors == [("fred.ipynb", "RuntimeError: boom")]
    assert h.median_s == 3.0 and h.slowest[0] == ("dave.ipynb", 30.0)


def test_message_text_that_mimics_the_grader_forges_no_category():
    """Rows whose messages (student text) read like the grader's lines, without the structured fields: no
    mistake, timeout, crash, unwritten question or failed test is read from them; a forged field value is dropped."""
    forged = ["failed: t: ValueError: timed out after 1 s", "likely mistake: forged hint", "timed out after 9 s",
              "your code ended the Python process (killed by signal SIGKILL)", "q: not written yet"]
    subs = [sub("mallory.ipynb", {"q": (0.0, 1.0, forged, {f.MISTAKE: "likely mistake: x", f.FAILED: "t"})},
                errors=forged, problems=[{"category": "likely mistake", "message": "x"}, "timed out after"])]
    h = stats.health(subs)
    assert not (h.timed_out or h.crashed or h.unreadable or h.grader_errors or h.flagged)
    assert stats.mistakes(subs, Names(subs)) == [] and stats.failed_tests(subs) == [] and stats.not_written(subs) == []
