"""What a report is made from: the gradebook's rows of one lab, and the names a person reads.

A grading output folder (``attnlab grade LAB DIR --out OUT``) holds its gradebook as ``OUT/gradebook.db``; a
gradebook may also be a SQLite file or a ``postgresql://`` URL (``grading/outputs/gradebook.py``). Each row becomes a
``Submission``. Student names are shown only as the gradebook has them (the key: the submitted file's name);
``Names(anonymise=True)`` replaces each by ``student-NNN``, numbered in an order that does not follow the names
(their SHA-256), and ``Names.scrub`` takes them out of any text a submission produced.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Submission:
    """One gradebook row, the marks applied (``grading/outputs/marks_applied.py``). ``questions``: name -> ``{"score",
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
    from attnlab.grading.outputs.marks_applied import marked_rows

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


class Names:
    """The name shown for each submission key, and the scrubbing of names out of student-produced text."""

    MIN_SCRUB = 3  # a stem shorter than this ("a.ipynb") is not replaced inside other words' text

    def __init__(self, submissions: list[Submission], *, anonymise: bool = False, roster_names=None):
        self.anonymise = anonymise
        # key -> the roster's name for the student (never when anonymising: an alias names nobody)
        self.roster_names = {} if anonymise else {k: v for k, v in dict(roster_names or {}).items() if v}
        order = sorted(submissions, key=lambda s: hashlib.sha256(s.key.encode("utf-8", "replace")).hexdigest())
        width = max(3, len(str(len(order))))
        self._alias = {s.key: f"student-{i:0{width}d}" for i, s in enumerate(order, start=1)}
        self._paths = {s.key: s.path for s in submissions}

    def __call__(self, key: str) -> str:
        """The name a person reads: the key as in the gradebook, or its alias."""
        return self._alias[key] if self.anonymise else key

    def shown(self, key: str) -> str:
        """The student as every section of the report names them: the roster's name and the submission
        (``Alice Smith (alice.ipynb)``) where a roster names them, else ``self(key)``."""
        name = self.roster_names.get(key)
        return f"{name} ({self(key)})" if name else self(key)

    def alias(self, key: str) -> str:
        return self._alias[key]

    def stem(self, key: str) -> str:
        """The identifier for an LMS import: the key's stem (``alice.ipynb`` -> ``alice``), or the alias."""
        return self._alias[key] if self.anonymise else Path(key).stem

    def scrub(self, key: str, text: str, *, always: bool = False) -> str:
        """``text`` with the submission's path, file name and stem replaced by its alias (when anonymising, or
        ``always``: the anonymised example messages)."""
        if not (self.anonymise or always):
            return text
        alias = self._alias[key]
        for name in (self._paths.get(key) or "", key, Path(key).stem):
            if len(name) >= self.MIN_SCRUB:
                text = text.replace(name, alias)
        return text
