"""The people who mark: one token per marker, made by the instructor (``attnlab mark OUT --add-marker NAME``) and
kept in the gradebook's ``markers`` table as its SHA-256 only. A marker signs in with their own URL and the audit
log names them from their token: nobody marks under a name they typed. The server's own token (printed at start)
is the instructor's (``INSTRUCTOR``)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone

from attnlab.marking.records import MarkingError
from attnlab.records.safe_text import escape_controls

INSTRUCTOR = "instructor"
MAX_MARKER_NAME = 60
MARKERS_TABLE = """CREATE TABLE IF NOT EXISTS markers (name TEXT PRIMARY KEY, token_sha TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL)"""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def checked_name(name: str) -> str:
    """A marker's name as the audit log shows it: one line, visible characters, at most ``MAX_MARKER_NAME``."""
    text = " ".join(str(name or "").split())
    if not text or len(text) > MAX_MARKER_NAME or escape_controls(text) != text:
        raise MarkingError(f"marker name {name!r}: give 1 to {MAX_MARKER_NAME} visible characters, such as 'ann'")
    if text.lower() == INSTRUCTOR:
        raise MarkingError(f"{INSTRUCTOR!r} is the server's own token: give the marker another name")
    return text


def add_marker(store, name: str) -> str:
    """On ``store`` (a ``MarkStore``), a new token for ``name`` (a new marker, or a new token that replaces a lost
    one); return it (it is stored as its digest only: it is shown once). The audit log records it."""
    name, token = checked_name(name), secrets.token_urlsafe(24)
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")

    def write(ex):
        had = ex("SELECT 1 FROM markers WHERE name = ?", (name,)).fetchall()
        if had:
            ex("UPDATE markers SET token_sha = ?, created_at = ? WHERE name = ?", (_digest(token), now, name))
        else:
            ex("INSERT INTO markers (name, token_sha, created_at) VALUES (?, ?, ?)", (name, _digest(token), now))
        store.audit(ex, INSTRUCTOR, "", None, None, "marker token replaced" if had else "marker added", None,
                    name, None)
    store.gradebook.transaction(write, write=True)
    return token


def marker_of(store, token: str) -> str | None:
    """The marker whose token this is, or None."""
    found = store.gradebook.transaction(lambda ex: ex("SELECT name FROM markers WHERE token_sha = ?",
                                                      (_digest(token),)).fetchall())
    return found[0][0] if found else None


def login(store, server_token: str):
    """``login(token)`` for ``security.Guard``: the server's token is the instructor, a marker's token its marker."""
    def check(token: str) -> str | None:
        if secrets.compare_digest(token.encode(), server_token.encode()):
            return INSTRUCTOR
        return marker_of(store, token)
    return check
