"""A gradebook's database connection that survives a server restart and never hangs a batch.

- **Connect timeout**: a PostgreSQL server that accepts the connection and never answers fails the try after
  ``connect_timeout_s`` (libpq's ``connect_timeout``, unless the URL sets its own).
- **Read timeout**: every transaction runs under a watchdog; a server that stops answering mid-transaction has
  its socket shut down after ``read_timeout_s``, which fails the transaction (client side: it works when the
  server process is stopped or the network is gone, where a server-side ``statement_timeout`` never fires).
- **Reconnect with bounded retries**: a transaction that fails for a connection reason (``AdminShutdown`` from a
  restart, ``OperationalError``, the watchdog) is rolled back by the server, the connection is dropped, and the
  whole transaction runs again on a new one after a pause that doubles (``BACKOFF_S``), ``retries`` times. A
  transaction is all or nothing, so a retried row is never half written, and replaying an upsert is harmless.
  After the last try ``GradebookUnavailable`` names the database and the last error. While the database stays
  down, later transactions fail at once for the longest pause, then try once each, until one succeeds: a
  database down for good costs a batch seconds, not a connect timeout per row.
- **No retry for a wrong URL**: a database, user, password or host name that does not exist fails at once with a
  ``GradebookError`` (``postgres_may_pass``).

The bounds come from the environment, for a course whose database restarts slowly (``docs/GRADING_AT_SCALE.md``):
``ATTNLAB_DB_CONNECT_TIMEOUT_S``, ``ATTNLAB_DB_READ_TIMEOUT_S``, ``ATTNLAB_DB_RETRIES``, ``ATTNLAB_DB_BACKOFF_S``.
"""

from __future__ import annotations

import os
import random
import socket
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from attnlab import settings

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 60.0
RETRIES = 5
BUSY_TIMEOUT_S = 60.0  # SQLite: how long a writer waits for another's lock
BACKOFF_S = 1.0  # the first pause; then 2, 4, 8, 16 s: a restart of up to about 30 s is ridden out


class GradebookError(ValueError):
    """A gradebook target that cannot be used (a wrong URL, a database that does not answer): one line to show."""


class GradebookUnavailable(GradebookError):
    """The database did not answer after the retries; the message names it, the tries and the last error."""


def _env_number(name: str, default: float, *, whole: bool = False) -> float:
    text = settings.get(name).strip()
    if not text:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise GradebookError(f"{name}={text!r} is not a {'whole ' if whole else ''}number: unset it or give one "
                             f"(default {default:g})") from None
    if value < 0:
        raise GradebookError(f"{name}={text!r} is negative: give 0 or more (default {default:g})")
    return value


@dataclass(frozen=True)
class Bounds:
    """How long one try may wait and how often to try again."""

    connect_timeout_s: float = CONNECT_TIMEOUT_S
    read_timeout_s: float = READ_TIMEOUT_S
    retries: int = RETRIES
    backoff_s: float = BACKOFF_S

    @classmethod
    def from_environment(cls) -> Bounds:
        return cls(_env_number(settings.DB_CONNECT_TIMEOUT_S, CONNECT_TIMEOUT_S),
                   _env_number(settings.DB_READ_TIMEOUT_S, READ_TIMEOUT_S),
                   int(_env_number(settings.DB_RETRIES, RETRIES, whole=True)),
                   _env_number(settings.DB_BACKOFF_S, BACKOFF_S))

    def pause(self, attempt: int) -> float:
        """The pause before try ``attempt`` (1-based retry number): ``backoff_s * 2**(attempt - 1)``."""
        return self.backoff_s * 2 ** (attempt - 1)


def _last_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


class Link:
    """One connection, opened by ``connect()`` and opened again after a connection failure.

    ``transient``: the exception types that mean "the connection failed, try again". ``interrupt(conn)``: unblocks
    a transaction stuck on the server (None: no watchdog, as for SQLite, whose waits are bounded by its busy
    timeout).
    """

    def __init__(self, connect: Callable[[], Any], *, target: str, transient: tuple, bounds: Bounds,
                 interrupt: Callable[[Any], None] | None = None,
                 retry_if: Callable[[Exception], bool] = lambda exc: True):
        self._connect = connect
        self._retry_if = retry_if  # of the ``transient`` errors, those worth another try
        self.target = target
        self._transient = transient
        self.bounds = bounds
        self._interrupt = interrupt
        self._down_at: float | None = None  # when the last try of a failed run ended
        self._down_why = ""
        self.conn = None
        self.run(lambda conn: None)  # the first connection, with the same retries

    def run(self, op: Callable[[Any], Any]):
        """``op(conn)``: one whole transaction; run again on a new connection after a connection failure."""
        hold = self.bounds.pause(self.bounds.retries)  # the longest pause: a database down for good costs nothing
        if self._down_at is not None and time.monotonic() - self._down_at < hold:
            raise GradebookUnavailable(f"gradebook {self.target} is down ({self._down_why}; tried again "
                                       f"{hold:g} s after the last try): check that the database is up, then rerun")
        tries = 1 if self._down_at is not None else self.bounds.retries + 1
        start, last = time.monotonic(), None
        for attempt in range(tries):
            fired = None
            if attempt:
                time.sleep(self.bounds.pause(attempt))
            connecting = self.conn is None
            try:
                if connecting:
                    self.conn = self._connect()
                with self._watchdog() as fired:
                    result = op(self.conn)
                self._down_at = None
                return result
            except self._transient as exc:
                if not self._retry_if(exc):
                    if connecting:  # a wrong database, user, password or host: no retry makes it right
                        raise GradebookError(f"cannot connect to the gradebook {self.target}: {_last_line(exc)}; "
                                             "check the URL") from None
                    raise
                last = exc if fired is None or not fired.is_set() else TimeoutError(
                    f"no answer within {self.bounds.read_timeout_s:g} s (ATTNLAB_DB_READ_TIMEOUT_S)")
                self.drop()
        self._down_at, self._down_why = time.monotonic(), _last_line(last)
        raise GradebookUnavailable(
            f"gradebook {self.target} did not answer: {tries} tr{'y' if tries == 1 else 'ies'} in "
            f"{time.monotonic() - start:.1f} s, last: {self._down_why}; check that the database is up and "
            "reachable, then rerun") from last

    @contextmanager
    def _watchdog(self):
        fired = threading.Event()
        if self._interrupt is None or self.conn is None:
            yield fired
            return
        conn = self.conn

        def fire():
            fired.set()
            self._interrupt(conn)

        timer = threading.Timer(self.bounds.read_timeout_s, fire)
        timer.daemon = True
        timer.start()
        try:
            yield fired
        finally:
            timer.cancel()

    def drop(self) -> None:
        """Close the connection, whatever state it is in; the next ``run`` opens a new one."""
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - a broken connection may fail to close; it is gone either way
                pass

    def close(self) -> None:
        self.drop()


