"""Hand-made submissions for the report's unit tests (no grading)."""

from __future__ import annotations

from attnlab.report.load import Submission


def sub(key: str, questions: dict[str, tuple[float, float, list[str]]], **fields) -> Submission:
    qs = {n: {"score": s, "max_score": m, "messages": msgs} for n, (s, m, msgs) in questions.items()}
    fields.setdefault("isolation", "bubblewrap")
    return Submission(key=key, path=fields.pop("path", f"/subs/{key}"), score=sum(q[0] for q in questions.values()),
                      max_score=sum(q[1] for q in questions.values()), questions=qs, **fields)
