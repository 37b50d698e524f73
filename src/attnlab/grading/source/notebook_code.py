"""Which code of a submission notebook the grader runs.

The grader runs every code cell in order, except:

- cells tagged ``otter_ignore`` (training and experiments: grading never re-runs them),
- the set-up cell tagged ``attnlab_setup`` (the worker provides ``device`` and a stub ``grader``),
- cells that only call ``grader.check(...)`` / ``grader.check_all()`` / ``grader.export(...)``.

What is graded is the state those cells leave, as after running them all top to bottom: a name defined in several
cells is graded on its last definition (``definitions``), on every route.

Reading never executes anything; a file that is not a readable notebook raises ``SubmissionError``
with a message for the student.

A cell is named the way the student sees it, never by its position (JupyterLab shows no cell numbers):
``describe_cell`` says "the cell defining `attention`", or "the cell starting `x = ...`" with the heading it is
under; ``cell_error_text`` turns a worker's report of a failed cell into a message with that description (the
grader's own, from the notebook it read) and the line inside the cell; ``describe_location`` maps a line of
``joined_source`` back to its cell and line, for messages about the joined source (forbidden calls).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from attnlab.records.safe_text import escape_controls

MAX_NOTEBOOK_BYTES = 50 * 2**20
UNREADABLE = ("this notebook could not be read: {why}; simplify the cell it names (or the notebook) "
              "and submit again")
# What the grader analyses in its own process (joining, describing, the rules' parse and walks, definitions per
# test) is bounded by these, checked before anything is parsed: a parse costs memory per syntax node, so one large
# cell of `a,a,...` could take the grader far past its memory bound. The limits leave several times the largest
# graded code of the labs' solutions (benchmarks/README.md, "The grader's own work on hostile source").
MAX_JSON_ITEMS = 500_000  # commas, brackets and braces of the file (an upper bound on its JSON values)
MAX_CELLS = 2_000  # cells of any kind
MAX_CELL_CHARS = 32_768  # one graded cell
MAX_CODE_CHARS = 131_072  # all graded cells together
MAX_CODE_LINES = 5_000
MAX_AST_NODES = 30_000  # syntax nodes of all graded cells
MAX_AST_DEPTH = 100  # nesting of syntax nodes in one cell
TOO_LARGE = ("the graded code is too large for the grader: {what}, over the limit of {limit:,}; the graded cells "
             "score 0. {fix} and submit again")
KEEP_ANSWERS = "Keep the graded cells to your answers (delete pasted data, generated code and long experiments)"
CLEAR_OUTPUTS = "Clear the outputs (Edit > Clear Outputs of All Cells), keep the graded cells to your answers"

OTTER_IGNORE = "otter_ignore"  # the tag of training and experiments: Otter, nbgrader and the grader skip them
SKIP_TAGS = {OTTER_IGNORE, "attnlab_setup"}


class SubmissionError(Exception):
    """The submission file cannot be read as a notebook."""


class SubmissionUnreadable(SubmissionError):
    """The file could not be opened at all (gone, no permission, an I/O error): the file system's doing, not the
    notebook's; a batch records it as a grader error (``scale/batch.py``), to grade again."""


class SourceTooLarge(SubmissionError):
    """The graded code is past a limit of the grader's own analysis (``MAX_*``); ``cell`` names the cell."""

    def __init__(self, what: str, limit: int, cell: str | None = None, fix: str = KEEP_ANSWERS):
        super().__init__(TOO_LARGE.format(what=what, limit=limit, fix=fix))
        self.cell = cell


@dataclass(frozen=True)
class CodeCell:
    index: int  # position among all cells of the notebook
    source: str
    section: str = ""  # the last markdown heading above the cell, as the student reads it


_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
MAX_QUOTE = 50  # characters of a student's line quoted in a description


def _quote(text: str) -> str:
    """A short, one-line quote of student text (backticks replaced, invisible characters shown by ``safe_text``)."""
    text = " ".join(re.split(r"[ \t\n]+", escape_controls(text.replace("`", "'")).strip(" \t\n")))
    if len(text) <= MAX_QUOTE:
        return text
    cut = text[:MAX_QUOTE - 3]
    partial = re.search(r"(<(U(\+[0-9A-F]{0,6})?)?|\\(x[0-9a-f]?)?)$", cut)  # never half an escape
    return (cut[:partial.start()] if partial else cut).rstrip() + "..."


