"""No function in src/attnlab is over 60 lines, except those listed below with the reason why.

A function is counted from its ``def`` line to its last line, docstring included (decorators excluded). Split a long
function into named steps that read top to bottom (``training.fit`` is the model); if one really must stay long, add
it to ALLOWED with the reason, and remove the entry once it is split (a stale entry fails too).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attnlab"
MAX_LINES = 60

# "path relative to src/attnlab:qualified name" -> why it may be longer
ALLOWED: dict[str, str] = {}


def long_functions(package: Path = PACKAGE, limit: int = MAX_LINES) -> dict[str, int]:
    """``{"path:Class.function": lines}`` for every function or method over `limit` lines (generated files excluded)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("kit/generated/"):
            continue
        found.update({f"{rel}:{name}": lines for name, lines in _functions(ast.parse(path.read_text()))
                      if lines > limit})
    return found


def _functions(node: ast.AST, prefix: str = ""):
    """(qualified name, lines) of every function under `node`, nested ones and methods included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = prefix + child.name
            if not isinstance(child, ast.ClassDef):
                yield name, child.end_lineno - child.lineno + 1
            yield from _functions(child, name + ".")
        else:
            yield from _functions(child, prefix)


def test_no_function_is_over_60_lines_without_a_reason():
    found = long_functions()
    unexplained = {name: lines for name, lines in found.items() if name not in ALLOWED}
    assert not unexplained, (f"over {MAX_LINES} lines: {unexplained}; split them into named steps, or add them "
                             "to ALLOWED in tests/test_function_length.py with the reason")


def test_the_allow_list_has_no_stale_entry():
    stale = sorted(set(ALLOWED) - set(long_functions()))
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): remove {stale} from ALLOWED"


def test_the_counter_sees_methods_and_nested_functions(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))  # MAX_LINES body lines + the def line
    (tmp_path / "m.py").write_text(f"class A:\n  def long(self):\n{body}\n\ndef outer():\n  def inner():\n{body}\n"
                                   f"\ndef short():\n    pass\n")
    found = long_functions(tmp_path)
    assert found == {"m.py:A.long": MAX_LINES + 1, "m.py:outer": MAX_LINES + 2, "m.py:outer.inner": MAX_LINES + 1}
