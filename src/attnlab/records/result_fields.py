"""The structured fields of a grading result, named once: what a program reads instead of message text.

Messages are for people and hold student text (an exception's message, a file name), so nothing decides a
category by searching them: a student who raises ``ValueError("timed out after 1 s; likely mistake: x")`` must
not be listed as timed out or diagnosed. The grader records what it decided, in these fields, where it decides it:

- ``result["problems"]``: a list of ``{"category": ..., "cell": ..., "message": ...}``, one per thing that went
  wrong with the submission as a whole (``CATEGORIES``); ``cell`` is the grader's description of the cell it
  concerns (``notebook_code.describe_cell``) or None; ``message`` the text a person reads (also in ``errors``).
- ``result["questions"][q]["mistake"]``: ``{"entry": <catalogue entry names, comma-separated>, "hint": ...}``
  when the diagnosis named the mistake the answer behaves like (``diagnose.name_mistakes``), else absent.
- ``result["questions"][q]["failed"]``: the names of the question's failed hidden tests (``hidden.run_suite``).
- ``result["questions"][q]["not_written"]``: True when every failed test of the question hit its unwritten stub.
- ``result["questions"][q]["forbidden"]``: the failed tests that failed on a forbidden function (a ``rule_breach``
  problem each).

``clean_problems`` and ``clean_question_fields`` keep only well-formed values (a gradebook row, a custom
``grade_fn``'s result): an unknown category or a wrong type is dropped, never guessed from text.
"""

from __future__ import annotations

PROBLEMS = "problems"
CATEGORY, CELL, MESSAGE = "category", "cell", "message"
MISTAKE, ENTRY, HINT = "mistake", "entry", "hint"
FAILED = "failed"
FORBIDDEN = "forbidden"  # a question's failed tests that failed on a lab's forbidden function (forbidden_calls.ForbiddenUse)
NOT_WRITTEN = "not_written"
ON_REFERENCE = "graded_on_reference"  # the reference functions a question's tests ran its code with (hidden.py)

# Problem categories (``result["problems"][i]["category"]``):
TIMEOUT = "timeout"  # the submission ran past its overall time, or a request past its limit
CELL_TIMEOUT = "cell_timeout"  # a cell ran past its time while the notebook loaded (skipped)
WORKER_CRASH = "worker_crash"  # the worker died, was killed, or broke its protocol
CELL_LIMIT = "cell_limit"  # a cell killed the worker while loading (memory, os._exit): skipped on a fresh start
UNREADABLE = "unreadable"  # not a notebook (not a regular file, empty, too big, not JSON, no cells)
WRONG_LAB = "wrong_lab"  # the notebook's metadata names another lab
SOURCE_TOO_LARGE = "source_too_large"  # graded code past the grader's analysis limits (notebook_code.py)
SYNTAX_ERROR = "syntax_error"  # a graded cell does not parse (found by the grader's own parse)
CELL_ERROR = "cell_error"  # a graded cell raised while the notebook loaded
RULE_BREACH = "rule_breach"  # the course rules (rules.py) refused a construct
GRADER_ERROR = "grader_error"  # the grader itself failed (batch.py): not the student's fault, regraded next run
CATEGORIES = frozenset({TIMEOUT, CELL_TIMEOUT, WORKER_CRASH, CELL_LIMIT, UNREADABLE, WRONG_LAB, SOURCE_TOO_LARGE,
                        SYNTAX_ERROR, CELL_ERROR, RULE_BREACH, GRADER_ERROR})


def problem(category: str, message: str, cell: str | None = None) -> dict:
    """One entry of ``result["problems"]``."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown problem category {category!r}: one of {sorted(CATEGORIES)}")
    return {CATEGORY: category, CELL: cell, MESSAGE: str(message)}


def clean_problems(value) -> list[dict]:
    """The well-formed problems of ``value`` (anything), in order; the rest dropped."""
    if not isinstance(value, (list, tuple)):
        return []
    out = []
    for p in value:
        if (isinstance(p, dict) and p.get(CATEGORY) in CATEGORIES and isinstance(p.get(MESSAGE, ""), str)
                and (p.get(CELL) is None or isinstance(p.get(CELL), str))):
            out.append({CATEGORY: p[CATEGORY], CELL: p.get(CELL), MESSAGE: p.get(MESSAGE, "")})
    return out


def categories(result) -> set[str]:
    """The problem categories of a result or gradebook row."""
    problems = result.get(PROBLEMS) if isinstance(result, dict) else getattr(result, PROBLEMS, None)
    return {p[CATEGORY] for p in clean_problems(problems)}


def clean_question_fields(q: dict) -> dict:
    """The structured fields of one question's result (``mistake``, ``failed``, ``forbidden``, ``graded_on_reference``,
    ``not_written``),
    well-formed only."""
    out: dict = {}
    mistake = q.get(MISTAKE)
    if isinstance(mistake, dict) and isinstance(mistake.get(HINT), str) and isinstance(mistake.get(ENTRY, ""), str):
        out[MISTAKE] = {ENTRY: mistake.get(ENTRY, ""), HINT: mistake[HINT]}
    for key in (FAILED, FORBIDDEN, ON_REFERENCE):
        names = q.get(key)
        if isinstance(names, (list, tuple)) and all(isinstance(t, str) for t in names):
            out[key] = list(names)
    if q.get(NOT_WRITTEN) is True:
        out[NOT_WRITTEN] = True
    return out
