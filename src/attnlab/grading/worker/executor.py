"""Runs the narrow-interface operations on a namespace of student (or reference) code.

The same ``Executor`` serves the in-process student (``LocalStudent``) and the worker process
(``attnlab.grading.worker.process``). Every operation takes and returns plain values (see ``wire``).
"""

from __future__ import annotations

import itertools
import traceback
from typing import Any

import torch

from attnlab.grading.worker.wire import ObjectHandle

ABSENT = object()  # a name the student never defined


class StudentError(Exception):
    """Student code is missing, raised an exception, or returned something unusable."""


def _is_float_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


def tensor_leaves(value: Any) -> list[torch.Tensor]:
    """The tensors in a nested output, in traversal order (dict values by key order)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensor_leaves(v)]
    if isinstance(value, dict):
        return [t for k in value for t in tensor_leaves(value[k])]
    return []


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} values"
    return "None" if value is None else f"a {type(value).__name__}"


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, tuple):
        return tuple(_detach(v) for v in value)
    if isinstance(value, list):
        return [_detach(v) for v in value]
    if isinstance(value, dict):
        return {k: _detach(v) for k, v in value.items()}
    return value


def _student_error(exc: BaseException, what: str) -> StudentError:
    tb = traceback.extract_tb(exc.__traceback__)
    where = ""
    for frame in reversed(tb):
        if frame.filename.startswith("<cell"):
            where = f" (in {frame.filename.strip('<>')}, line {frame.lineno}: {frame.line})"
            break
    return StudentError(f"{what} raised {type(exc).__name__}: {exc}{where}")


def _described(value: Any) -> Any:
    """An argument as a record of calls keeps it: a tensor as ``{"tensor": shape}``, a plain value as itself,
    anything else as ``{"type": its type's name}``."""
    if isinstance(value, torch.Tensor):
        return {"tensor": [int(n) for n in value.shape]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value if not isinstance(value, str) else value[:100]
    return {"type": type(value).__name__}


class Executor:
    """Executes calls against ``namespace``. Objects created by ``create`` live in ``self.objects``."""

    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace
        self.objects: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self.proxy = None  # (name, module=) -> a stand-in calling the grader back (process.main: reference/module_proxy)
        self._rebound: dict[str, Any] = {}  # name -> the student's own binding (ABSENT: none) while a proxy stands in
        self._recorded: dict[int, list] = {}  # object id -> the forward calls recorded (record_forward)

    # -- lookup ---------------------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.namespace

    def _lookup(self, name: str) -> Any:
        if name not in self.namespace:
            raise StudentError(f"`{name}` is not defined in your notebook: define it with exactly this name")
        return self.namespace[name]

    def _obj(self, handle: ObjectHandle) -> Any:
        try:
            return self.objects[handle.id]
        except KeyError:
            raise StudentError(f"object #{handle.id} does not exist") from None

    def _module(self, handle: ObjectHandle) -> torch.nn.Module:
        obj = self._obj(handle)
        if not isinstance(obj, torch.nn.Module):
            raise StudentError(f"`{type(obj).__name__}` is not an nn.Module: subclass torch.nn.Module")
        return obj

    # -- operations -----------------------------------------------------------------------------
    def call(self, name, args=(), kwargs=None, grad=False, grad_outputs=None):
        fn = self._lookup(name)
        if not callable(fn):
            raise StudentError(f"`{name}` is a {type(fn).__name__}, not a function")
        return self._invoke(fn, f"`{name}`", list(args), dict(kwargs or {}), grad, grad_outputs, params=None)

    def create(self, name, args=(), kwargs=None):
        cls = self._lookup(name)
        if not callable(cls):
            raise StudentError(f"`{name}` is a {type(cls).__name__}, not a class")
        args = [self._obj(a) if isinstance(a, ObjectHandle) else a for a in args]  # objects built by create
        kwargs = {k: self._obj(v) if isinstance(v, ObjectHandle) else v for k, v in (kwargs or {}).items()}
        try:
            obj = cls(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - student code
            raise _student_error(exc, f"`{name}(...)`") from None
        hid = next(self._ids)
        self.objects[hid] = obj
        return ObjectHandle(hid)

    def state_dict(self, handle):
        obj = self._module(handle)
        return {k: v.detach().clone() for k, v in obj.state_dict().items()}

    def param_shapes(self, handle):
        obj = self._module(handle)
        return {k: tuple(p.shape) for k, p in obj.named_parameters()}

    def load_state_dict(self, handle, state):
        obj = self._module(handle)
        try:
            res = obj.load_state_dict(state, strict=False)
        except Exception as exc:  # noqa: BLE001 - size mismatches land here
            raise _student_error(exc, "load_state_dict") from None
        return (sorted(res.missing_keys), sorted(res.unexpected_keys))

    def to(self, handle, dtype):
        obj = self._obj(handle)
        try:
            obj.to(dtype)
        except Exception as exc:  # noqa: BLE001
            raise _student_error(exc, f".to({dtype})") from None
        return None

    def module_call(self, handle, method="forward", args=(), kwargs=None, train=False, grad=False,
                    grad_outputs=None):
        """A method of an object built by ``create``: any method of a module (in train or eval mode, with
        gradients if asked), or a public method of a plain object (a tokenizer's ``encode``)."""
        obj = self._obj(handle)
        if isinstance(obj, torch.nn.Module):
            obj.train(bool(train))
        elif grad or train or method in ("forward", "__call__") or method.startswith("_"):
            obj = self._module(handle)  # raises: only a module has a forward, a train mode and parameters
        fn = obj if method in ("forward", "__call__") else getattr(obj, method, None)
        if not callable(fn):
            raise StudentError(f"`{type(obj).__name__}` has no method `{method}`")
        # the parameters that train: a frozen one (requires_grad False, LoRA's base layer) has no gradient to compare
        params = {n: p for n, p in obj.named_parameters() if p.requires_grad} if grad else None
        return self._invoke(fn, f"`{type(obj).__name__}.{method}`", list(args), dict(kwargs or {}), grad,
                            grad_outputs, params=params)

    def get_attr(self, handle, name):
        """A public attribute of an object built by ``create`` (a tokenizer's ``vocab_size``)."""
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise StudentError(f"cannot read the attribute {str(name)[:40]!r}: only public attributes")
        obj = self._obj(handle)
        try:
            value = getattr(obj, name)
        except AttributeError:
            raise StudentError(f"`{type(obj).__name__}` has no attribute `{name}`") from None
        except Exception as exc:  # noqa: BLE001 - a property is student code
            raise _student_error(exc, f"`{type(obj).__name__}.{name}`") from None
        return _detach(value)

    # -- what a module is fed (trusted code; evidence only: student code in this process can tamper with it) ------
    MAX_RECORDED_CALLS = 1000

    def record_forward(self, handle):
        """Record the calls of the forward of a module built by ``create`` from now on (until ``forward_calls``):
        each call's arguments described by ``_described`` (a tensor by its shape). Hidden tests observe with it what a
        function fed a model (lab09's ``generate`` with the cache: only the tokens the cache lacks)."""
        obj = self._module(handle)
        self.forward_calls(handle)  # a record still running stops first
        calls: list = []
        inner = obj.forward  # the bound method (or an instance attribute the student set)

        def recording_forward(*args, **kwargs):
            if len(calls) < self.MAX_RECORDED_CALLS:
                calls.append({"args": [_described(a) for a in args],
                              "kwargs": {str(k): _described(v) for k, v in kwargs.items()}})
            return inner(*args, **kwargs)

        self._recorded[handle.id] = (calls, obj.__dict__.get("forward"), recording_forward)
        object.__setattr__(obj, "forward", recording_forward)  # nn.Module.__call__ and model.forward both reach it
        return None

    def forward_calls(self, handle):
        """The calls recorded since ``record_forward`` (oldest first; [] when none was), and the record stops: the
        module's forward is what it was before (unless the student's code replaced it meanwhile)."""
        obj = self._module(handle)
        calls, before, wrapper = self._recorded.pop(handle.id, ([], None, None))
        if wrapper is not None and obj.__dict__.get("forward") is wrapper:
            if before is None:
                del obj.__dict__["forward"]
            else:
                object.__setattr__(obj, "forward", before)
        return calls

    # -- the one place that calls student code with tensors -------------------------------------------
    def _invoke(self, fn, what, args, kwargs, grad, grad_outputs, params):
        """Call ``fn``; the reply carries the tensor arguments as they are after the call (``inputs_after``),
        so that the grader, not this process, decides whether the call modified them in place."""
        handles = {id(self._obj(a)): a for a in [*args, *kwargs.values()] if isinstance(a, ObjectHandle)}
        args = [self._obj(a) if isinstance(a, ObjectHandle) else a for a in args]  # objects built by create
        kwargs = {k: self._obj(v) if isinstance(v, ObjectHandle) else v for k, v in kwargs.items()}
        wrt: dict[Any, torch.Tensor] = {}
        if grad:
            for i, a in enumerate(args):
                if _is_float_tensor(a):
                    args[i] = a.detach().clone().requires_grad_(True)
                    wrt[i] = args[i]
            for k, v in kwargs.items():
                if _is_float_tensor(v):
                    kwargs[k] = v.detach().clone().requires_grad_(True)
                    wrt[k] = kwargs[k]
        try:
            with torch.enable_grad() if grad else torch.no_grad():
                out = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - student code
            raise _student_error(exc, what) from None
        after = {str(i): a.detach() for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
        after.update({k: v.detach() for k, v in kwargs.items() if isinstance(v, torch.Tensor)})
        # a function that returns an object it was given (a loader returning its model) answers with its handle
        output = handles[id(out)] if id(out) in handles else _detach(out)
        result = {"output": output, "grads": {}, "param_grads": {}, "inputs_after": after}
        if grad:
            result["grads"], result["param_grads"] = self._backward(out, grad_outputs, wrt, params or {})
        return result

    @staticmethod
    def _backward(out, grad_outputs, wrt, params):
        leaves = tensor_leaves(out)  # one grad_output entry per tensor, None for integer ones
        if grad_outputs is None:
            raise StudentError("internal: grad=True needs grad_outputs")
        gos = list(grad_outputs)
        if len(gos) != len(leaves):
            raise StudentError(f"returned {_describe(out)}; expected {len(gos)} tensor(s)")
        pairs = [(o, g) for o, g in zip(leaves, gos)
                 if g is not None and _is_float_tensor(o) and o.requires_grad]
        names = list(wrt) + [f"param:{n}" for n in params]
        targets = list(wrt.values()) + list(params.values())
        if not pairs or not targets:
            return {str(k): None for k in wrt}, {n: None for n in params}
        for o, g in pairs:
            if o.shape != g.shape:
                raise StudentError(f"an output has shape {tuple(o.shape)}, expected {tuple(g.shape)}")
        try:  # one scalar, sum(o * g): the same gradients (g reaches each o times 1) as grad_outputs=g, without
            # torch importing sympy (symbolic_shapes, a slow import) to check the grad_outputs' shapes
            if any(o.is_complex() for o, _ in pairs):
                grads = torch.autograd.grad([o for o, _ in pairs], targets,
                                            [g.to(o.dtype) for o, g in pairs], allow_unused=True)
            else:
                loss = sum((o * g.to(o.dtype)).sum() for o, g in pairs)
                grads = torch.autograd.grad(loss, targets, allow_unused=True)
        except Exception as exc:  # noqa: BLE001 - student's graph
            raise _student_error(exc, "backward pass") from None
        by_name = dict(zip(names, grads))
        in_grads = {str(k): (None if by_name[k] is None else by_name[k].detach()) for k in wrt}
        p_grads = {n: (None if by_name[f"param:{n}"] is None else by_name[f"param:{n}"].detach())
                   for n in params}
        return in_grads, p_grads

    # -- graded with the reference (reference_proxy.py, reference_calls.py) -----------------------------------
    def bind_reference(self, names, modules=()):
        """Bind each of ``names`` to a proxy that asks the grader to run the reference's version (for one test);
        those in ``modules`` are classes (``module_proxy``), the others functions (``reference_proxy``)."""
        if self.proxy is None:
            raise StudentError("internal: this process cannot call the grader back")
        self.unbind_reference()
        modules = {str(m) for m in modules}
        for name in map(str, names):
            self._rebound[name] = self.namespace.get(name, ABSENT)
            self.namespace[name] = self.proxy(name, module=name in modules)
        return None

    def unbind_reference(self):
        """Restore the student's own bindings of the names ``bind_reference`` replaced."""
        for name, own in self._rebound.items():
            if own is ABSENT:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = own
        self._rebound = {}
        return None

    # -- dispatch for the worker -----------------------------------------------------------------
    OPS = ("has", "call", "create", "state_dict", "param_shapes", "load_state_dict", "to", "module_call",
           "get_attr", "bind_reference", "unbind_reference", "record_forward", "forward_calls")

    def dispatch(self, op: str, payload: dict) -> Any:
        if op not in self.OPS:
            raise StudentError(f"unknown operation {op!r}")
        return getattr(self, op)(**payload)
