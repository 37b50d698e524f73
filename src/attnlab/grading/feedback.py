"""The per-student feedback file (``feedback.md``).

It is built from the student-facing fields of a grading result only: the total, each question's score and
messages, the notebook-level errors and what a person will review (``result["review"]``). Nothing else of the
result (paths, isolation report, grader internals) is written, so hidden test source can reach a student only if
the grader put it in a message.
Everything the submission controls (its file name, question messages, errors) is escaped (``safe_text``):
the file name as inline text, messages inside fenced blocks (question names come from the hidden tests),
so no heading, HTML or fake total can appear.
"""

from __future__ import annotations

from pathlib import Path

from attnlab.grading.gradebook import format_score, validate_result
from attnlab.grading.outputs import write_text_atomic
from attnlab.grading.safe_text import cap_messages, for_markdown, markdown_inline, readable_name

REVIEW_HEADING = "Your instructor will review"  # the items of result["review"], a person's decision


def _block(messages: list[str]) -> list[str]:
    """Student-derived messages as one fenced block: headings, HTML, links and tables inside stay literal."""
    return [for_markdown("\n".join(f"- {m}" for m in messages)), ""]


def feedback_markdown(result: dict) -> str:
    """Markdown feedback for one graded submission (see the module docstring for what it contains)."""
    r = validate_result(result)
    name = markdown_inline(readable_name(Path(r["submission"]).name) or "your submission")
    lines = [f"# Feedback: {name}", "", f"**Total: {format_score(r['score'])} / {format_score(r['max_score'])}**", ""]
    if r["errors"]:
        lines += ["## About your notebook", ""] + _block(cap_messages(r["errors"]))
    if r["review"]:
        lines += [f"## {REVIEW_HEADING}", ""] + _block(cap_messages(r["review"]))
    if r["questions"]:
        lines += ["| question | score |", "|---|---|"]
        lines += [f"| `{q}` | {format_score(s['score'])} / {format_score(s['max_score'])} |"
                  for q, s in r["questions"].items()]
        lines.append("")
    for q, s in r["questions"].items():
        lines += [f"## `{q}`: {format_score(s['score'])} / {format_score(s['max_score'])}", ""]
        if s["messages"]:
            lines += _block(cap_messages(s["messages"], 200))
        elif s["score"] >= s["max_score"]:
            lines += ["All checks passed.", ""]
        else:
            lines += ["No details were given for the points lost here; ask your instructor.", ""]
    return "\n".join(lines)


def write_feedback(result: dict, path) -> Path:
    """Write ``feedback_markdown(result)`` to ``path`` (atomically, under a private temporary name:
    ``outputs.write_text_atomic``; a failure raises ``outputs.OutputWriteError`` naming the path)."""
    return write_text_atomic(path, feedback_markdown(result))
