"""Every row a batch leaves is true: a file gone between listing and grading is an errored row, never a 0 that
looks current; one resubmission rule for ``grade``, ``gradebook --check`` and the rerun lines they print; a gradebook
whose tables changed stops the task with one line; an unknown host fails at once."""

from __future__ import annotations

import os
import shlex
import sqlite3
import time
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.commands import EXIT_GRADEBOOK
from attnlab.grading.outputs.connection import GradebookError
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.outputs.gradebook_schema import GradebookSchemaError
from attnlab.grading.scale import batch
from attnlab.grading.scale.batch import grade_batch
from attnlab.grading.scale.gradebook_check import check_gradebook

from .test_batch import LAB, Grader, fake_grade, rows_by_key, write_submissions


def _age(path: Path, seconds_ago: int) -> None:
    stamp = 1_700_000_000 - seconds_ago
    os.utime(path, (stamp, stamp))


# -- the bytes graded are the bytes recorded ----------------------------------------------------------------------------
def test_a_file_removed_after_listing_is_an_errored_row_that_check_lists_and_a_rerun_grades(tmp_path):
    subs = write_submissions(tmp_path / "subs", {"a.ipynb": {"softmax": 1}, "b.ipynb": {"softmax": 2}})
    kept = (subs / "b.ipynb").read_bytes()

    def grade(lab, path):
        if path.name == "a.ipynb":
            (subs / "b.ipynb").unlink()  # b vanishes while a is graded (a sync, a student deleting it)
        return fake_grade(lab, path)

    out = tmp_path / "out"
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=grade, progress=False)
    assert (summary.graded, summary.failed, sorted(summary.left)) == (1, 1, ["b.ipynb"])
    row = rows_by_key(out)["b.ipynb"]
    assert row["score"] == 0.0 and "could not be read when its turn came" in row["grader_error"]
    assert "No such file or directory" in row["grader_error"]
    (subs / "b.ipynb").write_bytes(kept)  # back, unchanged: its row must not count as current
    [finding] = check_gradebook(out, subs).findings
    assert (finding.kind, finding.key) == ("errored", "b.ipynb") and "could not be read" in finding.detail
    grader = Grader()
    assert grade_batch(LAB, [subs], out_dir=out, grade_fn=grader, progress=False).graded == 1
    assert grader.calls == ["b.ipynb"] and rows_by_key(out)["b.ipynb"]["score"] == 2.0
    assert check_gradebook(out, subs).findings == []


# -- one resubmission rule ---------------------------------------------------------------------------------------------
def _failing_first(names):
    """A grade function that fails once on each of ``names``, then grades as fake_grade."""
    failed = set()

    def grade(lab, path, **_):
        if path.name in names and path.name not in failed:
            failed.add(path.name)
            raise RuntimeError(f"boom on {path.name}")
        return fake_grade(lab, path)

    return grade


@pytest.mark.parametrize("rule", [r"(?P<student>[^-]+)(-v\d+)?", "folder"])
def test_the_printed_reruns_keep_one_row_per_student(rule, built_course, tmp_path, monkeypatch, capsys):
    subs = tmp_path / "subs"
    if rule == "folder":
        write_submissions(subs / "alice", {"lab.ipynb": {"softmax": 1}, "lab-late.ipynb": {"softmax": 2}})
        write_submissions(subs, {"notes.ipynb": {"attention": 1}})  # beside the folders: keyed by its name
        newest, failing = subs / "alice" / "lab-late.ipynb", {"lab-late.ipynb", "notes.ipynb"}
        _age(subs / "alice" / "lab.ipynb", 60)
    else:
        write_submissions(subs, {"alice.ipynb": {"softmax": 1}, "alice-v2.ipynb": {"softmax": 2},
                                 "notes.ipynb": {"attention": 1}})
        newest, failing = subs / "alice-v2.ipynb", {"alice-v2.ipynb"}
        _age(subs / "alice.ipynb", 60)
    _age(newest, 0)
    monkeypatch.setattr(batch, "grade_submission", _failing_first(failing))
    out = tmp_path / "out"
    root = ["--root", str(built_course)]
    assert main([*root, "grade", "lab99_demo", str(subs), "--out", str(out), "--student-from", rule]) == 3
    batch_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert main([*root, "gradebook", str(out), "--check", str(subs), "--student-from", rule]) == 1
    captured = capsys.readouterr()
    assert "errored  alice: grader error: RuntimeError: boom on " in captured.out
    check_line = captured.err.strip()
    assert check_line.split("rerun: ")[1] == batch_line.split("rerun: ")[1]  # the same command, twice
    for command in check_line.split("rerun: ", 1)[1].split("; "):
        argv = shlex.split(command)
        assert argv[0].endswith("/attnlab") and Path(argv[argv.index("--out") + 1]).is_absolute()
        assert main([*root, *argv[1:]]) == 0
    capsys.readouterr()
    with open_gradebook(out, create=False) as book:
        rows = {r["key"]: r for r in book.rows()}
    assert sorted(rows) == ["alice", "notes.ipynb" if rule == "folder" else "notes"]  # one per student, as before
    assert rows["alice"]["path"] == str(newest.resolve()) and rows["alice"]["grader_error"] is None
    assert rows["alice"]["score"] == 2.0
    assert main([*root, "gradebook", str(out), "--check", str(subs), "--student-from", rule]) == 0


