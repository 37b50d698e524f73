"""The narrow interface through which hidden tests reach student code.

Hidden tests receive two ``StudentAPI`` objects, ``student`` and ``ref``, and never touch notebook
internals. They can only:

- ask whether a name exists (``has``) and read its source (``source``),
- call a function by name with tensors and plain values (``call``),
- build a module by name with arguments (``create``), then read and load its state dict, cast it,
  run a method forward (and backward) in train or eval mode (``ObjectRef``),
- build any other object by name, call its public methods and read its public attributes (a tokenizer's
  ``encode`` and ``vocab_size``),
- pass an object built by ``create`` to a function (``greedy_decode(model, ...)``): it stays in the
  student's process, and the function receives the object itself,
- record what a module built by ``create`` is fed while a function uses it (``record_forward``, ``forward_calls``:
  the shapes of its forward's arguments, call by call).

Every value that comes back went through the wire format, or in-process what it returns (``wire.copied``), so a
test always sees plain tensors, tuples, lists and JSON values, whoever produced them.

``LocalStudent`` runs the code in this process (the reference; Otter's in-kernel ``grader.check``).
``RemoteStudent`` talks to a worker process (``attnlab.grading.worker.process``), possibly sandboxed; it lives in
``attnlab.grading.worker.remote`` (with ``WorkerDied``), which builds on this module: import it from there.
"""

from __future__ import annotations

import ast
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from attnlab.grading.worker import wire
from attnlab.grading.worker.deferred_imports import deferring_builtins
from attnlab.grading.worker.executor import ABSENT, Executor, StudentError
from attnlab.grading.worker.reference_calls import counting
from attnlab.grading.worker.wire import ObjectHandle

__all__ = ["StudentAPI", "ObjectRef", "Result", "LocalStudent", "StudentError",
           "definition_source", "trusted_namespace"]

@dataclass
class Result:
    """What a call returned.

    output: the returned value (tensors detached).
    grads: gradient of sum(output_leaf * grad_output) w.r.t. each floating-point tensor argument,
        keyed by position (int) or keyword name (str); None where no gradient reached it.
    param_grads: the same for a module's parameters, keyed by parameter name.
    modified: positions / keyword names of tensor arguments the call changed in place.
    """

    output: Any
    grads: dict = field(default_factory=dict)
    param_grads: dict = field(default_factory=dict)
    modified: list = field(default_factory=list)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and values, NaN equal to NaN (an untouched NaN input is not 'modified')."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def _sent_tensors(args, kwargs) -> dict[str, torch.Tensor]:
    sent = {str(i): a for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
    sent.update({k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)})
    return sent


def _result(raw: Any, args=(), kwargs=None) -> Result:
    """A call's reply as a ``Result``. Which arguments were modified in place is decided here, from the
    arguments as the callee left them (``inputs_after``) and the tensors this process sent: nothing the
    worker computes is trusted."""
    malformed = StudentError("the grading process sent a malformed reply (did your code write to its pipes?)")
    if not (isinstance(raw, dict) and "output" in raw and isinstance(raw.get("grads", {}), dict)
            and isinstance(raw.get("param_grads", {}), dict) and isinstance(raw.get("inputs_after"), dict)):
        raise malformed
    after, modified = raw["inputs_after"], []
    for key, sent in _sent_tensors(args, kwargs or {}).items():
        now = after.get(key)
        if not isinstance(now, torch.Tensor):
            raise malformed
        if not _same(now, sent):
            modified.append(int(key) if key.isdigit() else key)
    grads = {int(k) if str(k).isdigit() else k: v for k, v in raw.get("grads", {}).items()}
    return Result(raw["output"], grads, dict(raw.get("param_grads", {})), modified)


