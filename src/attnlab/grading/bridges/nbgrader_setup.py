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
  It also refuses a notebook whose lab's autograder bundle cannot be found (``missing_bundle_message``).
- ``require_bundles(config_file)``: ``nbgrader autograde`` stops at the start, before anyone is scored, with a
  message and exit status 1, when a lab it is asked to grade has no autograder bundle (the hidden tests) that the
  student's kernel would find (``bundle.find_bundle`` from the course folder: ``autograder/<lab>/`` in it or in a
  folder above it, or ``$ATTNLAB_BUNDLE``). Without it every ``grader.check`` cell fails and every student scores
  0 with exit status 0: what happened to a course folder copied out of the repository (a JupyterHub course
  directory). The fix it names: copy the repository's ``autograder/`` folder into the course folder.
- ``set_due_dates(config_file, due)``: the labs' due dates (course.yml's ``due:``) as nbgrader's assignment
  ``duedate`` in the course's ``gradebook.db``, set when ``generate_assignment`` or ``autograde`` runs on a lab, so
  that nbgrader's own lateness (``total_seconds_late``, the formgrader) and students' ``nbgrader list`` know them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

from attnlab.grading.core.bundle import BUNDLE_ENV, find_bundle, holds_bundle, manifest_lab
from attnlab.grading.source.notebook_code import OTTER_IGNORE

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


class NoBundle(ValueError):
    """A lab's autograder bundle (its hidden tests) cannot be found from the course folder."""


def bundle_problem(lab: str, course: Path) -> str | None:
    """None when the kernel of a notebook autograded in ``course`` finds ``lab``'s bundle; else why not."""
    try:
        folder = find_bundle(lab, start=course)
    except FileNotFoundError:
        return f"no autograder/{lab}/ in {course} or a folder above it"
    if not holds_bundle(folder) or manifest_lab(folder) != lab:
        return f"${BUNDLE_ENV} is {folder}, which is not {lab}'s autograder bundle"
    return None


def missing_bundle_message(labs: dict[str, str], course: Path,
                           lead: str = "nbgrader_config.py: autograde stopped before grading anyone") -> str:
    """What to do when the bundles of ``labs`` (lab -> why) are missing."""
    listed = "; ".join(f"{lab}: {why}" for lab, why in labs.items())
    return (f"{lead}: the hidden tests (attnlab's autograder "
            f"bundle) cannot be found ({listed}), and without them every student would score 0. Copy the course "
            f"repository's autograder/ folder (or just autograder/<lab>/, written by `attnlab build`) into {course}, "
            f"or set {BUNDLE_ENV} to the autograder/<lab>/ folder, then run autograde again.")


def _labs_named(args: list[str], course: Path) -> list[str]:
    """The labs an ``nbgrader autograde`` command line grades: those it names (``lab05_self_attention``,
    ``--assignment=...``), else every lab of ``source/`` that has a submission."""
    labs = [a for a in args if not a.startswith("-") and (course / "source" / a).is_dir()]
    labs += [a.split("=", 1)[1] for a in args if a.startswith(("--assignment=", "--CourseDirectory.assignment_id="))]
    if labs:
        return list(dict.fromkeys(labs))
    source = course / "source"
    return sorted({p.name for p in (course / "submitted").glob("*/*") if p.is_dir() and (source / p.name).is_dir()})


def require_bundles(config_file: str | Path, argv: list[str] | None = None) -> None:
    """Stop ``nbgrader autograde`` (``argv``, default ``sys.argv``) at the start, with a message and exit status 1,
    when a lab it grades has no bundle found from the course folder (``config_file``'s folder)."""
    argv = sys.argv if argv is None else argv
    if len(argv) < 2 or argv[1] != "autograde":
        return
    course = Path(config_file).resolve().parent
    missing = {lab: why for lab in _labs_named(argv[2:], course) if (why := bundle_problem(lab, course))}
    if missing:
        print(missing_bundle_message(missing, course), file=sys.stderr)
        raise SystemExit(1)


def set_due_dates(config_file: str | Path, due: dict[str, str], argv: list[str] | None = None) -> None:
    """Write ``due`` (lab -> course.yml's ``due:`` text) as the ``duedate`` of the labs that ``nbgrader
    generate_assignment`` or ``autograde`` (``argv``, default ``sys.argv``) works on, in the course folder's
    gradebook.db (UTC, as nbgrader keeps it)."""
    from datetime import date, datetime, time, timezone

    from nbgrader.api import Gradebook

    argv = sys.argv if argv is None else argv
    if len(argv) < 2 or argv[1] not in ("generate_assignment", "autograde"):
        return
    course = Path(config_file).resolve().parent
    labs = [lab for lab in _labs_named(argv[2:], course) if lab in due]
    if not labs:
        return
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for lab in labs:
            text = due[lab]  # checked by the build (course.parse_due): a date, or a date and time with its zone
            when = (datetime.fromisoformat(text) if "T" in text or " " in text
                    else datetime.combine(date.fromisoformat(text), time(23, 59, 59)).astimezone())
            when = when.astimezone(timezone.utc).replace(tzinfo=None)
            gb.update_or_create_assignment(lab, duedate=when)


class RequireTestCells(NbGraderPreprocessor):
    """Refuse a submission without autograded test cells, or whose lab's bundle cannot be found (an autograde that
    ``require_bundles`` did not see start, such as the formgrader's); take ``SKIP_TAG`` off the graded and locked
    cells."""

    def preprocess(self, nb, resources):
        graded = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")]
        info = resources.get("nbgrader", {})
        lab = info.get("assignment", "<lab>")
        if not graded:
            where = f"{info.get('student', '<student>')}/{lab}/{info.get('notebook', '<notebook>')}.ipynb"
            message = missing_cells_message(where, lab)
            self.log.error(message)
            raise NoTestCells(message)
        why = bundle_problem(lab, Path.cwd()) if "assignment" in info else None
        if why:
            message = missing_bundle_message({lab: why}, Path.cwd(), f"{info.get('student', '<student>')}'s {lab} "
                                                                     "is not graded")
            self.log.error(message)
            raise NoBundle(message)
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
