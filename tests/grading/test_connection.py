"""``connection.Link`` without a database: which errors are retried, how often, how long it waits, and the hold-off
while a database stays down (the real server cases: test_recovery.py)."""

from __future__ import annotations

import threading
import time

import pytest

from attnlab.grading.outputs.connection import Bounds, GradebookError, GradebookUnavailable, Link


class Down(Exception):
    """Stands for a connection failure (OperationalError)."""


class FakeConn:
    def __init__(self, log):
        self.log = log

    def close(self):
        self.log.append("close")


QUICK = Bounds(retries=3, backoff_s=0.01)


def _link(failures: list, bounds=QUICK, **kw):
    """A Link whose connects raise the exceptions in ``failures`` first, then succeed; ``log`` records them."""
    log = []

    def connect():
        log.append("connect")
        if failures:
            raise failures.pop(0)
        return FakeConn(log)

    return Link(connect, target="db", transient=(Down,), bounds=bounds, **kw), log


def test_a_failed_connect_is_retried_until_it_succeeds():
    link, log = _link([Down("refused"), Down("refused")])
    assert log == ["connect"] * 3 and link.run(lambda conn: "ok") == "ok"


def test_a_transaction_that_fails_runs_again_whole_on_a_new_connection():
    link, log = _link([])
    seen = []

    def op(conn):
        seen.append(conn)
        if len(seen) == 1:
            raise Down("AdminShutdown: terminating connection due to administrator command")
        return len(seen)

    assert link.run(op) == 2
    assert seen[0] is not seen[1] and log == ["connect", "close", "connect"]


def test_after_the_retries_the_error_names_the_database_the_tries_and_the_last_error():
    link, _ = _link([])
    start = time.monotonic()
    with pytest.raises(GradebookUnavailable, match=r"gradebook db did not answer: 4 tries in .* last: Down: gone"):
        link.run(lambda conn: (_ for _ in ()).throw(Down("gone")))
    assert time.monotonic() - start >= 0.01 + 0.02 + 0.04  # the pauses double


def test_other_errors_pass_through_at_once():
    link, log = _link([])
    with pytest.raises(KeyError):
        link.run(lambda conn: {}["x"])
    assert log == ["connect"]
    link, log = _link([], retry_if=lambda exc: "locked" in str(exc))
    with pytest.raises(Down, match="no such table"):
        link.run(lambda conn: (_ for _ in ()).throw(Down("no such table")))
    assert log == ["connect"]
    with pytest.raises(GradebookError, match=r"cannot connect to the gradebook db: Down: role x does not exist"):
        _link([Down("role x does not exist")], retry_if=lambda exc: "locked" in str(exc))


def test_while_the_database_stays_down_later_runs_fail_at_once_then_try_once():
    link, log = _link([], bounds=Bounds(retries=2, backoff_s=0.2))  # longest pause: 0.4 s
    failing = lambda conn: (_ for _ in ()).throw(Down("gone"))  # noqa: E731
    with pytest.raises(GradebookUnavailable):
        link.run(failing)
    tries = log.count("close")
    start = time.monotonic()
    with pytest.raises(GradebookUnavailable, match="is down"):
        link.run(failing)
    assert time.monotonic() - start < 0.1 and log.count("close") == tries  # not tried: held off
    time.sleep(0.45)
    assert link.run(lambda conn: "back") == "back"  # one try after the hold-off, and it is up again


def test_the_watchdog_cuts_off_a_transaction_that_hangs():
    released = threading.Event()

    def interrupt(conn):
        released.set()

    def hang(conn):
        if not released.wait(5):
            return "hung"
        released.clear()
        raise Down("server closed the connection unexpectedly")

    link, _ = _link([], bounds=Bounds(read_timeout_s=0.2, retries=0), interrupt=interrupt)
    start = time.monotonic()
    with pytest.raises(GradebookUnavailable, match=r"TimeoutError: no answer within 0.2 s"):
        link.run(hang)
    assert time.monotonic() - start < 2


@pytest.mark.parametrize("name, value", [("ATTNLAB_DB_RETRIES", "2.5"), ("ATTNLAB_DB_READ_TIMEOUT_S", "-1")])
def test_bounds_from_the_environment_refuse_a_bad_value(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(GradebookError, match=name):
        Bounds.from_environment()


def test_bounds_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "7")
    monkeypatch.setenv("ATTNLAB_DB_BACKOFF_S", "0.5")
    bounds = Bounds.from_environment()
    assert (bounds.retries, bounds.connect_timeout_s, [bounds.pause(i) for i in (1, 2, 3)]) == (7, 10.0, [0.5, 1, 2])
