"""The gradebook on a REAL throwaway PostgreSQL server (initdb + pg_ctl on 127.0.0.1, stopped at the end).

Skipped only when no PostgreSQL server binaries are installed (Debian: apt-get install postgresql).
Needs psycopg 3 (pip install "attnlab[postgres]"): without it these tests fail instead of skipping.
"""

import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.report.gradebook_csv import export_gradebook

# The backend-independent gradebook tests, collected here again with the PostgreSQL ``book`` below.
from .test_batch import grade_shards_in_processes, write_submissions
from .test_gradebook import (  # noqa: F401
    test_export_csv_columns_and_values,
    test_export_csv_of_an_empty_gradebook_has_the_header_only,
    test_is_done_needs_same_key_same_content_and_no_grader_error,
    test_record_rejects_an_invalid_result_and_keeps_the_old_rows,
    test_record_then_rows_round_trip,
    test_resubmission_replaces_the_earlier_rows,
)


def _postgres_bindir() -> Path | None:
    def version(path):
        return [int(n) for n in re.findall(r"\d+", Path(path).parts[-3])]

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(cmd, what, log=None):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        server_log = Path(log).read_text() if log and Path(log).exists() else ""
        pytest.fail(f"{what} failed ({proc.returncode}): {proc.stdout}{proc.stderr}{server_log}")


class PgServer:
    """A throwaway server: ``url`` (no database), ``stop()`` (fast shutdown: sessions get ``AdminShutdown``),
    ``start()``."""

    def __init__(self, bindir: Path, as_user: list, tmp: Path):
        self.bindir, self.as_user, self.tmp = bindir, as_user, tmp
        self.data, self.log, self.port = tmp / "data", tmp / "server.log", _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}"

    def start(self):
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.tmp} -c fsync=off -c max_connections=40"
        _run(self.as_user + [self.bindir / "pg_ctl", "-D", self.data, "-o", options, "-l", self.log, "-w", "-t",
                             "60", "start"], "pg_ctl start", self.log)

    def stop(self, mode="fast"):
        subprocess.run(self.as_user + [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"],
                       capture_output=True, timeout=60)


@contextmanager
def throwaway_server():
    """Start a PostgreSQL server on loopback for the tests (skip where there are no server binaries)."""
    bindir = _postgres_bindir()
    if bindir is None or not (bindir / "pg_ctl").exists():
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on "
                    "PATH; install them with: apt-get install postgresql")
    import psycopg  # noqa: F401 - fail here, clearly, when the server exists but the client library does not

    tmp = Path(tempfile.mkdtemp(prefix="attnlab-pg-"))  # under /tmp: pytest's tmp dir is root-only
    as_user = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("running as root needs a 'postgres' user to start the test server (apt-get install "
                        "postgresql creates it), or run the tests as a normal user")
        os.chown(tmp, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"] if shutil.which("runuser") else [
            "setpriv", f"--reuid={owner.pw_uid}", f"--regid={owner.pw_gid}", "--clear-groups"]
    server = PgServer(bindir, as_user, tmp)
    _run(as_user + [bindir / "initdb", "-D", server.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                    "--no-sync"], "initdb")
    server.start()
    try:
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_server():
    with throwaway_server() as server:
        yield server.url


@contextmanager
def fresh_database(server_url: str):
    """The URL of a new, empty database on the server at ``server_url``, dropped afterwards."""
    import psycopg

    name = f"gb_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield f"{server_url}/{name}"
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def pg_url(pg_server):
    """A fresh, empty database on the test server."""
    with fresh_database(pg_server) as url:
        yield url


@pytest.fixture
def book(pg_url):
    with open_gradebook(pg_url) as gb:
        yield gb


def test_concurrent_opens_create_the_tables_once(pg_url):
    """Several connections open a fresh database at the same moment: CREATE TABLE IF NOT EXISTS races
    must not fail, and all of them can write afterwards."""
    barrier, errors = threading.Barrier(8), []

    def opener(i):
        try:
            barrier.wait()
            with open_gradebook(pg_url) as gb:
                gb.record("lab01", f"s{i}.ipynb", "/s", "0" * 64,
                          {"score": 1.0, "max_score": 1.0, "questions": {}})
        except Exception as exc:  # surfaced below
            errors.append(repr(exc))

    threads = [threading.Thread(target=opener, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with open_gradebook(pg_url) as gb:
        assert [r["key"] for r in gb.rows()] == [f"s{i}.ipynb" for i in range(8)]


def test_two_processes_grade_two_shards_into_one_postgres_gradebook(pg_url, tmp_path):
    src = write_submissions(tmp_path / "subs", {f"s{i:02d}.ipynb": b"x" * i for i in range(20)})
    graded = grade_shards_in_processes(src, tmp_path / "out", pg_url)
    assert graded[0] and graded[1] and not set(graded[0]) & set(graded[1])
    assert export_gradebook(pg_url, tmp_path / "all.csv") == 20
    lines = (tmp_path / "all.csv").read_text().splitlines()
    assert lines[0] == "submission,score,max_score,q,notes"
    assert lines[1:] == [f"s{i:02d}.ipynb,{i % 5},4,{i % 5}," for i in range(20)]  # every submission once
    assert sorted(p.name for p in (tmp_path / "out" / "submissions").iterdir()) == [f"s{i:02d}" for i in range(20)]


def test_password_is_not_shown_in_messages(pg_server):
    with open_gradebook(f"{pg_server}/postgres".replace("postgres@", "postgres:hunter2@")) as gb:
        assert "hunter2" not in repr(gb) and "postgres:***@127.0.0.1" in repr(gb)


def test_an_older_postgres_gradebook_gets_the_review_column(pg_url):
    import psycopg

    from .test_hostile import OLD_SCHEMA

    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in OLD_SCHEMA.split(";"):
            conn.execute(statement)
        conn.execute("INSERT INTO submissions VALUES ('lab', 'old.ipynb', '/p', 'sha', 1, 2, 'i', 0.1, 't', "
                     "'[\"hung\"]', NULL)")
    result = {"score": 1.0, "max_score": 2.0, "questions": {}, "review": ["check by hand"]}
    with open_gradebook(pg_url) as book:
        book.record("lab", "new.ipynb", "/p", "s", result)
        assert [(r["key"], r["review"]) for r in book.rows()] == [("new.ipynb", ["check by hand"]), ("old.ipynb", [])]


def test_an_older_postgres_gradebook_takes_written_answers_awaiting_marking(pg_url):
    """questions.score NOT NULL (before written questions): opening drops the constraint and adds kind/answer."""
    import psycopg

    from .test_written_answers import MANIFEST, OLD_SCHEMA, add_written, code_result

    with psycopg.connect(pg_url, autocommit=True) as conn:
        for statement in OLD_SCHEMA.split(";"):
            conn.execute(statement)
    with open_gradebook(pg_url) as book:
        book.record("lab99_demo", "alice.ipynb", "/p", "s", add_written(code_result(), MANIFEST, None))
        alice, bob = book.rows()
        assert alice["questions"]["mirror_pairs"]["score"] is None and alice["awaiting_points"] == 3.5
        assert bob["questions"]["Scale"] == {"score": 0.0, "max_score": 1.0, "messages": ["failed"]}
    with open_gradebook(pg_url) as book:  # a second open finds nothing to migrate
        assert [r["key"] for r in book.rows()] == ["alice.ipynb", "bob.ipynb"]
