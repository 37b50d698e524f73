"""Gradescope output: a grading result as Gradescope's ``results.json``.

Schema (https://gradescope-autograders.readthedocs.io/en/latest/specs/): top-level ``score``,
``execution_time`` (seconds), ``output`` (text shown above the tests) and ``tests``, one per question with
``name``, ``score``, ``max_score``, ``output`` and ``visibility``. Like the feedback file, it is built from
the student-facing fields of the result only.

Every text field is plain text (``output_format`` ``"text"``, at the top, as the tests' default and on each
test): Gradescope then renders neither HTML nor Markdown, so a student's message cannot fake a heading, a
link or a total. Control characters are escaped and messages capped (``safe_text``).
"""

from __future__ import annotations

import json
from pathlib import Path

from attnlab.grading.gradebook import format_score, validate_result
from attnlab.grading.safe_text import cap_messages, escape_controls


def to_gradescope(result: dict) -> dict:
    """The Gradescope ``results.json`` content of one grading result."""
    r = validate_result(result)
    output = [f"Total: {format_score(r['score'])} / {format_score(r['max_score'])}"] + cap_messages(r["errors"])
    return {
        "score": r["score"],
        "execution_time": round(r["elapsed_s"], 2),
        "output": escape_controls("\n".join(output)),
        "output_format": "text",
        "test_output_format": "text",
        "tests": [
            {
                "name": escape_controls(name),
                "score": q["score"],
                "max_score": q["max_score"],
                "output": escape_controls("\n".join(cap_messages(q["messages"], 200))),
                "output_format": "text",
                "visibility": "visible",
            }
            for name, q in r["questions"].items()
        ],
    }


def write_results_json(result: dict, path) -> Path:
    """Write ``to_gradescope(result)`` to ``path`` (atomically: a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(to_gradescope(result), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
