"""What a report is made from: the gradebook's rows of one lab, and the names a person reads.

A grading output folder (``attnlab grade LAB DIR --out OUT``) holds its gradebook as ``OUT/gradebook.db``; a
gradebook may also be a SQLite file or a ``postgresql://`` URL (``grading/outputs/gradebook.py``). Each row becomes a
``Submission``. Student names are shown only as the gradebook has them (the key: the submitted file's name), or as
``records/student_names.py`` aliases them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Submission:
    """One gradebook row, the marks applied (``marking/marks_applied.py``). ``questions``: name -> ``{"score",
    "max_score", "messages", "kind"}`` and the question's structured fields (``records/result_fields.py``), in the
    result's order; a written answer awaiting marking has the score None. ``score``: the marked points only."""

    key: str
    path: str
    score: float
    max_score: float
    questions: dict
    errors: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    isolation: str = ""
    grader_error: str | None = None
    problems: list[dict] = field(default_factory=list)  # result_fields.PROBLEMS: what went wrong, by category
    awaiting_points: float = 0.0  # written answers no person has marked yet (their score is None)
    late: dict | None = None  # the late penalty applied (grading/outputs/late_work.py): score is after it
    regrades: list[dict] = field(default_factory=list)  # the student's regrade requests (marking/regrades.py)


class ReportInputError(ValueError):
    """The gradebook cannot make a report (empty, several labs and none chosen): the message says what to pass."""


def load_submissions(target, lab: str | None = None) -> tuple[str, list[Submission]]:
    """``(lab, submissions)`` from the gradebook at ``target`` (an output folder, a ``.db`` file or a
    ``postgresql://`` URL), ordered by key. ``lab``: required when the gradebook holds several labs."""
    from attnlab.grading.outputs.gradebook import open_gradebook
    from attnlab.marking.marks_applied import marked_rows

    with open_gradebook(target, create=False) as book:
        labs = book.labs()
        if lab is None:
            if len(labs) != 1:
                held = "several labs: " + ", ".join(labs) if labs else "no submissions"
                raise ReportInputError(f"the gradebook {book.target} holds {held}"
                                       + ("; pass --lab to choose one" if labs else "; grade a batch into it first"))
            lab = labs[0]
        elif lab not in labs:
            raise ReportInputError(f"the gradebook {book.target} has no rows of {lab} (it has: {', '.join(labs) or 'none'})")
        rows = marked_rows(book, lab)  # the marks of the people who mark (attnlab mark) applied
    return lab, [_submission(r) for r in rows]


def _submission(row: dict) -> Submission:
    return Submission(key=row["key"], path=row["path"], score=float(row["score"]), max_score=float(row["max_score"]),
                      questions=row["questions"], errors=list(row["errors"]), review=list(row["review"]),
                      elapsed_s=float(row["elapsed_s"]), isolation=row["isolation"] or "",
                      grader_error=row["grader_error"], problems=list(row.get("problems") or []),
                      awaiting_points=float(row.get("awaiting_points") or 0.0), late=row.get("late"),
                      regrades=list(row.get("regrades") or []))