def test_course_yml_gives_the_rule_to_check_when_no_option_does(tmp_path, capsys):
    root = tmp_path / "course"
    (root / "instructor").mkdir(parents=True)
    (root / "instructor" / "course.yml").write_text("name: c\nlabs: []\nstudent_from: '(?P<student>[^-]+)(-v\\d+)?'\n")
    subs = write_submissions(tmp_path / "subs", {"alice.ipynb": {"softmax": 1}, "alice-v2.ipynb": {"softmax": 2}})
    _age(subs / "alice.ipynb", 60)
    _age(subs / "alice-v2.ipynb", 0)
    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False, student_from=r"(?P<student>[^-]+)(-v\d+)?")
    assert main(["--root", str(root), "gradebook", str(out), "--check", str(subs)]) == 0
    assert "1 submission(s) in" in capsys.readouterr().out
    (root / "instructor" / "course.yml").write_text("name: c\nlabs: []\nstudent_from: 'alice'\n")
    assert main(["--root", str(root), "gradebook", str(out), "--check", str(subs)]) == 2
    assert "student_from: --student-from 'alice' has no group" in capsys.readouterr().err


# -- the schema is checked, not assumed --------------------------------------------------------------------------------
@pytest.mark.parametrize("change, says", [
    ("DROP TABLE submissions", "no submissions table"),
    ("ALTER TABLE submissions RENAME COLUMN score TO points", "submissions table has no column score"),
    ("DROP TABLE questions", "no questions table"),
])
def test_a_table_changed_mid_batch_stops_the_task_with_one_line(change, says, built_course, tmp_path, monkeypatch,
                                                                capsys):
    subs = write_submissions(tmp_path / "subs", {f"s{i}.ipynb": {"softmax": 1} for i in range(5)})
    out = tmp_path / "out"
    db = out / "gradebook.db"

    def grade(lab, path, **_):
        if path.name == "s2.ipynb":
            with sqlite3.connect(db) as conn:
                conn.execute(change)
        return fake_grade(lab, path)

    monkeypatch.setattr(batch, "grade_submission", grade)
    root = ["--root", str(built_course)]
    assert main([*root, "grade", "lab99_demo", str(subs), "--out", str(out)]) == EXIT_GRADEBOOK
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("attnlab grade: the gradebook ") and says in err[-1] and "Traceback" not in err[-1]
    assert sorted({p.parent.name for p in out.glob("submissions/*/*")}) == ["s0", "s1"]  # s2's files not put in place
    for argv in (["grade", "lab99_demo", str(subs), "--out", str(out)], ["gradebook", str(out), "--check", str(subs)]):
        assert main([*root, *argv]) == EXIT_GRADEBOOK  # a later task, and --check: refused, never recreated
        [line] = capsys.readouterr().err.strip().splitlines()
        assert says in line
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert ("submissions" in tables) == ("DROP TABLE submissions" != change)


def test_a_new_gradebook_is_created_and_one_with_a_table_missing_is_refused(tmp_path):
    db = tmp_path / "g.db"
    open_gradebook(db).close()  # new: both tables made
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE questions")
    with pytest.raises(GradebookSchemaError, match="has a submissions table but no questions table"):
        open_gradebook(db)


# -- fail fast ---------------------------------------------------------------------------------------------------------
def test_an_unknown_host_fails_at_once_and_is_not_called_down(tmp_path):
    pytest.importorskip("psycopg")
    start = time.monotonic()
    with pytest.raises(GradebookError, match="cannot connect to the gradebook") as caught:
        open_gradebook("postgresql://grader@no-such-host.invalid/course")
    assert time.monotonic() - start < 2
    assert "check the URL" in str(caught.value) and "down" not in str(caught.value)



def test_a_row_not_written_counts_as_a_failure_in_the_progress_lines(tmp_path, monkeypatch, capsys):
    from attnlab.grading.outputs.connection import GradebookUnavailable
    from attnlab.grading.outputs.gradebook import Gradebook

    real = Gradebook.record

    def record(self, lab, key, *args, **kwargs):
        if key == "a.ipynb":
            raise GradebookUnavailable("gradebook x did not answer")
        return real(self, lab, key, *args, **kwargs)

    monkeypatch.setattr(Gradebook, "record", record)
    subs = write_submissions(tmp_path / "subs", {"a.ipynb": {"softmax": 1}, "b.ipynb": {}})
    summary = grade_batch(LAB, [subs], out_dir=tmp_path / "out", grade_fn=fake_grade)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert summary.unwritten == 1 and lines[0].endswith("failures so far: 1") and lines[1].endswith("so far: 1")
