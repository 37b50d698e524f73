"""The audit log of marking (``store``'s append-only ``audit`` table): read it, and export it as CSV.

Every mark, score change and rubric edit adds one row: who, when (UTC), lab, submission key, question, action,
before and after (JSON), reason. Text cells of the CSV go through ``safe_text.for_csv`` (a comment never runs as a
spreadsheet formula)."""

from __future__ import annotations

import csv
import io

from attnlab.grading.outputs.safe_text import for_csv
from attnlab.marking.store import MarkStore

COLUMNS = ("id", "at", "who", "lab", "key", "question", "action", "before", "after", "reason")


def audit_log(gradebook, lab: str | None = None) -> list[dict]:
    """The audit rows (of one lab, or all), oldest first, each a dict of ``COLUMNS``."""
    MarkStore(gradebook)  # the table exists, even before the first mark
    where, params = ("WHERE lab = ?", (lab,)) if lab is not None else ("", ())
    rows = gradebook.transaction(lambda ex: ex(
        "SELECT id, at, who, lab, key, question, action, before_value, after_value, reason FROM audit "
        f"{where} ORDER BY id", params).fetchall())
    return [dict(zip(COLUMNS, row)) for row in rows]


def audit_csv(gradebook, lab: str | None = None) -> str:
    """The audit log as CSV text, a header line then one line per row."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in audit_log(gradebook, lab):
        writer.writerow([row["id"], *(for_csv(row[c]) if row[c] is not None else "" for c in COLUMNS[1:])])
    return out.getvalue()
