"""Run one hidden test from an Otter test file, in the student's kernel (``otter run``, plain Otter).

Otter copies the bundle's files (``grading/core/bundle.py``) next to the submission, where ``find_bundle`` finds them;
the generated test files call ``run_hidden_test(env, name)``. The student is reached through the same
narrow interface as in attnlab's own grader (``LocalStudent`` over the notebook's globals), but here
student code shares the process with the tests: this path has Otter's isolation, not attnlab's.
"""

from __future__ import annotations

from pathlib import Path

import torch

from attnlab.grading.core.bundle import find_bundle, grading_seed, load_bundle
from attnlab.grading.core.hidden import test_seed
from attnlab.grading.core.notebook_code import SubmissionError, described_cells, joined_source, read_cells
from attnlab.grading.worker.api import LocalStudent, StudentError


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
    bundle = load_bundle(find_bundle())
    tests = {t.name: t for t in bundle.suite.tests}
    if name not in tests:
        raise KeyError(f"no hidden test named {name!r}")
    data, code, cells = _submission()
    student = LocalStudent(env, code, cells)
    rng = torch.Generator().manual_seed(test_seed(grading_seed(bundle, data), name))
    try:
        tests[name].func(student, bundle.reference, rng)
    except StudentError as exc:
        raise AssertionError(str(exc)) from None
