"""`attnlab grade LAB DIR --out OUT --jobs 2` with the real grader: one gradebook row per file whatever
the file holds, a CSV export, and a rerun that resumes without regrading."""

from __future__ import annotations

import csv
import json
import os
import shutil
import sqlite3

import nbformat

from attnlab.cli import main

LAB = "lab99_demo"


def test_batch_of_good_blank_buggy_corrupt_and_empty(built_course, tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(built_course / "solutions" / LAB / f"{LAB}.ipynb", subs / "good.ipynb")
    shutil.copy(built_course / "labs" / LAB / f"{LAB}.ipynb", subs / "blank.ipynb")
    buggy = nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    buggy.cells.append(nbformat.v4.new_code_cell("def double(x):\n    return x * 2 + 1"))
    nbformat.write(buggy, subs / "buggy.ipynb")
    (subs / "corrupt.ipynb").write_bytes(b'{"cells": [ this is not json')
    (subs / "empty.ipynb").write_bytes(b"")
    out = tmp_path / "out"
    args = ["--root", str(built_course), "grade", LAB, str(subs), "--out", str(out), "--jobs", "2", "--json"]

    assert main(args) == 0
    graded = json.loads(capsys.readouterr().out)
    results = {r["submission"].rsplit("/", 1)[-1]: r["score"] for r in graded}
    assert results == {"good.ipynb": 3.0, "blank.ipynb": 0.0, "buggy.ipynb": 1.0, "corrupt.ipynb": 0.0,
                       "empty.ipynb": 0.0}
    with sqlite3.connect(out / "gradebook.db") as db:
        assert db.execute("select count(*) from submissions").fetchone()[0] == 5
        assert db.execute("select count(*) from questions").fetchone()[0] == 10
    for stem in ("good", "blank", "buggy", "corrupt", "empty"):
        folder = out / "submissions" / stem
        assert (folder / "results.json").exists() and (folder / "feedback.md").exists()
    feedback = (out / "submissions" / "corrupt" / "feedback.md").read_text()
    assert "not a Jupyter notebook" in feedback and "double_values" not in feedback.split("messages")[0]

    assert main(["--root", str(built_course), "gradebook", str(out), "--csv", str(tmp_path / "g.csv")]) == 0
    rows = list(csv.reader((tmp_path / "g.csv").open()))
    assert rows[0][:3] == ["submission", "score", "max_score"] and rows[0][-1] == "notes"
    assert set(rows[0][3:-1]) == {"double", "Scale"}
    assert len(rows) == 6

    capsys.readouterr()
    assert main(args) == 0  # a rerun resumes: nothing is graded again
    assert "5 skipped" in capsys.readouterr().err


def test_grade_batch_default_grade_fn_grades_against_the_lab_folder(built_course, tmp_path):
    """No grade_fn: the documented default, runner.grade_submission(lab_dir, path), grades for real."""
    from attnlab.grading.scale.batch import grade_batch

    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(built_course / "solutions" / LAB / f"{LAB}.ipynb", subs / "good.ipynb")
    (subs / "broken.ipynb").write_bytes(b"not json")
    summary = grade_batch(built_course / "autograder" / LAB, [subs], out_dir=tmp_path / "out", progress=False)
    assert summary.lab == LAB and (summary.graded, summary.failed) == (2, 0)
    scores = {r["key"]: (r["score"], r["max_score"]) for r in summary.results}
    assert scores == {"good.ipynb": (3.0, 3.0), "broken.ipynb": (0.0, 3.0)}


def test_the_batch_grades_a_copy_and_still_hides_the_other_submissions(built_course, tmp_path, monkeypatch):
    """The grader runs a private copy of each notebook, and the worker is still told to hide the folder the original
    came from (the other students' work), besides the copy's folder."""
    from attnlab.grading import runner
    from attnlab.grading.scale.batch import grade_batch

    hidden, real = [], runner._start_worker
    monkeypatch.setattr(runner, "_start_worker", lambda workdir, hide: hidden.append(hide) or real(workdir, hide))
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(built_course / "solutions" / LAB / f"{LAB}.ipynb", subs / "good.ipynb")
    summary = grade_batch(built_course / "autograder" / LAB, [subs / "good.ipynb"], out_dir=tmp_path / "out",
                          progress=False)
    (result,) = summary.results
    assert result["score"] == 3.0 and result["submission"] == str(subs / "good.ipynb")
    assert hidden and all(subs.resolve() in hide for hide in hidden)
    assert all(any(p.name.startswith("attnlab-graded-") for p in hide) for hide in hidden)  # the copy's folder


def test_cli_student_from_grades_the_newest_file_of_each_student(built_course, tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(built_course / "labs" / LAB / f"{LAB}.ipynb", subs / "alice.ipynb")
    shutil.copy(built_course / "solutions" / LAB / f"{LAB}.ipynb", subs / "alice-v2.ipynb")
    os.utime(subs / "alice.ipynb", (1_700_000_000, 1_700_000_000))
    out = tmp_path / "out"
    args = ["--root", str(built_course), "grade", LAB, str(subs), "--out", str(out), "--json",
            "--student-from", r"(?P<student>[^-]+)(-v\d+)?"]
    assert main(args) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["submission"].endswith("alice-v2.ipynb") and row["score"] == 3.0
    with sqlite3.connect(out / "gradebook.db") as db:
        assert db.execute("select key, score from submissions").fetchall() == [("alice", 3.0)]
    assert (out / "submissions" / "alice" / "feedback.md").is_file()
    assert main(args[:-1] + ["alice"]) == 2  # a pattern without a group: one line, exit 2
    err = capsys.readouterr().err
    assert "has no group" in err and "Traceback" not in err
