"""Per-question scores as CSV, in three column layouts.

- ``scores``: ``submission, score, max_score, <question>..., notes`` (the gradebook export's layout,
  ``attnlab gradebook --csv``).
- ``canvas``: Canvas's gradebook import: ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
  graded item (``<lab>: <question>``, ``<lab>: total``), and a second row ``Points Possible`` with each item's
  points. ``Student`` and ``SIS Login ID`` hold the submission's file stem (``alice.ipynb`` -> ``alice``): name
  the files by login, or map the column on import.
- ``moodle``: Moodle's grade export layout, which its CSV import reads back: ``First name, Last name, ID number,
  Institution, Department, Email address``, then one column per grade item; ``ID number`` holds the stem (map it
  to "ID number" on import).

With ``--anonymise`` the identifiers are the aliases (``student-007``) in every layout. Text goes through
``safe_text.for_csv`` (no cell runs as a spreadsheet formula); scores are numbers.
"""

from __future__ import annotations

import csv
from pathlib import Path

from attnlab.grading.gradebook import MAX_NOTES_CHARS, format_score, row_notes
from attnlab.grading.safe_text import clip, for_csv

from .model import ClassReport

CANVAS_IDS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDS = ["First name", "Last name", "ID number", "Institution", "Department", "Email address"]


def _score(sub, question: str) -> str:
    q = sub.questions.get(question)
    return format_score(q["score"]) if q else ""


def plain_rows(r: ClassReport) -> list[list[str]]:
    names = [d.name for d in r.per_question]
    rows = [["submission", "score", "max_score", *map(for_csv, names), "notes"]]
    for s in r.submissions:
        notes = r.names.scrub(s.key, " | ".join(row_notes({"review": s.review, "errors": s.errors})))
        rows.append([for_csv(r.names(s.key)), format_score(s.score), format_score(s.max_score),
                     *(_score(s, q) for q in names), for_csv(clip(notes, MAX_NOTES_CHARS))])
    return rows


def _items(r: ClassReport) -> list[str]:
    return [for_csv(f"{r.lab}: {d.name}") for d in r.per_question] + [for_csv(f"{r.lab}: total")]


def _scores(r: ClassReport, s) -> list[str]:
    return [_score(s, d.name) for d in r.per_question] + [format_score(s.score)]


def canvas_rows(r: ClassReport) -> list[list[str]]:
    points = [format_score(d.max_score) for d in r.per_question] + [format_score(r.total.max_score)]
    rows = [CANVAS_IDS + _items(r), ["Points Possible", "", "", "", "", *points]]
    for s in r.submissions:
        who = for_csv(r.names.stem(s.key))
        rows.append([who, "", "", who, "", *_scores(r, s)])
    return rows


def moodle_rows(r: ClassReport) -> list[list[str]]:
    rows = [MOODLE_IDS + _items(r)]
    for s in r.submissions:
        who = for_csv(r.names.stem(s.key))
        rows.append([who, "", who, "", "", "", *_scores(r, s)])
    return rows


LAYOUTS = {"scores": plain_rows, "canvas": canvas_rows, "moodle": moodle_rows}


def write_all(r: ClassReport, base: Path) -> dict[str, Path]:
    """Write ``<base>-scores.csv``, ``<base>-canvas.csv``, ``<base>-moodle.csv``; layout -> path."""
    out = {}
    for layout, rows in LAYOUTS.items():
        path = base.with_name(f"{base.name}-{layout}.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            csv.writer(f, lineterminator="\n").writerows(rows(r))
        out[layout] = path
    return out
