"""What ``grader.check("name")`` does while nbgrader runs the notebook, in the student's kernel (nbgrader's isolation).

The ``grader.check`` cells are nbgrader's autograded test cells (``buildchain/transforms/nbgrader_cells.py``). While
nbgrader executes the notebook (it sets ``NBGRADER_EXECUTION`` to ``validate`` or ``autograde``), ``grader.check``
(``public_check.Grader``) raises, while nbgrader validates, when a public check fails
(``public_check.require_checks``); while nbgrader autogrades, it calls, through the score ``start_lab`` handed it
(``labkit.py``, ``graded_by_nbgrader``),

- ``grade_question(env, lab, question)``: the question's score as ``attnlab grade`` gives it (``in_kernel``: the
  same ``run_suite``, each question graded on its own, the course rules' costs), returned as the cell's value:
  nbgrader reads a test cell whose output is a number as that many points (``nbgrader.utils.determine_grade``). The
  public checks are not run then: a failed check never zeroes the cell by itself, the hidden tests decide.

The bundle (hidden tests, reference, manifest) is ``autograder/<lab>/`` of the course repository, found from the
working folder upwards, or ``$ATTNLAB_BUNDLE`` (``bundle.find_bundle``). The notebook never holds them, so the cell's
source is the same in every copy and nbgrader's checksums match on an untouched notebook.
"""

from __future__ import annotations

import json
from pathlib import Path

from attnlab.grading.bridges.in_kernel import question_result
from attnlab.grading.core.bundle import find_bundle
from attnlab.grading.source.notebook_code import SubmissionError, cells_from_notebook, described_cells, joined_source


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


def _original(folder: Path, lab: str) -> Path | None:
    """The notebook as the student submitted it, which nbgrader's autograde rewrote (outputs cleared, locked cells
    restored) into ``autograded/<student>/<lab>/`` before running it there: ``submitted/<student>/<lab>/<name>`` of
    the same course folder (nbgrader's default layout), when it is there."""
    if folder.parent.parent.name != "autograded":
        return None
    submitted = folder.parents[2] / "submitted" / folder.parent.name / folder.name
    if (submitted / f"{lab}.ipynb").is_file():
        return submitted / f"{lab}.ipynb"
    found = sorted(submitted.glob("*.ipynb"))
    return found[0] if len(found) == 1 else None


def grade_question(env: dict, lab: str, question: str) -> float:
    """``question``'s score as ``attnlab grade`` gives it (``in_kernel.question_result``), at the grading seed of the
    notebook as submitted; its hidden tests' messages are printed (to stdout: nbgrader scores a test cell with
    anything on stderr 0)."""
    folder = find_bundle(lab)
    data, code, cells = read_student_notebook(lab)
    original = _original(Path.cwd(), lab)
    if original is not None:
        data = original.read_bytes()
    entry = question_result(env, folder, data, code, cells, question)
    print(f"{question}: {entry['score']:g} of {entry['max_score']:g} points")
    for message in entry["messages"]:
        print("  " + message[:500].replace("\n", "\n    "))
    return round(float(entry["score"]), 6)
