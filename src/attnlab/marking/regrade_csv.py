"""Regrade requests from a CSV that an LMS form exports (``attnlab mark OUT --import-requests FILE``, or pasted on
the requests page): a header row with the columns ``student``, ``question``, ``text`` and ``time`` (any order, any
case; other columns are left out, a ``lab`` column is read when there), then one request a row.

``student`` is the submission's file name (``alice.ipynb``), its stem or folder (``alice``), or, given the course's
roster, the login, email or an LMS id it lists; ``time`` an ISO time with its zone (``2027-02-14T23:59+01:00``, or
``Z``). Every row is checked before anything is stored: one bad row and nothing is imported, and the message names
each bad row (its line in the file) and the fix. The CSV is untrusted text (a student typed it)."""

from __future__ import annotations

import csv
import io
from datetime import timezone
from pathlib import PurePosixPath

from attnlab.grading.scale.submission_times import parse_time
from attnlab.marking.records import MarkingError
from attnlab.marking.regrades import NewRequest, add_requests, checked_request, questions_by_key
from attnlab.marking.store import MarkStore

COLUMNS = ("student", "question", "text", "time")
MAX_ROWS = 2000
MAX_BYTES = 1 << 20
MAX_SHOWN = 10  # bad rows named in one message; the rest counted
_ROSTER_IDS = ("submission", "login", "email", "canvas_id", "sis_id", "moodle_id")


def find_key(student: str, keys: list[str], roster=None) -> str:
    """The submission ``student`` names among ``keys`` (see the module docstring), or ``MarkingError``."""
    wanted = str(student or "").strip()
    if not wanted:
        raise MarkingError("the student is empty: give the submission's name (alice.ipynb or alice)")
    if wanted in keys:
        return wanted
    found = [k for k in keys if wanted in _names_of(k)]
    if not found and roster:
        ids = {s.submission for s in roster.students.values()
               if any(str(getattr(s, f) or "").casefold() == wanted.casefold() for f in _ROSTER_IDS)}
        found = [k for k in keys if (roster.find(k) is not None and roster.find(k).submission in ids)]
    if len(found) > 1:
        raise MarkingError(f"{wanted!r} names several submissions ({', '.join(found)}): give the file name")
    if not found:
        raise MarkingError(f"no submission is {wanted!r}: give the submission's file name or stem"
                           + (", or the login or email the roster lists" if roster else ""))
    return found[0]


def _names_of(key: str) -> set[str]:
    path = PurePosixPath(key.replace("\\", "/"))
    return {path.stem} | ({path.parts[0]} if len(path.parts) > 1 else set())


def asked_time(text: str) -> str:
    """An ISO time with its zone as UTC (``2027-02-14T22:59:00+00:00``), or ``MarkingError``."""
    when = parse_time(text)
    if when is None:
        raise MarkingError(f"time {str(text)!r} is not an ISO time with its zone: give it as 2027-02-14T23:59+01:00 "
                           "(or with Z for UTC)")
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def _header(reader) -> dict[str, str]:
    """Column name as the file spells it -> its lowercase name; ``MarkingError`` if a required one is missing."""
    names = {str(n or "").strip().lower(): n for n in (reader.fieldnames or [])}
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise MarkingError(f"the CSV has no column(s) {', '.join(missing)} (its header: "
                           f"{', '.join(map(str, reader.fieldnames or [])) or 'none'}); it needs "
                           f"{', '.join(COLUMNS)}, and a lab column when the gradebook holds several labs")
    return {c: names[c] for c in (*COLUMNS, "lab") if c in names}


def read_requests(store: MarkStore, text: str, *, lab: str | None = None, roster=None) -> list[NewRequest]:
    """The checked requests of the CSV ``text``; every bad row named in one ``MarkingError``. ``lab``: the lab a
    row without a ``lab`` column is for (default: the gradebook's only lab)."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise MarkingError(f"the CSV is over {MAX_BYTES:,} bytes: split it into smaller files")
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    columns = _header(reader)
    labs = store.gradebook.labs()
    asked = {name: questions_by_key(store, name) for name in labs}
    out, bad = [], []
    for line, row in enumerate(reader, start=2):
        if len(out) + len(bad) >= MAX_ROWS:
            raise MarkingError(f"the CSV has over {MAX_ROWS:,} rows: split it into smaller files")
        if None in row:
            bad.append(f"row {line}: more cells than the header has columns (quote a text that holds a comma)")
            continue
        cell = {c: str(row.get(name) or "").strip() for c, name in columns.items()}
        try:
            row_lab = cell.get("lab") or lab or (labs[0] if len(labs) == 1 else "")
            if row_lab not in asked:
                raise MarkingError(f"lab {row_lab!r} is not in the gradebook (it has: {', '.join(labs) or 'none'})"
                                   + ("; add a lab column" if not row_lab else ""))
            key = find_key(cell["student"], sorted(asked[row_lab]), roster)
            out.append(checked_request(asked[row_lab], row_lab, key, cell["question"], cell["text"],
                                       asked_time(cell["time"])))
        except MarkingError as exc:
            bad.append(f"row {line}: {exc}")
    if bad:
        more = f"; and {len(bad) - MAX_SHOWN} more bad row(s)" if len(bad) > MAX_SHOWN else ""
        raise MarkingError("nothing was imported: " + "; ".join(bad[:MAX_SHOWN]) + more)
    if not out:
        raise MarkingError(f"the CSV has a header but no request: one row per request under {', '.join(COLUMNS)}")
    return out


def import_requests(store: MarkStore, text: str, *, marker: str, source: str, lab: str | None = None,
                    roster=None) -> tuple[int, int]:
    """Check every row, then store them all in one transaction: ``(added, already there)``."""
    return add_requests(store, read_requests(store, text, lab=lab, roster=roster), marker=marker, source=source)
