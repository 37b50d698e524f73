"""Hand-made submissions for the report's unit tests (no grading)."""

from __future__ import annotations

from attnlab.records import result_fields as f
from attnlab.report.load import Submission


def diagnosed(hint: str, *failed: str, entry: str = "") -> dict:
    """The structured fields of a question whose failed tests ``failed`` the diagnosis named as ``hint``."""
    return {f.FAILED: list(failed), f.MISTAKE: {f.ENTRY: entry, f.HINT: hint}}


def problem(category: str, message: str = "", cell: str | None = None) -> dict:
    return f.problem(category, message, cell)


def sub(key: str, questions: dict[str, tuple], **fields) -> Submission:
    """``questions``: name -> ``(score, max_score, messages)``, or ``(score, max_score, messages, structured)`` with
    the question's structured fields (``records/result_fields.py``), which the report reads its categories from."""
    qs = {n: {"score": q[0], "max_score": q[1], "messages": q[2], **(q[3] if len(q) > 3 else {})}
          for n, q in questions.items()}
    fields.setdefault("isolation", "bubblewrap")
    return Submission(key=key, path=fields.pop("path", f"/subs/{key}"), score=sum(q[0] for q in questions.values()),
                      max_score=sum(q[1] for q in questions.values()), questions=qs, **fields)
