"""Late work in the gradebook: one recorded adjustment per late submission, beside (never inside) its question scores.

The table ``late_work`` [lab, key] lives in the gradebook's database (created on first use, as ``marking/store.py``
creates its tables): ``submitted_at`` and ``deadline`` (ISO times), ``source`` (where the time was read:
``grading/scale/submission_times.py``), ``percent`` (taken off the points earned, 0-100), ``reason`` (in the
student's words: ``2 days late: -20%``), ``extended`` (1: the deadline is the student's extension) and
``recorded_at``. Every recording is also a line of the table ``late_work_log`` (append-only: what was recorded
when, so a changed policy or time leaves its trace).

``apply_late(row, entry)`` takes the penalty off a marked gradebook row (``marks_applied.marked_rows``): the row
gets ``late`` (the entry, with ``points``: what was taken) and ``score_before_late``; its ``score`` is the score
after the penalty; its questions keep their scores. The percent applies to the marked score, so a mark or a changed
score given later changes the points taken with it.
"""

from __future__ import annotations

from datetime import datetime, timezone

LATE = "late"  # a row's key: the applied adjustment
BEFORE = "score_before_late"
_COLUMNS = ("key", "submitted_at", "deadline", "source", "percent", "reason", "extended", "recorded_at")
_TABLES = (
    """CREATE TABLE IF NOT EXISTS late_work (lab TEXT NOT NULL, key TEXT NOT NULL, submitted_at TEXT NOT NULL,
        deadline TEXT NOT NULL, source TEXT NOT NULL, percent DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL,
        extended INTEGER NOT NULL, recorded_at TEXT NOT NULL, PRIMARY KEY (lab, key))""",
    """CREATE TABLE IF NOT EXISTS late_work_log (lab TEXT NOT NULL, key TEXT NOT NULL, submitted_at TEXT NOT NULL,
        deadline TEXT NOT NULL, source TEXT NOT NULL, percent DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL,
        extended INTEGER NOT NULL, recorded_at TEXT NOT NULL)""",
)
_UPSERT = """INSERT INTO late_work (lab, key, submitted_at, deadline, source, percent, reason, extended, recorded_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (lab, key) DO UPDATE SET submitted_at = excluded.submitted_at,
    deadline = excluded.deadline, source = excluded.source, percent = excluded.percent, reason = excluded.reason,
    extended = excluded.extended, recorded_at = excluded.recorded_at"""


def _ensure(book) -> None:
    def ready(execute) -> bool:
        if book.dialect == "postgresql":
            return len(execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                               "current_schema() AND table_name IN ('late_work', 'late_work_log')").fetchall()) == 2
        return len(execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
                           "('late_work', 'late_work_log')").fetchall()) == 2

    if not book.transaction(ready):
        book.transaction(lambda execute: [execute(ddl) for ddl in _TABLES], write=True)


def record_late_work(book, lab: str, entries: dict) -> int:
    """Record ``entries`` (key -> ``late_policy.Lateness``) of ``lab``, replacing earlier ones of those keys, each
    also logged; returns how many."""
    _ensure(book)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = [(lab, key, e.submitted_at.isoformat(), e.deadline.isoformat(), e.source, float(e.percent), e.reason,
             int(e.extended), now) for key, e in sorted(entries.items())]

    def write(execute):
        for row in rows:
            execute(_UPSERT, row)
            execute("INSERT INTO late_work_log (lab, key, submitted_at, deadline, source, percent, reason, extended, "
                    "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
    book.transaction(write, write=True)
    return len(rows)


def late_work(book, lab: str) -> dict[str, dict]:
    """Key -> the recorded entry of ``lab`` (``percent``, ``reason``, ``submitted_at``, ``deadline``, ``source``,
    ``extended``); empty when nothing was recorded."""
    _ensure(book)
    found = book.transaction(lambda execute: execute(
        f"SELECT {', '.join(_COLUMNS)} FROM late_work WHERE lab = ? ORDER BY key", (lab,)).fetchall())
    out = {}
    for values in found:
        entry = dict(zip(_COLUMNS, values))
        entry["percent"], entry["extended"] = float(entry["percent"]), bool(entry["extended"])
        out[entry.pop("key")] = entry
    return out


def apply_late(row: dict, entry: dict | None) -> dict:
    """``row`` with ``entry``'s penalty taken off its total (see the module docstring); unchanged without one."""
    if entry is None:
        return row
    before = float(row["score"])
    points = round(before * min(max(float(entry["percent"]), 0.0), 100.0) / 100.0, 4)
    row[BEFORE] = before
    row[LATE] = {**entry, "points": points}
    row["score"] = max(0.0, before - points)
    return row


def late_note(late: dict | None) -> str | None:
    """The notes' line of a row's applied penalty (``late: 2 days late: -20% (-2 points)``), or None."""
    if not late:
        return None
    if not late["percent"]:
        return f"late: {late['reason']}" if late["reason"] != "on time" else None
    return f"late: {late['reason']} (-{late['points']:g} points)"
