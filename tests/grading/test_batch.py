"""grade_batch with fake grade functions: rows, outputs, CSV, resume, interrupt, shards, workers."""

import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.scale.batch import BatchInterrupted, grade_batch, in_shard, parse_shard
from attnlab.grading.scale.submissions import collect_submissions
from attnlab.records.safe_text import markdown_inline
from attnlab.report.gradebook_csv import export_gradebook

LAB = "lab05_self_attention"
QUESTIONS = {"softmax": 2.0, "attention": 3.0}  # the result order: not alphabetical on purpose


def fake_grade(lab, path):
    """Deterministic from the file content: a fake notebook is {"answers": {question: points}}; anything
    unreadable scores 0 with messages, as the real grader does for a malformed notebook."""
    try:
        answers = json.loads(Path(path).read_bytes())["answers"]
    except (ValueError, KeyError, TypeError):
        answers, errors = {}, ["the file is not a readable notebook"]
    else:
        errors = []
    questions = {}
    for q, max_score in QUESTIONS.items():
        got = min(float(answers.get(q, 0)), max_score)
        questions[q] = {"score": got, "max_score": max_score,
                        "messages": [] if got == max_score else [f"{q}: {got:g} of {max_score:g} points"]}
    return {"submission": str(path), "score": sum(q["score"] for q in questions.values()),
            "max_score": sum(QUESTIONS.values()), "questions": questions, "isolation": "fake",
            "elapsed_s": 0.25, "errors": errors}


class Grader:
    """fake_grade, counting calls (thread-safe); optionally sleeping, or misbehaving on some files."""

    def __init__(self, *, sleep=0.0, interrupt_on_call=None, misbehave=None):
        self.calls, self.sleep, self.interrupt_on_call = [], sleep, interrupt_on_call
        self.misbehave = misbehave or {}  # file name -> exception to raise, or a value to return
        self.running = self.max_running = 0
        self._lock = threading.Lock()

    def __call__(self, lab, path):
        with self._lock:
            self.calls.append(Path(path).name)
            n = len(self.calls)
            self.running += 1
            self.max_running = max(self.max_running, self.running)
        try:
            if n == self.interrupt_on_call:
                raise KeyboardInterrupt
            time.sleep(self.sleep)
            bad = self.misbehave.get(Path(path).name)
            if isinstance(bad, Exception):
                raise bad
            return fake_grade(lab, path) if bad is None else bad
        finally:
            with self._lock:
                self.running -= 1


def write_submissions(folder, files):
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        data = content if isinstance(content, bytes) else json.dumps({"answers": content}).encode()
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture
def subs(tmp_path):
    folder = write_submissions(tmp_path / "subs", {
        "alice.ipynb": {"softmax": 2, "attention": 3},
        "bob.ipynb": {"softmax": 1},
        "blank.ipynb": {},
        "corrupt.ipynb": b'{"cells": [',
        "empty.txt": b"",
        ".DS_Store": b"hidden",
    })
    write_submissions(folder / "notes", {"inner.ipynb": {}})  # a sub-folder is not a submission
    return folder


ALL_KEYS = ["alice.ipynb", "blank.ipynb", "bob.ipynb", "corrupt.ipynb", "empty.txt"]

EXPECTED_CSV = (
    "submission,score,max_score,softmax,attention,notes\n"
    "alice.ipynb,5,5,2,3,\n"
    "blank.ipynb,0,5,0,0,\n"
    "bob.ipynb,1,5,1,0,\n"
    "corrupt.ipynb,0,5,0,0,the file is not a readable notebook\n"
    "empty.txt,0,5,0,0,the file is not a readable notebook\n"
)


def rows_by_key(out_dir, lab=LAB):
    with open_gradebook(out_dir / "gradebook.db", create=False) as gb:
        return {r["key"]: r for r in gb.rows(lab)}


