"""pool: a batch's jobs as forked grader processes. Every item comes back once, in parallel; a process that dies
loses no row; Ctrl-C (an error in ``finish``) leaves no process behind; and ``grade_batch`` with the real grader
uses it, giving the same rows as one job at a time."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from attnlab.grading.scale import pool
from attnlab.grading.scale.batch import grade_batch

pytestmark = pytest.mark.skipif(pool.start_method() != "processes", reason="forked grader processes need Linux")


def _work(item):
    time.sleep(0.2)
    if item == "dies":
        os._exit(3)
    if item == "killed":
        os.kill(os.getpid(), 9)
    return (item, os.getpid())


def test_every_item_comes_back_once_from_two_processes_at_once():
    finished = []
    peaks = pool.run_in_processes([f"s{i}" for i in range(6)], 2, _work, lambda i, o: finished.append((i, o)),
                                  lost=lambda i, why: pytest.fail(f"{i} lost: {why}"))
    assert sorted(i for i, _ in finished) == [f"s{i}" for i in range(6)]
    assert all(o[0] == i for i, o in finished)
    pids = {o[1] for _, o in finished}
    assert len(pids) == 2 and os.getpid() not in pids  # two children, none of them this process
    assert len(peaks) == 2 and all(p > 0 for p in peaks)


def test_each_start_is_reported_in_this_process_before_its_result_and_at_most_jobs_run_at_once():
    events, running, most = [], set(), [0]

    def started(item):
        events.append(("start", item, os.getpid()))
        running.add(item)
        most[0] = max(most[0], len(running))

    def finish(item, outcome):
        events.append(("finish", item, os.getpid()))
        running.discard(item)

    items = ["a", "dies", "b", "c", "d"]
    pool.run_in_processes(items, 2, _work, finish, lost=lambda i, why: ("lost", why), started=started)
    assert sorted(e[1] for e in events if e[0] == "start") == sorted(items)  # the replacement's item too
    assert {e[2] for e in events} == {os.getpid()}  # reported here, where the progress line is drawn
    for item in items:
        assert events.index(("start", item, os.getpid())) < events.index(("finish", item, os.getpid()))
    assert most[0] == 2 and not running


@pytest.mark.parametrize("bad", ["dies", "killed"])
def test_a_process_that_dies_loses_no_row_and_is_replaced(bad):
    finished = {}
    items = ["a", bad, "b", "c", "d"]
    pool.run_in_processes(items, 2, _work, lambda i, o: finished.__setitem__(i, o),
                          lost=lambda i, why: ("lost", why))
    assert sorted(finished) == sorted(items)
    assert finished[bad][0] == "lost"
    why = finished[bad][1]
    assert "died while grading" in why and ("exit code 3" if bad == "dies" else "killed by signal 9") in why
    assert all(finished[i][0] == i for i in items if i != bad)


def test_an_error_in_finish_stops_every_process():
    seen_pids = []

    def finish(item, outcome):
        seen_pids.append(outcome[1])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pool.run_in_processes([f"s{i}" for i in range(6)], 2, _work, finish, lost=lambda i, why: None)
    time.sleep(0.1)
    for pid in seen_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # reaped: not even a zombie left
    assert not [p for p in __import__("multiprocessing").active_children() if p.name == "attnlab-grader"]


def test_threads_on_request(monkeypatch):
    monkeypatch.setenv(pool.POOL_ENV, "threads")
    assert pool.start_method() == "threads"


def test_the_real_grader_in_processes_gives_the_rows_of_one_job(built_course, tmp_path):
    lab = built_course / "autograder" / "lab99_demo"
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(2):
        shutil.copy(built_course / "solutions" / "lab99_demo" / "lab99_demo.ipynb", subs / f"good{i}.ipynb")
        shutil.copy(built_course / "labs" / "lab99_demo" / "lab99_demo.ipynb", subs / f"blank{i}.ipynb")
    (subs / "broken.ipynb").write_bytes(b"not json")
    one = grade_batch(lab, [subs], out_dir=tmp_path / "one", progress=False)
    two = grade_batch(lab, [subs], out_dir=tmp_path / "two", jobs=2, progress=False)
    assert two.jobs_as == "2 grader processes" and "on 2 grader processes" in str(two)
    assert len(two.process_peaks_mib) == 2

    def rows(summary):
        return {r["key"]: (r["score"], r["max_score"], r["grader_error"],
                           {q: v["score"] for q, v in r["questions"].items()}) for r in summary.results}

    assert rows(one) == rows(two)
    assert {k: v[0] for k, v in rows(two).items()} == {"blank0.ipynb": 0.0, "blank1.ipynb": 0.0,
                                                         "broken.ipynb": 0.0, "good0.ipynb": 3.0,
                                                         "good1.ipynb": 3.0}


def _zygote_pid(item):
    from attnlab.grading.worker.sandbox import forked

    inherited = sum(k[1] == (("ATTNLAB_POOL_TEST", "1"),) for k in forked._ZYGOTES)  # the parent's, as seen here
    return inherited, forked.zygote_for({"ATTNLAB_POOL_TEST": "1"}).proc.pid


@pytest.mark.skipif(os.geteuid() != 0, reason="the zygote serves a root grader")
def test_the_grader_processes_share_their_parents_zygote_and_leave_it_serving():
    from attnlab.grading.worker.sandbox import forked

    try:
        ours = forked.zygote_for({"ATTNLAB_POOL_TEST": "1"})
    except forked.ZygoteUnavailable as exc:
        pytest.skip(f"no zygote here: {exc}")
    if ours.shared is None:
        pytest.skip("no shared-memory lock here: each grader process starts its own zygote")
    theirs = []
    pool.run_in_processes(["a", "b", "c", "d"], 2, _zygote_pid, lambda i, o: theirs.append(o),
                          lost=lambda i, why: why)
    assert [inherited for inherited, _ in theirs] == [1, 1, 1, 1]  # kept at the fork: its lock holds across forks
    assert {pid for _, pid in theirs} == {ours.proc.pid}  # no zygote of their own
    assert ours.alive() and forked.zygote_for({"ATTNLAB_POOL_TEST": "1"}) is ours  # still this process's


def test_a_fork_forgets_a_zygote_whose_lock_holds_in_one_process_only(monkeypatch):
    from attnlab.grading.worker.sandbox import forked

    monkeypatch.setattr(forked, "_shared_lock", lambda: None)
    try:
        ours = forked.zygote_for({"ATTNLAB_POOL_TEST": "2"})
    except forked.ZygoteUnavailable as exc:
        pytest.skip(f"no zygote here: {exc}")
    assert ours.shared is None
    theirs = []

    def zygote_pid(item):
        inherited = any(k[1] == (("ATTNLAB_POOL_TEST", "2"),) for k in forked._ZYGOTES)
        return inherited, forked.zygote_for({"ATTNLAB_POOL_TEST": "2"}).proc.pid

    pool.run_in_processes(["a", "b"], 2, zygote_pid, lambda i, o: theirs.append(o), lost=lambda i, why: why)
    assert [inherited for inherited, _ in theirs] == [False, False]
    assert ours.proc.pid not in {pid for _, pid in theirs}  # each started its own
    assert ours.alive() and forked.zygote_for({"ATTNLAB_POOL_TEST": "2"}) is ours
    ours.close()
    forked._ZYGOTES.pop(next(k for k in forked._ZYGOTES if k[1] == (("ATTNLAB_POOL_TEST", "2"),)), None)


CTRL_C = """
import signal, sys
from attnlab.grading.scale.batch import BatchInterrupted, grade_batch

