"""nbgrader_bridge: under nbgrader, `grader.check` raises when a public check fails, runs the hidden tests only while
nbgrader autogrades, and returns nothing (nbgrader would read a returned value as partial credit)."""

from types import SimpleNamespace

import pytest

from attnlab.grading import nbgrader_bridge
from attnlab.public_check import Grader


class FakeOtter:
    """Otter's Notebook as far as the bridge uses it: ``check`` returns results with ``test_case_results``."""

    def __init__(self, passed):
        self.passed = passed

    def check(self, question, env):
        rows = [SimpleNamespace(passed=p, message="" if p else "wrong", test_case=SimpleNamespace(
            hidden=False, name=f"check {i}", body=SimpleNamespace(failure=None))) for i, p in enumerate(self.passed)]
        return SimpleNamespace(test_case_results=rows)


@pytest.fixture
def hidden_runs(monkeypatch):
    runs = []
    monkeypatch.setattr(nbgrader_bridge, "run_hidden_tests", lambda env, lab, q: runs.append((lab, q)))
    return runs


def test_outside_nbgrader_check_only_shows_the_result(monkeypatch, hidden_runs):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    result = Grader(FakeOtter([True, False]), "lab05_self_attention").check("f", {})
    assert "1 of 2 checks failed" in repr(result) and hidden_runs == []


def test_validate_raises_on_a_failed_check_and_runs_no_hidden_test(monkeypatch, hidden_runs, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with pytest.raises(AssertionError, match="1 check\\(s\\) of f do not pass yet"):
        Grader(FakeOtter([True, False]), "lab05_self_attention").check("f", {})
    assert Grader(FakeOtter([True, True]), "lab05_self_attention").check("f", {}) is None
    assert "f: all 2 checks pass" in capsys.readouterr().out and hidden_runs == []


def test_autograde_runs_the_hidden_tests_after_the_public_checks(monkeypatch, hidden_runs):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert Grader(FakeOtter([True]), "lab05_self_attention").check("f", {}) is None
    assert hidden_runs == [("lab05_self_attention", "f")]
    with pytest.raises(AssertionError):
        Grader(FakeOtter([False]), "lab05_self_attention").check("g", {})
    assert hidden_runs == [("lab05_self_attention", "f")]  # a failed public check stops the cell first
