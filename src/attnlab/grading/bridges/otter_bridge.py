"""Run one hidden test from an Otter test file, in the student's kernel (``otter run``, plain Otter).

Otter copies the bundle's files (``grading/core/bundle.py``) next to the submission, where ``find_bundle`` finds them;
the generated test files call ``run_hidden_test(env, name)``, one Otter test case per hidden test, worth its points.
The question is scored as ``attnlab grade`` scores it (``in_kernel.question_result``: ``run_suite``, each question
graded on its own, the course rules' costs), and a case passes when its test counts toward that score, so that
Otter's sum of the passing cases' points is the question's score. Student code shares the process with the tests:
this path has Otter's isolation, not attnlab's sandbox.
"""

from __future__ import annotations

from pathlib import Path

from attnlab.grading.bridges.in_kernel import question_result, test_counted, test_message
from attnlab.grading.core.bundle import find_bundle, load_bundle
from attnlab.grading.source.notebook_code import SubmissionError, described_cells, joined_source, read_cells


def _submission() -> tuple[bytes, str | None, list[dict] | None]:
    """The notebook's bytes, its graded code and its cells as the checks name them (lines by cell, as the student
    sees them), or nothing when the folder does not hold exactly one readable notebook."""
    notebooks = sorted(Path.cwd().glob("*.ipynb"))
    if len(notebooks) != 1:
        return b"", None, None
    try:
        cells = read_cells(notebooks[0])
        return notebooks[0].read_bytes(), joined_source(cells), described_cells(cells)
    except (SubmissionError, OSError):
        return b"", None, None


def run_hidden_test(env: dict, name: str) -> None:
    """Pass when hidden test ``name`` counts toward its question's score; else raise ``AssertionError`` with why."""
    folder = find_bundle()
    tests = {t.name: t for t in load_bundle(folder).suite.tests}
    if name not in tests:
        raise KeyError(f"no hidden test named {name!r}")
    data, code, cells = _submission()
    entry = question_result(env, folder, data, code, cells, tests[name].question)
    if not test_counted(entry, name):
        raise AssertionError(test_message(entry, name))