def test_every_file_gets_a_row_results_json_and_feedback(subs, tmp_path):
    out = tmp_path / "out"
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    assert (summary.graded, summary.skipped, summary.failed, summary.interrupted) == (5, 0, 0, False)
    assert [r["key"] for r in summary.results] == ALL_KEYS
    rows = rows_by_key(out)
    assert sorted(rows) == ALL_KEYS
    assert {k: r["score"] for k, r in rows.items()} == {
        "alice.ipynb": 5.0, "blank.ipynb": 0.0, "bob.ipynb": 1.0, "corrupt.ipynb": 0.0, "empty.txt": 0.0}
    assert rows["corrupt.ipynb"]["errors"] == ["the file is not a readable notebook"]
    assert rows["bob.ipynb"]["path"] == str((subs / "bob.ipynb").resolve())
    for key in ALL_KEYS:
        stem = out / "submissions" / Path(key).stem
        gradescope = json.loads((stem / "results.json").read_text())
        assert gradescope["score"] == rows[key]["score"]
        assert [t["name"] for t in gradescope["tests"]] == ["Your notebook", "softmax", "attention"]
        assert (stem / "feedback.md").read_text().startswith(f"# Feedback: {markdown_inline(key)}\n")
    assert "attention: 0 of 3 points" in (out / "submissions" / "bob" / "feedback.md").read_text()
    assert sorted(p.name for p in (out / "submissions").iterdir()) == [Path(k).stem for k in ALL_KEYS]


def test_csv_export_exactly(subs, tmp_path):
    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    assert export_gradebook(out, tmp_path / "grades.csv") == 5  # DIR means DIR/gradebook.db
    assert (tmp_path / "grades.csv").read_text() == EXPECTED_CSV
    with pytest.raises(FileNotFoundError, match="no gradebook at"):
        export_gradebook(tmp_path / "elsewhere", tmp_path / "x.csv")


def test_resume_skips_what_is_graded_and_regrade_does_not(subs, tmp_path):
    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    again = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=again, progress=False)
    assert again.calls == [] and (summary.graded, summary.skipped) == (0, 5)
    forced = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=forced, progress=False, regrade=True)
    assert forced.calls == ALL_KEYS and (summary.graded, summary.skipped) == (5, 0)
    other_lab = Grader()
    grade_batch("lab06_transformer", [subs], out_dir=out, grade_fn=other_lab, progress=False)
    assert other_lab.calls == ALL_KEYS  # the same files for another lab are not "done"


def test_resubmission_is_regraded_and_replaces_the_row(subs, tmp_path):
    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    write_submissions(subs, {"bob.ipynb": {"softmax": 2, "attention": 2}})
    grader = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=grader, progress=False)
    assert grader.calls == ["bob.ipynb"] and (summary.graded, summary.skipped) == (1, 4)
    rows = rows_by_key(out)
    assert len(rows) == 5 and rows["bob.ipynb"]["score"] == 4.0
    assert json.loads((out / "submissions" / "bob" / "results.json").read_text())["score"] == 4.0


@pytest.mark.parametrize("jobs", [1, 2])
def test_interrupt_then_resume_grades_only_the_rest(subs, tmp_path, jobs):
    out = tmp_path / "out"
    first = Grader(interrupt_on_call=3)
    with pytest.raises(BatchInterrupted) as info:
        grade_batch(LAB, [subs], out_dir=out, grade_fn=first, jobs=jobs, progress=False)
    summary = info.value.summary
    assert isinstance(info.value, KeyboardInterrupt) and summary.interrupted
    recorded = sorted(rows_by_key(out))
    # The third call raises; with 2 jobs it starts once one grade is recorded, and the other one still in
    # flight is dropped or recorded depending on which thread finishes first.
    assert recorded == [r["key"] for r in summary.results] and summary.graded == len(recorded) >= 3 - jobs
    if jobs == 1:
        assert recorded == ALL_KEYS[:2] and first.calls == ALL_KEYS[:3]  # nothing started after Ctrl-C
    second = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=second, jobs=jobs, progress=False)
    assert sorted(second.calls) == sorted(set(ALL_KEYS) - set(recorded))  # no regrade of the first ones
    assert summary.skipped == len(recorded)
    export_gradebook(out, tmp_path / "grades.csv")
    assert (tmp_path / "grades.csv").read_text() == EXPECTED_CSV


