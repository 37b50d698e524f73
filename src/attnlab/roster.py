"""The roster: which student each submission is, by the IDs a gradebook import matches on.

``instructor/course.yml`` holds it (``attnlab.course`` reads the file; this module owns the roster's columns and
lookups), either as a list or as the name of a CSV file beside course.yml::

    roster: roster.csv          # columns: submission, name, login, email, canvas_id, sis_id, moodle_id, section

    roster:
      - {submission: alice, name: Alice Smith, login: asmith, email: asmith@uni.example, canvas_id: "10234"}

``submission`` is what the grader sees: the submitted file's stem (``alice`` for ``alice.ipynb``) or the
folder a submission sits in (``alice/lab05.ipynb``). Only ``submission`` is required. A submission that is not on
the roster is never dropped: the exports keep its row and flag it (``NOT ON ROSTER``).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath


class RosterError(ValueError):
    """The roster cannot be used as it is; the message names the row or column and the fix."""


@dataclass(frozen=True)
class Student:
    submission: str
    name: str = ""
    login: str = ""
    email: str = ""
    canvas_id: str = ""
    sis_id: str = ""
    moodle_id: str = ""
    section: str = ""


COLUMNS = tuple(f.name for f in fields(Student))
CSV_COLUMNS = ("name", "login", "email")  # what a gradebook CSV adds after the submission, given a roster
NOT_ON_ROSTER = "NOT ON ROSTER"  # the flag of a submission the roster does not list: kept, never dropped


def _student(row: dict, where: str) -> Student:
    unknown = sorted(str(k) for k in row if k not in COLUMNS)
    if unknown:
        raise RosterError(f"{where} has the column(s) {', '.join(unknown)}, which a roster does not know; its "
                          f"columns are {', '.join(COLUMNS)}")
    values = {k: "" if v is None else str(v).strip() for k, v in row.items()}
    if not values.get("submission"):
        raise RosterError(f"{where} has no submission: give the submitted file's stem (alice for alice.ipynb) or "
                          "its folder's name")
    return Student(**values)


class Roster:
    """Students by submission; ``find`` matches a gradebook key by its stem or its first folder."""

    def __init__(self, students=()):
        self.students: dict[str, Student] = {}
        for s in students:
            if s.submission in self.students:
                raise RosterError(f"the roster lists the submission {s.submission!r} twice; one row per submission")
            self.students[s.submission] = s

    def __bool__(self) -> bool:
        return bool(self.students)

    def __len__(self) -> int:
        return len(self.students)

    def find(self, key: str) -> Student | None:
        """The student of the submission ``key`` (``alice.ipynb``, ``alice/lab05.ipynb``, ``alice``), or None."""
        path = PurePosixPath(str(key).replace("\\", "/"))
        for candidate in (str(key), path.stem, path.parts[0] if len(path.parts) > 1 else None):
            if candidate and candidate in self.students:
                return self.students[candidate]
        return None

    def cells(self, key: str) -> list[str]:
        """``CSV_COLUMNS`` of the submission ``key``: its student's, or ``NOT ON ROSTER: <stem>`` and the stem."""
        who = self.find(key)
        if who is None:
            stem = PurePosixPath(str(key).replace("\\", "/")).stem
            return [f"{NOT_ON_ROSTER}: {stem}", stem, ""]
        return [who.name, who.login, who.email]

    def missing(self, keys) -> list[str]:
        """The keys no roster row matches, in the order given."""
        return [k for k in keys if self.find(k) is None]


def read_roster(path: str | Path) -> Roster:
    """A roster CSV (UTF-8, a header row with ``submission`` and any of the other ``COLUMNS``)."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise RosterError(f"no roster file {path}; write it with the columns {', '.join(COLUMNS)}, or list the "
                          "students under roster: in course.yml") from None
    return Roster(_student(row, f"{path.name} row {i}") for i, row in enumerate(rows, start=2))


def roster_from(value, base: Path) -> Roster:
    """course.yml's ``roster:``: nothing, a CSV file name (relative to ``base``, course.yml's folder) or a list."""
    if value is None or value == "" or value == []:
        return Roster()
    if isinstance(value, str):
        return read_roster(base / value)
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return Roster(_student(item, f"roster entry {i}") for i, item in enumerate(value, start=1))
    raise RosterError(f"roster: {value!r} is neither a CSV file name nor a list of students "
                      "({submission: alice, login: asmith, ...})")
