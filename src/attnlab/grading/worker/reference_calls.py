"""The grader's side of "graded with the reference": for the tests of a question that builds on another graded function
(``SelfAttention`` on ``scaled_dot_product_attention``), the student's code is run with the reference's version of
that function, so that one mistake costs only its own question (``HiddenSuite(graded_on_reference=...)``).

The reference's code never goes to the worker. There, the helper's name is bound to a proxy
(``attnlab.grading.worker.reference_proxy``) that calls back in the middle of a request; ``ReferenceCalls`` answers
those callbacks here, trusting nothing: only the names bound for the current test, at most ``MAX_CALLBACKS`` per test,
arguments of tensors and plain values only (the frame's size is bounded by the wire; a function's own arguments may
also be CPU ``torch.Generator``s, whose state travels: the reference draws from it, and the reply carries the state
after the draws, ``generators``, which the worker's proxy sets back, so the student's generator goes on as if the
reference had run in the student's process), and no output larger than a
frame (``_check_size``: surely small arguments pass at once, others are tried on ``meta`` tensors before the
reference runs on the data). ``ReferenceCalls.used`` is what
the grader saw called, the only record the feedback believes. ``LocalStudent`` (in-process) binds the reference's
function itself, wrapped by ``CountingCall``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from attnlab.grading.worker.executor import tensor_leaves
from attnlab.grading.worker.module_calls import MODULE_KINDS, ModuleCalls, Refused, is_module_class
from attnlab.grading.worker.wire import MAX_FRAME_BYTES

__all__ = ["ReferenceCalls", "CountingCall", "counting", "counting_class", "MAX_CALLBACKS", "reference_note"]

MAX_CALLBACKS = 10_000  # per test: a test makes a few dozen calls, each a handful of helper calls
_PLAIN = (type(None), bool, int, float, str, torch.dtype)
_Refused = Refused  # a callback the grader does not answer with the reference (module_calls.Refused)


def reference_note(names) -> str:
    """The feedback line of a question graded with the reference's ``names``."""
    shown = ", ".join(f"`{n}`" for n in sorted(names))
    return (f"note: graded with the reference {shown} where your code calls it, so that a mistake there costs only "
            "its own question")


def _plain(value: Any, depth: int = 0) -> bool:
    """Tensors and plain values (in lists, tuples and str-keyed dicts) only: no handle, generator or other object."""
    if depth > 8:
        return False
    if isinstance(value, _PLAIN) or isinstance(value, torch.Tensor):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


class _Drawn(NamedTuple):
    """A function's output and the state of its generator arguments after the call (key: position or keyword)."""

    output: Any
    states: dict[str, torch.Tensor]


def _generator_slots(message: dict) -> dict[str, torch.Generator]:
    """The CPU generators among a function callback's own arguments, by position (``"0"``) or keyword."""
    args, kwargs = message["args"], message["kwargs"]
    slots = {str(i): a for i, a in enumerate(args)} | {str(k): v for k, v in kwargs.items()}
    return {key: g for key, g in slots.items() if isinstance(g, torch.Generator) and g.device.type == "cpu"}


def _without(part: Any, generators: dict) -> Any:
    """``part`` (a callback's ``args`` list or ``kwargs`` dict) without its ``generators``, for the plain-value check."""
    chosen = {id(g) for g in generators.values()}
    if isinstance(part, list):
        return [a for a in part if id(a) not in chosen]
    if isinstance(part, dict):
        return {k: v for k, v in part.items() if id(v) not in chosen}
    return part


class CountingCall:
    """The reference's ``fn``, bound in an in-process student's namespace: records in ``used`` that it was called."""

    def __init__(self, name: str, fn: Callable, used: set):
        self.__name__ = self.__qualname__ = name
        self.fn, self.used = fn, used

    def __call__(self, *args, **kwargs):
        self.used.add(self.__name__)
        return self.fn(*args, **kwargs)


