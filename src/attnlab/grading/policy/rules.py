"""The course rules: what the graded cells of a submission may contain (the one description of them).

The rules are an ALLOWLIST over what the graded cells can reach; whatever they cannot prove allowed is a breach.
The rules:

1. Imports: only the modules in ``DEFAULT_IMPORTS`` (and their public submodules, not ``DENIED_MODULES``: torch's
   internal layout ``torch.nn.modules``, ``torch.utils.benchmark``...) plus what a lab adds with
   ``HiddenSuite(lab, allowed_imports=...)``; never ``attnlab.grading``, never a relative or ``*`` import. A module
   reached as an attribute (``plt.matplotlib``, ``nn.modules.activation``) must be allowed just the same.
2. Attributes, read or written on ANY object (so an alias such as ``_g = F`` does not help): no private name
   (``_x``) except on ``self``, no dunder outside ``ALLOWED_DUNDERS``, none of ``DENIED_ATTRIBUTES`` (module names
   such as ``sys``/``os``/``grading`` that modules re-export, and ``torch.ops``/``torch.hub``/``load``...).
3. Modules are used only through their attributes (``F.softmax``): a module bound by an import, or a dotted path
   that names a module (``torch.nn.functional``), is never a value (assigned, passed, returned, stored), and no
   attribute of a module is assigned or deleted (``torch.allclose = ...``).
4. No reflection or dynamic code: the names in ``DENIED_NAMES`` (``vars``, ``globals``, ``locals``, ``setattr``,
   ``delattr``, ``exec``, ``eval``, ``compile``, ``__import__``, ``__builtins__``, ``open``, ...) are never used;
   ``getattr``/``hasattr`` only as a direct call with a constant string that rule 2 allows
   (``getattr(self, "bias", None)``), so no name is computed at run time; ``type`` only with one argument,
   ``super`` with none, no ``.mro()`` (a class's ancestors: ``nn.LSTM.mro()[1]`` is ``RNNBase``);
   no dunder name (``__loader__``), no dunder method outside ``ALLOWED_DUNDERS``, no ``metaclass=``. A string
   that parses as Python code (a type hint that ``typing``/``functools.singledispatch`` evaluate, a timer's
   statement) is checked as code, by these same rules; so are paths from data to code (``reflection``).
5. Lab rules (``forbidden_calls``): a lab's forbidden library functions (``assert_not_used``) are refused as
   attributes of anything, as imported names, as strings, inside strings that run as code, and through the
   library classes that hold them (``REACHES``: ``nn.TransformerEncoderLayer`` holds an ``nn.MultiheadAttention``);
   a student's own function of the same name, called bare, is fine.
6. Costs (``rule_costs``), proportionate and stated in each notebook's opening and ``docs/CURRICULUM.md``: a breach
   costs the question it appears in (or whose code uses the helper or top-level name it is in; top-level code
   that binds nothing costs every question the lab ties to the rules, ``HiddenSuite(policy_questions=...)``),
   never the lab for one answer's sake; ``setattr(self, ...)``/``getattr(self, ...)`` with a name built at run
   time is only suspicious (``Breach.review_only``): it costs nothing and goes to a person. Every breach is named
   in the feedback by cell, line, code and rule, and listed in the result's ``review``.

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

from attnlab.grading.policy import reflection
from attnlab.grading.policy.forbidden_calls import code_in_string
from attnlab.grading.policy.rule_costs import top_level_names

# Every addition is deliberate: what the solutions, blank notebooks, catalogue entries and variants of the nine
# labs import (torch and its public submodules, math, re, time, collections, matplotlib.pyplot, tqdm.auto,
# attnlab's student-facing modules), plus the standard helpers an honest answer may reach for.
DEFAULT_IMPORTS = frozenset({
    "__future__", "torch", "numpy", "math", "re", "time", "collections", "itertools", "functools", "dataclasses",
    "typing", "string", "random", "unicodedata", "heapq", "bisect", "statistics", "copy", "matplotlib.pyplot",
    "tqdm", "attnlab.kit.expect", "attnlab.kit.plotting", "attnlab.kit.training", "attnlab.kit.datasets",
    "attnlab.kit.device", "attnlab.kit.seeding",
})
ALLOWED_DUNDERS = frozenset({
    # what honest code defines or reads; not __name__ (selecting a function by a computed name) nor __class__
    "__init__", "__call__", "__doc__", "__version__", "__len__", "__getitem__", "__iter__", "__next__", "__repr__",
    "__str__", "__contains__",
})
DENIED_ATTRIBUTES = frozenset({
    # modules that allowed modules re-export (torch.sys, attnlab.kit.device.os, np.ctypeslib) and attnlab's grader
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
    "Formatter", "get_field", "attrgetter", "methodcaller", "read_array", "NpzFile", "npyio",
    # a class's ancestors: nn.LSTM.mro()[1] is the forbidden RNNBase
    "mro",
})
DENIED_NAMES = frozenset({
    "vars", "globals", "locals", "dir", "setattr", "delattr", "exec", "eval", "compile", "__import__",
    "__builtins__", "breakpoint", "open", "input", "memoryview", "help",
})
CONSTANT_NAME_CALLS = frozenset({"getattr", "hasattr"})
# modules inside allowed packages that the graded cells may not reach: torch's internal layout (where its ready-made
# layers live under other names), attention back ends, and what runs code strings (a benchmark Timer's ``stmt``)
DENIED_MODULES = ("torch.nn.modules", "torch.nn.attention", "torch.utils.benchmark", "torch.testing",
                  "torch.compiler", "torch.export", "torch.onnx", "torch.utils.bundled_inputs", "torch.utils.jit",
                  "timeit", "pydoc")
MAX_BREACHES = 50  # per submission: a person reviews these; the rest is summed up in one line


class _Enough(Exception):
    """MAX_BREACHES were found: stop walking (a hostile notebook cannot make the check slow)."""


@dataclass(frozen=True)
class Breach:
    """One construct the rules do not allow: where (``cell 12, line 3`` or ``line 3``), the code, and why.

    ``scope``: the top-level names whose code holds it (a ``def``/``class``, or what a top-level statement binds);
    ``()`` for top-level code that binds nothing. ``review_only``: only suspicious (rule 6): a person looks at it
    and it costs nothing.
    """

    where: str
    text: str
    why: str
    scope: tuple = ()
    review_only: bool = False

    def __str__(self) -> str:
        return f"{self.where}: `{self.text}` ({self.why})"


def _is_allowed_module(dotted: str, allowed: frozenset) -> bool:
    parts = dotted.split(".")
    if any(p.startswith("_") and p != "__future__" or p in DENIED_ATTRIBUTES for p in parts):
        return False
    if any(dotted == d or dotted.startswith(d + ".") for d in DENIED_MODULES):
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


def _module_reached(dotted: str, allowed: frozenset) -> str:
    """The first module that a step of ``dotted`` reaches and the graded cells may not use (``torch.nn.modules``
    in ``torch.nn.modules.activation``: torch's internal layout; ``matplotlib`` in ``plt.matplotlib``), else ''.
    Looked up among the modules this process has loaded, through their ``__dict__``: nothing is imported or run."""
    parts = dotted.split(".")
    found = sys.modules.get(parts[0])
    for part in parts[1:]:
        found = (getattr(found, "__dict__", None) or {}).get(part)
        if isinstance(found, type(sys)):
            name = str(getattr(found, "__name__", ""))
            if name.startswith(DENIED_MODULES) or not _is_allowed_module(name, allowed):
                return name
    return ""


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
        for statement in getattr(tree, "body", [tree]):
            self.scope = top_level_names(statement)
            self.visit(statement)
        return self.hits

    scope: tuple = ()
    review: bool = False  # set while a hit is only suspicious

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
        self.hits.append(Breach(where, text[:100], why, self.scope, self.review))

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
        path = self._module_path(node) if isinstance(node.ctx, ast.Load) else ""
        if path and not self._used_through(node) and _names_a_module(path):
            self.hit(node, "a module is used only through its attributes, never as a value")
        if path and not isinstance(self.parents.get(id(node)), ast.Attribute):  # the whole chain, once
            module = next((d for d in DENIED_MODULES if path == d or path.startswith(d + ".")), "") or \
                _module_reached(path, self.allowed)  # written (not loaded here), or reached by a step
            if module:
                self.hit(node, f"{path} reaches the module {module}, which the graded cells may not use")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        """Rule 4: a string that parses as Python code (a type hint, a timer's statement) is checked as code; not a
        docstring or other bare string statement, which nothing the rules allow can run."""
        tree = None if isinstance(self.parents.get(id(node)), ast.Expr) else code_in_string(node.value)
        if tree is None:
            return
        found: list[Breach] = []
        _Scan(node.value, "", self.allowed, dict(self.modules), found).scan(tree)
        for inner in found[:3]:
            self.hit(node, f"a string that Python can run as code (a type hint, a timer's statement): {inner.why}")

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
    def _on_self(self, node: ast.Name, arguments: int) -> bool:
        """``node`` is called directly as ``name(self, <name>, ...)`` with ``arguments`` arguments or more."""
        parent = self.parents.get(id(node))
        return isinstance(parent, ast.Call) and parent.func is node and len(parent.args) >= arguments \
            and isinstance(parent.args[0], ast.Name) and parent.args[0].id == "self" and not parent.keywords

    def _suspicious(self, node: ast.Name, why: str) -> None:
        self.review = True
        try:
            self.hit(node, f"{why}: the rule 'no names computed at run time' (a person will review it; no points "
                           "lost; nn.ModuleList / nn.ParameterList hold numbered layers without it)")
        finally:
            self.review = False

    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name == "setattr" and self._on_self(node, 3):
            self._suspicious(node, "setattr(self, ...) with a name built at run time")
        elif name in CONSTANT_NAME_CALLS and self._on_self(node, 2) and not self._constant_name_call(node):
            self._suspicious(node, f"{name}(self, ...) with a name built at run time")
        elif name in DENIED_NAMES:
            self.hit(node, f"{name} is not allowed (reflection or dynamic code)")
        elif name.startswith("__") and name.endswith("__") and name not in ALLOWED_DUNDERS:
            self.hit(node, f"the name {name} is not allowed")
        elif name in CONSTANT_NAME_CALLS and not self._constant_name_call(node):
            self.hit(node, f"{name} only as a direct call with a constant attribute name, e.g. "
                           f"{name}(self, \"bias\")")
        elif name == "super" and not self._one_argument_call(node, 0):
            self.hit(node, "super only as super(): super(X, self) reaches the methods of the classes above X")
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

    def _one_argument_call(self, node: ast.Name, count: int = 1) -> bool:
        parent = self.parents.get(id(node))
        return isinstance(parent, ast.Call) and parent.func is node and len(parent.args) == count \
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
        self._annotation(node.returns)
        self.generic_visit(node)

    def _annotation(self, node: ast.AST | None) -> None:
        if why := reflection.computed_annotation(node):  # rule 4: data a library turns into code
            self.hit(node, why)

    def visit_arg(self, node: ast.arg) -> None:  # an argument's annotation (and an annotated assignment's)
        self._annotation(node.annotation)
        self.generic_visit(node)
    visit_AnnAssign = visit_arg

    def visit_keyword(self, node: ast.keyword) -> None:
        if why := reflection.unpickling_keyword(node):  # rule 4: unpickling turns data into objects
            self.hit(node.value, why)
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


