"""Rule 5 of the course rules (``grading/policy/rules.py``): a lab's forbidden library functions, and what reaches them.

``forbidden_uses`` finds a forbidden name used as an attribute of anything (``F.x``, ``_g.x``), an imported name,
a match-pattern attribute or a string, inside strings that Python can run as code too (a type hint, a timer's
statement), and the ready-made classes that build a forbidden one inside (``REACHES``: ``nn.TransformerEncoderLayer``
holds an ``nn.MultiheadAttention`` that a student reads as ``layer.self_attn`` without writing its name), and the
names of the operations that carry them (``forbidden_ops``: ``torch.native_group_norm`` for ``layer_norm``). A bare
call of the student's own function of the same name (``scaled_dot_product_attention(q, k, v)``) is allowed.
Every use is named by cell and line as the student sees them (``in the cell defining `attention`, line 5``).

Names are the first line and the source of the messages; the rule is what runs. Each check notes the names it was
asked about (``asked_names``): the grader compares them with what the worker saw run (``grading/worker/
call_evidence.py``: the callables by name, and ``op_guard.py``: the operations, whatever route reached them), and a
question whose own code ran one is costed as if the name were in its source.
"""

from __future__ import annotations

import ast
import threading
from contextlib import contextmanager
from typing import Iterable

from attnlab.grading.policy import forbidden_ops
from attnlab.grading.policy.rule_costs import student_cells, top_level_names

_TRANSFORMERS = ("Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
                 "TransformerDecoderLayer")
# library name -> the library names that reach it when called (their instances hold it, or their code calls it)
REACHES = {
    "scaled_dot_product_attention": ("multi_head_attention_forward", "MultiheadAttention") + _TRANSFORMERS,
    "multi_head_attention_forward": ("MultiheadAttention",) + _TRANSFORMERS,
    "MultiheadAttention": _TRANSFORMERS,
}


_ASKED = threading.local()  # per grading thread: the names the checks of the current hidden test were asked about


def asked_names(start: bool = False) -> list[str]:
    """The forbidden names the checks were asked about since the last ``asked_names(start=True)`` (which starts
    afresh and returns ``[]``); a batch grades in threads, so each thread keeps its own."""
    if start:
        _ASKED.names = []
    return list(getattr(_ASKED, "names", None) or [])


def _note_asked(names: Iterable[str]) -> None:
    if getattr(_ASKED, "names", None) is not None:
        _ASKED.names.extend(n for n in names if n not in _ASKED.names)


def code_in_string(value) -> ast.AST | None:
    """The tree of a string that parses as Python code and does more than name one thing, else None."""
    if not isinstance(value, str) or len(value) > 10_000 or not value.strip():
        return None
    try:
        tree = ast.parse(value.strip())
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    body = tree.body
    if len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, (ast.Name, ast.Constant)):
        return None
    return tree


def reaching(names: Iterable[str]) -> set[str]:
    """``names``, every library name that reaches one of them (``REACHES``) and the operations that carry them
    (``forbidden_ops.FAMILIES``: ``torch.native_group_norm`` for ``layer_norm``)."""
    out = set(names)
    for name in list(out):
        out.update(REACHES.get(name, ()))
    return out | forbidden_ops.ops_for(out)


