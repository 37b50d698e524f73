"""What the autograded cells of the nbgrader version of a lab call, in the student's kernel (nbgrader's isolation).

- ``require_checks(grader, question, env)``: the question's public checks, shown as usual; raises when one fails,
  so that nbgrader's Validate and autograde see the failure (a bare ``grader.check`` only prints it).
- ``register_experiment_magic()``: the ``%%experiment`` cell magic of experiment and demo cells, which runs the
  cell for the student and skips it while nbgrader validates or autogrades (``NBGRADER_EXECUTION`` is set).
- ``run_hidden_tests(env, lab, question)``: the question's hidden tests through the narrow interface
  (``LocalStudent`` over the notebook's globals), as plain Otter does. nbgrader keeps the cell that calls it out
  of the student's copy (``### BEGIN HIDDEN TESTS``) and puts it back when it autogrades. The bundle (hidden tests,
  reference, manifest) is ``autograder/<lab>/`` of the course repository, found from the working folder upwards,
  or ``$ATTNLAB_BUNDLE`` (``bundle.find_bundle``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from .api import LocalStudent, StudentError
from .bundle import find_bundle, grading_seed, load_bundle
from .hidden import test_seed
from .notebook_code import SubmissionError, cells_from_notebook, joined_source


def require_checks(grader, question: str, env: dict) -> None:
    """Run ``grader.check(question)`` on ``env``; raise ``AssertionError`` naming the question if any check fails."""
    result = grader.check(question, env)
    failed = [str(r.message).strip() for r in result.test_case_results if not r.passed and not r.test_case.hidden]
    if failed:
        raise AssertionError(f"{len(failed)} check(s) of {question} do not pass yet:\n" + "\n".join(failed))
    # Printed, not returned: nbgrader reads a test cell's result value as partial credit.
    print(f"{question}: all {len(result.test_case_results)} checks pass")


def register_experiment_magic() -> None:
    """Register ``%%experiment`` in the running IPython kernel (nothing happens outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def experiment(line: str, cell: str) -> None:
        if os.environ.get("NBGRADER_EXECUTION"):
            print(f"Experiment skipped while nbgrader {os.environ['NBGRADER_EXECUTION']}s this notebook.")
            return
        result = shell.run_cell(cell)  # as IPython's own %%capture runs its cell
        if not result.success:  # its traceback is shown above; stop "Run All" here as a plain cell would
            raise RuntimeError("the experiment in this cell failed (see the error above)")

    shell.register_magic_function(experiment, magic_kind="cell", magic_name="experiment")


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
