"""The course rules: what the graded cells of a submission may contain (the one description of them).

The rules are an ALLOWLIST over the syntax of the graded cells; whatever they cannot prove allowed is a breach.
A breach costs the questions the lab ties to the rules (``HiddenSuite(lab, policy_questions=...)``, None meaning
every question), is named in the feedback by cell, line and code text, and is listed in the result's ``review``
for a person to look at. The rules:

1. Imports: only the modules in ``DEFAULT_IMPORTS`` (and their public submodules) plus what a lab adds with
   ``HiddenSuite(lab, allowed_imports=...)``; never ``attnlab.grading``, never a relative or ``*`` import.
2. Attributes, read or written on ANY object (so an alias such as ``_g = F`` does not help): no private name
   (``_x``) except on ``self``, no dunder outside ``ALLOWED_DUNDERS``, none of ``DENIED_ATTRIBUTES`` (module names
   such as ``sys``/``os``/``grading`` that modules re-export, and ``torch.ops``/``torch.hub``/``load``...).
3. Modules are used only through their attributes (``F.softmax``): a module bound by an import, or a dotted path
   that names a module (``torch.nn.functional``), is never a value (assigned, passed, returned, stored), and no
   attribute of a module is assigned or deleted (``torch.allclose = ...``).
4. No reflection or dynamic code: the names in ``DENIED_NAMES`` (``vars``, ``globals``, ``locals``, ``setattr``,
   ``delattr``, ``exec``, ``eval``, ``compile``, ``__import__``, ``__builtins__``, ``open``, ...) are never used;
   ``getattr``/``hasattr`` only as a direct call with a constant string that rule 2 allows
   (``getattr(self, "bias", None)``), so no name is computed at run time; ``type`` only with one argument;
   no dunder name (``__loader__``), no dunder method outside ``ALLOWED_DUNDERS``, no ``metaclass=``.
5. Lab rules: a lab's forbidden library functions (``assert_not_used``) are refused as attributes of anything,
   as imported names and as strings; a student's own function of the same name, called bare, is fine.

This is a policy check on the source, not a security measure: the sandbox is the security boundary, and the
grader decides every score in its own process. RestrictedPython was considered and not used: it rewrites the
code and enforces its guards at run time inside the executing process (here: the sandboxed worker, whose replies
are untrusted), it refuses every ``_`` name (``self._embed`` in honest code), and it would add a dependency; a
static allowlist over ``ast`` in the grader is simpler, and what it cannot prove allowed goes to a person.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from typing import Iterable

# Every addition is deliberate: what the solutions, blank notebooks, catalogue entries and variants of the nine
# labs import (torch and its public submodules, math, re, time, collections, matplotlib.pyplot, tqdm.auto,
# attnlab's student-facing modules), plus the standard helpers an honest answer may reach for.
DEFAULT_IMPORTS = frozenset({
    "__future__", "torch", "numpy", "math", "re", "time", "collections", "itertools", "functools", "dataclasses",
    "typing", "string", "random", "unicodedata", "heapq", "bisect", "statistics", "copy", "matplotlib.pyplot",
    "tqdm", "attnlab.expect", "attnlab.plotting", "attnlab.training", "attnlab.datasets", "attnlab.device",
    "attnlab.seeding",
})
ALLOWED_DUNDERS = frozenset({
    # what honest code defines or reads; not __name__ (selecting a function by a computed name) nor __class__
    "__init__", "__call__", "__doc__", "__version__", "__len__", "__getitem__", "__iter__", "__next__", "__repr__",
    "__str__", "__contains__",
})
DENIED_ATTRIBUTES = frozenset({
    # modules that allowed modules re-export (torch.sys, attnlab.device.os, np.ctypeslib) and attnlab's grader
    "sys", "os", "posix", "nt", "subprocess", "importlib", "builtins", "inspect", "pickle", "dill", "cloudpickle",
    "copyreg", "shelve", "marshal", "ctypes", "ctypeslib", "cffi", "codecs", "operator", "types", "gc", "runpy",
    "code", "codeop", "imp", "pkgutil", "socket", "shutil", "io", "pathlib", "tempfile", "urllib", "http",
    "multiprocessing", "threading", "signal", "resource", "pty", "platform", "sysconfig", "site", "ast", "dis",
    "linecache", "traceback", "weakref", "tarfile", "zipfile", "zipimport", "gzip", "webbrowser", "grading",
    # torch's raw operator registry, code loading, compilation from text, every function listed in one place
    "ops", "hub", "library", "classes", "package", "cpp_extension", "jit", "fx", "serialization", "load", "loads",
    "overrides", "distributed", "rpc", "f2py", "distutils",
    # frames and code objects (a frame's globals hold the built-ins), names resolved or evaluated from strings
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next", "f_globals",
    "f_locals", "f_builtins", "f_back", "f_code", "co_code", "co_consts", "get_type_hints", "ForwardRef",
    "Formatter", "get_field", "attrgetter", "methodcaller",
})
DENIED_NAMES = frozenset({
    "vars", "globals", "locals", "dir", "setattr", "delattr", "exec", "eval", "compile", "__import__",
    "__builtins__", "breakpoint", "open", "input", "memoryview", "help",
})
CONSTANT_NAME_CALLS = frozenset({"getattr", "hasattr"})
MAX_BREACHES = 50  # per submission: a person reviews these; the rest is summed up in one line


class _Enough(Exception):
    """MAX_BREACHES were found: stop walking (a hostile notebook cannot make the check slow)."""


@dataclass(frozen=True)
class Breach:
    """One construct the rules do not allow: where (``cell 12, line 3`` or ``line 3``), the code, and why."""

    where: str
    text: str
    why: str

    def __str__(self) -> str:
        return f"{self.where}: `{self.text}` ({self.why})"


def _is_allowed_module(dotted: str, allowed: frozenset) -> bool:
    parts = dotted.split(".")
    if any(p.startswith("_") and p != "__future__" or p in DENIED_ATTRIBUTES for p in parts):
        return False
    return any(".".join(parts[:i]) in allowed for i in range(1, len(parts) + 1))


def _names_a_module(dotted: str) -> bool:
    """``dotted`` names a module (``torch.nn.functional``): looked up among the modules this process has loaded,
    through their ``__dict__``, so nothing the student wrote is imported or run here."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        found = sys.modules.get(".".join(parts[:i]))
        if found is not None:
            break
    else:
        return False
    for part in parts[i:]:
        found = (getattr(found, "__dict__", None) or {}).get(part)
    return isinstance(found, type(sys))


