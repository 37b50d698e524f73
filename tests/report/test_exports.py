"""Score CSVs in the plain, Canvas and Moodle layouts; text cells never run as formulas."""

from __future__ import annotations

import csv

import pytest

from attnlab.report import compute
from attnlab.report.exports import write_all

from .rows import sub


def _read(path):
    return list(csv.reader(path.open(newline="")))


def _subs():
    return [sub("=HYPERLINK(1).ipynb", {"q1": (1.5, 2.0, []), "q2": (0.0, 3.0, [])}, errors=["-oops"]),
            sub("bob.ipynb", {"q1": (2.0, 2.0, [])})]


def test_three_layouts_with_points_and_numbers(tmp_path):
    paths = write_all(compute("lab05", _subs(), figures=False), tmp_path / "report")
    plain, canvas, moodle = (_read(paths[k]) for k in ("scores", "canvas", "moodle"))
    assert plain[0] == ["submission", "score", "max_score", "q1", "q2", "notes"]
    assert plain[1] == ["'=HYPERLINK(1).ipynb", "1.5", "5", "1.5", "0", "'-oops"]
    assert plain[2] == ["bob.ipynb", "2", "2", "2", "", ""]
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "lab05: q1", "lab05: q2",
                         "lab05: total"]
    assert canvas[1] == ["Points Possible", "", "", "", "", "2", "3", "5"]
    assert canvas[3] == ["bob", "", "", "bob", "", "2", "", "2"]
    assert canvas[2][0] == canvas[2][3] == "'=HYPERLINK(1)"
    assert moodle[0][:6] == ["First name", "Last name", "ID number", "Institution", "Department", "Email address"]
    assert moodle[2] == ["bob", "", "bob", "", "", "", "2", "", "2"]


def test_anonymised_exports_use_the_aliases(tmp_path):
    report = compute("lab05", _subs(), figures=False, anonymise=True)
    paths = write_all(report, tmp_path / "r")
    for path in paths.values():
        text = path.read_text()
        assert "bob" not in text and "HYPERLINK" not in text and report.names("bob.ipynb") in text


ROSTER_CSV = ("submission,name,login,email,canvas_id,sis_id,moodle_id,section\n"
              "bob,Bob Stone,bstone,bstone@uni.example,10234,S-77,M-5,Tue lab\n"
              "carol,=Carol,cw,cw@uni.example,10235,,,\n")


def _course_with_roster(tmp_path, roster_line: str):
    from attnlab.course import load_course

    root = tmp_path / "course"
    (root / "instructor").mkdir(parents=True)
    (root / "instructor" / "roster.csv").write_text(ROSTER_CSV)
    (root / "instructor" / "course.yml").write_text(f"name: c\n{roster_line}\nlabs:\n  - id: lab05_x\n")
    return load_course(root)


def test_the_course_roster_reaches_the_canvas_and_moodle_exports(tmp_path):
    roster = _course_with_roster(tmp_path, "roster: roster.csv").roster
    subs = _subs() + [sub("carol/lab05.ipynb", {"q1": (1.0, 2.0, [])})]  # a folder per student
    paths = write_all(compute("lab05", subs, figures=False), tmp_path / "report", roster)
    canvas, moodle, plain = (_read(paths[k]) for k in ("canvas", "moodle", "scores"))
    rows = {row[3]: row for row in canvas[2:]}
    assert rows["bstone"] == ["Bob Stone", "10234", "S-77", "bstone", "Tue lab", "2", "", "2"]
    assert rows["cw"][:5] == ["'=Carol", "10235", "", "cw", ""]  # a name is still never a formula
    # not on the roster: kept and flagged, never dropped
    assert rows["'=HYPERLINK(1)"][:5] == ["NOT ON ROSTER: =HYPERLINK(1)", "", "", "'=HYPERLINK(1)", ""]
    assert len(canvas) == 2 + len(subs)
    bob = next(row for row in moodle if row[2] == "M-5")
    assert bob[:6] == ["Bob", "Stone", "M-5", "", "", "bstone@uni.example"]
    assert plain[0][:4] == ["submission", "name", "login", "email"]
    assert ["bob.ipynb", "Bob Stone", "bstone", "bstone@uni.example"] == plain[2][:4]


def test_a_roster_listed_in_course_yml_and_its_errors(tmp_path):
    from attnlab.course import CourseError
    from attnlab.report.exports import not_on_roster

    course = _course_with_roster(tmp_path, "roster:\n  - {submission: bob, login: bstone, canvas_id: 9}")
    assert course.roster.find("bob.ipynb").canvas_id == "9" and course.roster.find("alice.ipynb") is None
    report = compute("lab05", _subs(), figures=False)
    assert not_on_roster(report, course.roster) == ["=HYPERLINK(1).ipynb"]
    assert not_on_roster(report, None) == []
    anonymised = compute("lab05", _subs(), figures=False, anonymise=True)
    assert "bstone" not in "".join(p.read_text() for p in write_all(anonymised, tmp_path / "a", course.roster).values())
    for bad, message in [("roster: nobody.csv", "no roster file .*nobody.csv"),
                         ("roster:\n  - {login: x}", "roster entry 1 has no submission"),
                         ("roster:\n  - {submission: b, phone: 1}", "column\\(s\\) phone"),
                         ("roster:\n  - {submission: b}\n  - {submission: b}", "'b' twice")]:
        with pytest.raises(CourseError, match=message):
            _course_with_roster(tmp_path / str(abs(hash(bad))), bad)


def test_attnlab_gradebook_exports_with_the_course_roster(tmp_path, capsys):
    from attnlab.cli import main
    from attnlab.grading.outputs.gradebook import open_gradebook

    course = _course_with_roster(tmp_path, "roster: roster.csv")
    with open_gradebook(tmp_path / "gradebook.db") as book:
        for key, score in (("bob.ipynb", 2.0), ("dave.ipynb", 1.0)):
            book.record("lab05_x", key, f"/s/{key}", key[0] * 64, {
                "submission": key, "score": score, "max_score": 2.0, "isolation": "fake", "elapsed_s": 0.1,
                "errors": [], "questions": {"q1": {"score": score, "max_score": 2.0, "messages": []}}})
    assert main(["--root", str(course.root), "gradebook", str(tmp_path / "gradebook.db"), "--csv", "-"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "submission,name,login,email,score,max_score,q1,notes",
        "bob.ipynb,Bob Stone,bstone,bstone@uni.example,2,2,2,",
        "dave.ipynb,NOT ON ROSTER: dave,dave,,1,2,1,"]
