"""Rule 4's paths from data to code that the names alone do not show (``grading/policy/rules.py`` calls these).

Any path from data to code or objects is reflection: a string a library evaluates (``typing`` and
``functools.singledispatch`` evaluate string annotations: an annotation must be a type written out, never computed,
so that the string the library evaluates is one the rules have read), and unpickling (numpy's ``allow_pickle``, a
``pickle_module``, ``torch.load`` without ``weights_only=True``: an unpickled object can be any callable's result).
Operator registries (``torch.ops``, ``torch.library``) are refused by name (``DENIED_ATTRIBUTES``); what any route
runs is seen by the worker's guard (``grading/worker/op_guard.py``).
"""

from __future__ import annotations

import ast

MAX_CHECKED_STRING = 10_000  # longer strings are not parsed (forbidden_calls.code_in_string): never an annotation
UNPICKLING_KEYWORDS = frozenset({"allow_pickle", "pickle_module"})


def _written_type(node: ast.AST) -> bool:
    """``node`` is a type written out: a name, a dotted name, a constant, ``X[...]``, ``X | Y``, a list or tuple of
    these (``Callable[[int], int]``)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return not (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and len(node.value) > MAX_CHECKED_STRING)
    if isinstance(node, ast.Attribute):
        return _written_type(node.value)
    if isinstance(node, ast.Subscript):
        return _written_type(node.value) and _written_type(node.slice)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, ast.BitOr) and _written_type(node.left) and _written_type(node.right)
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_written_type(e) for e in node.elts)
    return False


def computed_annotation(node: ast.AST | None) -> str:
    """Why the annotation ``node`` is refused (computed at run time, or a string too long to check), else ''."""
    if node is None or _written_type(node):
        return ""
    return ("an annotation computed at run time (typing and functools.singledispatch evaluate annotations as "
            "code, a path from data to code): write the type itself, e.g. x: torch.Tensor")


def unpickling_keyword(node: ast.keyword) -> str:
    """Why the keyword argument ``node`` is refused (it turns data into objects by unpickling), else ''."""
    if node.arg in UNPICKLING_KEYWORDS:
        return f"{node.arg}= unpickles data, a path from data to code (reflection)"
    if node.arg == "weights_only" and not (isinstance(node.value, ast.Constant) and node.value.value is True):
        return "weights_only other than True unpickles data, a path from data to code (reflection)"
    return ""