def test_grader_that_raises_or_returns_garbage_still_gives_rows(subs, tmp_path):
    out = tmp_path / "out"
    grader = Grader(misbehave={
        "bob.ipynb": RuntimeError("secret grader internals"),
        "corrupt.ipynb": "not a dict",
        "blank.ipynb": {"score": "abc", "max_score": 5.0, "questions": {}},
    })
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=grader, jobs=2, progress=False)
    assert (summary.graded, summary.failed, summary.skipped) == (2, 3, 0)
    rows = rows_by_key(out)
    assert sorted(rows) == ALL_KEYS
    assert rows["alice.ipynb"]["score"] == 5.0 and rows["alice.ipynb"]["grader_error"] is None
    for key, error in [("bob.ipynb", "RuntimeError: secret grader internals"),
                       ("corrupt.ipynb", "invalid result: the result is a str"),
                       ("blank.ipynb", "invalid result: result['score'] is 'abc'")]:
        assert rows[key]["score"] == 0.0 and error in rows[key]["grader_error"]
        feedback = (out / "submissions" / Path(key).stem / "feedback.md").read_text()
        assert "grader itself failed" in feedback and "secret" not in feedback and "Traceback" not in feedback
    assert "secret" not in (out / "submissions" / "bob" / "results.json").read_text()
    retry = Grader()
    summary = grade_batch(LAB, [subs], out_dir=out, grade_fn=retry, progress=False)
    assert sorted(retry.calls) == ["blank.ipynb", "bob.ipynb", "corrupt.ipynb"]  # failures are retried
    assert summary.skipped == 2 and rows_by_key(out)["bob.ipynb"]["grader_error"] is None


def test_feedback_and_results_json_never_contain_hidden_test_source(tmp_path):
    """The fake grader runs a fake hidden test file whose source holds a marker; its result carries that
    source in extra fields (as a sloppy grader might); the student-facing files must not."""
    marker = "HIDDEN_SRC_7f3a9c"
    hidden = tmp_path / "hidden_tests.py"
    hidden.write_text(textwrap.dedent(f"""
        def test_softmax(answers):
            secret_reference_value = "{marker}"
            assert answers.get("softmax") == 2, "softmax: each row of the output must sum to 1"
    """))

    def grade_with_hidden_tests(lab, path):
        result = fake_grade(lab, path)
        namespace = {}
        exec(compile(hidden.read_text(), str(hidden), "exec"), namespace)
        try:
            namespace["test_softmax"](json.loads(Path(path).read_text())["answers"])
        except AssertionError as exc:
            result["questions"]["softmax"]["messages"] = [str(exc)]
        result["hidden_source"] = hidden.read_text()
        result["questions"]["softmax"]["traceback"] = hidden.read_text()
        return result

    subs = write_submissions(tmp_path / "subs", {"dan.ipynb": {"softmax": 1, "attention": 3}})
    out = tmp_path / "out"
    grade_batch(LAB, [subs], out_dir=out, grade_fn=grade_with_hidden_tests, progress=False)
    feedback = (out / "submissions" / "dan" / "feedback.md").read_text()
    results_json = (out / "submissions" / "dan" / "results.json").read_text()
    assert "softmax: each row of the output must sum to 1" in feedback  # the message does get through
    assert "softmax: each row of the output must sum to 1" in results_json
    assert marker in hidden.read_text()
    assert marker not in feedback and marker not in results_json


def test_shards_partition_the_submissions(tmp_path):
    subs = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": {"softmax": i % 3} for i in range(24)})
    seen = []
    for i in (1, 2, 3):
        grader = Grader()
        summary = grade_batch(LAB, [subs], out_dir=tmp_path / "out", shard=f"{i}/3", grade_fn=grader,
                              progress=False)
        assert sorted(grader.calls) == [r["key"] for r in summary.results]
        assert all(in_shard(k, i, 3) for k in grader.calls)
        assert 0 < len(grader.calls) < 24  # 24 keys over 3 shards: none takes all or nothing
        seen.append(set(grader.calls))
    assert set.union(*seen) == {f"s{i:02d}.ipynb" for i in range(24)}
    assert sum(len(s) for s in seen) == 24  # disjoint
    assert len(rows_by_key(tmp_path / "out")) == 24  # one gradebook, filled by the three shards


