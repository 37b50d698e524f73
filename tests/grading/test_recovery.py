"""A batch finishes or says exactly what is left: a PostgreSQL restart mid-batch, a server down for good, a server
that stops answering, a listener that never answers, a grader process that dies (docs/GRADING_AT_SCALE.md).

The server tests run a REAL throwaway PostgreSQL server on loopback (``test_postgres.throwaway_server``), stopped
and started mid-batch; skipped only where no server binaries are installed (apt-get install postgresql).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from attnlab.cli import main
from attnlab.commands import EXIT_GRADEBOOK
from attnlab.grading.outputs.connection import GradebookUnavailable
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.scale import batch, pool
from attnlab.grading.scale.batch import grade_batch
from attnlab.grading.scale.gradebook_check import attnlab_executable

from .test_batch import write_submissions
from .test_postgres import fresh_database, throwaway_server

LAB = "lab99_demo"  # the fixture course's lab (conftest.built_course)


def _fake_grade(lab_dir, path):
    return {"submission": str(path), "score": 1.0, "max_score": 1.0, "questions": {}}


@pytest.fixture(scope="module")
def server():
    with throwaway_server() as s:
        yield s


@pytest.fixture
def db_url(server):
    with fresh_database(server.url) as url:
        yield url


@pytest.fixture
def quick_retries(monkeypatch):
    """Short bounds, so that a test of giving up stays short: a try waits 2 s at most to connect (libpq's
    minimum), pauses 0.5, 1, 2, 4, 8 s between the 6 tries."""
    monkeypatch.setenv("ATTNLAB_DB_CONNECT_TIMEOUT_S", "2")
    monkeypatch.setenv("ATTNLAB_DB_BACKOFF_S", "0.5")
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "5")


def test_a_restart_mid_batch_ends_with_every_row_written(server, db_url, tmp_path, quick_retries):
    """The server stops (fast shutdown: the open session gets AdminShutdown) while s04 is graded and comes back
    2 s later: its row and all the later ones are written after the retry, within 40 s."""
    src = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": b"x" * i for i in range(10)})
    restarts = []

    def grade(lab_dir, path, **_):
        if path.name == "s04.ipynb" and not restarts:
            server.stop("fast")
            restarts.append(threading.Timer(2.0, server.start))
            restarts[0].start()
        return _fake_grade(lab_dir, path)

    start = time.monotonic()
    summary = grade_batch("lab01", [src], out_dir=tmp_path / "out", gradebook=db_url, grade_fn=grade,
                          progress=False)
    elapsed = time.monotonic() - start
    restarts[0].join()
    assert (summary.graded, summary.failed, summary.unwritten, summary.left) == (10, 0, 0, {})
    with open_gradebook(db_url) as book:
        assert [r["key"] for r in book.rows()] == [f"s{i:02d}.ipynb" for i in range(10)]
    assert elapsed < 40, elapsed


SHARD = textwrap.dedent("""
    import json, sys, time
    from attnlab.grading.scale.batch import grade_batch

    def slow(lab, path):
        time.sleep(0.1)
        return {"submission": str(path), "score": 1.0, "max_score": 1.0, "questions": {}}

    src, out, shard, gradebook = sys.argv[1:]
    s = grade_batch("lab01", [src], out_dir=out, shard=shard, gradebook=gradebook, grade_fn=slow, progress=False)
    print(json.dumps([s.graded, s.failed, s.unwritten]))
