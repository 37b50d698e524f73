"""Sample submissions for ``attnlab demo``: the solution, the blank student notebook, and buggy notebooks
made from the solution with one catalogued mistake each."""

from __future__ import annotations

import shutil
from pathlib import Path
from textwrap import dedent

import nbformat

from attnlab.grading.core.mutants import load_catalogue
from attnlab.grading.source.notebook_code import OTTER_IGNORE

from .course import Lab


def with_entry(solution_path: Path, entry) -> nbformat.NotebookNode:
    """The solution notebook with ``entry``'s definitions in a cell after the last graded code cell."""
    nb = nbformat.read(solution_path, as_version=4)
    last = max(i for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and OTTER_IGNORE not in c.metadata.get("tags", []))
    nb.cells.insert(last + 1, nbformat.v4.new_code_cell(dedent(entry.source).strip()))
    for i, cell in enumerate(nb.cells):
        cell.id = f"demo-{i:03d}"
    return nb


def make_demo_submissions(lab: Lab, out: Path, n_buggy: int = 2) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "solution.ipynb", out / "blank.ipynb"]
    shutil.copyfile(lab.solution_notebook, paths[0])
    shutil.copyfile(lab.student_notebook, paths[1])
    mutants, _ = load_catalogue(lab.catalogue)
    for entry in mutants[:n_buggy]:
        path = out / f"buggy-{entry.name}.ipynb"
        nbformat.write(with_entry(lab.solution_notebook, entry), path)
        paths.append(path)
    return paths
