"""``attnlab gradebook --csv``: the gradebook of one lab as CSV, with the marks applied (``marks_applied``).

The layout (``export_csv`` documents it): ``submission, [name, login, email,] score, max_score,
<question>..., [awaiting_marking,] notes``. ``awaiting_marking`` (the points no person has marked yet) is there
only for a lab with written questions, so a code-only lab's CSV keeps its columns; a written question's cell is
empty while it awaits marking, never 0.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from attnlab.grading.core import written_answers as written
from attnlab.grading.outputs.gradebook import MAX_NOTES_CHARS, open_gradebook, row_notes
from attnlab.grading.outputs.late_work import BEFORE, LATE, late_note
from attnlab.marking.marks_applied import marked_rows
from attnlab.records.safe_text import clip, for_csv
from attnlab.records.score_text import format_score

AWAITING_COLUMN = "awaiting_marking"
# A lab with recorded submission times (``late_work``): ``score`` is after the penalty, these say how it was taken.
LATE_COLUMNS = ("score_before_late", "late_penalty", "late_percent", "submitted_at")


def _cell(q: dict | None) -> str:
    return "" if q is None or q["score"] is None else format_score(q["score"])


def _write_csv(f, rows: list[dict], columns: list[str], roster=None) -> None:
    writer = csv.writer(f, lineterminator="\n")
    extra = ["name", "login", "email"] if roster else []  # attnlab.roster.CSV_COLUMNS: Roster.cells(key)
    awaiting = [AWAITING_COLUMN] if any(written.has_written(r["questions"]) for r in rows) else []
    late = LATE_COLUMNS if any(LATE in r for r in rows) else ()
    writer.writerow(["submission", *extra, "score", "max_score", *map(for_csv, columns), *awaiting, *late, "notes"])
    writer.writerows([for_csv(row["key"]), *map(for_csv, roster.cells(row["key"]) if roster else []),
                      format_score(row["score"]), format_score(row["max_score"]),
                      *(_cell(row["questions"].get(n)) for n in columns),
                      *(format_score(written.points_awaiting(row)) for _ in awaiting),
                      *(_late_cells(row) if late else ()),
                      for_csv(clip(" | ".join(_notes(row)), MAX_NOTES_CHARS))] for row in rows)


def _late_cells(row: dict) -> list[str]:
    """``LATE_COLUMNS`` of a row: empty cells where no time was recorded."""
    e = row.get(LATE)
    if e is None:
        return ["", "", "", ""]
    return [format_score(row[BEFORE]), format_score(e["points"]), format_score(e["percent"]), for_csv(e["submitted_at"])]


def _notes(row: dict) -> list[str]:
    note = late_note(row.get(LATE))
    return row_notes(row) + ([note] if note else [])


def export_csv(book, path, lab: str | None = None, roster=None) -> int:
    """Write the CSV of the gradebook ``book``'s rows (of ``lab``: required when it holds several), ``-``: to
    standard output: ``submission,score,max_score,<question>...,notes``, one row per submission (with a ``roster``,
    ``name,login,email`` after the submission, ``NOT ON ROSTER`` flagged); return the number of rows. Question
    columns follow the order of the result with the most questions (the first such one by key), then any other
    question in order of appearance; a missing one is empty.
    A lab with written questions gets an ``awaiting_marking`` column (points) before ``notes``; a written
    question's cell holds its mark (``marks_applied``), empty while it awaits marking.
    ``notes``: ``row_notes`` joined with `` | ``. Text cells go through ``safe_text.for_csv`` (one line,
    a leading ``=``, ``+``, ``-``, ``@`` neutralised: a file name never runs as a spreadsheet formula);
    scores are written as numbers."""
    labs = book.labs() if lab is None else [lab]
    if len(labs) > 1:
        raise ValueError(f"the gradebook {book.target} holds several labs ({', '.join(labs)}): "
                         "pass lab=... (CLI: --lab) to export one")
    rows = marked_rows(book, labs[0]) if labs else []
    columns: list[str] = []
    most = max(rows, key=lambda r: len(r["questions"]), default=None)
    for row in ([most] if most else []) + rows:
        columns += [name for name in row["questions"] if name not in columns]
    if str(path) == "-":  # `--csv -`: standard output, as other command-line tools read it
        _write_csv(sys.stdout, rows, columns, roster)
        return len(rows)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        _write_csv(f, rows, columns, roster)
    return len(rows)


def export_gradebook(target, csv_path, lab: str | None = None, roster=None) -> int:
    """``attnlab gradebook DIR --csv FILE``: write the CSV of the gradebook at ``target`` (a directory
    meaning ``DIR/gradebook.db``, a SQLite file or a ``postgresql://`` URL), students identified by ``roster``
    (``attnlab.roster``); return the number of rows."""
    with open_gradebook(target, create=False) as book:
        return export_csv(book, csv_path, lab=lab, roster=roster)
