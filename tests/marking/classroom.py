"""A class's gradebook rows with written answers, for the marking tests: until the grade side writes them, a written
question is recorded as the spec says (``questions.kind = 'written'``, its text in ``questions.answer``)."""

from __future__ import annotations


def add_written_columns(gradebook) -> None:
    """The ``kind`` and ``answer`` columns of ``questions`` (a no-op where the gradebook has them)."""
    def alter(ex):
        for column in ("kind", "answer"):
            if gradebook.dialect == "postgresql":
                ex(f"ALTER TABLE questions ADD COLUMN IF NOT EXISTS {column} TEXT")
            elif column not in {r[1] for r in ex("PRAGMA table_info(questions)").fetchall()}:
                ex(f"ALTER TABLE questions ADD COLUMN {column} TEXT")
    gradebook.transaction(alter, write=True)


def record_student(gradebook, lab: str, key: str, *, code: dict, written: dict, path=None, sha: str = "0" * 64) -> None:
    """``code``: {question: (score, max_score)}; ``written``: {question: (answer text, points)}; ``path`` and
    ``sha``: the notebook graded (none by default) and its digest."""
    add_written_columns(gradebook)
    questions = {q: {"score": s, "max_score": m, "messages": []} for q, (s, m) in code.items()}
    questions |= {q: {"score": 0.0, "max_score": m, "messages": []} for q, (_, m) in written.items()}
    gradebook.record(lab, key, path or f"/subs/{key}", sha, {
        "score": float(sum(s for s, _ in code.values())), "max_score": float(sum(m for _, m in code.values())),
        "questions": questions})

    def mark_kinds(ex):
        for q in code:
            ex("UPDATE questions SET kind = 'code' WHERE lab = ? AND key = ? AND question = ?", (lab, key, q))
        for q, (text, _) in written.items():
            ex("UPDATE questions SET kind = 'written', answer = ? WHERE lab = ? AND key = ? AND question = ?",
               (text, lab, key, q))
    gradebook.transaction(mark_kinds, write=True)
