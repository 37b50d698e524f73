"""Per-question scores as CSV, in three column layouts.

- ``scores``: ``submission, score, max_score, <question>..., notes`` (the gradebook export's layout,
  ``attnlab gradebook --csv``).
- ``canvas``: Canvas's gradebook import: ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
  graded item (``<lab>: <question>``, ``<lab>: total``), and a second row ``Points Possible`` with each item's
  points.
- ``moodle``: Moodle's grade export layout, which its CSV import reads back: ``First name, Last name, ID number,
  Institution, Department, Email address``, then one column per grade item.

The identifiers come from the course's roster (``attnlab.roster``): Canvas gets the name, Canvas user ID, SIS user
ID, login and section; Moodle the name, ID number and email; the plain layout adds ``name, login, email``
columns. A submission the roster does not list keeps its row, flagged: its name column reads ``NOT ON ROSTER:
<stem>`` and its login or ID number is the stem. Without a roster, the stem (``alice.ipynb`` -> ``alice``) stands
for the login and ID number: name the files by login, or map the column on import.

With ``--anonymise`` the identifiers are the aliases (``student-007``) in every layout, and the roster is not read.
A lab with written questions (``grading/core/written_answers.py``) gets the marks (``marking/marks_applied.py``): a
written question's cell is empty while it awaits marking (never 0), the total counts the marked points, and a last
column ``<lab>: points awaiting marking`` holds the points still waiting (in Canvas's layout marked ``(read only)``
in the ``Points Possible`` row, as Canvas marks the columns its import skips; the plain layout's notes say it).
A lab whose submission times were recorded (``grading/outputs/late_work.py``) gets a last column ``<lab>: late
penalty`` (the points taken; ``(read only)`` in Canvas's ``Points Possible`` row): the total is after the penalty,
the question columns before it.
Text goes through ``safe_text.for_csv`` (no cell runs as a spreadsheet formula); scores are numbers.
"""

from __future__ import annotations

import csv
from pathlib import Path

from attnlab.grading.core.written_answers import KIND, WRITTEN
from attnlab.grading.outputs.gradebook import MAX_NOTES_CHARS, row_notes
from attnlab.grading.outputs.late_work import late_note
from attnlab.records.safe_text import clip, for_csv
from attnlab.records.score_text import format_score

from ..roster import CSV_COLUMNS, NOT_ON_ROSTER, Roster, Student
from .model import ClassReport

AWAITING_ITEM = "points awaiting marking"  # the column of a lab with written questions
LATE_ITEM = "late penalty"  # the column of a lab with recorded submission times: the points taken (total: after)
CANVAS_IDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDS = ["First name", "Last name", "ID number", "Institution", "Department", "Email address"]


def _score(sub, question: str) -> str:
    q = sub.questions.get(question)
    return format_score(q["score"]) if q and q["score"] is not None else ""  # None: awaiting marking, never 0


def _who(r: ClassReport, key: str, roster: Roster | None) -> tuple[Student, bool]:
    """The roster's student for ``key`` (the stem or alias standing in when there is no roster, or when
    anonymising), and whether the submission is missing from a roster that exists."""
    stem = r.names.stem(key)
    if not roster or r.names.anonymise:
        return Student(stem, name=stem, login=stem, moodle_id=stem), False
    found = roster.find(key)
    if found is None:
        return Student(stem, name=f"{NOT_ON_ROSTER}: {stem}", login=stem, moodle_id=stem), True
    return found, False


def plain_rows(r: ClassReport, roster: Roster | None = None) -> list[list[str]]:
    names = [d.name for d in r.per_question]
    extra = list(CSV_COLUMNS) if roster and not r.names.anonymise else []
    late = ["late_penalty"] if _late(r) else []
    rows = [["submission", *extra, "score", "max_score", *map(for_csv, names), *late, "notes"]]
    for s in r.submissions:
        said = row_notes({"review": s.review, "errors": s.errors, "questions": s.questions})
        notes = r.names.scrub(s.key, " | ".join(said + ([late_note(s.late)] if late_note(s.late) else [])))
        ids = [for_csv(cell) for cell in roster.cells(s.key)] if extra else []
        rows.append([for_csv(r.names(s.key)), *ids, format_score(s.score), format_score(s.max_score),
                     *(_score(s, q) for q in names), *([format_score(s.late["points"]) if s.late else ""] if late
                                                       else []), for_csv(clip(notes, MAX_NOTES_CHARS))])
    return rows


def _written(r: ClassReport) -> bool:
    return any(q.get(KIND) == WRITTEN for s in r.submissions for q in s.questions.values())


def _late(r: ClassReport) -> bool:
    return any(s.late is not None for s in r.submissions)


def _items(r: ClassReport) -> list[str]:
    awaiting = [f"{r.lab}: {AWAITING_ITEM}"] if _written(r) else []
    late = [f"{r.lab}: {LATE_ITEM}"] if _late(r) else []
    return [for_csv(f"{r.lab}: {d.name}") for d in r.per_question] + [for_csv(f"{r.lab}: total"), *awaiting, *late]


def _scores(r: ClassReport, s) -> list[str]:
    awaiting = [format_score(s.awaiting_points)] if _written(r) else []
    late = [format_score(s.late["points"]) if s.late else ""] if _late(r) else []
    return [_score(s, d.name) for d in r.per_question] + [format_score(s.score), *awaiting, *late]


def canvas_rows(r: ClassReport, roster: Roster | None = None) -> list[list[str]]:
    points = ([format_score(d.max_score) for d in r.per_question] + [format_score(r.total.max_score)]
              + (["(read only)"] if _written(r) else [])  # Canvas's mark of a column its import skips
              + (["(read only)"] if _late(r) else []))
    rows = [CANVAS_IDS + _items(r), ["Points Possible", "", "", "", "", *points]]
    for s in r.submissions:
        who, _ = _who(r, s.key, roster)
        ids = [who.name or who.submission, who.canvas_id, who.sis_id, who.login, who.section]
        rows.append([*map(for_csv, ids), *_scores(r, s)])
    return rows


def moodle_rows(r: ClassReport, roster: Roster | None = None) -> list[list[str]]:
    rows = [MOODLE_IDS + _items(r)]
    for s in r.submissions:
        who, _ = _who(r, s.key, roster)
        first, _, last = (who.name or who.submission).rpartition(" ") if " " in who.name else (who.name, "", "")
        ids = [first, last, who.moodle_id or who.login, "", "", who.email]
        rows.append([*map(for_csv, ids), *_scores(r, s)])
    return rows


def not_on_roster(r: ClassReport, roster: Roster | None) -> list[str]:
    """The shown names of the submissions a roster that exists does not list (none without one)."""
    return [r.names(s.key) for s in r.submissions if _who(r, s.key, roster)[1]]


LAYOUTS = {"scores": plain_rows, "canvas": canvas_rows, "moodle": moodle_rows}


def write_all(r: ClassReport, base: Path, roster: Roster | None = None) -> dict[str, Path]:
    """Write ``<base>-scores.csv``, ``<base>-canvas.csv``, ``<base>-moodle.csv`` (students identified by
    ``roster``); layout -> path."""
    out = {}
    for layout, rows in LAYOUTS.items():
        path = base.with_name(f"{base.name}-{layout}.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows(rows(r, roster))
        out[layout] = path
    return out
