"""The gradebook's tables, created once and checked, never assumed (``gradebook.py`` owns the rows).

- **At open** (``open_or_create``): a database with neither table is a new gradebook, and both are created; one
  written before a column existed gets it (``_migrate``: ``review``, ``problems``, ``details``, ``kind``, ``answer``,
  and ``questions.score`` may be NULL). A database with one table and not the other, or a table without one of its
  columns (dropped, renamed), is refused with ``GradebookSchemaError``: it is never created again over rows that
  other tasks wrote.
- **Before each write** (``check``, in the write's transaction): the same tables and columns, so a table dropped or
  a column renamed while a batch runs stops it at the next row, with one line, instead of a row written elsewhere.
- Any read or write that still meets a missing table or column (between the check and the statement) is turned into
  the same error (``schema_error``).
"""

from __future__ import annotations

import sqlite3

from attnlab.grading.outputs.connection import GradebookError

# Any constant: serialises concurrent schema creation on one PostgreSQL database.
PG_SCHEMA_LOCK = 0x61747467  # "attg"

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS submissions (
        lab TEXT NOT NULL, key TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,
        score DOUBLE PRECISION NOT NULL, max_score DOUBLE PRECISION NOT NULL,
        isolation TEXT NOT NULL, elapsed_s DOUBLE PRECISION NOT NULL, graded_at TEXT NOT NULL,
        errors TEXT NOT NULL, grader_error TEXT, review TEXT, problems TEXT,
        PRIMARY KEY (lab, key))""",
    """CREATE TABLE IF NOT EXISTS questions (
        lab TEXT NOT NULL, key TEXT NOT NULL, question TEXT NOT NULL, position INTEGER NOT NULL,
        score DOUBLE PRECISION, max_score DOUBLE PRECISION NOT NULL, messages TEXT NOT NULL, details TEXT,
        kind TEXT, answer TEXT, PRIMARY KEY (lab, key, question))""",
)
SUBMISSION_COLUMNS = ("lab", "key", "path", "sha256", "score", "max_score", "isolation", "elapsed_s", "graded_at",
                      "errors", "grader_error", "review", "problems")
QUESTION_COLUMNS = ("lab", "key", "question", "position", "score", "max_score", "messages", "details", "kind",
                    "answer")
TABLES = {"submissions": SUBMISSION_COLUMNS, "questions": QUESTION_COLUMNS}
_ADDED_LATER = (("submissions", "review"), ("submissions", "problems"), ("questions", "details"),
                ("questions", "kind"), ("questions", "answer"))
_FIX = ("restore it from a backup (or undo the change), or grade into a new gradebook; nothing more was recorded "
        "here")


class GradebookSchemaError(GradebookError):
    """The gradebook's tables are not the ones it was made with (a table missing, a column dropped or renamed)."""


def columns(execute, dialect: str) -> dict[str, set[str]]:
    """Table -> its column names, for the gradebook's two tables that exist."""
    if dialect == "postgresql":
        found: dict[str, set[str]] = {}
        for table, column in execute("SELECT table_name, column_name FROM information_schema.columns WHERE "
                                     "table_schema = current_schema() AND table_name IN ('submissions', "
                                     "'questions')").fetchall():
            found.setdefault(table, set()).add(column)
        return found
    return {t: cols for t in TABLES if (cols := {r[1] for r in execute(f"PRAGMA table_info({t})").fetchall()})}


def _problem(found: dict[str, set[str]], target: str, *, optional=()) -> str | None:
    """What is wrong with ``found`` (``columns``), or None; ``optional``: ``(table, column)`` allowed missing."""
    for table, wanted in TABLES.items():
        if table not in found:
            other = next(iter(found))
            return (f"the gradebook {target} has a {other} table but no {table} table (dropped while in use?); "
                    + _FIX)
        missing = [c for c in wanted if c not in found[table] and (table, c) not in optional]
        if missing:
            return (f"the gradebook {target}'s {table} table has no column {', '.join(missing)} (dropped or renamed "
                    f"while in use?); " + _FIX)
    return None


def check(execute, dialect: str, target: str) -> None:
    """Before a write: raise ``GradebookSchemaError`` unless both tables are there with all their columns."""
    found = columns(execute, dialect)
    why = _problem(found, target) if found else (f"the gradebook {target} has no submissions or questions table any "
                                                 "more (dropped while in use?); " + _FIX)
    if why:
        raise GradebookSchemaError(why)


def open_or_create(execute, dialect: str, target: str) -> None:
    """At open, in one write transaction: create the tables of a new gradebook, migrate an older one, refuse a
    changed one (``GradebookSchemaError``)."""
    if dialect == "postgresql":
        # Two concurrent CREATE TABLE IF NOT EXISTS can both miss the table and then collide on
        # the catalog's unique index; an advisory lock makes them take turns.
        execute("SELECT pg_advisory_xact_lock(?)", (PG_SCHEMA_LOCK,))
    found = columns(execute, dialect)
    if not found:
        for ddl in SCHEMA:
            execute(ddl)
        return
    why = _problem(found, target, optional=_ADDED_LATER)
    if why:
        raise GradebookSchemaError(why)
    _migrate(execute, dialect, found)


def _migrate(execute, dialect: str, found: dict[str, set[str]]) -> None:
    """A gradebook written before ``review``, ``problems``, ``details``, ``kind`` or ``answer`` existed gets them
    (NULL in its rows: a code question), and its ``questions.score`` may then be NULL (awaiting marking)."""
    for table, column in _ADDED_LATER:
        if column not in found[table]:
            execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
    if dialect == "postgresql":
        if execute("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() AND "
                   "table_name = 'questions' AND column_name = 'score' AND is_nullable = 'NO'").fetchall():
            execute("ALTER TABLE questions ALTER COLUMN score DROP NOT NULL")
    elif any(r[1] == "score" and r[3] for r in execute("PRAGMA table_info(questions)").fetchall()):
        # SQLite cannot drop a NOT NULL: copy the rows into the new table, in this transaction
        names = ", ".join(QUESTION_COLUMNS)
        execute("ALTER TABLE questions RENAME TO questions_before_written")
        execute(SCHEMA[1])
        execute(f"INSERT INTO questions ({names}) SELECT {names} FROM questions_before_written")
        execute("DROP TABLE questions_before_written")


def schema_error(exc: BaseException, target: str) -> GradebookSchemaError | None:
    """The database's own error for a missing table or column, as a ``GradebookSchemaError``; None for others."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, sqlite3.OperationalError):
        hit = any(w in str(exc) for w in ("no such table", "no such column", "has no column named"))
    else:
        hit = type(exc).__name__ in ("UndefinedTable", "UndefinedColumn")
    return GradebookSchemaError(f"the gradebook {target} changed while in use ({text}); " + _FIX) if hit else None
