"""The per-student feedback file (``feedback.md``).

It is built from the student-facing fields of a grading result only: the total (with "N points awaiting
marking" while written answers wait for a person), each question's score (a written answer's "awaiting marking"),
messages, what a marker gave (the rubric items applied, the comment, a changed score's reason: ``marks_applied``),
the notebook-level errors, what a person will review (``result["review"]``) and a late penalty (``result["late"]``,
``late_work.apply_late``: when it was handed in, the deadline, the points taken) and the student's regrade requests
with their decisions (``result["regrades"]``, ``regrade_feedback``). Nothing else of the result
(paths, isolation report, grader internals) is written, so hidden test source can reach a student only if the
grader put it in a message.
Everything the submission controls (its file name, question messages, errors) is escaped (``safe_text``):
the file name as inline text, messages inside fenced blocks (question names come from the hidden tests),
so no heading, HTML or fake total can appear.
"""

from __future__ import annotations

from pathlib import Path

from attnlab.grading.core.written_answers import (
    ANSWER,
    AWAITING,
    COMMENT,
    KIND,
    REASON,
    RUBRIC,
    STATUS,
    WRITTEN,
    change_text,
    points_awaiting,
    total_text,
)
from attnlab.grading.outputs.files import write_text_atomic
from attnlab.grading.outputs.gradebook import validate_result
from attnlab.grading.outputs.late_work import LATE
from attnlab.grading.outputs.regrade_feedback import REGRADES, regrade_lines
from attnlab.records.safe_text import cap_messages, for_markdown, markdown_inline, readable_name
from attnlab.records.score_text import format_score

REVIEW_HEADING = "Your instructor will review"  # the items of result["review"], a person's decision


def _block(messages: list[str]) -> list[str]:
    """Student-derived messages as one fenced block: headings, HTML, links and tables inside stay literal."""
    return [for_markdown("\n".join(f"- {m}" for m in messages)), ""]


def feedback_markdown(result: dict) -> str:
    """Markdown feedback for one graded submission (see the module docstring for what it contains)."""
    r = validate_result(result)
    name = markdown_inline(readable_name(Path(r["submission"]).name) or "your submission")
    lines = [f"# Feedback: {name}", "", f"**Total: {total_text(r['score'], r['max_score'], points_awaiting(r))}**", ""]
    lines += late_lines(result.get(LATE))
    if r["errors"]:
        lines += ["## About your notebook", ""] + _block(cap_messages(r["errors"]))
    if r["review"]:
        lines += [f"## {REVIEW_HEADING}", ""] + _block(cap_messages(r["review"]))
    if r["questions"]:
        lines += ["| question | score |", "|---|---|"]
        lines += [f"| `{q}` | {_score(s)} |" for q, s in r["questions"].items()]
        lines.append("")
    for q, s in r["questions"].items():
        lines += [f"## `{q}`: {_score(s)}", ""] + _marks(s)
        if s["messages"]:
            lines += _block(cap_messages(s["messages"], 200))
        elif s.get(KIND) == WRITTEN:
            lines += [] if s["score"] is not None else [_awaiting_words(s), ""]
        elif s["score"] >= s["max_score"]:
            lines += ["All checks passed.", ""]
        else:
            lines += ["No details were given for the points lost here; ask your instructor.", ""]
    lines += regrade_lines(result.get(REGRADES), r["questions"])  # a student's regrade requests and decisions
    return "\n".join(lines)


def late_lines(late: dict | None) -> list[str]:
    """The "Late work" section of a submission with a recorded time (``late_work.apply_late``), or none."""
    if not isinstance(late, dict) or not late.get("reason"):
        return []
    whose = "your extended deadline" if late.get("extended") else "the deadline"
    # the grader's own text (times it parsed, a reason it wrote from numbers), not the student's: shown as it is
    lines = ["## Late work", "", f"Handed in {late['submitted_at']}; {whose} was {late['deadline']}: "
             f"{late['reason']}."]
    if late.get("percent"):
        lines.append(f"The penalty took {format_score(late['points'])} points off the total above; each question "
                     "below keeps the score it earned.")
    return lines + [""]


def _awaiting_words(s: dict) -> str:
    if not s.get(ANSWER, "").strip():
        return ("No answer was found in your notebook: its answer cell is empty or still holds the placeholder. A "
                "person will mark the question all the same.")
    return "A person will mark your answer; this file shows the mark once it is given."


def _score(s: dict) -> str:
    """``"1.5 / 2"``, or ``"awaiting marking (2 points)"`` for an answer no person has marked yet."""
    if s["score"] is None:
        return f"{AWAITING} ({format_score(s['max_score'])} points)"
    return f"{format_score(s['score'])} / {format_score(s['max_score'])}"


def _marks(s: dict) -> list[str]:
    """What a marker gave (``marks_applied``): the rubric items applied, the comment, and the reason of a changed
    score. The marker's text is escaped as the student's is."""
    lines = []
    if s.get(RUBRIC):
        lines += ["Rubric items applied:", ""]
        lines += [f"- {markdown_inline(c)} ({'+' if p > 0 else ''}{format_score(p)})" for c, p in s[RUBRIC]] + [""]
    if s.get(COMMENT):
        lines += ["Comment from your marker:", ""] + _block([s[COMMENT]])
    if s.get(STATUS) == "changed" and s.get(REASON):
        lines += [f"Your score was {markdown_inline(change_text(s))}, for this reason:", ""] + _block([s[REASON]])
    return lines


def write_feedback(result: dict, path) -> Path:
    """Write ``feedback_markdown(result)`` to ``path`` (atomically, under a private temporary name:
    ``outputs.write_text_atomic``; a failure raises ``outputs.OutputWriteError`` naming the path)."""
    return write_text_atomic(path, feedback_markdown(result))
