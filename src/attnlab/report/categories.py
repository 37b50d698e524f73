"""What went wrong with one submission, by category: the one place the report reads a result's problems, its
diagnosed mistakes and its unwritten questions.

``problems(s)`` gives ``Problem(category, text)`` for each of ``CATEGORIES``; ``diagnosed(s)`` the ``(question,
hint)`` of each diagnosed mistake; ``unwritten(s)`` the questions not written yet. Health, the Students view and
the Mistakes table all call these, so a result that carries its categories as fields changes this module only:
a submission with a structured ``problems`` list (``Submission.problems``: ``{"category", "text"}`` items) is
read as it is; one without is read from the grader's messages (``grading/worker.py``: ``did not finish within``;
``grading/remote.py``: ``timed out after``, a dead worker; ``grading/rules.py``: the lab's forbidden functions,
``; found line N: .name``; the row's ``review``, ``grader_error`` and ``isolation``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attnlab.buildchain.transforms.strip_solutions import NOT_WRITTEN
from attnlab.grading.diagnose import HINT_PREFIX

from .load import Submission

# category -> the heading a person reads (Health's sections, the Students view's marks), in the order shown
CATEGORIES = {
    "timeout": "Timed out (a call or the whole submission ran past its time limit)",
    "cell_timeout": "A cell ran past its time limit",
    "cell_limit": "A cell hit a resource limit (memory, size)",
    "worker_crash": "Crashed the worker",
    "unreadable": "Could not be read (or another lab's notebook)",
    "syntax_error": "Syntax errors (a cell that does not parse)",
    "rule_breach": "Broke the course rules (a forbidden call or construct)",
    "grader_error": "Grader errors (graded again on the next run)",
}
SHORT = {"timeout": "timed out", "cell_timeout": "cell timed out", "cell_limit": "cell limit",
         "worker_crash": "crashed", "unreadable": "unreadable", "syntax_error": "syntax error",
         "rule_breach": "course rules", "grader_error": "grader error"}
TIMED_OUT = ("timed out after", "ran past its overall time limit")  # remote.py: a call, the load, the submission
CELL_TIMED_OUT = "did not finish within"  # worker.py: a cell ran past the cell time limit
CRASHED = ("ended the Python process", "killed by signal", "killed, probably", "malformed reply",
           "malformed progress report")  # remote.py: the worker died or broke its protocol
_SYNTAX = re.compile(r": (SyntaxError|IndentationError|TabError): ")
_LIMIT = re.compile(r": (MemoryError|RecursionError)\b")
# rules.assert_not_used's message (``<why>; found line N: .name``); not a student's exception (`f` raised ...)
_FORBIDDEN = re.compile(r"^failed: \w+: (?!could not test your code)(?:(?! raised ).)*; found line \d+: \S")


@dataclass(frozen=True)
class Problem:
    category: str  # a key of CATEGORIES
    text: str  # one line saying why (the grader's message)


def problems(s: Submission) -> list[Problem]:
    """Each problem of ``s``, at most one per category (the first message that shows it), in ``CATEGORIES``
    order."""
    structured = getattr(s, "problems", None)
    if structured is not None:
        found = [Problem(str(p["category"]), str(p.get("text", ""))) for p in structured
                 if p.get("category") in CATEGORIES]
    else:
        found = _from_messages(s)
    first: dict[str, Problem] = {}
    for p in found:
        first.setdefault(p.category, p)
    return [first[c] for c in CATEGORIES if c in first]


def _from_messages(s: Submission) -> list[Problem]:
    messages = [m for q in s.questions.values() for m in q["messages"]]
    out = [Problem("timeout", t) for t in s.errors + messages if any(n in t for n in TIMED_OUT)]
    out += [Problem("cell_timeout", t) for t in s.errors if CELL_TIMED_OUT in t]
    out += [Problem("cell_limit", t) for t in s.errors if _LIMIT.search(t)]
    out += [Problem("worker_crash", t) for t in s.errors + messages if any(n in t for n in CRASHED)]
    if s.grader_error is not None:
        lines = s.grader_error.strip().splitlines()
        out.append(Problem("grader_error", lines[-1] if lines else "?"))
    elif not s.isolation and s.errors:  # ungraded before a worker started: the file itself was refused
        out.append(Problem("unreadable", s.errors[0]))
    out += [Problem("syntax_error", t) for t in s.errors if _SYNTAX.search(t)]
    if s.review:
        out.append(Problem("rule_breach", "; ".join(s.review)))
    out += [Problem("rule_breach", m) for m in messages if _FORBIDDEN.match(m)]
    return out


def diagnosed(s: Submission) -> list[tuple[str, str]]:
    """``(question, hint)`` of each mistake the grader diagnosed in ``s`` (each once), in question order."""
    found = []
    for q, result in s.questions.items():
        for m in result["messages"]:
            if m.startswith(HINT_PREFIX) and (q, m[len(HINT_PREFIX):]) not in found:
                found.append((q, m[len(HINT_PREFIX):]))
    return found


def unwritten(s: Submission) -> list[str]:
    """The questions of ``s`` of which some part says 'not written yet'."""
    return [q for q, result in s.questions.items() if any(NOT_WRITTEN in m for m in result["messages"])]
