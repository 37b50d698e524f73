"""The masters of one run, each read and parsed once: ``attnlab build`` and ``attnlab release`` ask for the same
master many times (its own build, the given cells of later labs, the hold-back rule, every gate of the release).

``Masters(course)`` reads ``instructor/<lab>/<lab>.py`` once, on the first request, and parses it once
(``parse_master``); it keeps the text, the notebook and the solution blocks' lines for the run. Each caller gets its
own copy of the notebook, so a transform that edits its input changes no other caller's master. A master edited
during the run is not seen again: a run works on the masters as they were when it first read them.
"""

from __future__ import annotations

import copy

import nbformat

from attnlab.course import Course

from .transforms import read_master  # the module: one parser for every master, whoever reads it
from .transforms.check_no_leak import solution_lines


class Masters:
    """Lab id -> its master, read once; the notebook, the raw text and the solution blocks' secret lines."""

    def __init__(self, course: Course):
        self.course = course
        self._notebooks: dict[str, nbformat.NotebookNode] = {}
        self._texts: dict[str, str] = {}
        self._solution_lines: dict[str, set[str]] = {}

    def notebook(self, lab_id: str) -> nbformat.NotebookNode:
        """A copy of the lab's master as a notebook (its given cells unresolved)."""
        if lab_id not in self._notebooks:
            master = self.course.lab(lab_id).master
            self._notebooks[lab_id] = read_master.parse_master(self.text(lab_id), ipynb=master.suffix == ".ipynb")
        return copy.deepcopy(self._notebooks[lab_id])

    def text(self, lab_id: str) -> str:
        """The master file as the instructor wrote it."""
        if lab_id not in self._texts:
            master = self.course.lab(lab_id).master
            if not master.exists():
                raise FileNotFoundError(f"master notebook {master} does not exist")
            self._texts[lab_id] = master.read_text()
        return self._texts[lab_id]

    def solution_lines(self, lab_id: str) -> set[str]:
        """The secret lines of the master's solution blocks (``check_no_leak.solution_lines``)."""
        if lab_id not in self._solution_lines:
            self._solution_lines[lab_id] = solution_lines(self.notebook(lab_id))
        return set(self._solution_lines[lab_id])