def shut_socket(conn) -> None:
    """Unblock a psycopg connection waiting on a silent server: shut its socket down, so the wait ends with an
    ``OperationalError`` (the server closed the connection) instead of hanging."""
    try:
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # noqa: BLE001 - the connection already closed: nothing to unblock
        pass


def connect_postgres(url: str, bounds: Bounds):
    """A psycopg 3 connection in autocommit mode (transactions are explicit) with the connect timeout, unless the
    URL gives its own ``connect_timeout``."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    options: dict = {"autocommit": True}
    if "connect_timeout" not in conninfo_to_dict(url):
        options["connect_timeout"] = max(1, round(bounds.connect_timeout_s))  # libpq: whole seconds, 1 at least
    return psycopg.connect(url, **options)


# A host name that does not resolve ("Name or service not known": not the temporary "Temporary failure in name
# resolution", which is retried), a refused password or user, a database that does not exist: no retry makes it right.
_PG_PERMANENT = ("does not exist", "authentication failed", "pg_hba.conf", "invalid dsn", "invalid connection option",
                 "could not translate host name", "name or service not known", "nodename nor servname",
                 "no password supplied")


def postgres_may_pass(exc: Exception) -> bool:
    """A PostgreSQL error worth another try: not a wrong database, user, password or host name in the URL."""
    return not any(word in str(exc).lower() for word in _PG_PERMANENT)


def sqlite_may_pass(exc: Exception) -> bool:
    """A SQLite error worth another try: a lock held past the busy timeout, a full disk, an I/O error."""
    return any(word in str(exc).lower() for word in ("locked", "busy", "disk", "i/o", "full"))


def connect_sqlite(path: Path) -> sqlite3.Connection:
    """A SQLite connection in autocommit mode (transactions are explicit), WAL journal, busy timeout. A file that is
    there, not empty and not SQLite is refused, never turned into a database (SQLite would take a short one)."""
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                raise GradebookError(f"{path} is not a usable gradebook (not a SQLite file): pass the gradebook.db "
                                     "a batch wrote, or a new file name")
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    except sqlite3.OperationalError as exc:
        if sqlite_may_pass(exc):
            raise
        raise GradebookError(f"cannot open the gradebook {path} ({exc}): pass a SQLite file you can write") from None
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    try:
        _enable_wal(conn, path)
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError as exc:
        conn.close()
        if isinstance(exc, sqlite3.OperationalError) and sqlite_may_pass(exc):
            raise
        raise GradebookError(f"{path} is not a usable gradebook ({exc}): pass the gradebook.db a batch wrote, "
                             "or a new file name") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _enable_wal(conn: sqlite3.Connection, path: Path, *, deadline_s: float = BUSY_TIMEOUT_S) -> None:
    """Switch ``conn``'s database to the WAL journal, retrying while another process holds a lock.

    SQLite answers ``database is locked`` at once, without waiting on the busy timeout, when two
    connections switch a new database to WAL at the same moment (waiting could deadlock). Several
    batch processes sharing one gradebook do exactly that, so retry with a short, growing back-off.
    """
    start = time.monotonic()
    pause = 0.005
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() - start > deadline_s:
                raise GradebookError(
                    f"gradebook {path} stayed locked for {deadline_s:.0f} s while switching it to the WAL "
                    "journal: is another program holding it open in a transaction?"
                ) from exc
            time.sleep(pause + random.uniform(0, pause))
            pause = min(pause * 2, 0.25)
            continue
        if str(mode).lower() != "wal":
            raise GradebookError(
                f"gradebook {path} cannot use the WAL journal (SQLite answered {mode!r}): "
                "SQLite on network file systems does not support it; put the gradebook on a local disk "
                "or use a postgresql:// URL"
            )
        return
