"""Late work end to end: three submissions of lab01 (on time, two days late, late after an extension) graded by
``attnlab grade --times`` under a 10%-per-day policy score as the policy says in the gradebook CSV, the Canvas CSV
and the feedback, the penalty recorded beside the question scores, never in them. And the routes' submission
times: Gradescope's metadata, nbgrader's timestamp, a CSV, the file's time, in that order."""

from __future__ import annotations

import csv
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch

from attnlab.cli import main
from attnlab.course import load_course
from attnlab.grading.core.bundle import manifest_questions
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.outputs.late_work import late_work
from attnlab.grading.scale.submission_times import TimesError, parse_time, read_times_csv, submission_time
from attnlab.records.score_text import format_score

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab01_text_as_vectors"
COURSE = f"""name: late course
late: {{penalty: 10% per day}}
roster:
  - {{submission: alice, name: Alice Smith, canvas_id: "101"}}
  - {{submission: bob, name: Bob Jones, canvas_id: "102"}}
  - {{submission: carol, name: Carol White, canvas_id: "103"}}
labs:
  - id: {LAB}
    title: "Lab 01"
    due: 2027-02-14T23:59Z
    extensions: {{carol: 2 days}}
"""
TIMES = "submission,submitted_at\nalice,2027-02-14T20:00Z\nbob,2027-02-16T10:00Z\ncarol,2027-02-17T12:00Z\n"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course like the kit's (its built lab01) with a due date, a policy and carol's extension; the batch."""
    tmp = tmp_path_factory.mktemp("late")
    root = tmp / "course"
    (root / "instructor").mkdir(parents=True)
    (root / "instructor" / "course.yml").write_text(COURSE)
    for part in ("autograder", "labs", "solutions", f"instructor/{LAB}"):
        (root / part).symlink_to(ROOT / part)
    subs = tmp / "subs"
    subs.mkdir()
    solution = (ROOT / "solutions" / LAB / f"{LAB}.ipynb").read_bytes()
    for who in ("alice", "bob", "carol"):
        (subs / f"{who}.ipynb").write_bytes(solution)
    (tmp / "times.csv").write_text(TIMES)
    out = tmp / "out"
    code = main(["--root", str(root), "grade", LAB, str(subs), "--out", str(out), "--times", str(tmp / "times.csv")])
    assert code == 0
    return root, out


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_the_penalty_is_recorded_beside_the_questions(graded):
    _, out = graded
    with open_gradebook(out, create=False) as book:
        late = late_work(book, LAB)
        rows = {r["key"]: r for r in book.rows(LAB)}
    assert {k: (e["percent"], e["reason"], e["source"], e["extended"]) for k, e in late.items()} == {
        "alice.ipynb": (0.0, "on time", "csv", False), "bob.ipynb": (20.0, "2 days late: -20%", "csv", False),
        "carol.ipynb": (10.0, "1 day late: -10%", "csv", True)}
    code = sum(manifest_questions(ROOT / "autograder" / LAB).values())
    for row in rows.values():  # the gradebook's own rows: the grader's scores, untouched
        assert row["score"] == code and all(q["score"] in (None, q["max_score"]) for q in row["questions"].values())


def test_the_gradebook_csv_the_canvas_and_moodle_csvs_score_as_the_policy_says(graded, tmp_path):
    root, out = graded
    code = sum(manifest_questions(ROOT / "autograder" / LAB).values())
    assert main(["--root", str(root), "gradebook", str(out), "--csv", str(tmp_path / "book.csv")]) == 0
    book = {r["submission"]: r for r in _rows(tmp_path / "book.csv")}
    expected = {"alice.ipynb": code, "bob.ipynb": code * 0.8, "carol.ipynb": code * 0.9}
    assert {k: float(r["score"]) for k, r in book.items()} == pytest.approx(expected)
    assert {k: float(r["late_penalty"]) for k, r in book.items()} == pytest.approx(
        {k: code - v for k, v in expected.items()})
    assert {k: float(r["score_before_late"]) for k, r in book.items()} == {k: code for k in expected}
    assert book["bob.ipynb"]["submitted_at"] == "2027-02-16T10:00:00+00:00"
    assert "late: 2 days late: -20%" in book["bob.ipynb"]["notes"]

    assert main(["--root", str(root), "report", str(out)]) == 0
    with open(out / "report-canvas.csv", newline="", encoding="utf-8") as f:
        canvas = list(csv.reader(f))
    header, possible, *students = canvas
    total, penalty = header.index(f"{LAB}: total"), header.index(f"{LAB}: late penalty")
    assert possible[penalty] == "(read only)"
    by_id = {row[1]: (round(float(row[total]), 6), round(float(row[penalty]), 6)) for row in students}
    assert by_id == {"101": (code, 0.0), "102": (round(code * 0.8, 6), round(code * 0.2, 6)),
                     "103": (round(code * 0.9, 6), round(code * 0.1, 6))}
    with open(out / "report-moodle.csv", newline="", encoding="utf-8") as f:
        header, *students = list(csv.reader(f))
    total, penalty = header.index(f"{LAB}: total"), header.index(f"{LAB}: late penalty")
    by_name = {row[0]: (round(float(row[total]), 6), round(float(row[penalty]), 6)) for row in students}
    assert by_name == {"Alice": (code, 0.0), "Bob": (round(code * 0.8, 6), round(code * 0.2, 6)),
                       "Carol": (round(code * 0.9, 6), round(code * 0.1, 6))}


def test_the_feedback_says_what_was_taken_and_why(graded):
    _, out = graded
    bob = (out / "submissions" / "bob" / "feedback.md").read_text()
    assert "## Late work" in bob and "2 days late: -20%" in bob and "the deadline was 2027-02-14T23:59:00+00:00" in bob
    carol = (out / "submissions" / "carol" / "feedback.md").read_text()
    assert "your extended deadline was 2027-02-16T23:59:00+00:00: 1 day late: -10%" in carol
    alice = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert "Late work" not in alice or "on time" in alice


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_feedback_pages_per_roster_id_say_it_in_chromium(graded, tmp_path):
    from playwright.sync_api import sync_playwright

    root, out = graded
    code = sum(manifest_questions(ROOT / "autograder" / LAB).values())
    to = tmp_path / "handback"
    assert main(["--root", str(root), "feedback", str(out), "--to", str(to)]) == 0
    pages = {who: to / who / f"{LAB}.html" for who in ("alice", "bob", "carol")}  # the roster's ids: no login
    assert sorted(p.name for p in to.iterdir()) == sorted(pages) and all(p.is_file() for p in pages.values())
    expected = {"alice": (code, None), "bob": (code * 0.8, "2 days late: -20%"), "carol": (code * 0.9, "1 day late: -10%")}
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        for who, (total, reason) in expected.items():
            page.goto(pages[who].as_uri())
            assert page.locator("p.total").inner_text().startswith(f"Total: {format_score(total)} / ")
            late = page.locator("section.late")
            if reason is None:
                assert late.count() == 0 or "on time" in late.inner_text()
            else:
                assert late.locator("strong").inner_text() == reason
                assert f"took {format_score(code - total)} points off your total" in late.inner_text()
        assert "your extended deadline was 2027-02-16T23:59:00+00:00" in page.locator("section.late").inner_text()
        page.screenshot(path=str(tmp_path / "carol.png"), full_page=True)
        browser.close()


def test_times_are_read_from_gradescope_then_nbgrader_then_a_csv_then_the_file(tmp_path):
    export = tmp_path / "export"
    (export / "submission_7").mkdir(parents=True)
    nb = export / "submission_7" / "lab.ipynb"
    nb.write_text("{}")
    (export / "submission_metadata.yml").write_text(
        "submission_7:\n  :submitters:\n  - :name: Alice\n  :created_at: 2027-02-14 23:00:00.123456789 -0800\n")
    (nb.parent / "timestamp.txt").write_text("2027-02-10 10:00:00.000000 UTC")
    times = {"submission_7": datetime(2027, 1, 1, tzinfo=timezone.utc)}
    assert submission_time("submission_7/lab.ipynb", nb, times) == (
        datetime(2027, 2, 14, 23, 0, 0, 123456, tzinfo=timezone(timedelta(hours=-8))), "gradescope")
    (export / "submission_metadata.yml").unlink()
    assert submission_time("submission_7/lab.ipynb", nb, times) == (
        datetime(2027, 2, 10, 10, tzinfo=timezone.utc), "nbgrader")
    (nb.parent / "timestamp.txt").unlink()
    assert submission_time("submission_7/lab.ipynb", nb, times) == (times["submission_7"], "csv")
    os.utime(nb, (1_800_000_000, 1_800_000_000))
    assert submission_time("submission_7/lab.ipynb", nb) == (
        datetime.fromtimestamp(1_800_000_000, timezone.utc), "file time")
    (nb.parent / "submission_metadata.json").write_text(json.dumps({"created_at": "2027-02-14T22:00:00.5+01:00"}))
    assert submission_time("x", nb)[1] == "gradescope"


def test_a_time_without_a_zone_is_never_guessed(tmp_path):
    assert parse_time("2027-02-14 23:00:00") is None and parse_time("soon") is None
    assert parse_time("2027-02-14T23:00Z") == datetime(2027, 2, 14, 23, tzinfo=timezone.utc)
    (tmp_path / "t.csv").write_text("submission,submitted_at\nalice,2027-02-14 23:00\n")
    with pytest.raises(TimesError, match="t.csv row 2: .* needs a submission and a submitted_at time with its zone"):
        read_times_csv(tmp_path / "t.csv")


def test_a_bad_times_file_is_one_line_before_anything_is_graded(tmp_path, capsys):
    (tmp_path / "a.ipynb").write_text("{}")
    assert main(["--root", str(ROOT), "grade", LAB, str(tmp_path / "a.ipynb"), "--out", str(tmp_path / "o"),
                 "--times", str(tmp_path / "none.csv")]) == 2
    assert "no times file" in capsys.readouterr().err and not (tmp_path / "o").exists()
    assert load_course(ROOT).lab(LAB).deadline is None  # the kit's own course sets no due dates


def test_penalties_from_file_times_are_flagged(tmp_path, capsys):
    from attnlab.late_policy import LabDeadline, LatePolicy
    from attnlab.report.late_record import record_late

    (tmp_path / "late.ipynb").write_text("{}")
    os.utime(tmp_path / "late.ipynb", (1_900_000_000, 1_900_000_000))  # 2030: after the deadline
    with open_gradebook(tmp_path) as book:
        book.record(LAB, "late.ipynb", str(tmp_path / "late.ipynb"), "a" * 64,
                    {"score": 4.0, "max_score": 4.0, "questions": {"q": {"score": 4.0, "max_score": 4.0,
                                                                        "messages": []}}})

    class Lab:  # what record_late reads of a course's lab
        id, late = LAB, LatePolicy(percent=10)
        deadline = LabDeadline(datetime(2027, 2, 14, tzinfo=timezone.utc), late)

    found = record_late(Lab, str(tmp_path), str(tmp_path))
    assert found["late.ipynb"].source == "file time" and found["late.ipynb"].percent == 100
    assert "come from the files' modification times" in capsys.readouterr().err
