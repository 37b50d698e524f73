"""A batch's files and rows under faults: private atomic writes (two runs at once), a full disk, the digest of the
bytes graded, resubmissions by student, and student names that look like the kit's own files."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from attnlab.grading.outputs import files as outputs
from attnlab.grading.outputs.feedback import write_feedback
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.outputs.gradescope import write_results_json
from attnlab.grading.scale.batch import BatchWriteFailed, grade_batch
from attnlab.grading.scale.submissions import collect_submissions
from attnlab.student_from import student_rule

from .test_batch import LAB, Grader, fake_grade, rows_by_key, write_submissions

RESULT = {"submission": "alice.ipynb", "score": 4.0, "max_score": 5.0, "isolation": "fake", "elapsed_s": 0.1,
          "errors": [], "questions": {"softmax": {"score": 1.0, "max_score": 2.0, "messages": ["softmax: 1 of 2"]},
                                      "attention": {"score": 3.0, "max_score": 3.0, "messages": []}}}


def stray_temporaries(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob("*") if p.name.endswith(".tmp"))


def files_and_rows_agree(out: Path, lab: str = LAB) -> dict:
    """Every row has its two files with its score, and no submission's files are without a row (a write that failed
    may leave its folder, empty: removing it could pull it from under another run writing there)."""
    rows = rows_by_key(out, lab)
    folders = {p.parent.name for p in out.glob("submissions/*/*")}
    assert folders == {Path(k).stem for k in rows}
    for key, row in rows.items():
        folder = out / "submissions" / Path(key).stem
        assert json.loads((folder / "results.json").read_text())["score"] == row["score"]
        assert f"**Total: {row['score']:g} / " in (folder / "feedback.md").read_text()
    return rows


# -- 1. private temporary names: writers of the same files at once ---------------------------------------------------
def test_threads_writing_the_same_outputs_many_times_never_collide(tmp_path):
    folder = tmp_path / "out" / "submissions" / "alice"
    errors = []

    def writer():
        try:
            for _ in range(300):
                write_results_json(RESULT, folder / "results.json")
                write_feedback(RESULT, folder / "feedback.md")
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []  # the old shared "results.json.tmp" raised FileNotFoundError here
    assert sorted(p.name for p in folder.iterdir()) == ["feedback.md", "results.json"]
    assert json.loads((folder / "results.json").read_text())["score"] == RESULT["score"]


RUN = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from attnlab.grading.scale.batch import grade_batch
    sys.path.insert(0, sys.argv[3])
    from tests.grading.test_batch import fake_grade

    for _ in range(int(sys.argv[4])):
        grade_batch("lab05_self_attention", [sys.argv[1]], out_dir=sys.argv[2], grade_fn=fake_grade,
                    progress=False, regrade=True)
    print("done")
""")


def test_two_runs_of_one_batch_into_one_out_both_finish(tmp_path):
    names = {f"s{i:02d}.ipynb": {"softmax": i % 3, "attention": i % 4} for i in range(20)}
    subs = write_submissions(tmp_path / "subs", names)
    out = tmp_path / "out"
    root = str(Path(__file__).resolve().parents[2])
    procs = [subprocess.Popen([sys.executable, "-c", RUN, str(subs), str(out), root, "5"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0 and stdout.strip() == "done", stderr
    rows = files_and_rows_agree(out)
    assert sorted(rows) == sorted(names)
    assert {k: r["score"] for k, r in rows.items()} == {k: float(min(v["softmax"], 2) + min(v["attention"], 3))
                                                        for k, v in names.items()}
    assert stray_temporaries(out) == []


# -- 1. a write that fails ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="tells the outputs by /proc/self/fd")
@pytest.mark.parametrize("fault", [errno.ENOSPC, errno.EACCES])
def test_a_failed_write_stops_cleanly_names_the_path_and_loses_no_row(tmp_path, monkeypatch, fault):
    names = {f"s{i}.ipynb": {"softmax": 1, "attention": i % 4} for i in range(6)}
    subs = write_submissions(tmp_path / "subs", names)
    out = tmp_path / "out"
    real_fdopen, writes = os.fdopen, []

    def failing_fdopen(fd, *args, **kwargs):  # the 7th output file (the 4th submission's results.json) fails
        if not os.readlink(f"/proc/self/fd/{fd}").startswith(str(out)):  # not an output: the grader reading
            return real_fdopen(fd, *args, **kwargs)
        writes.append(fd)
        if len(writes) == 7:
            os.close(fd)
            raise OSError(fault, os.strerror(fault))
        return real_fdopen(fd, *args, **kwargs)

    monkeypatch.setattr(outputs.os, "fdopen", failing_fdopen)
    with pytest.raises(BatchWriteFailed) as caught:
        grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    message = str(caught.value)
    assert str(out / "submissions" / "s3" / "results.json") in message and os.strerror(fault) in message
    assert "3 recorded" in message and "run the same command again" in message
    assert caught.value.summary.graded == 3
    assert sorted(files_and_rows_agree(out)) == ["s0.ipynb", "s1.ipynb", "s2.ipynb"]  # none half-written
    assert stray_temporaries(out) == []
    monkeypatch.setattr(outputs.os, "fdopen", real_fdopen)
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)  # space freed: resume
    assert (summary.graded, summary.skipped) == (3, 3)
    assert sorted(files_and_rows_agree(out)) == sorted(names)


def test_a_row_that_cannot_be_written_leaves_no_files(tmp_path, monkeypatch):
    subs = write_submissions(tmp_path / "subs", {"alice.ipynb": {"softmax": 2}, "bob.ipynb": {}})
    out = tmp_path / "out"
    from attnlab.grading.outputs.gradebook import Gradebook

    real = Gradebook.record

    def record(self, lab, key, *args, **kwargs):
        if key == "bob.ipynb":
            raise OSError(errno.ENOSPC, "No space left on device", str(out / "gradebook.db"))
        return real(self, lab, key, *args, **kwargs)

    monkeypatch.setattr(Gradebook, "record", record)
    with pytest.raises(OSError):
        grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    assert sorted(files_and_rows_agree(out)) == ["alice.ipynb"] and stray_temporaries(out) == []


# -- 2. the digest stored is the digest of the bytes graded -------------------------------------------------------------
def test_a_resubmission_written_during_grading_is_not_stored_under_the_old_digest(tmp_path):
    subs = write_submissions(tmp_path / "subs", {"alice.ipynb": {"softmax": 1}})
    original = subs / "alice.ipynb"
    old = original.read_bytes()
    new = json.dumps({"answers": {"softmax": 2, "attention": 3}}).encode()

    def resubmitted_while_grading(lab, path):
        original.write_bytes(new)  # the student uploads again while the grader works
        return fake_grade(lab, path)

    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=resubmitted_while_grading, progress=False)
    row = rows_by_key(out)["alice.ipynb"]
    assert row["score"] == 1.0 and row["sha256"] == hashlib.sha256(old).hexdigest()  # graded and stored: old bytes
    assert row["path"] == str(original.resolve())
    grader = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=grader, progress=False)
    assert grader.calls == ["alice.ipynb"] and summary.graded == 1  # the new bytes are graded next run
    row = rows_by_key(out)["alice.ipynb"]
    assert row["score"] == 5.0 and row["sha256"] == hashlib.sha256(new).hexdigest()


