"""What ``grader.check("name")`` does while nbgrader runs the notebook, in the student's kernel (nbgrader's isolation).

The ``grader.check`` cells are nbgrader's autograded test cells (``buildchain/transforms/nbgrader_cells.py``). While
nbgrader executes the notebook (it sets ``NBGRADER_EXECUTION`` to ``validate`` or ``autograde``), ``grader.check``
(``public_check.Grader``) raises when a public check fails (``public_check.require_checks``) and, while nbgrader
autogrades only, calls

- ``run_hidden_tests(env, lab, question)``: the question's hidden tests through the
  narrow interface (``LocalStudent`` over the notebook's globals), as plain Otter does. The bundle (hidden tests,
  reference, manifest) is ``autograder/<lab>/`` of the course repository, found from the working folder upwards,
  or ``$ATTNLAB_BUNDLE`` (``bundle.find_bundle``). The notebook never holds them, so the cell's source is the
  same in every copy and nbgrader's checksums match on an untouched notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from attnlab.grading.core.bundle import find_bundle, grading_seed, load_bundle
from attnlab.grading.core.hidden import test_seed
from attnlab.grading.core.notebook_code import SubmissionError, cells_from_notebook, described_cells, joined_source
from attnlab.grading.worker.api import LocalStudent, StudentError


def _is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


class NotebookUnclear(AssertionError):
    """The folder nbgrader runs in does not say which notebook is the student's: the hidden tests are refused (this
    question scores 0 with the message), never run against an empty notebook."""


def read_student_notebook(lab: str, folder: Path | None = None) -> tuple[bytes, str, list[dict]]:
    """The notebook's bytes (the grading seed), the student's code and its cells as the checks name them
    (``notebook_code.described_cells``): nbgrader's test cells are the course's,
    not the student's, so the source checks (forbidden calls) skip them. The notebook is ``<lab>.ipynb`` in the
    folder nbgrader executes it in (nbgrader grades that name), else the folder's only notebook."""
    folder = Path.cwd() if folder is None else folder
    notebooks = sorted(folder.glob("*.ipynb"))
    named = folder / f"{lab}.ipynb"
    if named.is_file():
        path = named
    elif len(notebooks) == 1:
        path = notebooks[0]
    else:
        found = ", ".join(p.name for p in notebooks[:5]) or "none"
        raise NotebookUnclear(f"the hidden tests cannot tell which notebook is yours: {folder.name}/ holds "
                              f"{len(notebooks)} notebooks ({found}) and none is named {lab}.ipynb. Submit "
                              f"exactly one notebook, {lab}.ipynb, and ask for a regrade.")
    try:
        data = path.read_bytes()
        nb = json.loads(data)
        nb["cells"] = [c for c in nb.get("cells", []) if not _is_test_cell(c)]
        cells = cells_from_notebook(nb)
        return data, joined_source(cells), described_cells(cells)
    except (SubmissionError, OSError, ValueError, AttributeError) as exc:
        raise NotebookUnclear(f"the hidden tests could not read {path.name}: {str(exc)[:200]}. Submit the notebook "
                              "as saved by Jupyter and ask for a regrade.") from exc


def run_hidden_tests(env: dict, lab: str, question: str) -> None:
    """All hidden tests of ``question``; raises ``AssertionError`` listing the failed ones with their messages."""
    bundle = load_bundle(find_bundle(lab))
    data, code, cells = read_student_notebook(lab)
    student, failures = LocalStudent(env, code, cells), []
    tests = [t for t in bundle.suite.tests if t.question == question]
    for test in tests:
        rng = torch.Generator().manual_seed(test_seed(grading_seed(bundle, data), test.name))
        try:
            test.func(student, bundle.reference, rng)
        except (AssertionError, StudentError) as exc:
            failures.append(f"{test.name}: {str(exc)[:500]}")
    if failures:
        raise AssertionError(f"{len(failures)} of {len(tests)} hidden tests of {question} failed:\n" + "\n".join(failures))
