"""The late_work tables on SQLite and on a real throwaway PostgreSQL server (``test_postgres``): the three
submissions of the term (on time, two days late, late after an extension) under 10% per day, recorded beside the
question scores, recorded again with a changed time (the entry replaced, both kept in the log), taken off the
marked total and shown in the gradebook CSV, the same on both databases."""

from __future__ import annotations

import csv
from datetime import datetime, timedelta, timezone

import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.outputs.late_work import late_work, record_late_work
from attnlab.late_policy import LabDeadline, LatePolicy
from attnlab.marking.marks_applied import marked_rows
from attnlab.report.gradebook_csv import export_csv

from .test_postgres import fresh_database, pg_server  # noqa: F401 - pg_server: the module's server

LAB = "lab01"
DUE = datetime(2027, 2, 14, 23, 59, tzinfo=timezone.utc)
TERM = LabDeadline(DUE, LatePolicy(percent=10.0), {"carol": timedelta(days=2)})
HANDED_IN = {"alice.ipynb": datetime(2027, 2, 14, 20, 0, tzinfo=timezone.utc),
             "bob.ipynb": datetime(2027, 2, 16, 10, 0, tzinfo=timezone.utc),
             "carol.ipynb": datetime(2027, 2, 17, 12, 0, tzinfo=timezone.utc)}


@pytest.fixture(params=["sqlite", "postgresql"])
def book(request, tmp_path):
    def opened(target):
        with open_gradebook(target) as gb:
            for key in HANDED_IN:
                gb.record(LAB, key, f"/subs/{key}", "0" * 64, {"score": 8.0, "max_score": 10.0, "questions": {
                    "q1": {"score": 6.0, "max_score": 6.0, "messages": []},
                    "q2": {"score": 2.0, "max_score": 4.0, "messages": []}}})
            yield gb

    if request.param == "sqlite":
        yield from opened(tmp_path / "gradebook.db")
        return
    with fresh_database(request.getfixturevalue("pg_server")) as url:
        yield from opened(url)


def _log(book) -> list[tuple]:
    return book.transaction(lambda ex: ex("SELECT key, percent FROM late_work_log WHERE lab = ? ORDER BY key, "
                                          "percent", (LAB,)).fetchall())


def test_the_terms_three_submissions_score_as_the_policy_says(book, tmp_path):
    entries = {key: TERM.lateness(key, when, source="csv") for key, when in HANDED_IN.items()}
    assert record_late_work(book, LAB, entries) == 3
    recorded = late_work(book, LAB)
    assert {k: (e["percent"], e["reason"], e["extended"]) for k, e in recorded.items()} == {
        "alice.ipynb": (0.0, "on time", False), "bob.ipynb": (20.0, "2 days late: -20%", False),
        "carol.ipynb": (10.0, "1 day late: -10%", True)}
    assert recorded["carol.ipynb"]["deadline"] == "2027-02-16T23:59:00+00:00"
    rows = {r["key"]: r for r in marked_rows(book, LAB)}
    assert {k: r["score"] for k, r in rows.items()} == pytest.approx(
        {"alice.ipynb": 8.0, "bob.ipynb": 6.4, "carol.ipynb": 7.2})
    assert all(r["questions"]["q1"]["score"] == 6.0 for r in rows.values())  # never inside a question
    assert {r["key"]: r["score"] for r in book.rows(LAB)} == dict.fromkeys(HANDED_IN, 8.0)  # the grader's, kept

    export_csv(book, tmp_path / "book.csv", lab=LAB)
    with open(tmp_path / "book.csv", newline="", encoding="utf-8") as f:
        cells = {r["submission"]: (float(r["score"]), float(r["late_penalty"]), r["late_percent"])
                 for r in csv.DictReader(f)}
    assert cells == {"alice.ipynb": (8.0, 0.0, "0"), "bob.ipynb": (6.4, 1.6, "20"), "carol.ipynb": (7.2, 0.8, "10")}


def test_recording_again_replaces_the_entry_and_the_log_keeps_both(book):
    record_late_work(book, LAB, {"bob.ipynb": TERM.lateness("bob.ipynb", HANDED_IN["bob.ipynb"], source="file")})
    on_time = TERM.lateness("bob.ipynb", DUE - timedelta(hours=1), source="csv")  # the right time, given later
    record_late_work(book, LAB, {"bob.ipynb": on_time})
    assert {k: (e["percent"], e["source"]) for k, e in late_work(book, LAB).items()} == {"bob.ipynb": (0.0, "csv")}
    assert _log(book) == [("bob.ipynb", 0.0), ("bob.ipynb", 20.0)]
    assert {r["key"]: r["score"] for r in marked_rows(book, LAB)}["bob.ipynb"] == 8.0
