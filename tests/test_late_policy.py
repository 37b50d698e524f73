"""The late policy (``late:``, ``extensions:`` in course.yml): what a submission's time costs, read from course.yml."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from attnlab.course import COURSE_FILE, CourseError, load_course
from attnlab.late_policy import LabDeadline, LatePolicy

UTC = timezone.utc
DUE = datetime(2027, 2, 14, 23, 59, tzinfo=UTC)
TEN_A_DAY = LatePolicy(percent=10, unit="day")


def at(days: float = 0, **more) -> datetime:
    return DUE + timedelta(days=days, **more)


@pytest.mark.parametrize("when, percent, reason", [
    (at(-1), 0, "on time"), (at(0), 0, "on time"),
    (at(seconds=1), 10, "1 day late: -10%"), (at(1), 10, "1 day late: -10%"),
    (at(1, seconds=1), 20, "2 days late: -20%"), (at(1.5), 20, "2 days late: -20%"),
    (at(9.5), 100, "10 days late: -100%"), (at(20), 100, "20 days late: -100%"),
])
def test_ten_percent_per_day_or_part_of_one(when, percent, reason):
    got = LabDeadline(DUE, TEN_A_DAY).lateness("alice.ipynb", when, "csv")
    assert (got.percent, got.reason, got.source, got.deadline) == (percent, reason, "csv", DUE)


def test_grace_cap_per_hour_and_the_last_day():
    policy = LatePolicy(grace=timedelta(minutes=15), percent=5, unit="hour", cap=50, last=timedelta(days=3))
    rule = LabDeadline(DUE, policy)
    assert rule.lateness("a", at(minutes=15)).reason == "within the grace period"
    assert (rule.lateness("a", at(minutes=16)).percent, rule.lateness("a", at(minutes=16)).reason) == (
        5, "1 hour late: -5%")  # the grace forgives, it does not move the deadline
    assert rule.lateness("a", at(hours=2, minutes=1)).percent == 15
    capped = rule.lateness("a", at(2))
    assert (capped.percent, capped.reason) == (50, "48 hours late: -50% (capped at 50%)")
    after = rule.lateness("a", at(3, seconds=1))
    assert after.percent == 100 and after.reason.startswith("handed in after the last day for late work (2027-02-17T23:59")
    by_date = LabDeadline(DUE, LatePolicy(percent=10, last=date(2027, 2, 15)))
    assert by_date.lateness("a", at(0.5)).percent == 10
    assert by_date.lateness("a", datetime(2027, 2, 16, 12, tzinfo=UTC)).percent == 100


def test_extensions_by_more_time_or_a_new_deadline_matched_by_stem_or_folder():
    rule = LabDeadline(DUE, LatePolicy(percent=10, last=timedelta(days=1)),
                       {"carol": timedelta(days=2), "dan": datetime(2027, 2, 20, 12, tzinfo=UTC)})
    carol = rule.lateness("carol.ipynb", at(2, hours=12))
    assert (carol.deadline, carol.extended, carol.percent) == (at(2), True, 10)
    assert rule.lateness("carol/lab05.ipynb", at(2, hours=12)).percent == 10  # the extension moves `last` too
    assert rule.lateness("dan-v2.ipynb", at(3)).percent == 100  # not dan: no extension, past the last day
    assert rule.lateness("dan.ipynb", datetime(2027, 2, 20, 11, tzinfo=UTC)).reason == "on time"
    assert LabDeadline(DUE, LatePolicy()).lateness("x", at(2)).reason == "2 days late, no penalty set"


def _course(tmp_path, text: str):
    (tmp_path / COURSE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / COURSE_FILE).write_text(text)
    return load_course(tmp_path)


def test_course_yml_gives_a_course_policy_a_lab_may_change_and_extensions(tmp_path):
    course = _course(tmp_path, """late: {grace: 15 minutes, penalty: 10% per day, cap: 50%, last: 7 days}
labs:
  - id: lab05_self_attention
    due: 2027-02-14T23:59Z
    extensions: {alice: 2 days, bob: 2027-02-20T12:00+01:00}
  - id: lab06_mha
    due: 2027-02-21
    late: {penalty: 2% per hour, last: 2027-03-01}
  - id: lab07_block
""")
    lab05, lab06, lab07 = course.labs
    assert lab05.late == LatePolicy(timedelta(minutes=15), 10, "day", 50, timedelta(days=7))
    assert lab05.extensions == {"alice": timedelta(days=2),
                                "bob": datetime(2027, 2, 20, 12, tzinfo=timezone(timedelta(hours=1)))}
    assert lab06.late == LatePolicy(timedelta(minutes=15), 2, "hour", 50, date(2027, 3, 1))
    assert lab07.deadline is None and lab05.deadline.deadline("alice.ipynb") == (DUE + timedelta(days=2), True)
    assert lab05.late.describe() == ("10% of your points per day or part of one late (at most 50%); 15 minutes of "
                                     "grace; no points for work more than 7 days late")


@pytest.mark.parametrize("late, message", [
    ("{penalty: 10 percent}", "penalty '10 percent' is not a rate; write it as 10% per day or 2% per hour"),
    ("{cap: 150%}", "'150%' is not a percentage from 0% to 100%"),
    ("{grace: soon}", "'soon' is not a time; write it as 15 minutes"),
    ("{penalties: 10% per day}", "has late: .*; write it as late: {grace: 15 minutes"),
    ("{last: 2027-13-01}", r"\(late last\) has due: '2027-13-01', which is not a date"),
])
def test_a_bad_policy_names_the_value_and_the_form(tmp_path, late, message):
    with pytest.raises(CourseError, match=message):
        _course(tmp_path, f"late: {late}\nlabs:\n  - id: lab05_self_attention\n")


def test_a_bad_extension_is_refused(tmp_path):
    with pytest.raises(CourseError, match="lab05_self_attention has extensions: .*write it as extensions:"):
        _course(tmp_path, "labs:\n  - id: lab05_self_attention\n    extensions: [alice]\n")


def test_the_students_readme_gives_each_due_date_and_its_policy(tmp_path):
    from attnlab.release.readme import student_readme

    course = _course(tmp_path, """late: {penalty: 10% per day, cap: 30%}
labs:
  - {id: lab05_self_attention, title: "Lab 05", due: 2027-02-14T23:59Z}
  - {id: lab06_mha, title: "Lab 06", due: 2027-02-21}
  - {id: lab07_block, title: "Lab 07"}
""")
    readme = student_readme(course, list(course.labs), url="https://example.invalid/c", branch="main")
    assert ("## Deadlines and late work\n\n- Lab 05: due 2027-02-14T23:59:00+00:00; late work: 10% of your points per "
            "day or part of one late (at most 30%).\n- Lab 06: due 2027-02-21 (the end of that day); late work:") in readme
    assert "Lab 07: due" not in readme and "extension before the deadline" in readme
    undated = _course(tmp_path, "labs:\n  - {id: lab05_self_attention, title: Lab 05}\n")
    assert "Deadlines" not in student_readme(undated, list(undated.labs), url="https://example.invalid/c",
                                             branch="main")


def test_the_report_page_says_the_penalty_beside_the_total():
    from report.rows import sub

    from attnlab.report.build import compute
    from attnlab.report.page import render

    late = {"percent": 20.0, "reason": "2 days late: -20%", "points": 2.0, "submitted_at": "x", "deadline": "y",
            "source": "csv", "extended": False}
    page = render(compute("lab05", [sub("bob.ipynb", {"q": (8.0, 10.0, [])}, late=late)], figures=False))
    assert "late: 2 days late: -20% (-2 points)" in page
