"""Which code of a submission notebook the grader runs.

The grader runs every code cell in order, except:

- cells tagged ``otter_ignore`` (training and experiments: grading never re-runs them),
- the set-up cell tagged ``attnlab_setup`` (the worker provides ``device`` and a stub ``grader``),
- cells that only call ``grader.check(...)`` / ``grader.check_all()`` / ``grader.export(...)``.

Reading never executes anything; a file that is not a readable notebook raises ``SubmissionError``
with a message for the student.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_NOTEBOOK_BYTES = 50 * 2**20
UNREADABLE = ("this notebook could not be read: {why}; simplify the cell it names (or the notebook) "
              "and submit again")

SKIP_TAGS = {"otter_ignore", "attnlab_setup"}


class SubmissionError(Exception):
    """The submission file cannot be read as a notebook."""


@dataclass(frozen=True)
class CodeCell:
    index: int  # position among all cells of the notebook
    source: str


def _source_text(source) -> str:
    if isinstance(source, list):
        return "".join(str(s) for s in source)
    if isinstance(source, str):
        return source
    raise SubmissionError("a cell's source is neither text nor a list of lines")


def _only_grader_calls(source: str) -> bool:
    if "grader" not in source:
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, RecursionError, MemoryError):
        return False
    if not tree.body:
        return False
    for stmt in tree.body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        func = stmt.value.func
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "grader"):
            return False
    return True


def _check_stat(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise SubmissionError("the submission is not a regular file (a link, a folder, a pipe or a device); "
                              "submit the .ipynb file itself")
    if st.st_size == 0:
        raise SubmissionError("the submitted file is empty; submit your saved .ipynb notebook")
    if st.st_size > MAX_NOTEBOOK_BYTES:
        raise SubmissionError(f"the submitted file is {st.st_size / 2**20:.0f} MiB, over the "
                              f"{MAX_NOTEBOOK_BYTES / 2**20:.0f} MiB limit; clear the outputs and submit again")


def read_submission(path: str | Path) -> bytes:
    """The bytes of a submission: a regular file (never a link, pipe or device) of at most
    ``MAX_NOTEBOOK_BYTES``, checked with ``lstat`` before it is opened and with ``fstat`` after."""
    try:
        _check_stat(os.lstat(path))
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise SubmissionError(f"cannot read the submission: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        _check_stat(os.fstat(fd))  # the file may have been swapped between lstat and open
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise SubmissionError("the submitted file grew past the size limit while it was read")
    return data


def read_cells(path: str | Path, data: bytes | None = None) -> list[CodeCell]:
    """The code cells the grader runs, in notebook order (``data``: the file's bytes, already read)."""
    data = read_submission(path) if data is None else data
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SubmissionError(f"the submitted file is not a Jupyter notebook (not valid JSON: {exc}); "
                              "submit the .ipynb file saved from Jupyter or Colab") from None
    except (RecursionError, MemoryError):
        raise SubmissionError(UNREADABLE.format(why="its JSON is nested too deeply")) from None
    return cells_from_notebook(nb)


def cells_from_notebook(nb: dict) -> list[CodeCell]:
    """The graded code cells of an already parsed notebook (a dict or ``NotebookNode``)."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise SubmissionError("the submitted file is JSON but not a Jupyter notebook (no list of cells)")
    cells = []
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
        if SKIP_TAGS.intersection(str(t) for t in tags):
            continue
        source = _source_text(cell.get("source", ""))
        if not source.strip() or _only_grader_calls(source):
            continue
        cells.append(CodeCell(i, source))
    return cells


_IPYTHON_SYNTAX = re.compile(r"%|!(?!=)|\?\s*$", re.MULTILINE)


def python_source(source: str) -> str:
    """Cell source with IPython syntax (``%magic``, ``!cmd``) turned into plain Python."""
    if not _IPYTHON_SYNTAX.search(source):
        # plain Python: what IPython's transformer returns for it, without its seconds on a long expression
        return source if source.endswith("\n") else source + "\n"
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001
        return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def joined_source(cells: list[CodeCell]) -> str:
    """All graded code as one parseable text (for source checks); cells that do not parse are left out."""
    parts = []
    for cell in cells:
        code = python_source(cell.source)
        try:
            ast.parse(code)
        except SyntaxError:
            continue
        except (RecursionError, MemoryError):
            raise SubmissionError(UNREADABLE.format(why=f"cell {cell.index} is nested too deeply for Python's "
                                                        "parser")) from None
        parts.append(code)
    return "\n\n".join(parts)
