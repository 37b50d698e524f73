"""The gradebook: one row per graded submission, in SQLite (default) or PostgreSQL.

Tables (primary keys in brackets):

- ``submissions`` [lab, key]: path, sha256 of the file, score, max_score, isolation, elapsed_s,
  graded_at (ISO time, UTC), errors (JSON list), grader_error (NULL unless the grader itself failed),
  review (JSON list of what a person must review), problems (JSON: the result's ``result_fields.PROBLEMS``).
- ``questions`` [lab, key, question]: position (order in the result), score (NULL: a written answer awaiting
  marking), max_score, messages (JSON list), details (JSON: the question's structured fields), kind (``code`` or
  ``written``), answer (a written question's text, ``written_answers``). Columns added later are NULL in older rows
  (a NULL kind is a code question); an older gradebook is migrated when opened, and a changed one refused, at open
  and before each write (``gradebook_schema.py``). The marks
  live beside these tables (``marking/store.py``); readers apply them through ``marks_applied``.

The key is the submission's file name (``alice.ipynb``): recording the same key again replaces its rows,
so a resubmission overwrites the earlier grade. Several processes or threads may write at once
(SQLite: WAL journal and a busy timeout; PostgreSQL: one transaction per record). Every transaction is retried
on a new connection after a connection failure (a server restart), with bounded retries (``connection.py``).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from attnlab.grading.core import written_answers as written
from attnlab.grading.outputs import gradebook_schema as schema
from attnlab.grading.outputs.connection import (
    Bounds,
    GradebookError,
    Link,
    connect_postgres,
    connect_sqlite,
    postgres_may_pass,
    shut_socket,
    sqlite_may_pass,
)
from attnlab.records import result_fields as fields
from attnlab.records.safe_text import MAX_MESSAGE_CHARS, clip, readable_name

DEFAULT_NAME = "gradebook.db"
NEEDS_REVIEW = "needs review: "
MAX_NOTES_CHARS = 4 * MAX_MESSAGE_CHARS  # the CSV's notes cell of one row
_QUESTION_COLUMNS = ", ".join(schema.QUESTION_COLUMNS)

_UPSERT_SUBMISSION = """INSERT INTO submissions
    (lab, key, path, sha256, score, max_score, isolation, elapsed_s, graded_at, errors, grader_error, review,
     problems)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (lab, key) DO UPDATE SET
    path = excluded.path, sha256 = excluded.sha256, score = excluded.score,
    max_score = excluded.max_score, isolation = excluded.isolation, elapsed_s = excluded.elapsed_s,
    graded_at = excluded.graded_at, errors = excluded.errors, grader_error = excluded.grader_error,
    review = excluded.review, problems = excluded.problems"""

_SUBMISSION_COLUMNS = schema.SUBMISSION_COLUMNS


class InvalidResult(ValueError):
    """A grading result that does not follow the documented shape (docs/GRADING.md, "Grading results")."""


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidResult(f"{where} is {value!r}: expected a finite number")
    return float(value)


def _strings(value, where: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, str) for m in value):
        raise InvalidResult(f"{where} is {value!r}: expected a list of strings")
    return list(value)


def validate_result(result) -> dict:
    """Return a clean copy of a ``grade_submission`` result, or raise ``InvalidResult`` naming the bad field.

    ``score``, ``max_score`` and ``questions`` are required; ``isolation``, ``elapsed_s``, ``errors`` and
    ``review`` default to ``"unknown"``, ``0.0``, ``[]``, ``[]``; extra keys dropped, ``result_fields`` kept clean.
    """
    if not isinstance(result, dict):
        raise InvalidResult(f"the result is a {type(result).__name__}, expected a dict: {result!r:.200}")
    for field in ("score", "max_score", "questions"):
        if field not in result:
            raise InvalidResult(f"the result has no {field!r} (keys: {sorted(result)})")
    questions = result["questions"]
    if not isinstance(questions, dict):
        raise InvalidResult(f"result['questions'] is {questions!r:.200}: expected a dict name -> scores")
    clean_questions = {}
    for name, q in questions.items():
        where = f"result['questions'][{name!r}]"
        if not isinstance(name, str) or not isinstance(q, dict):
            raise InvalidResult(f"{where} is {q!r:.200}: expected a str name mapped to a dict")
        clean_questions[name] = _clean_question(q, where)
    isolation = result.get("isolation", "unknown")
    if not isinstance(isolation, str):
        raise InvalidResult(f"result['isolation'] is {isolation!r:.200}: expected a string")
    return written.set_awaiting({
        "submission": str(result.get("submission", "")),
        "score": _number(result["score"], "result['score']"),
        "max_score": _number(result["max_score"], "result['max_score']"),
        "questions": clean_questions,
        "isolation": isolation,
        "elapsed_s": _number(result.get("elapsed_s", 0.0), "result['elapsed_s']"),
        "errors": _strings(result.get("errors", []), "result['errors']"),
        "review": _strings(result.get("review", []), "result['review']"),
        fields.PROBLEMS: fields.clean_problems(result.get(fields.PROBLEMS)),
    })


def _clean_question(q: dict, where: str) -> dict:
    """One question's entry, clean: a code question's score is a number; a written question's (``kind``
    ``"written"``) is a number once marked, else None with the status ``awaiting marking``
    (``written_answers``); its answer is text, bounded."""
    is_written = q.get(written.KIND) == written.WRITTEN
    awaiting = is_written and q.get("score") is None
    out = {
        "score": None if awaiting else _number(q.get("score"), where + "['score']"),
        "max_score": _number(q.get("max_score"), where + "['max_score']"),
        "messages": _strings(q.get("messages", []), where + "['messages']"),
        **fields.clean_question_fields(q),
    }
    if is_written:
        answer = q.get(written.ANSWER, "")
        out[written.KIND] = written.WRITTEN
        out[written.ANSWER] = clip(answer, written.MAX_ANSWER_CHARS + 200) if isinstance(answer, str) else ""
    return out | written.clean_marks(q, awaiting=awaiting)


def row_notes(result: dict) -> list[str]:
    """The messages that explain a row (a result or a gradebook row): ``needs review: <item>`` for each item of
    ``review`` (first: a table that cuts the line still shows it), then the notebook-level errors (hung, wrong
    lab, unreadable, grader error)."""
    awaiting = written.awaiting_note(written.awaiting_points(result.get("questions") or {}))
    return ([NEEDS_REVIEW + item for item in result.get("review") or []] + ([awaiting] if awaiting else [])
            + list(result.get("errors") or []))


class Gradebook:
    """A gradebook on an open DB-API connection. Use ``open_gradebook`` to get one."""

    def __init__(self, link: Link, *, dialect: str, target: str):
        self._link = link  # the connection, opened again after a connection failure (connection.py)
        self._dialect = dialect  # "sqlite" or "postgresql"
        self.target = target
        self._lock = threading.RLock()  # one connection, shared by the threads of this process
        self._retrying(self._create_schema)

    # -- plumbing --------------------------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self._dialect == "postgresql" else sql

    def _execute(self, sql: str, params=()):
        return self._link.conn.execute(self._sql(sql), params)

    def _retrying(self, transaction):
        """Run ``transaction()`` (one whole transaction), again on a new connection after a connection failure;
        raises ``GradebookUnavailable`` after the retries (``connection.Link``)."""
        with self._lock:
            try:
                return self._link.run(lambda conn: transaction())
            except Exception as exc:
                changed = schema.schema_error(exc, self.target)  # a table or column gone while in use: one line
                if changed is None:
                    raise
                raise changed from None

    @contextmanager
    def _transaction(self, *, write: bool = False):
        conn = self._link.conn
        if self._dialect == "postgresql":
            with conn.transaction():
                yield
            return
        # IMMEDIATE takes the write lock up front: no deadlock when two writers upgrade at once.
        # A read-only (deferred) transaction reads one consistent snapshot of the WAL.
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _create_schema(self) -> None:
        with self._transaction(write=True):
            schema.open_or_create(self._execute, self._dialect, self.target)

    # -- API -------------------------------------------------------------------------------------------
    def record(self, lab: str, key: str, path, sha256: str, result: dict, *, grader_error: str | None = None):
        """Store one graded submission, replacing any earlier rows of (lab, key) in one transaction.

        ``grader_error`` marks a submission the grader failed on: it is stored with its score, but
        ``is_done`` reports it as not done, so the next run grades it again.
        """
        clean = validate_result(result)
        graded_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        row = (
            lab, key, readable_name(str(path)), sha256, clean["score"], clean["max_score"], clean["isolation"],
            clean["elapsed_s"], graded_at, json.dumps(clean["errors"]), grader_error, json.dumps(clean["review"]),
            json.dumps(clean[fields.PROBLEMS]),
        )
        self._retrying(lambda: self._write(lab, key, row, clean["questions"]))

    def _write(self, lab: str, key: str, row: tuple, questions: dict) -> None:
        with self._transaction(write=True):  # all or nothing: a retried row is never half written
            schema.check(self._execute, self._dialect, self.target)  # the tables as made, or stop here
            self._execute(_UPSERT_SUBMISSION, row)  # locks the row: same-key writers take turns
            self._execute("DELETE FROM questions WHERE lab = ? AND key = ?", (lab, key))
            for position, (name, q) in enumerate(questions.items()):
                self._execute(
                    f"INSERT INTO questions ({_QUESTION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (lab, key, name, position, q["score"], q["max_score"], json.dumps(q["messages"]),
                     json.dumps(fields.clean_question_fields(q)), q.get(written.KIND, written.CODE),
                     q.get(written.ANSWER)),
                )

    def is_done(self, lab: str, key: str, sha256: str) -> bool:
        """True when this exact content of ``key`` was already graded without a grader error."""
        return self._retrying(lambda: self._read(
            "SELECT 1 FROM submissions WHERE lab = ? AND key = ? AND sha256 = ? AND grader_error IS NULL",
            (lab, key, sha256))) != []

    def labs(self) -> list[str]:
        return [r[0] for r in self._retrying(lambda: self._read("SELECT DISTINCT lab FROM submissions ORDER BY lab"))]

    def _read(self, sql: str, params=()) -> list[tuple]:
        with self._transaction():
            return self._execute(sql, params).fetchall()

    def transaction(self, op, *, write: bool = False):
        """``op(execute)``, one transaction on this database, retried as the gradebook's own; ``execute(sql, params)``
        takes ``?`` in either ``dialect``: how other tables in this database (``marking.store``) share it."""
        def run():
            with self._transaction(write=write):
                return op(self._execute)
        return self._retrying(run)

    @property
    def dialect(self) -> str:
        return self._dialect  # "sqlite" or "postgresql"

    def rows(self, lab: str | None = None) -> list[dict]:
        """All submissions (of one lab, or all), ordered by lab then key, each with its ``questions``
        (a dict in the order of the result) and ``errors`` decoded."""
        where, params = ("WHERE lab = ?", (lab,)) if lab is not None else ("", ())
        subs, qs = self._retrying(lambda: self._read_rows(where, params))
        out = {}
        for values in subs:
            row = dict(zip(_SUBMISSION_COLUMNS, values, strict=True))
            row["errors"] = json.loads(row["errors"])
            row["review"] = json.loads(row["review"]) if row["review"] else []
            row[fields.PROBLEMS] = fields.clean_problems(json.loads(row[fields.PROBLEMS] or "[]"))
            row["questions"] = {}
            out[(row["lab"], row["key"])] = row
        for q_lab, key, name, score, max_score, messages, details, kind, answer in qs:
            if (q_lab, key) in out:
                out[(q_lab, key)]["questions"][name] = written.from_row(score, max_score, messages, details, kind,
                                                                     answer)
        return [written.set_awaiting(row) for row in out.values()]

    def _read_rows(self, where: str, params) -> tuple[list, list]:
        with self._transaction():  # one snapshot: the questions match the submissions
            subs = self._execute(
                f"SELECT {', '.join(_SUBMISSION_COLUMNS)} FROM submissions {where} ORDER BY lab, key", params
            ).fetchall()
            qs = self._execute(
                f"SELECT lab, key, question, score, max_score, messages, details, kind, answer FROM questions {where}"
                " ORDER BY lab, key, position", params,
            ).fetchall()
        return subs, qs

    def close(self) -> None:
        with self._lock:
            self._link.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Gradebook({self.target!r})"


def _is_url(target) -> bool:
    return isinstance(target, str) and "://" in target


def sqlite_path(target) -> Path:
    """The SQLite file a target names: a directory means ``DIR/gradebook.db``."""
    path = Path(target)
    return path / DEFAULT_NAME if path.is_dir() else path


def open_gradebook(target, *, create: bool = True) -> Gradebook:
    """Open (creating the tables if needed) the gradebook at ``target``.

    ``target``: a SQLite file path, a directory (``DIR/gradebook.db``) or a ``postgresql://`` URL.
    With ``create=False`` a missing SQLite file is an error instead of a new empty gradebook. The connection
    has a connect and a read timeout and is opened again after a failure, with bounded retries
    (``connection.py``); ``GradebookUnavailable`` (a ``GradebookError``) when the database does not answer.
    """
    bounds = Bounds.from_environment()
    if _is_url(target):
        scheme = target.split("://", 1)[0].lower()
        if scheme not in ("postgresql", "postgres"):
            raise GradebookError(
                f"unsupported gradebook URL {redact_url(target)!r}: use a file path (SQLite) or a postgresql:// URL"
            )
        try:
            import psycopg
        except ImportError as exc:
            raise ImportError(f"a postgresql:// gradebook needs psycopg 3, which is not installed ({exc}): "
                              'pip install "attnlab[postgres]"') from exc
        link = Link(lambda: connect_postgres(target, bounds), target=redact_url(target), bounds=bounds,
                    transient=(psycopg.OperationalError, psycopg.InterfaceError), interrupt=shut_socket,
                    retry_if=postgres_may_pass)
        return Gradebook(link, dialect="postgresql", target=redact_url(target))
    path = sqlite_path(target)
    if not create and not path.is_file():
        raise FileNotFoundError(
            f"no gradebook at {path}: grade a batch into that folder first, or pass the gradebook file "
            "or postgresql:// URL you graded into"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GradebookError(f"cannot make the gradebook's folder {path.parent} ({exc.strerror}): pass a "
                             "writable place for it") from None
    link = Link(lambda: connect_sqlite(path), target=str(path), bounds=bounds, transient=(sqlite3.OperationalError,),
                retry_if=sqlite_may_pass)
    return Gradebook(link, dialect="sqlite", target=str(path))


def redact_url(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, rest = url.split("://", 1)
    if "@" in rest.split("/", 1)[0]:
        userinfo, host = rest.split("@", 1)
        rest = userinfo.split(":", 1)[0] + ":***@" + host if ":" in userinfo else rest
    return f"{scheme}://{rest}"
