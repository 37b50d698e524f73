"""A batch shows its progress: in a terminal (a pseudo-terminal here) a live line within 2 s of the first submission
starting, with its clock running while that submission is still graded; elsewhere one plain line per submission,
with the failures so far. The batch table abbreviates long notes with a visible mark."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from attnlab.grading.outputs.score_table import abbreviated, score_table
from attnlab.grading.scale.batch import grade_batch
from attnlab.grading.scale.progress import BatchProgress

ROOT = Path(__file__).resolve().parents[2]
LAB_DIR = ROOT / "autograder" / "lab05_self_attention"

SLOW_BATCH = textwrap.dedent("""
    import sys, time
    from attnlab.grading.scale.batch import grade_batch

    def slow(lab_dir, path):  # a first submission that takes 4 s
        if not hasattr(slow, "started"):
            slow.started = time.time()
            print(f"STARTED {slow.started!r}", file=sys.stderr, flush=True)
        time.sleep(4 if path.name == "a.ipynb" else 0.1)
        return {"score": 1.0, "max_score": 2.0, "questions": {}}

    grade_batch(sys.argv[1], [sys.argv[2]], out_dir=sys.argv[3], grade_fn=slow)
""")


def _read_pty(fd: int, proc, deadline: float) -> list[tuple[float, bytes]]:
    """Every chunk the child writes to the terminal, with the time it arrived."""
    chunks = []
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append((time.time(), data))
        elif proc.poll() is not None:
            break
    return chunks


def test_a_batch_in_a_terminal_shows_progress_within_2_s_of_the_first_submission(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a.ipynb", "b.ipynb", "c.ipynb"):
        (subs / name).write_text("{}")
    script = tmp_path / "batch.py"
    script.write_text(SLOW_BATCH)
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(script), str(LAB_DIR), str(subs), str(tmp_path / "out")],
                            stdin=follower, stdout=follower, stderr=follower, cwd=tmp_path)
    os.close(follower)
    try:
        chunks = _read_pty(leader, proc, time.time() + 120)
    finally:
        os.close(leader)
        proc.wait(timeout=30)
    text = b"".join(c for _, c in chunks).decode("utf-8", "replace")
    started = float(re.search(r"STARTED ([\d.]+)", text).group(1))
    seen = ""
    shown = []  # (time, text so far) of each chunk
    for at, chunk in chunks:
        seen += chunk.decode("utf-8", "replace")
        shown.append((at, seen))
    first = next(at for at, so_far in shown if "0/3" in so_far)
    assert first <= started + 2.0, f"the first progress line came {first - started:.1f} s after the first start"
    ticking = [at for at, so_far in shown if re.search(r"0/3 \[00:0[1-3]", so_far)]
    assert ticking and ticking[0] <= started + 3.5, "the line's clock did not run while the first submission graded"
    while_a = [so_far for at, so_far in shown if at < started + 3.5]  # a.ipynb takes 4 s: still running
    assert "running=a.ipynb" in while_a[-1], "the live line did not name the file being graded"
    assert "3/3" in text and "failures=0" in text and "\r" in text  # a live line, redrawn in place
    assert proc.returncode == 0


def test_outside_a_terminal_each_submission_is_one_plain_line_with_the_failures_so_far(tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("a.ipynb", "b.ipynb", "c.ipynb"):
        (subs / name).write_text("{}")

    def grade(lab_dir, path):
        if path.name == "b.ipynb":
            raise RuntimeError("boom")
        return {"score": 2.0, "max_score": 2.0, "questions": {}}

    summary = grade_batch(LAB_DIR, [subs], out_dir=tmp_path / "out", grade_fn=grade)
    err = capsys.readouterr().err
    assert summary.failed == 1 and "\r" not in err
    lines = [line for line in err.splitlines() if line.startswith("[")]
    assert [line.split(";")[0] for line in lines] == [
        "[1/3] a.ipynb 2/2", "[2/3] b.ipynb 0/37 (7 points awaiting marking)", "[3/3] c.ipynb 2/2"]
    assert lines[0].endswith("failures so far: 0") and lines[2].endswith("failures so far: 1")
    assert "s per submission, about" in lines[1] and "grader error on b.ipynb" in err


def test_progress_is_silent_when_disabled_and_live_when_asked():
    quiet = io.StringIO()
    p = BatchProgress("lab05", 2, enabled=False, stream=quiet)
    p.done("a.ipynb", "1/2")
    p.close()
    assert quiet.getvalue() == ""
    live = io.StringIO()
    p = BatchProgress("lab05", 2, stream=live, live=True)
    p.done("a.ipynb", "1/2", failed=True)
    p.close()
    assert "1/2" in live.getvalue() and "failures=1" in live.getvalue()


def test_the_files_still_running_are_named_in_both_kinds_of_line():
    plain = io.StringIO()
    p = BatchProgress("lab05", 3, stream=plain, live=False)
    for key in ("slow.ipynb", "b.ipynb", "c.ipynb"):
        p.start(key)
    p.done("b.ipynb", "1/2")
    p.done("c.ipynb", "2/2")
    p.start("d.ipynb")
    p.done("d.ipynb", "2/2")
    lines = plain.getvalue().splitlines()[1:]
    assert lines[0].endswith("failures so far: 0; running: slow.ipynb (+1 more)")
    assert lines[1].endswith("failures so far: 0; running: slow.ipynb")
    assert lines[2].endswith("running: slow.ipynb")
    p.done("slow.ipynb", "0/2 (timeout)")
    assert plain.getvalue().splitlines()[-1].endswith("failures so far: 0")  # none left running
    live = io.StringIO()
    p = BatchProgress("lab05", 2, stream=live, live=True)
    p.start("a\u202e.ipynb")  # a name's control characters are shown, never obeyed
    p.close()
    assert "running=a" in live.getvalue() and "\u202e" not in live.getvalue()


def test_long_notes_are_abbreviated_with_a_visible_mark_not_cut():
    lost = "lost: " + ", ".join(f"question_{i} 0/2" for i in range(12))
    short = abbreviated(lost, 60)
    assert len(short) <= 60 and short.endswith(" more)") and "…" in short
    kept = short.split(" …")[0]
    assert lost.startswith(kept) and kept.endswith("0/2,")  # cut between whole items
    left = int(re.search(r"\(\+(\d+) more\)", short).group(1))
    assert left == 12 - kept.count("question_")
    assert abbreviated(lost, None) == lost == abbreviated(lost, len(lost))
    row = {"submission": "alice.ipynb", "score": 0.0, "max_score": 24.0,
           "questions": {f"question_{i}": {"score": 0.0, "max_score": 2.0, "messages": []} for i in range(12)}}
    table = score_table([row], width=100).splitlines()
    assert len(table[1]) <= 100 and "… (+" in table[1]
    assert score_table([row]).splitlines()[1].endswith("question_11 0/2")  # not a terminal: every note kept


def test_a_cut_line_still_shows_a_timeout_or_a_crash():
    review = [f"needs review item {i}: a long sentence a person reads" for i in range(3)]
    row = {"submission": "slow.ipynb", "score": 0.0, "max_score": 24.0, "review": review,
           "errors": ["hung: the submission ran past its 600 s"],
           "problems": [{"category": "timeout", "cell": None, "message": "hung"},
                        {"category": "worker_crash", "cell": None, "message": "x"}],
           "questions": {f"question_{i}": {"score": 0.0, "max_score": 2.0, "messages": []} for i in range(12)}}
    line = score_table([row], width=100).splitlines()[1]
    assert len(line) <= 100 and "… (+" in line and "[timeout, worker crash]" in line
    assert "hung" not in line  # the message itself was cut: the category is what stays
