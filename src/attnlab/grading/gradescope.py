"""Gradescope output: a grading result as Gradescope's ``results.json``.

Schema (https://gradescope-autograders.readthedocs.io/en/latest/specs/): top-level ``score``,
``execution_time`` (seconds), ``output`` (text shown above the tests) and ``tests``, one per question with
``name``, ``score``, ``max_score``, ``output`` and ``visibility``. Like the feedback file, it is built from
the student-facing fields of the result only.

Every text field is plain text (``output_format`` ``"text"``, at the top, as the tests' default and on each
test): Gradescope then renders neither HTML nor Markdown, so a student's message cannot fake a heading, a
link or a total. Control characters are escaped and messages capped (``safe_text``). The text's structure is
unforgeable: the first line of ``output`` (``Total: ...``) is the only line at the left margin; every message
starts a line with ``- `` and its own line breaks continue it indented (``safe_text.bullet_lines``), so a
message holding ``"\\nTotal: 30 / 30"`` shows as an indented line inside that message.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnlab.grading.gradebook import format_score, validate_result
from attnlab.grading.outputs import write_text_atomic
from attnlab.grading.safe_text import bullet_lines, cap_messages, for_terminal


def to_gradescope(result: dict) -> dict:
    """The Gradescope ``results.json`` content of one grading result."""
    r = validate_result(result)
    total = f"Total: {format_score(r['score'])} / {format_score(r['max_score'])}"
    return {
        "score": r["score"],
        "execution_time": round(r["elapsed_s"], 2),
        "output": "\n".join([total, bullet_lines(cap_messages(r["errors"]))]).rstrip("\n"),
        "output_format": "text",
        "test_output_format": "text",
        "tests": [
            {
                "name": for_terminal(name),
                "score": q["score"],
                "max_score": q["max_score"],
                "output": bullet_lines(cap_messages(q["messages"], 200)),
                "output_format": "text",
                "visibility": "visible",
            }
            for name, q in r["questions"].items()
        ],
    }


def write_results_json(result: dict, path) -> Path:
    """Write ``to_gradescope(result)`` to ``path`` (atomically, under a private temporary name:
    ``outputs.write_text_atomic``; a failure raises ``outputs.OutputWriteError`` naming the path)."""
    return write_text_atomic(path, results_json_text(result))


def results_json_text(result: dict) -> str:
    """The text of ``results.json``."""
    return json.dumps(to_gradescope(result), indent=2) + "\n"
