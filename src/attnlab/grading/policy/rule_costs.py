"""What a breach of the course rules (``grading/policy/rules.py``) costs: the question it appears in, never the lab.

A breach inside the definition of a graded name (``class BiGRUEncoder``) costs that question; inside a helper or a
top-level statement, the questions whose code uses what it defines, directly or through other helpers; top-level
code that binds nothing (``exec(...)`` on its own line) can change anything, so it costs every question the lab
ties to the rules. A construct that is only suspicious (``Breach.review_only``) costs nothing and goes to a person.
"""

from __future__ import annotations

import ast

from attnlab.grading.source.notebook_code import python_source


def student_cells(student) -> list[tuple[str, str]]:
    """The graded cells of ``student`` as ``(where, source)``, ``where`` naming the cell as the student sees it
    (``the cell defining `attention```), when the student has them (a ``RemoteStudent``: the grader's own copy),
    else its whole source as one block."""
    inner = getattr(student, "inner", student)  # diagnose.Recorder wraps the student
    cells = getattr(inner, "cells", None)
    if isinstance(cells, list) and all(isinstance(c, dict) for c in cells):
        return [(str(c.get("where") or f"cell {c.get('index')}"), python_source(str(c.get("source", ""))))
                for c in cells]
    source = getattr(student, "source", None)
    code = source(None) if source is not None else None
    return [("", code)] if code else []


def top_level_names(statement: ast.AST) -> tuple:
    """What a top-level statement defines or binds (``def f`` -> ``("f",)``; ``a = b = 1`` -> ``("a", "b")``)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (statement.name,)
    names = []
    for node in ast.walk(statement):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [(a.asname or a.name).split(".")[0] for a in node.names]
    return tuple(dict.fromkeys(names))


def uses_by_name(cells: list[tuple[str, str]]) -> dict[str, set[str]]:
    """Each top-level name of the graded cells -> the names its code reads (a ``def``/``class`` body, or the
    statement that binds it), over every cell."""
    uses: dict[str, set[str]] = {}
    for _, code in cells:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for statement in tree.body:
            read = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            for name in top_level_names(statement):
                uses.setdefault(name, set()).update(read)
    return uses


def costed_questions(scope: tuple, questions: list[str], uses: dict[str, set[str]]) -> list[str]:
    """The ``questions`` whose code holds or uses the top-level names ``scope`` (``()``: every question)."""
    if not scope:
        return list(questions)
    out = []
    for question in questions:
        seen, todo = set(), [question]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo += [n for n in uses.get(name, ()) if n in uses]
        if seen & set(scope):
            out.append(question)
    return out


def question_code(question: str, uses: dict[str, set[str]], on_reference=()) -> set[str]:
    """The top-level names whose code is ``question``'s: its own and what it uses, directly or through other
    helpers, but not the graded names its tests run with the reference's version (``on_reference``): a forbidden
    call there is the other question's."""
    seen, todo = set(), [question]
    while todo:
        name = todo.pop()
        if name in seen or name in on_reference and name != question:
            continue
        seen.add(name)
        todo += [n for n in uses.get(name, ()) if n in uses]
    return seen
