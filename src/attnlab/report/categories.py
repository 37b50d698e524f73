"""What went wrong with one submission, by category: the one place the report reads a result's problems, its
diagnosed mistakes and its unwritten questions.

``problems(s)`` gives ``Problem(category, text)`` for each of ``CATEGORIES``; ``diagnosed(s)`` the ``(question,
hint)`` of each diagnosed mistake; ``unwritten(s)`` the questions not written yet. Health, the Students view and
the Mistakes table all call these. Every category comes from the row's structured fields
(``records/result_fields.py``: ``problems``, a question's ``mistake`` and ``not_written``; the row's ``review``
and ``grader_error``), never from message text, which holds student text: an exception reading "timed out after"
or "likely mistake: ..." is only text. A row written before those fields existed shows none: regrade it
(``attnlab grade --regrade``).
"""

from __future__ import annotations

from dataclasses import dataclass

from attnlab.records import result_fields as fields

from .load import Submission

# category -> the heading a person reads (Health's sections, the Students view's marks), in the order shown
CATEGORIES = {
    "timeout": "Timed out (a call or the whole submission ran past its time limit)",
    "cell_timeout": "A cell ran past its time limit",
    "cell_limit": "A cell hit a resource limit (memory, size)",
    "worker_crash": "Crashed the worker",
    "unreadable": "Could not be read",
    "wrong_lab": "Another lab's notebook",
    "source_too_large": "Source too large for the grader (past its analysis limits)",
    "syntax_error": "Syntax errors (a cell that does not parse)",
    "rule_breach": "Broke the course rules (a forbidden call or construct)",
    "grader_error": "Grader errors (graded again on the next run)",
}
SHORT = {"timeout": "timed out", "cell_timeout": "cell timed out", "cell_limit": "cell limit",
         "worker_crash": "crashed", "unreadable": "unreadable", "wrong_lab": "wrong lab",
         "source_too_large": "source too large", "syntax_error": "syntax error",
         "rule_breach": "course rules", "grader_error": "grader error"}


@dataclass(frozen=True)
class Problem:
    category: str  # a key of CATEGORIES
    text: str  # one line saying why (the grader's message)


def problems(s: Submission) -> list[Problem]:
    """Each problem of ``s``, at most one per category (the first), in ``CATEGORIES`` order: the row's ``problems``
    (``cell_error`` is not listed: a cell that raised is the student's to read in the feedback), a grader error
    (its traceback's last line) and the course rules' ``review`` items."""
    found = [Problem(p[fields.CATEGORY], p[fields.MESSAGE] or p[fields.CATEGORY])
             for p in fields.clean_problems(getattr(s, "problems", None)) if p[fields.CATEGORY] in CATEGORIES]
    if s.grader_error is not None:
        lines = s.grader_error.strip().splitlines()
        found.insert(0, Problem("grader_error", lines[-1] if lines else "?"))
    if s.review:
        found.append(Problem("rule_breach", "; ".join(s.review)))
    first: dict[str, Problem] = {}
    for p in found:
        first.setdefault(p.category, p)
    return [first[c] for c in CATEGORIES if c in first]


def diagnosed(s: Submission) -> list[tuple[str, str]]:
    """``(question, hint)`` of each mistake the grader diagnosed in ``s`` (a question's ``mistake``), in question
    order."""
    found = []
    for q, result in s.questions.items():
        mistake = fields.clean_question_fields(result).get(fields.MISTAKE)
        if mistake and (q, mistake[fields.HINT]) not in found:
            found.append((q, mistake[fields.HINT]))
    return found


def unwritten(s: Submission) -> list[str]:
    """The questions of ``s`` the grader found not written yet (a question's ``not_written``)."""
    return [q for q, result in s.questions.items() if fields.clean_question_fields(result).get(fields.NOT_WRITTEN)]
