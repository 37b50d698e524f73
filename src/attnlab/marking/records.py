"""The records of marking, named once: a question's row as marking sees it (``Answer``), a rubric item, a mark, a
score change, a question's ``Effective`` score (what exports, the report and feedback show), the statuses, and the
errors a write can meet. ``store`` keeps them in the gradebook's database and re-exports these names."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

WRITTEN = "written"
GRADED, MARKED, CHANGED, AWAITING = "graded", "marked", "changed", "awaiting marking"


class MarkingError(ValueError):
    """A mark, change or rubric edit that cannot be taken (an unknown item, a missing reason): one line to show."""


class MarkConflict(MarkingError):
    """Another marker saved first: ``current`` is what the database holds now (a ``Mark``, ``Change`` or
    ``RubricItem``, or None), to show beside the marker's own edit."""

    def __init__(self, message: str, current=None):
        super().__init__(message)
        self.current = current


@dataclass(frozen=True)
class RubricItem:
    id: str
    criterion: str
    points: float
    position: int


@dataclass(frozen=True)
class Mark:
    items: tuple[str, ...]
    adjustment: float
    comment: str
    marker: str
    marked_at: str
    version: int
    answer_sha: str  # the answer it marks (``answer_sha``)

    def marks(self, answer: Answer) -> bool:
        """True when this mark was made on ``answer``'s text as it is now (not on an earlier submission); a mark
        recorded before marks kept their answer's digest (``''``) counts."""
        return not self.answer_sha or self.answer_sha == answer_sha(answer.text)


@dataclass(frozen=True)
class Change:
    score: float
    reason: str
    marker: str
    changed_at: str
    version: int
    basis: str = ""  # the answer (written) or submission (code) it was changed on: ``Answer.basis``

    def counts(self, answer: Answer) -> bool:
        """True when this change was made on ``answer`` as it is now; one from before ``basis`` counts."""
        return not self.basis or self.basis == answer.basis


@dataclass(frozen=True)
class Answer:
    """One ``questions`` row: ``kind`` ``"code"`` or ``"written"``; ``score`` the grader's (ignored when written)."""

    key: str
    question: str
    kind: str
    text: str
    score: float | None
    max_score: float
    submission_sha: str = ""  # the submission's content (``submissions.sha256``)
    notes: tuple[str, ...] = ()  # the grader's messages: for a written answer, what its metadata got wrong

    @property
    def basis(self) -> str:
        """What a score change rests on: a written answer's text, or the whole submission for a code question."""
        return answer_sha(self.text) if self.kind == WRITTEN else self.submission_sha


@dataclass(frozen=True)
class Effective:
    """A question's score as exports show it: ``status`` ``graded`` (the grader's), ``marked``, ``changed`` or
    ``awaiting marking`` (``score`` None); ``rubric``: the applied items' (criterion, current points)."""

    score: float | None
    max_score: float
    status: str
    rubric: list[tuple[str, float]]
    comment: str | None
    reason: str | None
    note: str | None = None  # a mark or score change reset by a resubmission, said so
    was: float | None = None  # a changed score's: the score before the change (None: it awaited marking)
    changed_by: str | None = None  # a changed score's: the marker who changed it


def answer_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def mark_score(mark: Mark, rubric: dict[str, RubricItem], max_score: float) -> float:
    """The applied items' current points plus the adjustment, kept within 0 and ``max_score`` (as Gradescope)."""
    total = sum(rubric[i].points for i in mark.items if i in rubric) + mark.adjustment
    return min(max(total, 0.0), max_score)
