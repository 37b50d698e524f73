"""The worker's side of "graded with the reference": a proxy that stands, in the student's namespace and for one hidden
test, for a graded helper (``scaled_dot_product_attention``) and asks the grader to run the reference's version.

The proxy holds no solution content: it sends the call's arguments to the grader as a ``callback`` frame
(``{"callback": {"name", "kind": "forward", "args", "kwargs"}}``, see ``attnlab.grading.worker.reference_calls``,
which answers it) and returns the output the grader sends back. Gradients flow through a ``torch.autograd.Function``
whose backward sends a second callback (``"kind": "vjp"``, the saved arguments and the output gradients) and returns
the gradients of the tensor arguments the grader computed with the reference. A graded *class* stands in through
``module_proxy.py`` instead.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from attnlab.grading.worker.executor import tensor_leaves

__all__ = ["ReferenceProxy", "RaisedByReference", "reply_value", "detached", "floating_tensor", "rebuilt", "fell_short",
           "take_shortfalls"]

# Exceptions of the reference the proxy raises again under their own type, so that student code sees the reference's
# ValueError as one (anything else arrives as a RuntimeError carrying its text).
_RERAISED = {cls.__name__: cls for cls in (ValueError, TypeError, RuntimeError, IndexError, KeyError, AssertionError)}


_SHORTFALLS: dict[str, str] = {}  # proxied name -> what the student's code needed of it, during this request


class RaisedByReference(RuntimeError):
    """The grader could not answer a callback (the reference raised, or the callback was refused)."""


def fell_short(name: str, reason: str) -> None:
    """Record that the student's code needed of the proxy for ``name`` something it cannot give (an attribute the
    reference does not hold, a sub-layer's own forward, arguments the reference does not take): the reply says so
    (``take_shortfalls``), and the grader grades the question on the student's own ``name`` if the test fails."""
    _SHORTFALLS.setdefault(name, reason[:300])


def take_shortfalls() -> dict[str, str]:
    """The shortfalls recorded since the last call, then forgotten."""
    taken = dict(_SHORTFALLS)
    _SHORTFALLS.clear()
    return taken


def reply_value(name: str, reply: Any) -> Any:
    """The value of the grader's ``reply`` to a callback about the reference ``name``; its error raised again (the
    reference refusing the arguments with a ``TypeError`` is a shortfall: the student's own version may take them)."""
    if not isinstance(reply, dict) or "ok" not in reply:
        raise RaisedByReference(f"the grader sent no answer for the reference `{name}`")
    if not reply["ok"]:
        if reply.get("type") == "TypeError":
            fell_short(name, f"the reference `{name}` does not take the arguments your code gives it "
                             f"({str(reply.get('error', ''))[:160]})")
        raise _RERAISED.get(str(reply.get("type")), RaisedByReference)(str(reply.get("error", "")))
    return reply.get("value")


def rebuilt(structure: Any, leaves) -> Any:
    """``structure`` (an output) with its tensors replaced, in ``tensor_leaves`` order, by the next of ``leaves``."""
    if isinstance(structure, torch.Tensor):
        return next(leaves)
    if isinstance(structure, (list, tuple)):
        return type(structure)(rebuilt(v, leaves) for v in structure)
    if isinstance(structure, dict):
        return {k: rebuilt(structure[k], leaves) for k in structure}
    return structure


def floating_tensor(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


class _Backward(torch.autograd.Function):
    """Connects the grader's outputs to the tensor arguments: its backward asks the grader for the VJP."""

    @staticmethod
    def forward(ctx, proxy, call, outputs, *tensors):
        ctx.proxy, ctx.call = proxy, call
        ctx.save_for_backward(*tensors)
        ctx.mark_non_differentiable(*[o for o in outputs if not floating_tensor(o)])
        return tuple(o.clone() for o in outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        args, kwargs, slots = ctx.call
        tensors = ctx.saved_tensors
        args, kwargs = list(args), dict(kwargs)
        for slot, t in zip(slots, tensors):
            if isinstance(slot, int):
                args[slot] = t
            else:
                kwargs[slot] = t
        grads = ctx.proxy.ask("vjp", args, kwargs, [g if floating_tensor(g) else None for g in grad_outputs])
        by_slot = {**dict(enumerate(grads.get("args", []))), **grads.get("kwargs", {})}
        return (None, None, None, *[by_slot.get(s) for s in slots])


class ReferenceProxy:
    """Stands for the graded function ``name``; ``callback(message) -> reply`` talks to the grader (the worker's
    pipes). ``reply`` is ``{"ok": True, "value": ...}`` or ``{"ok": False, "error": str, "type": str}``."""

    def __init__(self, name: str, callback: Callable[[dict], Any]):
        self.__name__ = self.__qualname__ = name
        self.callback = callback

    def ask(self, kind: str, args: list, kwargs: dict, grad_outputs=None) -> Any:
        message = {"name": self.__name__, "kind": kind, "args": [detached(a) for a in args],
                   "kwargs": {k: detached(v) for k, v in kwargs.items()}}
        if grad_outputs is not None:
            message["grad_outputs"] = list(grad_outputs)
        reply = self.callback(message)
        value = reply_value(self.__name__, reply)
        if kind == "forward":
            _advance_generators(reply.get("generators"), args, kwargs)
        return value

    def __call__(self, *args, **kwargs):
        output = self.ask("forward", list(args), kwargs)
        leaves = tensor_leaves(output)
        slots = [i for i, a in enumerate(args) if floating_tensor(a)] + [k for k, v in kwargs.items() if floating_tensor(v)]
        tensors = [args[s] if isinstance(s, int) else kwargs[s] for s in slots]
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors) and any(map(floating_tensor, leaves))):
            return output
        plain = ([None if i in slots else a for i, a in enumerate(args)],
                 {k: None if k in slots else v for k, v in kwargs.items()}, slots)
        connected = _Backward.apply(self, plain, leaves, *tensors)
        return rebuilt(output, iter(connected))


def _advance_generators(states: Any, args: list, kwargs: dict) -> None:
    """Set each CPU generator argument to the state the reference left it in (``reference_calls``: the reply's
    ``generators``, by position or keyword), so that it goes on as if the reference had drawn from it here."""
    if not isinstance(states, dict):
        return
    for key, state in states.items():
        if not isinstance(key, str):
            continue
        if key.isdigit():
            target = args[int(key)] if int(key) < len(args) else None
        else:
            target = kwargs.get(key)
        if isinstance(target, torch.Generator) and isinstance(state, torch.Tensor) and state.dtype == torch.uint8:
            try:
                target.set_state(state)
            except RuntimeError:  # not a state of this generator's kind: it stays as it was
                pass


def detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (list, tuple)):
        return type(value)(detached(v) for v in value)
    if isinstance(value, dict):
        return {k: detached(v) for k, v in value.items()}
    return value
