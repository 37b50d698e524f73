"""What the worker SAW RUN of a lab's forbidden library calls (rule 5), checked by the grader and costed.

The source check (``grading/policy/forbidden_calls.py``) is the first line and the source of the messages. This
module adds what happened: in the worker, before the student's cells run, the lab's forbidden callables
(``watched_names``: every name the suite's checks can be asked about, and what reaches them) are wrapped where torch
keeps them (``OWNERS``: ``torch.nn.functional.scaled_dot_product_attention``, ``torch.nn.MultiheadAttention``'s
``__init__`` and ``forward``...), and the operation guard (``op_guard``) sees the operations they run, whatever
route reached them (``aten.native_layer_norm``). A use is recorded only

- during a graded call (a request of the narrow interface), never while the notebook's own cells load;
- when the code that called it is the student's: for a wrapped callable, the calling frame is a cell
  (``<cell N>``; for a class's ``forward``, the first frame past ``nn.Module.__call__``); for an operation, the
  innermost cell frame on the stack (what library code runs on the student's behalf is the student's).

The worker sends the uses with each reply (``{"call", "cell", "line", "count"}``, at most ``MAX_USES``). A student
can tamper with the worker, so nothing is believed beyond its form: the grader (``remote.RemoteStudent``) keeps only
uses that name a watched callable or one of its operations, a cell it sent and a line inside that cell; ``Tracker``
then costs a question whose tests ran, from the question's own code (``rule_costs.question_code``, as the source
check reads it), a forbidden call its static check did not see: the whole question, as the rule says, named by cell
and line; a call from code that is not the question's goes to a person (no points taken); and the evidence is added
to the message of a question the static check already costs. Each use is named by cell and line as the student sees
them (``notebook_code.cell_where``).
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from attnlab.grading.policy import forbidden_calls, forbidden_ops, rule_costs
from attnlab.grading.source.notebook_code import cell_where, python_source
from attnlab.grading.worker import op_guard
from attnlab.records import result_fields as fields

# where torch keeps the callables the labs forbid (a watched name is wrapped in each of these that holds it)
OWNERS = ("torch", "torch.nn", "torch.nn.functional", "torch.Tensor", "torch.autograd", "torch.autograd.functional",
          "torch.func", "torch.linalg")
MAX_WATCHED = 64  # names sent to the worker
MAX_NAME = 64
MAX_USES = 20  # distinct (call, cell, line) in one reply; the grader refuses a longer list
MAX_COUNT = 10**9
_CHECKS = ("assert_not_used", "forbidden_uses", "forbidden_uses_in", "ForbiddenUse")  # calls that name the rule's names


class Use(NamedTuple):
    """A forbidden callable that ran from the student's code: ``call`` (``torch.nn.functional.x``), the cell's
    index in the notebook, the line inside the cell, and how many times in the reply."""

    call: str
    cell: int
    line: int
    count: int


# -- the grader: what to watch ------------------------------------------------------------------------------------
def watched_names(source: str, namespace: dict) -> tuple[str, ...]:
    """The names a suite's checks can be asked about: in the hidden tests' ``source``, every list of strings given
    to a check (``assert_not_used(student, FORBIDDEN, ...)``, ``forbidden_uses_in``, ``ForbiddenUse``), written
    there or named by a module constant (``namespace``: the module's globals), with what reaches them."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    found: list[str] = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        called = getattr(func, "attr", None) or getattr(func, "id", None)
        if not (isinstance(node, ast.Call) and called in _CHECKS):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            for sub in ast.walk(arg):
                value = namespace.get(sub.id) if isinstance(sub, ast.Name) else None
                if isinstance(sub, (ast.List, ast.Tuple)):
                    value = [e.value for e in sub.elts if isinstance(e, ast.Constant)]
                if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                    found += value
    names = sorted(forbidden_calls.reaching(n for n in found if n.isidentifier() and len(n) <= MAX_NAME))
    return tuple(names[:MAX_WATCHED])


def suite_watch(path: Path, module: Any) -> tuple[str, ...]:
    """``watched_names`` of the hidden tests file ``path`` imported as ``module`` (trusted)."""
    try:
        return watched_names(Path(path).read_text(), vars(module))
    except OSError:
        return ()


def guarded_questions(source: str, tests: Iterable) -> frozenset[str] | None:
    """The questions whose tests can ask a check about forbidden names, read from the hidden tests' ``source``: a test
    function (``tests``: ``hidden.HiddenTest``) that names one of ``_CHECKS`` or ``forbidden_calls``, itself or
    through the module's top-level definitions it names, transitively. Only those questions' graded calls need the
    operation guard (``op_guard``), whose cost is on every torch call (``Tracker`` counts what the worker saw only
    for a question that asked). None, every question guarded, when the source does not parse or a test's function
    is not a top-level definition of it."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    asks: dict[str, bool] = {}  # top-level name -> a statement binding it names a check
    refers: dict[str, set[str]] = {}  # top-level name -> the names its statements read
    for statement in tree.body:
        mentioned = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(statement) if isinstance(n, ast.Attribute)}
        for name in rule_costs.top_level_names(statement):
            asks[name] = asks.get(name, False) or bool(mentioned & {*_CHECKS, "forbidden_calls"})
            refers.setdefault(name, set()).update(mentioned)

    def reaches(name: str) -> bool:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current in seen or current not in asks:
                continue
            if asks[current]:
                return True
            seen.add(current)
            todo += refers[current]
        return False

    guarded = set()
    for test in tests:
        name = getattr(test.func, "__name__", None)
        if name not in asks:
            return None
        if reaches(name):
            guarded.add(test.question)
    return frozenset(guarded)


# -- the worker: wrap and record ----------------------------------------------------------------------------------
class _State:
    active = False
    uses: dict = {}
    module_call_file = ""
    leave_guard = staticmethod(lambda: None)  # op_guard.begin's exit, while a graded call runs


def install(names: Iterable[str]) -> list[str]:
    """Wrap each watched callable in ``OWNERS`` (in the worker, before the student's cells run); returns what was
    wrapped (``torch.nn.functional.scaled_dot_product_attention``). Nothing is recorded until ``begin``."""
    names = [n for n in list(names)[:MAX_WATCHED] if isinstance(n, str) and n.isidentifier()]
    if not names:
        return []
    op_guard.install(names, _count)
    import importlib

    import torch

    _State.module_call_file = torch.nn.modules.module.__file__
    wrapped = []
    for owner_name in OWNERS:
        try:
            owner = torch.Tensor if owner_name == "torch.Tensor" else importlib.import_module(owner_name)
        except ImportError:
            continue
        for name in names:
            target = getattr(owner, name, None)
            call = f"{owner_name}.{name}"
            if isinstance(target, type):
                _wrap_class(target, call)
            elif callable(target) and not isinstance(target, type(sys)) and not getattr(target, "_attnlab_watch", 0):
                setattr(owner, name, _wrapped(target, call, through_module=False))
            else:
                continue
            wrapped.append(call)
    return wrapped


def _wrap_class(cls: type, call: str) -> None:
    for method in ("__init__", "forward"):
        inner = cls.__dict__.get(method)
        if callable(inner) and not getattr(inner, "_attnlab_watch", 0):
            setattr(cls, method, _wrapped(inner, call, through_module=method == "forward"))


def _wrapped(inner, call: str, through_module: bool):
    @functools.wraps(inner)
    def watched(*args, **kwargs):
        if _State.active:
            _record(call, sys._getframe(1), through_module)
        return inner(*args, **kwargs)

    watched._attnlab_watch = 1
    return watched


def _record(call: str, frame, through_module: bool) -> None:
    """Count the use when the calling frame (past ``nn.Module.__call__`` for a ``forward``) is a cell's."""
    while through_module and frame is not None and frame.f_code.co_filename == _State.module_call_file:
        frame = frame.f_back
    filename = frame.f_code.co_filename if frame is not None else ""
    if filename.startswith("<cell ") and filename.endswith(">") and filename[6:-1].isdigit():
        _count(call, int(filename[6:-1]), frame.f_lineno)


def _count(call: str, cell: int, line: int) -> None:
    """One more use of ``call`` at ``line`` of cell ``cell`` (at most ``MAX_USES`` distinct ones per reply)."""
    key = (call, cell, line)
    if _State.active and (key in _State.uses or len(_State.uses) < MAX_USES):
        _State.uses[key] = min(_State.uses.get(key, 0) + 1, MAX_COUNT)


def begin(guard: bool = True) -> None:
    """A graded call starts: record from now on, the operation guard on (``op_guard``) unless ``guard`` is False (the
    grader says so for a question whose tests ask no check about forbidden names: ``guarded_questions``)."""
    _State.uses, _State.active = {}, True
    _State.leave_guard = op_guard.begin() if guard else (lambda: None)


def end() -> list[dict]:
    """The graded call ended: what it recorded, as the reply's ``evidence``."""
    _State.leave_guard()
    _State.leave_guard, _State.active = (lambda: None), False
    return [{"call": c, "cell": i, "line": line, "count": n} for (c, i, line), n in _State.uses.items()]


# -- the grader: believe nothing ----------------------------------------------------------------------------------
def checked_uses(raw: Any, cells: list[dict], watch: Iterable[str]) -> tuple[list[Use], int]:
    """The worker's ``evidence`` as ``Use`` entries the grader can stand behind, and how many entries it refused:
    each must name a watched callable in ``OWNERS``, a cell that was sent and a line inside it."""
    if raw is None or (isinstance(raw, list) and not raw):  # nearly every reply: nothing to check
        return [], 0
    if not isinstance(raw, list) or len(raw) > MAX_USES:
        return [], 1
    watch, good, bad = set(watch), [], 0
    ops = forbidden_ops.ops_for(watch)  # what the operation guard reports: ``aten.native_layer_norm``
    lines = {c["index"]: python_source(str(c["source"])).count("\n") for c in cells}
    for entry in raw:
        ok = isinstance(entry, dict) and set(entry) == {"call", "cell", "line", "count"} \
            and all(type(entry[k]) is int for k in ("cell", "line", "count")) and isinstance(entry["call"], str)
        owner, _, name = entry["call"].rpartition(".") if ok else ("", "", "")
        known = owner in OWNERS and name in watch or owner == forbidden_ops.OWNER and name in ops
        if ok and known and 0 < entry["line"] <= lines.get(entry["cell"], 0) and 0 < entry["count"] <= MAX_COUNT:
            good.append(Use(entry["call"], entry["cell"], entry["line"], entry["count"]))
        else:
            bad += 1
    return good, bad


def describe(use: Use, cells: list[dict]) -> str:
    """``torch.nn.functional.x ran from the cell defining `f`, line 3 (2 times)``: the cell as the student sees it."""
    times = f" ({use.count:,} times)" if use.count > 1 else ""
    return f"{use.call} ran from {cell_where(cells, use.cell)}, line {use.line}{times}"


class Tracker:
    """What ``hidden.run_suite`` learns, test by test: the names each question's checks were asked about
    (``forbidden_calls.asked_names``), the top-level names whose code is the question's (``rule_costs.question_code``,
    as the source check reads it) and the uses the worker reported while its tests ran (``RemoteStudent``'s
    ``call_uses``, already checked). A student without a worker (``LocalStudent``) reports nothing. A question
    whose tests all fail before reaching their check asks no name: it has lost those points already."""

    def __init__(self, student):
        inner = getattr(student, "inner", student)  # diagnose.Recorder wraps the student
        self.student = inner if isinstance(getattr(inner, "call_uses", None), list) else None
        self.cells = list(getattr(inner, "cells", None) or [])
        self.asked: dict[str, set] = {}
        self.seen: dict[str, dict] = {}
        self.scope: dict[str, set | None] = {}
        self.unguarded: set[str] = set()  # questions that asked about forbidden names with the operation guard off
        self._mark = 0

    def start(self) -> None:
        forbidden_calls.asked_names(start=True)
        self._mark = len(self.student.call_uses) if self.student else 0

    def stop(self, question: str, scope: set | None = None, guarded: bool = True) -> None:
        """The test of ``question`` ended; ``scope``: the top-level names whose code is the question's (None: all);
        ``guarded``: whether the worker's operation guard was on for it (``guarded_questions``)."""
        asked = forbidden_calls.asked_names()
        if asked and not guarded:
            self.unguarded.add(question)
        self.asked.setdefault(question, set()).update(asked)
        self.scope[question] = scope
        for use in self.student.call_uses[self._mark:] if self.student else ():
            seen = self.seen.setdefault(question, {})
            key = use[:3]
            seen[key] = min(seen.get(key, 0) + use.count, MAX_COUNT)

    def apply(self, results: dict[str, dict], met: dict[str, list]) -> list[str]:
        """Cost each question whose tests ran, from its own code, a call (or an operation: ``op_guard``) its checks
        forbid at a line the static check did not find, as the rule says: the whole question, named by cell and
        line; mark for review such a call from code that is not the question's (no points taken); add the evidence
        to the message of a question the static check already costs. ``met``: question -> the ``ForbiddenUse`` its
        tests raised (their ``hits`` are the lines the check found: a call there, reached from another question's
        code, is that question's, already costed). Returns one review line per costed or marked question (and one
        for evidence the grader refused)."""
        lines, found = [], {hit for raised in met.values() for exc in raised for hit in exc.hits}
        for question, seen in self.seen.items():
            names = forbidden_calls.reaching(self.asked.get(question, ()))
            uses = [Use(*key, count) for key, count in seen.items() if _forbids(key[0], names)]
            if not results.get(question, {}).get(fields.FORBIDDEN):
                uses = [u for u in uses if not any(hit.startswith(self._at(u)) for hit in found)]
            if not uses or question not in results:
                continue
            entry = results[question]
            if entry.get(fields.FORBIDDEN):  # the static check met it: the question is already costed
                own = ("failed: the lab forbids", *(f"failed: {t}: " for t in entry[fields.FORBIDDEN]))
                at = next((i for i, m in enumerate(entry["messages"]) if m.startswith(own)), 0)
                entry["messages"][at] += f" (and the grading run saw it: {self._shown(uses)})"
                continue
            mine = [u for u in uses if self._in_scope(u, self.scope.get(question))]
            if mine:
                lines.append(_cost(entry, question, self._shown(mine)))
                continue
            shown = self._shown(uses)
            text = (f"while its hidden tests ran, {shown}: a library call this lab forbids, from code that is not "
                    "this question's. No points are taken for it; a person will review it")
            entry["messages"].insert(0, f"needs review: {text}")
            lines.append(f"forbidden call seen running in {question}: {shown}")
        for question in sorted(self.unguarded):
            lines.append(f"{question}'s tests asked about forbidden calls, but the grader had not foreseen it and ran "
                         "them without the worker's operation guard: operations reached other than by name were not "
                         "watched there (a person may review it; the hidden tests' checks should be named in them)")
        refused = getattr(self.student, "call_uses_refused", 0)
        if refused:
            lines.append(f"the grading process sent {refused} malformed report(s) of forbidden calls, ignored "
                         "(a person may check whether the notebook tampered with it)")
        return lines

    def _shown(self, uses: list[Use]) -> str:
        return "; ".join(describe(u, self.cells) for u in uses[:5]) + \
            (f"; and {len(uses) - 5} more" if len(uses) > 5 else "")

    def _in_scope(self, use: Use, scope: set | None) -> bool:
        """``use``'s line is in the question's code: a top-level statement of its cell that binds a name of ``scope``
        or binds nothing (top-level code that binds nothing can change anything, as ``rule_costs`` counts it)."""
        if scope is None:
            return True
        cell = next((c for c in self.cells if c.get("index") == use.cell), None)
        try:
            tree = ast.parse(python_source(str(cell["source"]))) if cell else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        for statement in getattr(tree, "body", ()):
            if statement.lineno <= use.line <= (statement.end_lineno or statement.lineno):
                bound = rule_costs.top_level_names(statement)
                return not bound or bool(scope.intersection(bound))
        return False

    def _at(self, use: Use) -> str:
        """How the static check names the line of ``use`` (``forbidden_uses``, over ``rule_costs.student_cells``)."""
        cell = next((c for c in self.cells if c.get("index") == use.cell), {})
        return f"in {cell.get('where') or f'cell {use.cell}'}, line {use.line}: "


def _forbids(call: str, names: set[str]) -> bool:
    """``call`` (``torch.nn.functional.x`` or ``aten.native_layer_norm``) is one of ``names`` or of their operations."""
    owner, _, name = call.rpartition(".")
    return name in forbidden_ops.ops_for(names) if owner == forbidden_ops.OWNER else name in names


def _cost(entry: dict, question: str, shown: str) -> str:
    """Set ``entry`` (a question's result) to 0 for a forbidden call the grading run saw, as a call the source check
    finds is costed (``hidden.forbidden_costs_question``); returns the review line."""
    lost = f"{entry['score']:g} of {entry['max_score']:g} points set to 0"
    entry["messages"].insert(0, (
        f"failed: the lab forbids this library call, so it costs the whole question ({lost}): the grading run saw "
        f"{shown} (the rule is checked on the operations your code runs, whatever route reaches them); write the "
        "computation yourself"))
    entry["score"] = 0.0
    return f"forbidden call seen running in {question} ({lost}): {shown}"