class _Scan(ast.NodeVisitor):
    """Walks one cell's tree and records every construct the rules cannot prove allowed."""

    def __init__(self, code: str, where: str, allowed: frozenset, modules: dict[str, str], hits: list[Breach]):
        self.code, self.where, self.allowed = code, where, allowed
        self.lines = code.splitlines()
        self.modules = modules  # bound name -> dotted module path (shared across cells: imports carry over)
        self.parents: dict[int, ast.AST] = {}
        self.hits = hits  # shared across cells, at most MAX_BREACHES

    def scan(self, tree: ast.AST) -> list[Breach]:
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
        self.visit(tree)
        return self.hits

    def hit(self, node: ast.AST, why: str) -> None:
        """Record ``node``: its line of code, and in the reason the construct itself (``F`` in ``_g = F``)."""
        if len(self.hits) >= MAX_BREACHES:
            raise _Enough
        line, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        segment = ""
        if line == end:  # one line: the construct itself, cut from it
            segment = self.lines[line - 1].encode()[node.col_offset:node.end_col_offset].decode(errors="replace")
        if segment and segment != text and not why.startswith(segment):
            why = f"{segment[:60]}: {why}"
        where = f"{self.where}, line {line}" if self.where else f"line {line}"
        self.hits.append(Breach(where, text[:100], why))

    # -- rule 1: imports ---------------------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if not _is_allowed_module(alias.name, self.allowed):
                self.hit(node, f"importing {alias.name} is not allowed in the graded cells")
            elif alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                self.modules[alias.name.split(".")[0]] = alias.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.hit(node, "a relative import is not allowed")
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            if alias.name == "*":
                self.hit(node, f"`from {module} import *` hides what it binds; import the names you use")
            elif not (_is_allowed_module(module, self.allowed) or _is_allowed_module(full, self.allowed)):
                self.hit(node, f"importing from {module} is not allowed in the graded cells")
            elif not self._attribute_ok(node, alias.name):
                pass
            elif _names_a_module(full):
                self.modules[alias.asname or alias.name] = full

    # -- rule 2: attribute names, whatever they are read from ------------------------------------------------
    def _attribute_ok(self, node: ast.AST, name: str, on_self: bool = False) -> bool:
        if name.startswith("__") and name.endswith("__"):
            if name not in ALLOWED_DUNDERS:
                self.hit(node, f"the attribute {name} is not allowed (reflection)")
                return False
        elif name.startswith("_") and not on_self:
            self.hit(node, f"the private attribute {name} is not allowed (only self._name of your own classes)")
            return False
        elif name in DENIED_ATTRIBUTES:
            self.hit(node, f"the attribute {name} is not allowed in the graded cells")
            return False
        return True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
        if self._attribute_ok(node, node.attr, on_self) and not isinstance(node.ctx, ast.Load):
            if self._module_path(node.value):
                self.hit(node, "changing an attribute of a module is not allowed")
        if isinstance(node.ctx, ast.Load) and not self._used_through(node) and self._module_path(node):
            if _names_a_module(self._module_path(node)):
                self.hit(node, "a module is used only through its attributes, never as a value")
        self.generic_visit(node)

    def visit_MatchClass(self, node: ast.AST) -> None:
        for name in getattr(node, "kwd_attrs", []):
            self._attribute_ok(node, name)
        self.generic_visit(node)

    # -- rule 3: modules only through their attributes -----------------------------------------------------------
    def _module_path(self, node: ast.AST) -> str:
        """The dotted path ``node`` names when it is an attribute chain on an imported module, else ''."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id, "")
        if isinstance(node, ast.Attribute):
            base = self._module_path(node.value)
            return f"{base}.{node.attr}" if base else ""
        return ""

    def _used_through(self, node: ast.AST) -> bool:
        """``node`` is read through (``node.x``) or called (``node(...)``) rather than used as a value."""
        parent = self.parents.get(id(node))
        return (isinstance(parent, ast.Attribute) and parent.value is node) or \
            (isinstance(parent, ast.Call) and parent.func is node)

    # -- rule 4: names, reflection, dynamic code -----------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in DENIED_NAMES:
            self.hit(node, f"{name} is not allowed (reflection or dynamic code)")
        elif name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
            self.hit(node, f"the name {name} is not allowed")
        elif name in CONSTANT_NAME_CALLS and not self._constant_name_call(node):
            self.hit(node, f"{name} only as a direct call with a constant attribute name, e.g. "
                           f"{name}(self, \"bias\")")
        elif name == "type" and not self._one_argument_call(node):
            self.hit(node, "type only as type(x), to read a value's class")
        elif name == "self" and not isinstance(node.ctx, ast.Load):
            self.hit(node, "self is bound only by Python, as a method's first argument")
        elif name in self.modules and not (isinstance(node.ctx, ast.Load) and self._used_through(node)):
            self.hit(node, "a module is used only through its attributes: never as a value, never rebound")

    def _constant_name_call(self, node: ast.Name) -> bool:
        parent = self.parents.get(id(node))
        if not (isinstance(parent, ast.Call) and parent.func is node and len(parent.args) >= 2):
            return False
        name = parent.args[1]
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()):
            return False
        on_self = isinstance(parent.args[0], ast.Name) and parent.args[0].id == "self"
        return self._attribute_ok(parent, name.value, on_self)

    def _one_argument_call(self, node: ast.Name) -> bool:
        parent = self.parents.get(id(node))
        return isinstance(parent, ast.Call) and parent.func is node and len(parent.args) == 1 \
            and not parent.keywords

    def visit_arguments(self, node: ast.arguments) -> None:
        positional = node.posonlyargs + node.args
        defaults = dict(zip([a.arg for a in positional[len(positional) - len(node.defaults):]], node.defaults))
        defaults.update({a.arg: d for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None})
        if "self" in defaults:
            self.hit(defaults["self"], "self is bound only by Python, never by a default value")
        self.generic_visit(node)

    def _dunder_definition(self, node: ast.AST, name: str) -> None:
        if name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
            self.hit(node, f"defining {name} is not allowed (it changes how Python treats your objects)")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._dunder_definition(node, node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for keyword in node.keywords:
            self.hit(keyword, f"the class keyword {keyword.arg or '**'} is not allowed")
        self.generic_visit(node)


def breaches(cells: Iterable[tuple[str, str]], allowed_imports: Iterable[str] = ()) -> list[Breach]:
    """What the rules refuse in the graded ``cells`` (``(where, source)`` pairs, ``where`` naming the cell such as
    ``"cell 12"``, or ``""`` for one block of code), each construct once, in order."""
    allowed = DEFAULT_IMPORTS | frozenset(allowed_imports)
    modules: dict[str, str] = {}
    found: list[Breach] = []
    for where, code in cells:
        try:
            _Scan(code, where, allowed, modules, found).scan(ast.parse(code))
        except SyntaxError:
            continue  # the worker reports it; a cell that does not run breaks no rule
        except (RecursionError, MemoryError):
            found.append(Breach(where or "the code", "", "nested too deeply to be checked against the rules"))
        except _Enough:
            found.append(Breach(where or "the code", "...", f"more than {MAX_BREACHES} constructs the rules refuse; "
                                                             "the rest of the graded cells was not checked"))
            break
    return list(dict.fromkeys(found))


def student_cells(student) -> list[tuple[str, str]]:
    """The graded cells of ``student`` as ``(where, source)``: per notebook cell when the student has them (a
    ``RemoteStudent``: the grader's own copy), else its whole source as one block."""
    inner = getattr(student, "inner", student)  # diagnose.Recorder wraps the student
    cells = getattr(inner, "cells", None)
    if isinstance(cells, list) and all(isinstance(c, dict) for c in cells):
        from .notebook_code import python_source

        return [(f"cell {c.get('index')}", python_source(str(c.get("source", "")))) for c in cells]
    source = getattr(student, "source", None)
    code = source(None) if source is not None else None
    return [("", code)] if code else []


def forbidden_uses(code: str | None, names: Iterable[str]) -> list[str]:
    """Where ``code`` uses any of ``names`` as an attribute of anything (``F.x``, ``_g.x``), an imported name, a
    match-pattern attribute, or a string (``operator.attrgetter("x")``).

    A bare call of the student's own function with the same name (``scaled_dot_product_attention(q, k, v)``)
    is allowed: only the library versions are caught.
    """
    if not code:
        return []
    names = set(names)
    try:
        tree = ast.parse(code)
    except (SyntaxError, RecursionError, MemoryError):
        return []
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in names:
            hits.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            hits += [f"line {node.lineno}: from {node.module} import {a.name}" for a in node.names if a.name in names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            hits.append(f"line {node.lineno}: {node.value!r}")
        elif type(node).__name__ == "MatchClass":
            hits += [f"line {node.lineno}: {a}=" for a in getattr(node, "kwd_attrs", []) if a in names]
    return hits


class ForbiddenUse(AssertionError):
    """A hidden test failed because the code uses a lab's forbidden function (``assert_not_used``): the suite
    records it as a course-rule breach by this type, never by its text."""


def assert_not_used(student, names: Iterable[str], *, why: str) -> None:
    """Fail (``ForbiddenUse``) when the submission's code uses any of the library functions in ``names``."""
    hits = forbidden_uses(student.source(None), names)
    if hits:
        raise ForbiddenUse(f"{why}; found {', '.join(hits[:5])}")
