"""What ``grader.check("name")`` does while nbgrader runs the notebook, in the student's kernel (nbgrader's isolation).

The ``grader.check`` cells are nbgrader's autograded test cells (``buildchain/transforms/nbgrader_cells.py``). While
nbgrader executes the notebook (it sets ``NBGRADER_EXECUTION`` to ``validate`` or ``autograde``), ``grader.check``
calls ``grade_cell`` instead of only showing the result:

- ``require_checks(notebook, question, env)``: the question's public checks; raises when one fails, so that
  nbgrader's Validate and autograde see the failure (a plain ``grader.check`` only shows it);
- ``run_hidden_tests(env, lab, question)``, while nbgrader autogrades only: the question's hidden tests through the
  narrow interface (``LocalStudent`` over the notebook's globals), as plain Otter does. The bundle (hidden tests,
  reference, manifest) is ``autograder/<lab>/`` of the course repository, found from the working folder upwards,
  or ``$ATTNLAB_BUNDLE`` (``bundle.find_bundle``). The notebook never holds them, so the cell's source is the
  same in every copy and nbgrader's checksums match on an untouched notebook.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from ..public_check import NBGRADER_EXECUTION, format_result
from .api import LocalStudent, StudentError
from .bundle import find_bundle, grading_seed, load_bundle
from .hidden import test_seed
from .notebook_code import SubmissionError, cells_from_notebook, joined_source


def grade_cell(notebook, lab: str, question: str, env: dict) -> None:
    """What ``grader.check(question)`` does under nbgrader: the public checks must pass, then (autograde) the
    hidden tests. Returns None: nbgrader reads a test cell's result value as partial credit."""
    require_checks(notebook, question, env)
    if os.environ.get(NBGRADER_EXECUTION) == "autograde":
        run_hidden_tests(env, lab, question)


def require_checks(notebook, question: str, env: dict) -> None:
    """Run Otter's ``notebook.check(question)`` on ``env``; raise ``AssertionError`` naming the question if any
    public check fails."""
    result = notebook.check(question, env)
    failed = [r for r in result.test_case_results if not r.passed and not r.test_case.hidden]
    if failed:
        raise AssertionError(f"{len(failed)} check(s) of {question} do not pass yet:\n"
                             + format_result(question, result, show_source=False))
    # Printed to stdout (nbgrader's Validate counts anything on stderr as a failure), not returned.
    print(f"{question}: all {len(result.test_case_results)} checks pass")


def _is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def _submission() -> tuple[bytes, str | None]:
    """The notebook's bytes (the grading seed) and the student's code: nbgrader's test cells are the course's,
    not the student's, so the source checks (forbidden calls) skip them."""
    notebooks = sorted(Path.cwd().glob("*.ipynb"))
    if len(notebooks) != 1:
        return b"", None
    try:
        data = notebooks[0].read_bytes()
        nb = json.loads(data)
        nb["cells"] = [c for c in nb.get("cells", []) if not _is_test_cell(c)]
        return data, joined_source(cells_from_notebook(nb))
    except (SubmissionError, OSError, ValueError, AttributeError):
        return b"", None


def run_hidden_tests(env: dict, lab: str, question: str) -> None:
    """All hidden tests of ``question``; raises ``AssertionError`` listing the failed ones with their messages."""
    bundle = load_bundle(find_bundle(lab))
    data, code = _submission()
    student, failures = LocalStudent(env, code), []
    tests = [t for t in bundle.suite.tests if t.question == question]
    for test in tests:
        rng = torch.Generator().manual_seed(test_seed(grading_seed(bundle, data), test.name))
        try:
            test.func(student, bundle.reference, rng)
        except (AssertionError, StudentError) as exc:
            failures.append(f"{test.name}: {str(exc)[:500]}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(tests)} hidden tests of {question} failed:\n" + "\n".join(failures))
