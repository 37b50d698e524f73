"""`attnlab gradebook TARGET --check SUBMISSIONS`: the missing, stale and errored rows, one line each, then a
summary; exit 1 when anything is listed, 0 when the run is complete."""

from __future__ import annotations

from attnlab.cli import main
from attnlab.grading.scale.batch import grade_batch
from attnlab.grading.scale.gradebook_check import attnlab_executable, check_gradebook

from .test_batch import write_submissions


def _grade(lab_dir, path):
    if path.name == "c.ipynb":
        raise RuntimeError("boom")
    return {"submission": str(path), "score": 1.0, "max_score": 1.0, "questions": {}}


def _graded(tmp_path):
    subs = write_submissions(tmp_path / "subs", {f"{k}.ipynb": k.encode() for k in "abcd"})
    out = tmp_path / "out"
    grade_batch("lab01", [subs], out_dir=out, grade_fn=_grade, progress=False)
    return subs, out


def test_check_lists_a_missing_a_stale_and_an_errored_row(tmp_path, capsys):
    subs, out = _graded(tmp_path)
    (subs / "b.ipynb").write_bytes(b"b, resubmitted after grading")
    (subs / "e.ipynb").write_bytes(b"e, submitted late")
    capsys.readouterr()
    assert main(["gradebook", str(out), "--check", str(subs)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith("stale    b.ipynb: the file differs from the one graded at 20")
    assert lines[1:] == [
        "errored  c.ipynb: grader error: RuntimeError: boom",
        "missing  e.ipynb: no row in the gradebook",
        f"attnlab gradebook --check: lab01, 5 submission(s) in {subs}: 2 graded and current; 1 missing, 1 stale, "
        "1 errored",
    ]
    assert captured.err.strip() == (f"attnlab grade: 3 submission(s) left: rerun: {attnlab_executable()} grade lab01 "
                                    f"{subs / 'b.ipynb'} {subs / 'c.ipynb'} {subs / 'e.ipynb'} --out {out}")
    assert attnlab_executable().startswith("/") and attnlab_executable().endswith("/attnlab")


def test_check_of_a_complete_run_lists_nothing_and_exits_0(tmp_path, capsys):
    subs, out = _graded(tmp_path)
    (subs / "c.ipynb").unlink()  # the errored one gone from the folder: its row is not listed
    capsys.readouterr()
    assert main(["gradebook", str(out), "--check", str(subs)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"attnlab gradebook --check: lab01, 3 submission(s) in {subs}: 3 graded and current; 0 missing, 0 stale, "
        "0 errored"]


def test_check_of_a_gradebook_in_the_submissions_folder_skips_its_own_files(tmp_path):
    subs = write_submissions(tmp_path / "subs", {"a.ipynb": b"a"})
    grade_batch("lab01", [subs], out_dir=tmp_path / "out", gradebook=subs / "gradebook.db", grade_fn=_grade,
                progress=False)
    report = check_gradebook(subs, subs)
    assert (report.lab, report.checked, report.findings) == ("lab01", 1, [])


def test_check_and_csv_usage_errors_are_one_line_exit_2(tmp_path, capsys):
    subs, out = _graded(tmp_path)
    capsys.readouterr()
    (tmp_path / "junk.db").write_bytes(b"x" * 200)  # long enough for SQLite itself to say so
    for argv, says in (([str(out)], "say what to do: --csv FILE"),
                       ([str(out), "--check", str(tmp_path / "typo")], "no such file or folder"),
                       ([str(tmp_path / "nowhere"), "--check", str(subs)], "no gradebook at"),
                       (["mysql://h/db", "--check", str(subs)], "unsupported gradebook URL"),
                       ([str(subs / "a.ipynb"), "--check", str(subs)], "is not a usable gradebook (not a SQLite file)"),
                       ([str(tmp_path / "junk.db"), "--csv", "-"], "is not a usable gradebook"),
                       ([str(out), "--csv", str(subs)], f"cannot write {subs} (Is a directory): pass a CSV file path"),
                       ([str(out), "--check", str(subs), "--lab", "lab02"], "has no rows of lab 'lab02'; its labs: lab01")):
        assert main(["gradebook", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("attnlab gradebook: ") and says in err and len(err.splitlines()) == 1
    assert (subs / "a.ipynb").read_bytes() == b"a"  # a submission passed as the gradebook is left as it was


def test_a_bad_connection_setting_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    subs, out = _graded(tmp_path)
    capsys.readouterr()
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "many")
    assert main(["gradebook", str(out), "--check", str(subs)]) == 2
    assert capsys.readouterr().err == ("attnlab gradebook: ATTNLAB_DB_RETRIES='many' is not a whole number: unset it "
                                       "or give one (default 5)\n")
