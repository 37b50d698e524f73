"""When each submission was handed in, read from the route it came by, in this order:

1. Gradescope: ``submission_metadata.yml`` of a Gradescope export (in a folder above the notebook: the entry of the
   notebook's ``submission_NNN/`` folder, its ``:created_at:``), or ``submission_metadata.json`` beside it (what
   Gradescope's autograder gets: ``created_at``).
2. nbgrader: ``timestamp.txt`` beside the notebook (``submitted/<student>/<lab>/``, written by ``nbgrader submit``
   and kept by ``nbgrader collect``).
3. A CSV the instructor gives (``attnlab grade --times FILE``): columns ``submission`` (the file's stem, its name or
   its folder, as in the roster) and ``submitted_at`` (an ISO time with its zone: ``2027-02-14T23:59+01:00``).
4. The file's modification time, for a local folder (what a copy or an unzip may have changed: give a CSV then).

Everything read here is untrusted text: a time that cannot be read is skipped for the next source, never guessed.
"""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

import yaml

GRADESCOPE_EXPORT, GRADESCOPE_RUN, NBGRADER = "submission_metadata.yml", "submission_metadata.json", "timestamp.txt"
SOURCES = ("gradescope", "nbgrader", "csv", "file time")
MAX_BYTES = 5_000_000  # a metadata file larger than this is not read
_TIME = re.compile(r"\s*(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d(?::\d\d)?)(\.\d+)?\s*(Z|UTC|GMT|[+-]\d\d:?\d\d)?\s*")


class TimesError(ValueError):
    """The times CSV cannot be used; the message names the row and the fix."""


def parse_time(text: str) -> datetime | None:
    """An aware datetime from the forms the routes write (``2027-02-14 23:59:00.123456 UTC``, Gradescope's
    ``2027-02-14 23:59:00.123456789 -0800``, ISO with ``Z`` or ``+01:00``), or None (no zone: None)."""
    match = _TIME.fullmatch(str(text))
    if not match or not match.group(4):
        return None
    day, clock, fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "UTC", "GMT") else zone if ":" in zone else f"{zone[:3]}:{zone[3:]}"
    micro = (fraction or ".0")[1:7].ljust(6, "0")
    clock = clock if clock.count(":") == 2 else clock + ":00"
    try:
        return datetime.fromisoformat(f"{day}T{clock}.{micro}{zone}")
    except ValueError:
        return None


def read_times_csv(path) -> dict[str, datetime]:
    """The times CSV (see the module docstring): submission -> time."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise TimesError(f"no times file {path}; write it with the columns submission,submitted_at") from None
    out = {}
    for i, row in enumerate(rows, start=2):
        who, when = (row.get("submission") or "").strip(), parse_time(row.get("submitted_at") or "")
        if not who or when is None:
            raise TimesError(f"{path.name} row {i}: {row!r} needs a submission and a submitted_at time with its zone "
                             "(2027-02-14T23:59+01:00, or Z for UTC)")
        out[who] = when
    return out


def _small_text(path: Path) -> str | None:
    try:
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_BYTES:
            return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        pass
    return None


def _gradescope(path: Path) -> datetime | None:
    text = _small_text(path.parent / GRADESCOPE_RUN)
    if text is not None:
        try:
            found = parse_time(str(json.loads(text).get("created_at", "")))
        except (ValueError, AttributeError):
            found = None
        if found:
            return found
    for folder in list(path.parents)[:3]:
        text = _small_text(folder.parent / GRADESCOPE_EXPORT)
        if text is None:
            continue
        try:
            entry = (yaml.safe_load(text) or {}).get(folder.name) or {}
            return parse_time(str(entry.get(":created_at") or entry.get("created_at") or ""))
        except (yaml.YAMLError, AttributeError):
            return None
    return None


def _nbgrader(path: Path) -> datetime | None:
    text = _small_text(path.parent / NBGRADER)
    return parse_time(text.strip()) if text else None


def _from_csv(times: dict, key: str, path: Path) -> datetime | None:
    posix = PurePosixPath(str(key).replace("\\", "/"))
    for candidate in (key, posix.stem, posix.parts[0] if len(posix.parts) > 1 else None, path.stem, path.parent.name):
        if candidate and candidate in times:
            return times[candidate]
    return None


def submission_time(key: str, path, times: dict | None = None) -> tuple[datetime, str] | None:
    """``(time, source)`` of the submission ``key`` graded from ``path`` (see the module docstring), or None when no
    source has one (the file is gone)."""
    path = Path(path)
    for source, read in (("gradescope", lambda: _gradescope(path)), ("nbgrader", lambda: _nbgrader(path)),
                         ("csv", lambda: _from_csv(times or {}, key, path))):
        found = read()
        if found is not None:
            return found, source
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc), "file time"
    except OSError:
        return None


def assess_lateness(book, lab: str, deadline, times: dict | None = None) -> dict:
    """Record in the gradebook ``book`` the lateness (``late_policy.LabDeadline.lateness``) of every row of ``lab``,
    its time read by ``submission_time``; key -> ``Lateness``. A row whose time no source has is left unrecorded
    (no penalty) and listed by the caller."""
    from attnlab.grading.outputs.late_work import record_late_work

    found = {}
    for row in book.rows(lab):
        when = submission_time(row["key"], row["path"], times)
        if when is not None:
            found[row["key"]] = deadline.lateness(row["key"], *when)
    record_late_work(book, lab, found)
    return found