def describe_cell(source: str, section: str = "") -> str:
    """The cell as the student finds it: by what it defines, else by its first line and the heading above it."""
    try:
        tree = ast.parse(python_source(source))
        names = list(dict.fromkeys(n.name for n in tree.body
                                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        names = []
    if names:
        shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return f"the cell defining {shown}"
    first = next((line for line in source.splitlines() if line.strip()), "")
    under = f' under "{_quote(section)}"' if section else ""
    return f"the cell starting `{_quote(first)}`{under}"


def cell_error_text(cells: list[dict], entry) -> str | None:
    """The message for a worker's report ``{"index", "line", "error"}`` of a failed cell of ``cells`` (the dicts
    the grader sent: ``index``, ``source``, optional ``where``), or None when the report is malformed.

    The cell's description is the grader's (``where``, else ``describe_cell``), never the worker's; a line
    number outside the cell is dropped."""
    if not isinstance(entry, dict) or set(entry) != {"index", "line", "error"}:
        return None
    index, line, error = entry["index"], entry["line"], entry["error"]
    if type(index) is not int or not isinstance(error, str) or not (line is None or type(line) is int):
        return None
    cell = next((c for c in cells if c["index"] == index), None)
    if cell is None:
        return None
    where = cell.get("where") or describe_cell(cell["source"])
    if line is not None and 0 < line <= python_source(cell["source"]).count("\n"):
        where += f", line {line}"
    return f"{where}: {error}"


_CELL_REFERENCE = re.compile(r"\(in cell (\d{1,9}), line (\d{1,9}): ")


def name_cells(text: str, cells: list[dict]) -> str:
    """``text`` (a worker's error: the executor writes ``(in cell 3, line 4: ...)``) with each reference to a cell
    it was sent replaced by the grader's description of that cell; other numbers are left as they are."""
    sent = {c["index"] for c in cells}

    def named(match: re.Match) -> str:
        index = int(match.group(1))
        if index not in sent:
            return match.group(0)
        return f"(in {cell_where(cells, index)}, line {match.group(2)}: "

    return _CELL_REFERENCE.sub(named, text)


def described_cells(cells: list[CodeCell]) -> list[dict]:
    """The graded cells as the grader sends them to the worker and hands them to its checks: ``index``, ``source``
    and ``where``, the cell as the student sees it (``describe_cell``), which every message naming a line uses."""
    return [{"index": c.index, "source": c.source, "where": describe_cell(c.source, c.section)} for c in cells]


def cell_where(cells: list[dict], index: int) -> str:
    """The grader's description of cell ``index`` of ``cells`` (the dicts sent to the worker)."""
    cell = next((c for c in cells if c["index"] == index), None)
    if cell is None:
        return f"cell {index}"
    return cell.get("where") or describe_cell(cell["source"])


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
        raise SubmissionUnreadable(f"cannot read the submission: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        _check_stat(os.fstat(fd))  # the file may have been swapped between lstat and open
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise SubmissionError("the submitted file grew past the size limit while it was read")
    return data


def read_cells(path: str | Path, data: bytes | None = None) -> list[CodeCell]:
    """The code cells the grader runs, in notebook order (``data``: the file's bytes, already read)."""
    data = read_submission(path) if data is None else data
    items = data.count(b",") + data.count(b"[") + data.count(b"{")
    if items > MAX_JSON_ITEMS:  # each JSON value is a Python object: count them before any is made
        raise SourceTooLarge(f"the notebook file has {items:,} commas, brackets and braces (each may start a "
                             "value the grader would hold)", MAX_JSON_ITEMS, fix=CLEAR_OUTPUTS)
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
    if len(nb["cells"]) > MAX_CELLS:
        raise SourceTooLarge(f"the notebook has {len(nb['cells']):,} cells", MAX_CELLS)
    cells, section, total = [], "", _Total()
    for i, cell in enumerate(nb["cells"]):
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            headings = _HEADING.findall(_source_text(cell.get("source", "")))
            section = headings[-1] if headings else section
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
        if SKIP_TAGS.intersection(str(t) for t in tags):
            continue
        source = _source_text(cell.get("source", ""))
        total.add(source, section)  # before any parse of it
        if not source.strip() or _only_grader_calls(source):
            continue
        cells.append(CodeCell(i, source, section))
    return cells


class _Total:
    """The running size of the graded cells, checked against the limits as each cell is read."""

    def __init__(self):
        self.chars = self.lines = 0

    def add(self, source: str, section: str) -> None:
        if len(source) > MAX_CELL_CHARS:
            where = brief_where(source, section)
            raise SourceTooLarge(f"{where} has {len(source):,} characters", MAX_CELL_CHARS, where)
        self.chars += len(source)
        self.lines += source.count("\n") + 1
        if self.chars > MAX_CODE_CHARS:
            raise SourceTooLarge(f"the graded cells have {self.chars:,} characters or more", MAX_CODE_CHARS)
        if self.lines > MAX_CODE_LINES:
            raise SourceTooLarge(f"the graded cells have {self.lines:,} lines or more", MAX_CODE_LINES)


def brief_where(source: str, section: str = "") -> str:
    """``describe_cell`` without parsing: the cell's first line (and heading), for a cell too large to parse."""
    first = next((line for line in source[:1000].splitlines() if line.strip()), "")
    under = f' under "{_quote(section[:1000])}"' if section else ""
    return f"the cell starting `{_quote(first)}`{under}"


def tree_size(tree: ast.AST) -> tuple[int, int]:
    """``(nodes, depth)`` of a syntax tree, walked without recursion."""
    nodes, deepest, stack = 0, 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes, deepest = nodes + 1, max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return nodes, deepest


_IPYTHON_SYNTAX = re.compile(r"%|!(?!=)|\?\s*$", re.MULTILINE)


def python_source(source: str) -> str:
    """Cell source with IPython syntax (``%magic``, ``!cmd``) turned into plain Python."""
    plain = source if source.endswith("\n") else source + "\n"
    if not _IPYTHON_SYNTAX.search(source):
        # plain Python: what IPython's transformer returns for it, without its seconds on a long expression
        return plain
    if parsed_shape(plain) is not None:  # a % or ! that Python reads (modulo, "%d" formats, !=): no magic, and no
        return plain  # IPython to import; too deep for the parser: the cell's own compile says so
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001
        return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


TOO_DEEP = (-1, -1)


@functools.lru_cache(maxsize=256)
def parsed_shape(code: str) -> tuple[int, int] | None:
    """``(nodes, depth)`` of ``code``'s syntax tree; None when it does not parse, ``TOO_DEEP`` when the parser gave up.
    Cached: a grade asks for each cell several times (the joined source, the syntax problems, the magics)."""
    try:
        return tree_size(ast.parse(code))
    except (SyntaxError, ValueError):  # ValueError: a NUL byte (Python 3.11)
        return None
    except (RecursionError, MemoryError):
        return TOO_DEEP


def code_spans(cells: list[CodeCell]) -> list[tuple[CodeCell, int, str]]:
    """The parseable cells as ``(cell, first line in joined_source, code)``; cells that do not parse are left out."""
    spans, line, nodes = [], 1, 0
    for cell in cells:
        code = python_source(cell.source)
        code = code if code.endswith("\n") else code + "\n"
        shape = parsed_shape(code)
        if shape is None:
            continue
        if shape == TOO_DEEP:
            where = brief_where(cell.source, cell.section)
            raise SourceTooLarge(f"{where} is nested too deeply for Python's parser", MAX_AST_DEPTH, where) from None
        size, depth = shape
        if depth > MAX_AST_DEPTH:
            where = brief_where(cell.source, cell.section)
            raise SourceTooLarge(f"{where} nests its code {depth:,} levels deep", MAX_AST_DEPTH, where)
        nodes += size
        if nodes > MAX_AST_NODES:
            raise SourceTooLarge(f"the graded cells have {nodes:,} syntax nodes or more", MAX_AST_NODES)
        spans.append((cell, line, code))
        line += code.count("\n") + 2  # each part ends with a newline; parts are joined by a blank line
    return spans


def joined_source(cells: list[CodeCell]) -> str:
    """All graded code as one parseable text (for source checks); cells that do not parse are left out."""
    return "\n\n".join(code for _, _, code in code_spans(cells))


def definitions(cells: list[tuple[str, str]], assigned=frozenset()) -> dict[str, list[tuple[int, ast.stmt]]]:
    """Each name a top-level ``def``/``class`` of ``cells`` (``(where, code)`` pairs, in notebook order) defines, or
    a top-level assignment binds where the name is in ``assigned`` (the graded names: ``causal_mask = lambda T: ...``,
    ``split_heads = my_split``) -> ``(position in cells, the cell's last statement defining it)`` per cell that
    defines it, in notebook order: the last pair is the definition a run of every cell leaves. Cells that do not
    parse are left out."""
    found: dict[str, list[tuple[int, ast.stmt]]] = {}
    for position, (_, code) in enumerate(cells):
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        last = {}
        for node in tree.body:
            name = _defined_name(node, assigned)
            if name is not None:
                last[name] = node
        for name, node in last.items():
            found.setdefault(name, []).append((position, node))
    return found


def _defined_name(node: ast.stmt, assigned) -> str | None:
    """The name a top-level statement defines: a ``def``/``class``, or an assignment of one name in ``assigned``."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target = node.target
    else:
        return None
    return target.id if isinstance(target, ast.Name) and target.id in assigned else None


def describe_location(cells: list[CodeCell], global_line: int) -> str:
    """Where line ``global_line`` of ``joined_source(cells)`` is, in the student's words:
    ``in the cell defining `attention`, line 3``."""
    for cell, first, code in code_spans(cells):
        if first <= global_line < first + code.count("\n"):
            return f"in {describe_cell(cell.source, cell.section)}, line {global_line - first + 1}"
    return f"at line {global_line} of the graded code"
