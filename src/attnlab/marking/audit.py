"""The audit log of marking (``store``'s append-only ``audit`` table): read it, and export it as CSV.

Every mark, score change, rubric edit and marker token adds one row: who, when (UTC), lab, submission key, question,
action, before and after (JSON), reason, and its hash-chain digest (``chain``; ``check_chain`` walks it). Text cells
of the CSV go through ``safe_text.for_csv`` (a comment never runs as a spreadsheet formula)."""

from __future__ import annotations

import csv
import io
import json

from attnlab.marking import chain
from attnlab.marking.store import MarkStore
from attnlab.records.safe_text import for_csv
from attnlab.records.score_text import format_score

COLUMNS = ("id", "at", "who", "lab", "key", "question", "action", "before", "after", "reason", "digest")


def audit_log(gradebook, lab: str | None = None) -> list[dict]:
    """The audit rows (of one lab, or all), oldest first, each a dict of ``COLUMNS``."""
    MarkStore(gradebook)  # the table exists, even before the first mark
    where, params = ("WHERE lab = ?", (lab,)) if lab is not None else ("", ())
    rows = gradebook.transaction(lambda ex: ex(
        "SELECT id, at, who, lab, key, question, action, before_value, after_value, reason, digest FROM audit "
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


def check_chain(gradebook) -> chain.ChainCheck:
    """The audit log's hash chain walked from its first row (``chain.verify``)."""
    MarkStore(gradebook)
    return chain.verify(gradebook.transaction(lambda ex: ex(
        f"SELECT id, {', '.join(chain.FIELDS)}, digest FROM audit ORDER BY id").fetchall()))


def readable(value: str | None, criteria: dict[str, tuple[str, float]]) -> str:
    """An audit row's before or after value as a marker reads it: criteria and points, not item ids and JSON
    (``criteria``: item id to its criterion and current points)."""
    try:
        data = json.loads(value) if value else None
    except ValueError:
        return value or ""
    if not isinstance(data, dict):
        return "" if data is None else str(data)
    name = lambda item: criteria.get(str(item), (str(item), None))[0]  # noqa: E731 - one lookup, used thrice
    parts = []
    if "request" in data:  # a regrade request added or decided (``regrades``)
        decision = data.get("decision") or data.get("status") or f"asked {data.get('asked_at', '')}"
        score = f", score {format_score(data['score'])}" if isinstance(data.get("score"), (int, float)) else ""
        text = f" \u201c{data['text']}\u201d" if data.get("text") else ""
        return f"request {data['request']}: {decision}{score}{text}"
    if "items" in data:
        parts.append("items: " + ("; ".join(name(i) for i in data["items"]) or "none"))
        if data.get("adjustment"):
            parts.append(f"adjustment {data['adjustment']:+g}")
        if data.get("comment"):
            parts.append(f"comment \u201c{data['comment']}\u201d")
    elif "score" in data:
        parts.append(f"score {format_score(data['score'])}" if isinstance(data["score"], (int, float)) else "score: none")
    elif "item" in data:
        parts.append(f"{data.get('criterion') or name(data['item'])}: {data.get('points', 0):+g} points")
    return ", ".join(parts) or value or ""