class StudentAPI:
    """Base class: subclasses implement ``_op(op, **payload)`` returning plain values."""

    def _op(self, op: str, **payload) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def has(self, name: str) -> bool:
        return bool(self._op("has", name=name))

    def source(self, name: str | None = None) -> str | None:
        """The source of definition ``name`` (None: all code), or None when unknown."""
        raise NotImplementedError

    @contextmanager
    def graded_on_reference(self, names, ref: "LocalStudent"):
        """For one test: the student's code calls the reference's version of each of ``names`` (``reference_calls``);
        yields the set of those names that were called (filled as the test runs). The student's own bindings come
        back afterwards, whatever happened."""
        used = self._bind_reference({name: ref.function(name) for name in names if ref.has(name)})
        try:
            yield used
        finally:
            try:
                self._unbind_reference()
            except StudentError:  # the worker died: the next test starts a fresh one, with the student's own code
                pass

    reference_shortfalls: dict = {}  # noqa: RUF012 - replaced at each bind: name -> what its stand-in could not give

    def _bind_reference(self, functions: dict) -> set:  # pragma: no cover - abstract
        raise NotImplementedError

    def _unbind_reference(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def call(self, name: str, *args, grad: bool = False, grad_outputs=None, **kwargs) -> Result:
        """``name(*args, **kwargs)``; an argument may be a ``ObjectRef`` of this API (the object itself is passed)."""
        args, kwargs = tuple(self._handle(a) for a in args), {k: self._handle(v) for k, v in kwargs.items()}
        return _result(self._op("call", name=name, args=list(args), kwargs=kwargs, grad=grad,
                                grad_outputs=grad_outputs), args, kwargs)

    def _handle(self, value: Any) -> Any:
        if not isinstance(value, ObjectRef):
            return value
        if value.api is not self:
            raise ValueError(f"a {value.name} built by another StudentAPI cannot be passed here: build it with "
                             "this one's create")
        return value.handle

    def create(self, name: str, *args, **kwargs) -> "ObjectRef":
        """``name(*args, **kwargs)`` kept in the student's process; an argument may be a ``ObjectRef`` of this API
        (``create("SequenceClassifier", encoder, 2)``: the object itself is passed)."""
        args, kwargs = [self._handle(a) for a in args], {k: self._handle(v) for k, v in kwargs.items()}
        return ObjectRef(self, self._op("create", name=name, args=args, kwargs=kwargs), name)


class ObjectRef:
    """An object built by ``StudentAPI.create``; it lives wherever the student code runs. It can be passed to
    ``StudentAPI.call`` as an argument (``student.call("generate", model, idx, 5)``); ``call(method=...)`` runs
    one of its methods (any method of a module; a public method of a plain object, such as a tokenizer)."""

    def __init__(self, api: StudentAPI, handle: ObjectHandle, name: str):
        self.api, self.handle, self.name = api, handle, name

    def state_dict(self) -> dict:
        return self.api._op("state_dict", handle=self.handle)

    def param_shapes(self) -> dict:
        return {k: tuple(v) for k, v in self.api._op("param_shapes", handle=self.handle).items()}

    def load_state_dict(self, state: dict) -> tuple[list, list]:
        """Load with strict=False; returns (missing_keys, unexpected_keys)."""
        missing, unexpected = self.api._op("load_state_dict", handle=self.handle, state=state)
        return list(missing), list(unexpected)

    def attr(self, name: str) -> Any:
        """The public attribute ``name`` of the object (a plain value or tensors: anything that can travel)."""
        return self.api._op("get_attr", handle=self.handle, name=name)

    def record_forward(self) -> None:
        """Record the calls of this module's forward from now on, until ``forward_calls``."""
        self.api._op("record_forward", handle=self.handle)

    def forward_calls(self) -> list:
        """The forward calls recorded since ``record_forward`` (and the record stops): each a dict ``{"args": [...],
        "kwargs": {...}}``, a tensor argument as ``{"tensor": shape}``. It comes from the student's process: a test
        checks its form before it reads it, and takes it as evidence of what the code did, never as proof."""
        calls = self.api._op("forward_calls", handle=self.handle)
        return calls if isinstance(calls, list) else []

    def to(self, dtype) -> "ObjectRef":
        self.api._op("to", handle=self.handle, dtype=dtype)
        return self

    def call(self, *args, method: str = "forward", train: bool = False, grad: bool = False,
             grad_outputs=None, **kwargs) -> Result:
        return _result(self.api._op("module_call", handle=self.handle, method=method, args=list(args),
                                    kwargs=kwargs, train=train, grad=grad, grad_outputs=grad_outputs), args, kwargs)


def definition_source(code: str, name: str | None) -> str | None:
    """Source of the last top-level ``def``/``class`` called ``name`` in ``code`` (all code if None)."""
    if name is None:
        return code
    try:
        tree = ast.parse(code)
    except (SyntaxError, RecursionError, MemoryError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found = ast.get_source_segment(code, node)
    return found


def trusted_namespace() -> dict[str, Any]:
    """A fresh namespace for trusted code (``LocalStudent.from_code``, the catalogue's candidates): its plotting
    imports are deferred (``deferred_imports``)."""
    return {"__name__": "__attnlab_code__", "__builtins__": deferring_builtins()}


class LocalStudent(StudentAPI):
    """Student (or reference) code in this process: ``namespace`` is where its cells ran.

    ``code`` is the source that produced the namespace (for ``source``); without it, ``inspect`` is tried.
    ``cells``: the notebook's graded cells (``notebook_code.described_cells``), when the code came from one, so that
    the checks name a line by its cell as the student sees it (``rule_costs.student_cells``).
    """

    def __init__(self, namespace: dict[str, Any], code: str | None = None, cells: list[dict] | None = None):
        self.executor = Executor(namespace)
        self.code = code
        self.cells = cells

    @classmethod
    def from_code(cls, code: str, filename: str = "<reference>") -> "LocalStudent":
        namespace = trusted_namespace()
        exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - trusted code only
        return cls(namespace, code)

    def function(self, name: str) -> Any:
        """The object ``name`` is bound to (trusted code: the reference's function, for ``graded_on_reference``)."""
        return self.executor.namespace[name]

    def _bind_reference(self, functions: dict) -> set:
        used: set = set()
        namespace, self._rebound, self.reference_shortfalls = self.executor.namespace, {}, {}
        for name, fn in functions.items():
            self._rebound[name] = namespace.get(name, ABSENT)
            namespace[name] = counting(name, fn, used, self.reference_shortfalls)
        return used

    def _unbind_reference(self) -> None:
        for name, own in getattr(self, "_rebound", {}).items():
            if own is ABSENT:
                self.executor.namespace.pop(name, None)
            else:
                self.executor.namespace[name] = own
        self._rebound = {}

    def _op(self, op: str, **payload) -> Any:
        payload = wire.copied(payload)  # the callee never shares tensors with the test
        return wire.copied(self.executor.dispatch(op, payload))

    def source(self, name: str | None = None) -> str | None:
        if self.code is not None:
            return definition_source(self.code, name)
        if name is None or name not in self.executor.namespace:
            return None
        import inspect

        try:
            return inspect.getsource(self.executor.namespace[name])
        except (OSError, TypeError):
            return None

