"""The audit log's hash chain: each row holds the SHA-256 of the previous row's digest and its own fields, so that a
row changed, removed or inserted by hand (with the append-only triggers dropped) breaks the chain at that row.

``append`` writes one row at the end of the chain (in the caller's transaction, the appends serialised);
``verify`` walks the rows in id order. Rows written before the chain existed (no digest) may only come first:
they are counted, not vouched for. A chain cannot tell rows cut from its end, nor a whole chain recomputed by
someone who can write to the database: the triggers refuse that through SQL, the chain shows what bypassed them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

FIELDS = ("at", "who", "lab", "key", "question", "action", "before_value", "after_value", "reason")
_PG_AUDIT_LOCK = 0x61747461  # "atta": one audit append at a time on a PostgreSQL database


def row_digest(previous: str, row_id: int, values) -> str:
    """The digest of a row: its id and ``FIELDS`` values after the previous row's digest ('' for the first)."""
    body = json.dumps([previous, int(row_id), *values], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def append(ex, postgres: bool, values) -> None:
    """Add the row of ``values`` (``FIELDS``) after the last one, with its digest."""
    if postgres:
        ex("SELECT pg_advisory_xact_lock(?)", (_PG_AUDIT_LOCK,))
    last = ex("SELECT id, digest FROM audit ORDER BY id DESC LIMIT 1").fetchall()
    row_id = last[0][0] + 1 if last else 1
    digest = row_digest(last[0][1] or "" if last else "", row_id, values)
    ex(f"INSERT INTO audit (id, {', '.join(FIELDS)}, digest) VALUES ({', '.join('?' * (len(FIELDS) + 2))})",
       (row_id, *values, digest))


@dataclass(frozen=True)
class ChainCheck:
    """``rows``: how many; ``before_chain``: rows from before the chain; ``broken_at``: the first row id that does
    not follow (None: the chain holds); ``problem``: what is wrong there."""

    rows: int
    before_chain: int
    broken_at: int | None
    problem: str

    @property
    def holds(self) -> bool:
        return self.broken_at is None

    def text(self) -> str:
        if not self.holds:
            return (f"the audit log was altered outside attnlab: row {self.broken_at} {self.problem}; the rows from "
                    "there on cannot be trusted (compare with a backup of the database)")
        older = f" ({self.before_chain} older rows from before the chain)" if self.before_chain else ""
        return f"{self.rows} rows, the hash chain holds{older}"


def verify(rows) -> ChainCheck:
    """Check ``rows`` (``(id, *FIELDS, digest)`` tuples in id order)."""
    rows = list(rows)
    previous, previous_id, legacy = "", None, 0
    for row_id, *values, digest in rows:
        if digest is None and previous == "":  # from before the chain: only before its first row
            legacy, previous_id = legacy + 1, row_id
            continue
        if previous_id is not None and row_id != previous_id + 1:
            return ChainCheck(len(rows), legacy, row_id, f"follows row {previous_id}: the rows between were removed")
        if digest != row_digest(previous, row_id, values):
            problem = ("has no digest" if digest is None else
                       "does not match its digest (it, or a row before it, was changed or removed)")
            return ChainCheck(len(rows), legacy, row_id, problem)
        previous, previous_id = digest, row_id
    return ChainCheck(len(rows), legacy, None, "")