def counting_class(name: str, cls: type, used: set, shortfalls: dict | None = None) -> type:
    """The reference's module class ``cls``, bound in an in-process student's namespace: a subclass that records in
    ``used`` that it was built (``isinstance`` holds for the student's checks, as for the worker's proxy class), and
    in ``shortfalls`` a public attribute the student's code reads that the reference does not hold (as the worker's
    proxy does: ``reference_proxy.fell_short``), once built: while it builds, torch's ``add_module`` and
    ``register_parameter`` probe each new name with ``hasattr``, which is not the student's code reading it."""
    def __init__(self, *args, **kwargs):
        used.add(name)
        cls.__init__(self, *args, **kwargs)
        self.__dict__["_attnlab_built"] = True

    def __getattr__(self, attr):
        try:
            return cls.__getattr__(self, attr)
        except AttributeError:
            if shortfalls is not None and not attr.startswith("_") and self.__dict__.get("_attnlab_built"):
                shortfalls.setdefault(name, f"your code reads `{attr}`, which the reference's `{name}` does not hold")
            raise

    return type(name, (cls,), {"__init__": __init__, "__getattr__": __getattr__, "__qualname__": name,
                               "__module__": cls.__module__})


def counting(name: str, fn: Callable, used: set, shortfalls: dict | None = None) -> Any:
    """What an in-process student's namespace binds ``name`` to for one test: the reference's function or class,
    recording in ``used`` that it was called (built) and in ``shortfalls`` what the student's code needed of it that
    the reference does not have (``counting_class``)."""
    return counting_class(name, fn, used, shortfalls) if is_module_class(fn) else CountingCall(name, fn, used)


class ReferenceCalls:
    """Answers the worker's callbacks of one test: ``functions`` maps each bound name to the reference's function."""

    def __init__(self, functions: dict[str, Callable]):
        self.functions = dict(functions)
        self.used: set[str] = set()
        self.count = 0
        self.refused: list[str] = []  # what the grader refused, in its words (tests, logs)
        self.modules = ModuleCalls()  # the reference modules of the graded classes, built for this test

    def answer(self, message: Any) -> dict:
        """The reply to one callback frame's body: ``{"ok": True, "value": ...}`` (and ``generators``: the state of
        each generator argument after the call, by position or keyword) or ``{"ok": False, ...}``."""
        try:
            value = self._answer(message)
            if isinstance(value, _Drawn):
                return {"ok": True, "value": value.output, "generators": value.states}
            return {"ok": True, "value": value}
        except _Refused as exc:
            self.refused.append(str(exc))
            return {"ok": False, "error": str(exc), "type": "RuntimeError"}
        except Exception as exc:  # noqa: BLE001 - the reference refused the student's arguments
            return {"ok": False, "error": f"the reference `{message['name']}` raised {type(exc).__name__}: {exc}"[:500],
                    "type": type(exc).__name__}

    def _answer(self, message: Any) -> Any:
        if not (isinstance(message, dict) and isinstance(message.get("name"), str)
                and message.get("kind") in ("forward", "vjp", *MODULE_KINDS) and isinstance(message.get("args"), list)
                and isinstance(message.get("kwargs"), dict)):
            raise _Refused("the grading process sent a malformed callback (did your code write to its pipes?)")
        name = message["name"]
        if name not in self.functions:
            raise _Refused(f"your code asked the grader for the reference `{name[:60]}`, which this test does not "
                           "grade on the reference: refused")
        self.count += 1
        if self.count > MAX_CALLBACKS:
            raise _Refused(f"your code called `{name}` more than {MAX_CALLBACKS:,} times in one test: refused")
        fn = self.functions[name]
        if is_module_class(fn) != (message["kind"] in MODULE_KINDS):
            raise _Refused(f"the grading process sent a malformed callback for `{name}`: refused")
        generators = _generator_slots(message) if message["kind"] == "forward" else {}
        if not all(_plain(_without(message.get(part), generators)) for part in ("args", "kwargs", "grad_outputs",
                                                                                 "params", "buffers", "state")):
            raise _Refused(f"`{name}` can be given only tensors and plain values (numbers, strings, None, lists of "
                           "them) while it is graded with the reference")
        if message["kind"] in MODULE_KINDS:
            if message["kind"] == "construct":
                self.used.add(name)
            return self.modules.answer(name, fn, message)
        args, kwargs = message["args"], message["kwargs"]
        grad_outputs = message.get("grad_outputs")
        _check_size(name, fn, args, kwargs)
        if message["kind"] == "forward":
            self.used.add(name)
            with torch.no_grad():
                output = fn(*args, **kwargs)
            return _Drawn(output, {key: g.get_state() for key, g in generators.items()}) if generators else output
        return _vjp(fn, args, kwargs, grad_outputs if isinstance(grad_outputs, list) else [])