""")


def test_shards_in_separate_processes_ride_out_a_restart(server, db_url, tmp_path):
    """The issue's case: three shard processes, 30 submissions, the server restarted (fast shutdown, 1 s down)
    once rows are coming in: every shard ends with exit 0 and all 30 rows are written, within 60 s."""
    import psycopg

    src = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": b"x" * i for i in range(30)})
    env = dict(os.environ, ATTNLAB_DB_BACKOFF_S="0.5", ATTNLAB_DB_CONNECT_TIMEOUT_S="2")
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", SHARD, str(src), str(tmp_path / "out"), f"{i}/3", db_url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for i in (1, 2, 3)]
    written = 0
    while written < 4 and time.monotonic() - start < 60:  # the shards are under way
        time.sleep(0.1)
        try:
            with psycopg.connect(db_url, autocommit=True) as conn:
                written = conn.execute("SELECT count(*) FROM submissions").fetchone()[0]
        except psycopg.Error:  # the tables are not there yet
            pass
    server.stop("fast")
    time.sleep(1.0)
    server.start()
    outcomes = [p.communicate(timeout=120) for p in procs]
    elapsed = time.monotonic() - start
    assert 4 <= written < 30
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outcomes]
    counts = [json.loads(out.strip().splitlines()[-1]) for out, _ in outcomes]
    assert sum(c[0] for c in counts) == 30 and all(c[1:] == [0, 0] for c in counts)
    with open_gradebook(db_url) as book:
        assert [r["key"] for r in book.rows()] == [f"s{i:02d}.ipynb" for i in range(30)]
    assert elapsed < 60, elapsed


def test_a_server_down_for_good_exits_4_naming_every_file_left(server, db_url, built_course, tmp_path,
                                                                monkeypatch, capsys):
    """The server stops while s04 is graded and stays down: the batch goes on (files put in place only with their
    row, so s00..s03's alone), exits 4, and its
    last line is the command that grades exactly s04..s09; afterwards `gradebook --check` lists the same six."""
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "2")
    monkeypatch.setenv("ATTNLAB_DB_BACKOFF_S", "0.2")
    src = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": b"x" * i for i in range(10)})

    def grade(lab_dir, path, **_):
        if path.name == "s04.ipynb":
            server.stop("fast")
        return _fake_grade(lab_dir, path)

    monkeypatch.setattr(batch, "grade_submission", grade)
    out = tmp_path / "out"
    start = time.monotonic()
    try:
        code = main(["--root", str(built_course), "grade", LAB, str(src), "--out", str(out), "--gradebook", db_url])
        elapsed = time.monotonic() - start
    finally:
        server.start()
    err = capsys.readouterr().err.strip().splitlines()
    left = [str(src / f"s{i:02d}.ipynb") for i in range(4, 10)]
    assert code == 4
    assert err[-1] == f"attnlab grade: 6 submission(s) left: rerun: {attnlab_executable()} grade {LAB} {' '.join(left)} " \
                      f"--out {out} --gradebook {db_url}"
    assert "6 not written to the gradebook" in err[-2]
    # files and rows agree: the rows written have their files, the six left have none (and no stray temporary file)
    assert sorted(p.parent.name for p in (out / "submissions").glob("*/results.json")) == [f"s{i:02d}" for i in range(4)]
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    assert elapsed < 30, elapsed  # the first lost row: 3 tries (0.6 s of pauses); the later ones 1 try at most

    assert main(["gradebook", db_url, "--check", str(src), "--lab", LAB]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[:-1] == [f"missing  s{i:02d}.ipynb: no row in the gradebook" for i in range(4, 10)]
    assert lines[-1].endswith(": 4 graded and current; 6 missing, 0 stale, 0 errored")


def test_a_server_that_stops_answering_is_cut_off_and_the_row_retried(db_url, monkeypatch):
    """The session's server process is frozen (SIGSTOP): the transaction is cut off after the read timeout (2 s)
    and runs again on a new connection, instead of hanging the shard."""
    monkeypatch.setenv("ATTNLAB_DB_READ_TIMEOUT_S", "2")
    result = {"score": 2.0, "max_score": 3.0, "questions": {"q": {"score": 2.0, "max_score": 3.0}}}
    with open_gradebook(db_url) as book:
        backend = book._link.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        os.kill(backend, signal.SIGSTOP)
        try:
            start = time.monotonic()
            book.record("lab01", "alice.ipynb", "/a", "0" * 64, result)
            elapsed = time.monotonic() - start
        finally:
            os.kill(backend, signal.SIGCONT)
        assert [(r["key"], r["score"], r["questions"]["q"]["score"]) for r in book.rows()] == [
            ("alice.ipynb", 2.0, 2.0)]
    assert 2 <= elapsed < 10, elapsed


@pytest.fixture
def silent_listener():
    """A loopback TCP server that accepts connections and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"postgresql://postgres@127.0.0.1:{sock.getsockname()[1]}/db"
    sock.close()


def test_a_listener_that_never_answers_fails_within_the_timeout(silent_listener, monkeypatch):
    monkeypatch.setenv("ATTNLAB_DB_CONNECT_TIMEOUT_S", "2")
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "1")
    monkeypatch.setenv("ATTNLAB_DB_BACKOFF_S", "0.1")
    start = time.monotonic()
    with pytest.raises(GradebookUnavailable, match=r"did not answer: 2 tries in .* timeout"):
        open_gradebook(silent_listener)
    assert time.monotonic() - start < 15  # 2 tries of 2 s


