"""The gradebook's rows with the marks applied: what every reader that shows a score after marking uses.

``marking.store.effective_scores(gradebook, lab)`` (owner: ``attnlab.marking``) gives, per submission and question,
the score that counts: the grader's, a marker's (written questions: the rubric items applied, an adjustment, a
comment) or a changed one (any question, with its reason), or None while a written answer awaits marking.
``marked_rows`` lays it over ``Gradebook.rows``: each question's ``score``, ``status``, ``rubric`` (``[[criterion,
points], ...]``), ``comment`` and ``reason``; a row's ``score`` is then the sum of its marked questions and its
``awaiting_points`` the points still waiting. The CSV export (``gradebook_csv``), the report (``report/load.py``)
and the feedback files the report refreshes read these rows.
"""

from __future__ import annotations

from attnlab.grading.core import written_answers as written
from attnlab.grading.outputs.late_work import apply_late, late_work
from attnlab.grading.outputs.regrade_feedback import REGRADES
from attnlab.marking.regrades import feedback_entries
from attnlab.marking.store import effective_scores


def _apply(q: dict, e) -> bool:
    """Lay one ``Effective`` over a question's entry; True when it changes the score or adds a mark."""
    changed = e.score != q["score"] or e.status in ("marked", "changed")
    q["score"] = None if e.score is None else float(e.score)
    q[written.STATUS] = e.status
    if e.rubric:
        q[written.RUBRIC] = [[str(c), float(p)] for c, p in e.rubric]
    for key, value in ((written.COMMENT, e.comment), (written.REASON, e.reason), (written.CHANGED_BY, e.changed_by)):
        if value:
            q[key] = str(value)
    if e.status == "changed":
        q[written.CHANGED_FROM] = None if e.was is None else float(e.was)
    return changed


def apply_marks(row: dict, effective: dict) -> dict:
    """``row`` (a gradebook row) with ``effective`` (question -> ``Effective``) laid over its questions, its total
    recomputed where a mark changed anything."""
    touched = [_apply(row["questions"][name], e) for name, e in effective.items() if name in row["questions"]]
    if any(touched):
        row["score"] = float(sum(q["score"] for q in row["questions"].values() if q["score"] is not None))
    return written.set_awaiting(row)


def marked_rows(book, lab: str) -> list[dict]:
    """``book.rows(lab)`` with the marks of ``lab`` applied (see the module docstring), then any late penalty
    (``late_work.apply_late``: off the marked total, never off a question), and the student's regrade requests
    (``REGRADES``: ``marking.regrades.feedback_entries``)."""
    marks, late, asked = effective_scores(book, lab), late_work(book, lab), feedback_entries(book, lab)
    return [apply_late(apply_marks(row, marks.get(row["key"], {})), late.get(row["key"])) | {
        REGRADES: asked.get(row["key"], [])} for row in book.rows(lab)]