def _surely_small(args: list, kwargs: dict) -> bool:
    """Whether the output surely fits in a frame without looking: the helpers graded this way return at most
    quadratically many numbers in their largest argument (attention's scores (..., n_q, n_k) from q and k; a mask
    (n, n) from n), so two outputs of float64 squares of the largest size fit in MAX_FRAME_BYTES."""
    def sizes(v):
        if isinstance(v, (list, tuple)):
            return [n for item in v for n in sizes(item)]
        return [v.numel() if isinstance(v, torch.Tensor) else abs(v) if isinstance(v, int) else 1]

    return 2 * 8 * max(sizes([*args, *kwargs.values()]), default=1) ** 2 <= MAX_FRAME_BYTES


def _check_size(name: str, fn: Callable, args: list, kwargs: dict) -> None:
    """Refuse a call whose output would not fit in a reply frame (a score matrix of 10^10 entries from two long
    sequences), found by running the reference on ``meta`` tensors (shapes only, no data, no time) unless the
    arguments are surely small (the meta run's first use imports sympy and torch._dynamo: seconds of a grade); a
    reference that cannot run on meta tensors (a data-dependent step) is not checked this way, nor a sampler (a
    generator among the arguments: its draws are not the quadratic scores this is for, and meta tensors cannot be
    drawn from). Both stay bounded by the reference process's memory and the frame budget (``reference_host``)."""
    if _surely_small(args, kwargs) or any(isinstance(v, torch.Generator) for v in [*args, *kwargs.values()]):
        return

    def meta(v):
        return torch.empty_like(v, device="meta") if isinstance(v, torch.Tensor) else v

    try:
        with torch.no_grad():
            out = fn(*[meta(a) for a in args], **{k: meta(v) for k, v in kwargs.items()})
        size = sum(t.numel() * t.element_size() for t in tensor_leaves(out))
    except Exception:  # noqa: BLE001 - the real call says what is wrong
        return
    if size > MAX_FRAME_BYTES:
        raise _Refused(f"`{name}` would return {size:,} bytes for these arguments, over the limit of "
                       f"{MAX_FRAME_BYTES:,}: call it on smaller tensors")


def _vjp(fn: Callable, args: list, kwargs: dict, grad_outputs: list) -> dict:
    """The gradients of sum(output_i * grad_outputs_i) with respect to the floating-point tensor arguments."""
    def floating(v):
        return isinstance(v, torch.Tensor) and v.is_floating_point()

    args = [a.detach().clone().requires_grad_(True) if floating(a) else a for a in args]
    kwargs = {k: v.detach().clone().requires_grad_(True) if floating(v) else v for k, v in kwargs.items()}
    with torch.enable_grad():
        leaves = tensor_leaves(fn(*args, **kwargs))
    if len(leaves) != len(grad_outputs):
        raise _Refused(f"the backward callback sent {len(grad_outputs)} output gradients for {len(leaves)} outputs")
    pairs = [(o, g) for o, g in zip(leaves, grad_outputs) if g is not None and o.requires_grad]
    for o, g in pairs:
        if not isinstance(g, torch.Tensor) or g.shape != o.shape:
            raise _Refused("the backward callback sent an output gradient of the wrong shape")
    targets = [a for a in args if floating(a)] + [v for v in kwargs.values() if floating(v)]
    grads = iter(torch.autograd.grad(sum((o * g.to(o.dtype)).sum() for o, g in pairs), targets, allow_unused=True)
                 if pairs and targets else [None] * len(targets))
    out_args = [next(grads) if floating(a) else None for a in args]
    out_kwargs = {k: next(grads) if floating(v) else None for k, v in kwargs.items()}
    return {"args": out_args, "kwargs": out_kwargs}