def test_the_grader_gets_a_private_copy_and_the_row_names_the_original(tmp_path):
    subs = write_submissions(tmp_path / "subs", {"alice.ipynb": {"softmax": 2}})
    seen = []

    def grade(lab, path):
        seen.append(Path(path))
        return fake_grade(lab, path) | {"errors": [f"read {path}"]}

    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=grade, progress=False)
    assert seen[0].name == "alice.ipynb" and seen[0].parent != subs and not seen[0].exists()  # removed after
    row = rows_by_key(out)["alice.ipynb"]
    assert row["errors"] == [f"read {subs / 'alice.ipynb'}"]


# -- 3. resubmissions by student ----------------------------------------------------------------------------------------
def _age(path: Path, seconds_ago: int) -> None:
    stamp = 1_700_000_000 - seconds_ago
    os.utime(path, (stamp, stamp))


def test_a_renamed_resubmission_replaces_the_students_row(tmp_path):
    subs = write_submissions(tmp_path / "subs", {"alice.ipynb": {"softmax": 1}, "bob.ipynb": {}})
    out = tmp_path / "out"
    rule = student_rule(r"(?P<student>[^-]+)(-v\d+)?")
    grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False, student_from=rule)
    assert {k: r["score"] for k, r in rows_by_key(out).items()} == {"alice": 1.0, "bob": 0.0}
    write_submissions(subs, {"alice-v2.ipynb": {"softmax": 2, "attention": 3}})
    _age(subs / "alice.ipynb", 60)
    _age(subs / "alice-v2.ipynb", 0)
    grader = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=grader, progress=False, student_from=rule)
    assert grader.calls == ["alice-v2.ipynb"] and (summary.graded, summary.skipped) == (1, 1)
    rows = files_and_rows_agree(out)
    assert sorted(rows) == ["alice", "bob"]  # one row for alice, graded from v2
    assert rows["alice"]["score"] == 5.0 and rows["alice"]["path"].endswith("alice-v2.ipynb")


def test_the_newest_file_wins_by_time_then_by_name(tmp_path):
    subs = write_submissions(tmp_path / "subs", {"alice-v3.ipynb": {}, "alice-v9.ipynb": {}, "alice.ipynb": {}})
    rule = student_rule(r"([^-]+)(?:-v\d+)?")  # the first group, unnamed
    _age(subs / "alice-v9.ipynb", 100)  # a higher version number, but older
    _age(subs / "alice-v3.ipynb", 0)
    _age(subs / "alice.ipynb", 0)  # same time as v3: the name decides ("alice.ipynb" > "alice-v3.ipynb")
    assert collect_submissions([subs], student_from=rule) == {"alice": subs / "alice.ipynb"}
    _age(subs / "alice.ipynb", 200)
    assert collect_submissions([subs], student_from=rule) == {"alice": subs / "alice-v3.ipynb"}
    write_submissions(subs, {"notes-draft.txt": b"x"})  # the stem does not match: keyed by its file name
    assert list(collect_submissions([subs], student_from=rule)) == ["alice", "notes-draft.txt"]


