"""Gradescope output: a grading result as Gradescope's ``results.json``.

Schema (https://gradescope-autograders.readthedocs.io/en/latest/specs/): top-level ``score``,
``execution_time`` (seconds), ``output`` (text shown above the tests), ``visibility`` (the tests' default) and
``tests``, "Your notebook" then one per question, with ``name``, ``score``, ``max_score``, ``output`` and
``visibility``. Like the feedback file, it is built from
the student-facing fields of the result only.

Every text field is plain text (``output_format`` ``"text"``, at the top, as the tests' default and on each
test): Gradescope then renders neither HTML nor Markdown, so a student's message cannot fake a heading, a
link or a total. Control characters are escaped and messages capped (``safe_text``). The text's structure is
unforgeable: the top-level ``output`` is one line of the grader's (``Total: ...``); every message
starts a line with ``- `` and its own line breaks continue it indented (``safe_text.bullet_lines``), so a
message holding ``"\\nTotal: 30 / 30"`` shows as an indented line inside that message.

Visibility (``gradescope_visibility.Visibility``, set per lab in ``instructor/course.yml``, carried by the bundle's
manifest): each question's test holds the hidden tests' score and messages, expected values included, so it takes
the ``hidden_tests`` visibility (default ``after_due_date``: students cannot resubmit against the hidden tests before
the deadline). A first test, "Your notebook" (0 points), holds what the student needs before the deadline (the notebook's own
errors) and takes the ``public_checks`` visibility (default ``visible``). The top-level ``output`` holds the total
only when the hidden tests are visible (Gradescope hides the total while a test is hidden), and otherwise says when
the results show.

A written question (``written_answers``) is marked by a person in Gradescope's manual grading, not here: its test
has no points (neither 0 nor full marks) and says so; the top-level total, when shown, says "N points awaiting
marking" beside the autograder's score.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnlab.gradescope_visibility import VISIBILITIES, Visibility
from attnlab.grading.core.written_answers import KIND, WRITTEN, awaiting_note, points_awaiting, total_text
from attnlab.grading.outputs.files import write_text_atomic
from attnlab.grading.outputs.gradebook import validate_result
from attnlab.records.safe_text import bullet_lines, cap_messages, for_terminal
from attnlab.records.score_text import format_score


def _notebook_test(r: dict, vis: Visibility) -> dict:
    """The 0-point test holding the notebook's own errors: what a student needs before the deadline."""
    errors = bullet_lines(cap_messages(r["errors"])) or "Your notebook as a whole raised no error."
    return {"name": "Your notebook", "score": 0.0, "max_score": 0.0, "output": errors, "output_format": "text",
            "visibility": vis.public_checks}


def to_gradescope(result: dict, visibility: Visibility | None = None) -> dict:
    """The Gradescope ``results.json`` content of one grading result, with ``visibility`` (default: the public
    checks visible, the hidden tests after the due date)."""
    r = validate_result(result)
    vis = visibility or Visibility()
    if vis.hidden_tests == "visible":
        output = "Total: " + total_text(r["score"], r["max_score"], points_awaiting(r))
    else:
        output = (f"Your score and the hidden tests' messages (one test per question) are shown "
                  f"{VISIBILITIES[vis.hidden_tests]}; until then, the grader.check cells in your notebook are your "
                  "guide.")
    return {
        "score": r["score"],
        "execution_time": round(r["elapsed_s"], 2),
        "output": output,
        "output_format": "text",
        "test_output_format": "text",
        "visibility": vis.hidden_tests,
        "tests": [_notebook_test(r, vis)] + [
            _written_test(name, q, vis) if q.get(KIND) == WRITTEN else {
                "name": for_terminal(name),
                "score": q["score"],
                "max_score": q["max_score"],
                "output": bullet_lines(cap_messages(q["messages"], 200)),
                "output_format": "text",
                "visibility": vis.hidden_tests,
            }
            for name, q in r["questions"].items()
        ],
    }


def _written_test(name: str, q: dict, vis: Visibility) -> dict:
    """A written question as a test with no points of the autograder's (neither 0 nor full marks): a person marks
    it in Gradescope's manual grading, where its points count. Its text says so."""
    note = awaiting_note(q["max_score"]) if q["score"] is None else f"marked: {format_score(q['score'])}"
    return {"name": for_terminal(f"{name} (written)"),
            "output": f"{note}: a person marks this answer in Gradescope's manual grading "
                      f"(worth {format_score(q['max_score'])} points there, not in the autograder's score)",
            "output_format": "text", "visibility": vis.hidden_tests}


def write_results_json(result: dict, path, visibility: Visibility | None = None) -> Path:
    """Write ``to_gradescope(result, visibility)`` to ``path`` (atomically, under a private temporary name:
    ``outputs.write_text_atomic``; a failure raises ``outputs.OutputWriteError`` naming the path)."""
    return write_text_atomic(path, results_json_text(result, visibility))


def results_json_text(result: dict, visibility: Visibility | None = None) -> str:
    """The text of ``results.json``."""
    return json.dumps(to_gradescope(result, visibility), indent=2) + "\n"