def _uses(tree: ast.AST, names: set[str], line_of) -> list[tuple[int, str]]:
    """``(line, what)`` of each use of ``names`` in ``tree`` (``line_of(node)`` gives the line)."""
    hits = []
    bare = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}  # docstrings: nothing runs them
    for node in ast.walk(tree):
        line = line_of(node)
        if isinstance(node, ast.Attribute) and node.attr in names:
            hits.append((line, f".{node.attr}"))
        elif isinstance(node, ast.ImportFrom):
            hits += [(line, f"from {node.module} import {a.name}") for a in node.names if a.name in names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            hits.append((line, repr(node.value)))
        elif isinstance(node, ast.Constant) and id(node) not in bare and (code := code_in_string(node.value)):
            inner = _uses(code, names, lambda _n, line=line: line)
            hits += [(line, f"{text} in a string that Python can run as code") for _, text in inner]
        elif type(node).__name__ == "MatchClass":
            hits += [(line, f"{a}=") for a in getattr(node, "kwd_attrs", []) if a in names]
    return hits


def forbidden_uses(code: str | None, names: Iterable[str], where: str = "") -> list[str]:
    """Where ``code`` uses any of ``names`` or what reaches them: ``"line 5: .x"``, or with ``where`` (the cell as
    the student sees it) ```"in the cell defining `attention`, line 5: .x"``."""
    if not code:
        return []
    try:
        tree = ast.parse(code)
    except (SyntaxError, RecursionError, MemoryError):
        return []
    prefix = f"in {where}, " if where else ""
    hits = _uses(tree, reaching(names), lambda node: getattr(node, "lineno", 0))
    return [f"{prefix}line {line}: {text}" for line, text in hits]


class ForbiddenUse(AssertionError):
    """A hidden test failed because the code uses a lab's forbidden function (``assert_not_used``): the suite
    records it as a course-rule breach by this type, never by its text. ``names``: the forbidden functions;
    ``hits``: where the code uses them (``forbidden_uses``), for the feedback; ``scoped``: the hits were looked for
    in the code of the test's question only (``question_scope``)."""

    def __init__(self, message: str, names: Iterable[str] = (), hits: Iterable[str] = (), scoped: bool = False):
        super().__init__(message)
        self.names, self.hits, self.scoped = tuple(names), tuple(hits), scoped


@contextmanager
def question_scope(names: Iterable[str] | None):
    """While a hidden test runs: the top-level names whose code is its question's (``rule_costs.question_code``),
    so that ``assert_not_used`` reads only that code (None: every graded cell)."""
    before = getattr(_ASKED, "scope", None)
    _ASKED.scope = None if names is None else frozenset(names)
    try:
        yield
    finally:
        _ASKED.scope = before


def _scoped_uses(code: str, names: list[str], where: str, scope: frozenset | None) -> list[str]:
    """``forbidden_uses`` over the top-level statements of ``code`` that bind a name of ``scope`` or bind nothing
    (top-level code that binds nothing can change anything); every statement when ``scope`` is None."""
    if scope is None:
        return forbidden_uses(code, names, where)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    prefix = f"in {where}, " if where else ""
    hits = []
    for statement in tree.body:
        bound = top_level_names(statement)
        if not bound or scope.intersection(bound):
            hits += _uses(statement, reaching(names), lambda node: getattr(node, "lineno", 0))
    return [f"{prefix}line {line}: {text}" for line, text in hits]


def assert_not_used(student, names: Iterable[str], *, why: str) -> None:
    """Fail (``ForbiddenUse``) when the submission's graded cells use any of the library functions in ``names``,
    naming each use by cell and line as the student sees them (a submission without cells: by line of its source).
    While ``run_suite`` runs a test, only its question's code is read (``question_scope``): a call written in
    another question's cell costs that question, not this one."""

    names = list(names)
    _note_asked(names)
    scope = getattr(_ASKED, "scope", None)
    hits = [hit for where, code in student_cells(student) for hit in _scoped_uses(code, names, where, scope)]
    if hits:
        raise ForbiddenUse(f"{why}; found {', '.join(hits[:5])}", names, hits, scoped=scope is not None)


def forbidden_uses_in(student, name: str, names: Iterable[str]) -> list[str]:
    """Where the definition of ``name`` (the last top-level ``def``/``class`` of that name in the graded cells, as
    ``student.source(name)`` finds it) uses any of ``names`` or what reaches them, by cell and line as the student
    sees them: ``in the cell defining `conv1d`, line 7: .conv1d``. For a question whose rule holds in its own code
    only (lab03's ``conv1d``, lab07's ``layer_norm``)."""
    names = list(names)
    _note_asked(names)
    found = None
    for where, code in student_cells(student):
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                found = (where, node)
    if found is None:
        return []
    where, node = found
    prefix = f"in {where}, " if where else ""
    hits = _uses(node, reaching(names), lambda n: getattr(n, "lineno", 0))
    return [f"{prefix}line {line}: {text}" for line, text in hits]