@pytest.mark.parametrize("shard, message", [
    ("0/3", r"1 <= i <= N"), ("4/3", r"1 <= i <= N"), ("1/0", r"N >= 1"),
    ("3", r"not of the form i/N"), ("a/b", r"not of the form i/N"), ("-1/3", r"not of the form i/N"),
])
def test_bad_shard_is_refused_before_grading(subs, tmp_path, shard, message):
    grader = Grader()
    with pytest.raises(ValueError, match=message):
        grade_batch(LAB, [subs], out_dir=tmp_path / "out", shard=shard, grade_fn=grader, progress=False)
    assert grader.calls == [] and not (tmp_path / "out").exists()


def test_parse_shard():
    assert parse_shard("2/3") == (2, 3) and parse_shard(" 1 / 1 ") == (1, 1)


def test_two_workers_run_at_once_and_give_the_same_gradebook(subs, tmp_path):
    one, two = Grader(sleep=0.05), Grader(sleep=0.05)
    grade_batch(LAB, [subs], out_dir=tmp_path / "j1", grade_fn=one, jobs=1, progress=False)
    summary = grade_batch(LAB, [subs], out_dir=tmp_path / "j2", grade_fn=two, jobs=2, progress=False)
    assert (one.max_running, two.max_running) == (1, 2)
    assert [r["key"] for r in summary.results] == ALL_KEYS

    def comparable(out):
        return {k: {f: v for f, v in r.items() if f != "graded_at"} for k, r in rows_by_key(out).items()}

    assert comparable(tmp_path / "j1") == comparable(tmp_path / "j2")
    for out in ("j1", "j2"):
        export_gradebook(tmp_path / out, tmp_path / f"{out}.csv")
    assert (tmp_path / "j1.csv").read_text() == (tmp_path / "j2.csv").read_text() == EXPECTED_CSV


def test_duplicate_names_are_refused_naming_both_paths(tmp_path):
    a = write_submissions(tmp_path / "a", {"alice.ipynb": {}})
    b = write_submissions(tmp_path / "b", {"alice.ipynb": {"softmax": 1}})
    grader = Grader()
    with pytest.raises(ValueError, match=r"named 'alice.ipynb': .*a/alice.ipynb and .*b/alice.ipynb"):
        grade_batch(LAB, [a, b], out_dir=tmp_path / "out", grade_fn=grader, progress=False)
    assert grader.calls == []
    # the same file named twice is one submission
    assert list(collect_submissions([a, a / "alice.ipynb"])) == ["alice.ipynb"]
    # two names with one stem would share out_dir/alice/
    write_submissions(a, {"alice.txt": b"x"})
    with pytest.raises(ValueError, match=r"alice.ipynb and .*alice.txt would both write .*<out_dir>/submissions/alice/"):
        collect_submissions([a])


def test_inputs_mix_files_and_folders_and_skip_the_gradebook_files(subs, tmp_path):
    extra = write_submissions(tmp_path / "late", {"zoe.ipynb": {"attention": 3}})
    # out_dir is the submissions folder itself: its gradebook files must not become submissions
    summary = grade_batch(LAB, [subs, extra / "zoe.ipynb"], out_dir=subs, grade_fn=fake_grade, progress=False)
    assert [r["key"] for r in summary.results] == ALL_KEYS + ["zoe.ipynb"]
    summary = grade_batch(LAB, [subs, extra / "zoe.ipynb"], out_dir=subs, grade_fn=fake_grade, progress=False)
    assert (summary.graded, summary.skipped) == (0, 6)


def test_bad_arguments_are_refused(tmp_path, subs):
    with pytest.raises(ValueError, match=r"jobs=0: expected a whole number of workers, 1 or more"):
        grade_batch(LAB, [subs], out_dir=tmp_path / "o", jobs=0, grade_fn=fake_grade)
    with pytest.raises(FileNotFoundError, match=r"nowhere.ipynb is neither a file nor a directory"):
        grade_batch(LAB, [tmp_path / "nowhere.ipynb"], out_dir=tmp_path / "o", grade_fn=fake_grade)
    (tmp_path / "...").write_text("{}")  # its stem is "..": out_dir/../results.json
    with pytest.raises(ValueError, match=r"\.\.\. is a hidden file.*rename it"):
        grade_batch(LAB, [tmp_path / "..."], out_dir=tmp_path / "o", grade_fn=fake_grade)