@pytest.mark.parametrize("command", ["gradebook", "grade"])
def test_a_listener_that_never_answers_is_one_line_and_exit_6(silent_listener, built_course, tmp_path, monkeypatch,
                                                             capsys, command):
    """Not a usage error (2): the command is right, the database did not answer (EXIT_GRADEBOOK)."""
    monkeypatch.setenv("ATTNLAB_DB_CONNECT_TIMEOUT_S", "2")
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "0")
    src = write_submissions(tmp_path / "subs", {"a.ipynb": b"a"})
    argv = {"gradebook": ["gradebook", silent_listener, "--csv", "-"],
            "grade": ["grade", LAB, str(src), "--gradebook", silent_listener]}[command]
    assert main(["--root", str(built_course), *argv]) == EXIT_GRADEBOOK == 6
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab {command}: gradebook postgresql://") and len(err.splitlines()) == 1
    assert "did not answer: 1 try" in err


@pytest.mark.skipif(pool.start_method() != "processes", reason="grader processes need Linux fork")
def test_a_killed_grader_process_makes_the_exit_non_zero(built_course, tmp_path, monkeypatch, capsys):
    """A grader process killed mid-grade (SIGKILL, as the OOM killer does): its file gets a row with the grader
    error, the batch exits 3 and its last line reruns exactly that file."""
    def grade(lab_dir, path, **_):
        if path.name == "b.ipynb":
            os.kill(os.getpid(), signal.SIGKILL)
        return _fake_grade(lab_dir, path)

    monkeypatch.setattr(batch, "grade_submission", grade)
    monkeypatch.setattr(batch, "warm_up", lambda lab_dir: None)
    src = write_submissions(tmp_path / "subs", {f"{k}.ipynb": k.encode() for k in "abc"})
    out = tmp_path / "out"
    assert main(["--root", str(built_course), "grade", LAB, str(src), "--out", str(out), "--jobs", "2"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"attnlab grade: 1 submission(s) left: rerun: {attnlab_executable()} grade {LAB} "
                       f"{src / 'b.ipynb'} --out {out}")
    with open_gradebook(out) as book:
        rows = {r["key"]: r for r in book.rows()}
    assert sorted(rows) == ["a.ipynb", "b.ipynb", "c.ipynb"]
    assert "grader process died while grading this submission (killed by signal 9" in rows["b.ipynb"]["grader_error"]
    assert rows["b.ipynb"]["score"] == 0.0
    assert rows["a.ipynb"]["grader_error"] is None and rows["a.ipynb"]["score"] == 1.0


def test_a_sqlite_lock_held_past_the_busy_timeout_is_retried_then_reported(tmp_path, monkeypatch):
    """Another program holds the SQLite gradebook's write lock: the row waits out the busy timeout, is retried, and
    is written once the lock goes; a lock that never goes leaves the row reported, the batch going on."""
    import sqlite3

    from attnlab.grading.outputs import connection

    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.2)
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "2")
    monkeypatch.setenv("ATTNLAB_DB_BACKOFF_S", "0.2")
    src = write_submissions(tmp_path / "subs", {"a.ipynb": b"a", "b.ipynb": b"b", "c.ipynb": b"c"})
    db = tmp_path / "gb.db"
    open_gradebook(db).close()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)

    def grade(lab_dir, path, **_):
        if path.name == "a.ipynb":
            holder.execute("BEGIN IMMEDIATE")
            threading.Timer(0.4, holder.execute, ("COMMIT",)).start()  # released while a's row is retried
        if path.name == "b.ipynb":
            holder.execute("BEGIN IMMEDIATE")  # held for good
        return _fake_grade(lab_dir, path)

    summary = grade_batch("lab01", [src], out_dir=tmp_path / "out", gradebook=db, grade_fn=grade, progress=False)
    holder.execute("COMMIT")
    holder.close()
    assert (summary.graded, summary.unwritten, sorted(summary.left)) == (3, 2, ["b.ipynb", "c.ipynb"])
    with open_gradebook(db) as book:
        assert [r["key"] for r in book.rows()] == ["a.ipynb"]


def test_a_wrong_database_in_the_url_is_one_line_exit_2_at_once(server, capsys):
    start = time.monotonic()
    assert main(["gradebook", f"{server.url}/no_such_db", "--csv", "-"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab gradebook: cannot connect to the gradebook {server.url}/no_such_db: ")
    assert 'database "no_such_db" does not exist' in err and len(err.splitlines()) == 1
    assert time.monotonic() - start < 5  # not retried