signal.signal(signal.SIGINT, signal.default_int_handler)  # a shell without job control ignores it: take it back
try:
    grade_batch(sys.argv[1], [sys.argv[2]], out_dir=sys.argv[3], jobs=2, progress=False)  # {marker}
except BatchInterrupted as exc:
    print("interrupted:", exc.summary.graded, exc.summary.jobs_as, flush=True)
    sys.exit(130)
"""


def test_ctrl_c_on_grader_processes_keeps_the_rows_and_leaves_no_process(built_course, tmp_path):
    import signal
    import subprocess
    import sys
    import uuid

    from attnlab.grading.outputs.gradebook import open_gradebook

    marker = f"attnlab-pool-test-{uuid.uuid4().hex}"
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(12):
        shutil.copy(built_course / "solutions" / "lab99_demo" / "lab99_demo.ipynb", subs / f"s{i:02d}.ipynb")
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C.replace("{marker}", marker),
                             str(built_course / "autograder" / "lab99_demo"), str(subs), str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def recorded():
        if not (out / "gradebook.db").exists():
            return 0
        with open_gradebook(out / "gradebook.db") as book:
            return len(book.rows("lab99_demo"))

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and recorded() < 2:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    graded = int(stdout.split("interrupted:")[1].split()[0])
    assert "2 grader processes" in stdout
    assert 2 <= recorded() == graded < 12
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert not left, f"grader processes left running: {left}"