def test_progress_bar_and_summary_text(subs, tmp_path, capsys):
    summary = grade_batch(LAB, [subs], out_dir=tmp_path / "out", grade_fn=fake_grade, progress=True)
    assert f"grading {LAB}" in capsys.readouterr().err
    assert str(summary).startswith(f"{LAB}: 5 graded, 0 skipped (already graded) in ")


# -- several processes on one gradebook (also used by test_postgres.py) -----------------------------------
WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from attnlab.grading.scale.batch import grade_batch

    def fake(lab, path):
        time.sleep(0.02)
        score = float(len(Path(path).read_bytes()) % 5)
        return {"submission": str(path), "score": score, "max_score": 4.0, "isolation": "fake",
                "elapsed_s": 0.0, "errors": [],
                "questions": {"q": {"score": score, "max_score": 4.0, "messages": []}}}

    src, out, shard, gradebook = sys.argv[1:]
    summary = grade_batch("lab01", [src], out_dir=out, shard=shard, gradebook=gradebook, grade_fn=fake,
                          progress=False)
    print(json.dumps([r["key"] for r in summary.results]))
""")


def grade_shards_in_processes(src, out, gradebook, shards=2):
    """Start one process per shard at once, all writing to ``gradebook``; return the keys each graded."""
    procs = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(src), str(out), f"{i}/{shards}", str(gradebook)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(1, shards + 1)
    ]
    graded = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=120)
        assert p.returncode == 0, stderr
        graded.append(json.loads(stdout.strip().splitlines()[-1]))
    return graded


def test_two_processes_grade_two_shards_into_one_sqlite_gradebook(tmp_path):
    src = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": b"x" * i for i in range(20)})
    graded = grade_shards_in_processes(src, tmp_path / "out", tmp_path / "shared.db")
    assert sorted(graded[0] + graded[1]) == [f"s{i:02d}.ipynb" for i in range(20)]
    export_gradebook(tmp_path / "shared.db", tmp_path / "all.csv")
    lines = (tmp_path / "all.csv").read_text().splitlines()
    assert lines[0] == "submission,score,max_score,q,notes"
    assert lines[1:] == [f"s{i:02d}.ipynb,{i % 5},4,{i % 5}," for i in range(20)]


INTERRUPTIBLE = textwrap.dedent("""
    import signal, sys, time
    from attnlab.grading.scale.batch import BatchInterrupted, grade_batch

    # A shell without job control starts background jobs with SIGINT ignored, and Python keeps that:
    # take Ctrl-C back, as an interactive terminal would deliver it.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def slow(lab, path):
        time.sleep(0.3)
        return {"submission": str(path), "score": 1.0, "max_score": 1.0, "questions": {}}

    try:
        grade_batch("lab01", [sys.argv[1]], out_dir=sys.argv[2], grade_fn=slow, jobs=2, progress=False)
    except BatchInterrupted as exc:
        print("interrupted:", exc.summary.graded, flush=True)
        sys.exit(130)
""")


def test_ctrl_c_in_a_real_process_keeps_what_is_recorded(tmp_path):
    import signal

    src = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": {} for i in range(12)})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTIBLE, str(src), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "gradebook.db").exists() and len(rows_by_key(out, "lab01")) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    graded = int(stdout.split("interrupted:")[1])
    recorded = rows_by_key(out, "lab01")
    assert 2 <= len(recorded) == graded < 12
    grader = Grader()
    summary = grade_batch("lab01", [src], out_dir=out, grade_fn=grader, progress=False)
    assert sorted(grader.calls) == sorted({f"s{i:02d}.ipynb" for i in range(12)} - set(recorded))
    assert summary.skipped == len(recorded) and len(rows_by_key(out, "lab01")) == 12


def test_a_gradebook_object_is_used_and_left_open(subs, tmp_path):
    with open_gradebook(tmp_path / "elsewhere.db") as book:
        grade_batch(LAB, [subs], out_dir=tmp_path / "out", gradebook=book, grade_fn=fake_grade,
                    progress=False)
        assert sorted(r["key"] for r in book.rows(LAB)) == ALL_KEYS  # still open: the caller closes it
    assert not (tmp_path / "out" / "gradebook.db").exists()