def test_one_folder_per_student(tmp_path):
    subs = tmp_path / "subs"
    write_submissions(subs / "alice", {"lab05.ipynb": {"softmax": 1}, "lab05-late.ipynb": {"softmax": 2}})
    write_submissions(subs / "bob", {"lab05.ipynb": {"attention": 3}})
    _age(subs / "alice" / "lab05.ipynb", 50)
    _age(subs / "alice" / "lab05-late.ipynb", 0)
    out = subs / "out"  # out_dir inside the submissions folder is not a student
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False, student_from="folder")
    assert [r["key"] for r in summary.results] == ["alice", "bob"]
    rows = files_and_rows_agree(out)
    assert rows["alice"]["score"] == 2.0 and rows["alice"]["path"].endswith("alice/lab05-late.ipynb")
    assert rows["bob"]["score"] == 3.0
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False, student_from="folder")
    assert (summary.graded, summary.skipped) == (0, 2)


@pytest.mark.parametrize("spec, says", [("(", "not a regular expression"), ("alice", "has no group")])
def test_a_bad_student_pattern_says_what_to_write(spec, says):
    with pytest.raises(ValueError, match=says):
        student_rule(spec)


# -- 4. names that look like the kit's own files ------------------------------------------------------------------------
RESERVED = ["report.html.ipynb", "report.md.ipynb", "gradebook.db.ipynb", "report-scores.csv.ipynb", "alice.ipynb"]


@pytest.mark.parametrize("out_is_subs", [False, True])
def test_names_like_the_kits_files_get_rows_and_the_report_still_builds(tmp_path, out_is_subs):
    from attnlab.report.build import build_report

    subs = write_submissions(tmp_path / "subs", {n: {"softmax": 1} for n in RESERVED})
    out = subs if out_is_subs else tmp_path / "out"  # in the submissions folder: the kit's files are not submissions
    for regrade in (False, True):  # a rerun after the report finds the report's files beside the folders
        summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False, regrade=regrade)
        assert summary.graded == len(RESERVED) and summary.failed == 0
        files = build_report(out)
        assert files.html == out / "report.html" and files.html.is_file() and files.markdown.is_file()
        assert all(p.parent == out and p.name in outputs.KIT_NAMES for p in [*files.csv.values(), files.markdown])
    assert sorted(files_and_rows_agree(out)) == sorted(RESERVED)
    assert (out / "gradebook.db").is_file() and (out / "submissions" / "report.html" / "feedback.md").is_file()
    with open_gradebook(out, create=False) as book:
        assert len(book.rows(LAB)) == len(RESERVED)


FULL_DISK = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from attnlab.grading.scale.batch import BatchWriteFailed, grade_batch
    from tests.grading.test_batch import fake_grade

    def wordy(lab, path):  # about 6 KB of feedback per submission
        result = fake_grade(lab, path)
        result["errors"] = [f"note {i}: " + "x" * 100 for i in range(60)]
        return result

    subs, out, book = sys.argv[1:4]
    try:
        grade_batch("lab05_self_attention", [subs], out_dir=out, gradebook=book, grade_fn=wordy, progress=False)
        print(json.dumps({"stopped": None}))
    except BatchWriteFailed as exc:
        print(json.dumps({"stopped": str(exc), "graded": exc.summary.graded}))
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="mounts a small tmpfs: root and unshare")
def test_a_really_full_disk_stops_cleanly(tmp_path):
    """OUT on a 64 KiB tmpfs (in a private mount namespace), the gradebook elsewhere: the batch stops at the first
    write that does not fit, naming it; every row recorded has its files, no file is without its row, no .tmp."""
    subs = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": {"softmax": 1} for i in range(20)})
    out, book = tmp_path / "out", tmp_path / "gradebook.db"
    out.mkdir()
    root = str(Path(__file__).resolve().parents[2])
    script = (f"mount -t tmpfs -o size=64k tmpfs {out} || exit 77; "
              f"{sys.executable} -c \"$0\" {subs} {out} {book} {root} && find {out} -type f | sort")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, FULL_DISK], capture_output=True, text=True,
                          timeout=300)
    if proc.returncode == 77:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    report, *files = proc.stdout.strip().splitlines()
    stopped = json.loads(report)
    assert stopped["stopped"] and "No space left on device" in stopped["stopped"]
    assert f"cannot write {out}/submissions/s" in stopped["stopped"]
    assert not [f for f in files if f.endswith(".tmp")]
    with open_gradebook(book, create=False) as gradebook:
        keys = sorted(r["key"] for r in gradebook.rows(LAB))
    assert 0 < len(keys) == stopped["graded"] < 20
    written = sorted({Path(f).parent.name for f in files})
    assert written == [Path(k).stem for k in keys]  # files and rows agree
    assert all(f"{out}/submissions/{Path(k).stem}/{n}" in files for k in keys for n in ("feedback.md", "results.json"))
