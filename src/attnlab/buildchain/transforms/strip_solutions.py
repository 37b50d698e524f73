"""Student branch: replace solution code with TODOs. Needs parse_questions' labels (runs after it).

A ``# BEGIN SOLUTION`` block inside a function or method becomes

    # TODO: your code here
    raise NotImplementedError("<qualified name>: not written yet")

so that an unwritten answer says so (``SelfAttention.forward: not written yet``) instead of returning ``None``
and failing later with an unrelated error. A block outside any function (top level, class body) becomes ``...``.
"""

from __future__ import annotations

import ast
import copy
import re

from attnlab.records.stub_text import PLACEHOLDER, stub_message

from .markers import ASSIGNMENT_LINE, BEGIN_SOLUTION, END_SOLUTION, META, SOLUTION_SUFFIX

_SCOPE = re.compile(r"^(\s*)(?:async\s+def|def|class)\s+(\w+)")


def _scopes_by_ast(source: str, lineno: int) -> list[tuple[str, bool]] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    names: list[tuple[str, bool]] = []  # outermost first
    body = tree.body
    while True:
        for node in body:
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and node.lineno <= lineno <= (node.end_lineno or node.lineno)):
                names.append((node.name, not isinstance(node, ast.ClassDef)))
                body = node.body
                break
            if (not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                    and node.lineno <= lineno <= (node.end_lineno or node.lineno)):
                body = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)]
                break
        else:
            return names[::-1]


def _scopes_by_indent(lines: list[str], index: int) -> list[tuple[str, bool]]:
    need = len(lines[index]) - len(lines[index].lstrip())
    names: list[tuple[str, bool]] = []  # innermost first
    for line in reversed(lines[:index]):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or need == 0:
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= need:
            continue
        need = indent
        scope = _SCOPE.match(line)
        if scope:
            names.append((scope.group(2), not stripped.startswith("class")))
    return names


def enclosing_function(lines: list[str], index: int) -> str | None:
    """The qualified name (``Class.method``, ``outer.inner``) of the function around ``lines[index]``;
    ``None`` at top level or directly in a class body. Read with ``ast`` (from the indentation of the lines
    above when the cell is not plain Python, e.g. holds IPython magics)."""
    names = _scopes_by_ast("\n".join(lines), index + 1)
    if names is None:
        names = _scopes_by_indent(lines, index)
    if not names or not names[0][1]:
        return None
    return ".".join(name for name, _ in reversed(names))


def strip_source(source: str) -> str:
    lines = source.split("\n")
    out, inside = [], False
    for i, line in enumerate(lines):
        begin = BEGIN_SOLUTION.match(line)
        if begin:
            if inside:
                raise ValueError(f"nested BEGIN SOLUTION at {line.strip()!r}")
            inside = True
            indent = begin.group(1)
            out.append(f"{indent}# TODO: your code here")
            name = enclosing_function(lines, i)
            out.append(f'{indent}raise NotImplementedError("{stub_message(name)}")' if name else f"{indent}...")
            continue
        if END_SOLUTION.match(line):
            if not inside:
                raise ValueError("END SOLUTION without BEGIN SOLUTION")
            inside = False
            continue
        if inside:
            continue
        if SOLUTION_SUFFIX.search(line):
            assign = ASSIGNMENT_LINE.match(line)
            if assign:
                out.append(f"{assign.group(1)}{assign.group(2)} = ...  # TODO")
            else:
                indent = line[: len(line) - len(line.lstrip())]
                out.append(f"{indent}...  # TODO")
            continue
        out.append(line)
    if inside:
        raise ValueError("BEGIN SOLUTION is never closed with END SOLUTION")
    return "\n".join(out)


def strip_solutions(nb):
    """Code cells lose their solution blocks; a written question's answer cell (``answer_cells``) its reference
    answer, replaced with ``PLACEHOLDER``."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        role = cell.metadata.get(META, {}).get("role")
        if cell.cell_type == "code" and role != "test":
            cell.source = strip_source(cell.source)
        elif role == "answer":
            cell.source = PLACEHOLDER
    return nb
