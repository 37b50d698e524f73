"""What the course's ``nbgrader/nbgrader_config.py`` (written by ``attnlab build``) adds to nbgrader's own process.

- ``tools_on_path()``: nbgrader creates ``gradebook.db`` by running the ``alembic`` command from ``PATH``; a venv's
  ``bin`` is on ``PATH`` only while the venv is activated, so ``.venv/bin/nbgrader ...`` failed with
  ``FileNotFoundError: 'alembic'``. The folder of the Python running nbgrader goes first on ``PATH``. Done in the
  config, not in a wrapper command, so that every way of running nbgrader in the course folder (the CLI, the
  formgrader) gets it.
- ``SKIP_TAG``: cells with this tag are not executed by nbgrader (``c.Execute.skip_cells_with_tag``): experiments
  and demos, which Otter and attnlab's grader skip too, so grading never re-runs training.
- ``RequireTestCells``: the first sanitizing step of ``nbgrader autograde`` (``sanitize_preprocessors()``). A
  notebook without the course's autograded test cells (a copy whose cell metadata an editor dropped, a notebook
  from before the build wrote it) would score 0 without a word; it is refused with a message saying what to do.
  It also takes ``SKIP_TAG`` off the course's graded and locked cells: a student cannot have a test cell skipped.
"""

from __future__ import annotations

import os
import sys

from nbgrader.preprocessors import NbGraderPreprocessor

from .notebook_code import OTTER_IGNORE

SKIP_TAG = OTTER_IGNORE


def tools_on_path() -> None:
    """Put the folder of this Python (a venv's ``bin``, where ``alembic`` is) first on ``PATH``."""
    here = os.path.dirname(sys.executable)
    path = os.environ.get("PATH", "")
    if here not in path.split(os.pathsep):
        os.environ["PATH"] = here + (os.pathsep + path if path else "")


class NoTestCells(ValueError):
    """The submission has none of the course's autograded test cells; the message says what to do."""


def missing_cells_message(where: str, lab: str) -> str:
    return (f"{where}: this notebook has none of the course's autograded test cells (its cells carry no nbgrader "
            f"metadata: an editor dropped it, or the notebook was made before the course's notebooks carried it). "
            f"nbgrader would score it 0, so it is not graded. Grade it with attnlab's own grader, which needs no "
            f"cell metadata: `attnlab grade {lab} <the notebook>`; or ask the student to copy their answers into "
            f"the notebook as the course handed it out (labs/{lab}/{lab}.ipynb, the `attnlab release` "
            f"repository, or nbgrader's release/{lab}/) and submit that.")


class RequireTestCells(NbGraderPreprocessor):
    """Refuse a submission without autograded test cells; take ``SKIP_TAG`` off the graded and locked cells."""

    def preprocess(self, nb, resources):
        graded = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")]
        if not graded:
            info = resources.get("nbgrader", {})
            lab = info.get("assignment", "<lab>")
            where = f"{info.get('student', '<student>')}/{lab}/{info.get('notebook', '<notebook>')}.ipynb"
            message = missing_cells_message(where, lab)
            self.log.error(message)
            raise NoTestCells(message)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            tags = cell.metadata.get("tags")
            if (meta.get("grade") or meta.get("locked") or meta.get("solution")) and tags and SKIP_TAG in tags:
                cell.metadata["tags"] = [t for t in tags if t != SKIP_TAG]
        return nb, resources


def sanitize_preprocessors() -> list:
    """nbgrader's own sanitizing steps of autograde, ``RequireTestCells`` first."""
    from nbgrader.converters.autograde import Autograde

    return [RequireTestCells, *Autograde.class_traits()["sanitize_preprocessors"].default()]
