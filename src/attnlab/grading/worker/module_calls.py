"""The grader's side of a graded *class* run as the reference's (``GPTBlock`` graded with the reference
``CausalSelfAttention``): ``ModuleCalls`` answers the callbacks of the worker's module proxies
(``attnlab.grading.worker.module_proxy``) for one test; ``ReferenceCalls`` (``reference_calls.py``) passes them on.

Three kinds, each checked before the reference runs, nothing the worker sends trusted:

- ``construct`` (plain arguments only): builds the reference module, first on the ``meta`` device to count its
  numbers (at most ``MAX_PARAMETERS``), then for real under a fixed seed (the grader's own generator is left as it
  was); answers an id, its parameters and buffers, its state attributes (``STATE_ATTRS``: ``cache``, by dotted
  path), its sub-modules' paths and its plain public attributes (``public_attributes``: ``patch``,
  ``attn.num_heads``). At most ``MAX_MODULES`` per test; one reference instance per proxy instance, kept for the test.
- ``module_forward``: the module's id, its parameters and buffers (exactly the reference's names and shapes,
  floating point), its state (the same paths; tensors, plain values), ``training`` and a dropout seed, and the
  arguments (tensors and plain values). The work is bounded (``MAX_WORK``: the numbers sent times their largest
  dimension, which bounds attention's score matrix). The reference runs with ``torch.func.functional_call`` on
  those parameters; the answer is ``{"output", "state"}``.
- ``module_vjp``: the same, with the output gradients; answers the gradients of the floating-point tensor
  arguments and of the parameters (``{"args", "kwargs", "params"}``), computed with the reference on the same
  state and dropout seed as the forward.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from attnlab.grading.worker.executor import tensor_leaves

__all__ = ["ModuleCalls", "Refused", "MAX_MODULES", "MAX_PARAMETERS", "MAX_WORK", "STATE_ATTRS", "is_module_class",
           "public_attributes", "MAX_ATTRIBUTES"]

MAX_MODULES = 256  # reference modules one test may build (a test builds a few; a MiniGPT one per layer)
MAX_PARAMETERS = 2**21  # numbers in one reference module's parameters and buffers (16 MB in float64)
MAX_WORK = 2**26  # the numbers of a call's tensors times their largest dimension (attention's scores: B h T^2)
MAX_ATTRIBUTES = 512  # plain attributes (and sub-module paths) a construct reply mirrors
STATE_ATTRS = ("cache",)  # the attributes of the reference's modules the proxy mirrors (lab09's key-value cache)
MODULE_KINDS = ("construct", "module_forward", "module_vjp")
_INIT_SEED = 0  # the reference's initial values: the same at every construction, whatever the grader drew before
_SCALAR = (type(None), bool, int, float, str)


class Refused(Exception):
    """A callback the grader does not answer with the reference (its text says why, to the student)."""


def is_module_class(obj: Any) -> bool:
    return isinstance(obj, type) and issubclass(obj, nn.Module)


def _state_keys(module: nn.Module) -> list[str]:
    """The dotted paths of the state attributes of ``module`` and its sub-modules (``cache``, ``attn.cache``)."""
    return [f"{path}.{attr}" if path else attr for path, sub in module.named_modules()
            for attr in STATE_ATTRS if attr in vars(sub)]


def _plain_attribute(value: Any) -> bool:
    """A value the proxy mirrors: a number, bool, short string, None, or a short tuple of them (``normalized_shape``)."""
    if isinstance(value, tuple):
        return len(value) <= 16 and all(not isinstance(v, tuple) and _plain_attribute(v) for v in value)
    return isinstance(value, (type(None), bool, int, float)) or (isinstance(value, str) and len(value) <= 200)


def public_attributes(module: nn.Module) -> dict[str, Any]:
    """The plain public attributes of ``module`` and its sub-modules after construction, by dotted path
    (``patch``, ``attn.num_heads``, ``proj.in_features``), at most ``MAX_ATTRIBUTES``: what the proxy mirrors, so that
    student code reading them sees the reference's values. The state (``STATE_ATTRS``) travels on its own."""
    found = {}
    for path, sub in module.named_modules():
        for attr, value in vars(sub).items():
            if (attr.startswith("_") or attr in STATE_ATTRS or attr == "training" or hasattr(nn.Module, attr)
                    or not _plain_attribute(value) or len(found) >= MAX_ATTRIBUTES):
                continue
            found[f"{path}.{attr}" if path else attr] = value
    return found


def _owner(module: nn.Module, key: str) -> tuple[nn.Module, str]:
    path, _, attr = key.rpartition(".")
    return (module.get_submodule(path) if path else module), attr


class ModuleCalls:
    """The reference modules of one test's proxies, by id, and the answers to their callbacks."""

    def __init__(self):
        self.modules: dict[int, tuple[str, nn.Module]] = {}

    def answer(self, name: str, cls: type, message: dict) -> Any:
        kind = message["kind"]
        if kind == "construct":
            return self._construct(name, cls, message["args"], message["kwargs"])
        module = self._module(name, message.get("id"))
        tensors = self._checked_inputs(name, module, message)
        if kind == "module_forward":
            with torch.no_grad():
                output = self._run(module, message, tensors)
            state = {key: getattr(*_owner(module, key)) for key in _state_keys(module)}
            return {"output": output, "state": state}
        return self._vjp(name, module, message, tensors)

    # -- construct ------------------------------------------------------------------------------------------
    def _construct(self, name: str, cls: type, args: list, kwargs: dict) -> dict:
        if not all(isinstance(v, _SCALAR) for v in [*args, *kwargs.values()]):
            raise Refused(f"`{name}(...)` can be given only numbers, strings and None while it is graded with the "
                          "reference")
        if len(self.modules) >= MAX_MODULES:
            raise Refused(f"your code built more than {MAX_MODULES} `{name}` modules in one test: refused")
        size = _size(cls, tuple(args), tuple(sorted(kwargs.items())))
        if size > MAX_PARAMETERS:
            raise Refused(f"`{name}(...)` with these arguments would hold {size:,} numbers, over the limit of "
                          f"{MAX_PARAMETERS:,} while it is graded with the reference: build a smaller one")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_INIT_SEED)
            module = cls(*args, **kwargs)
        ident = len(self.modules) + 1
        self.modules[ident] = (name, module)
        persistent = set(module.state_dict())
        buffers = dict(module.named_buffers())
        return {"id": ident, "parameters": {n: p.detach() for n, p in module.named_parameters()},
                "buffers": {n: b.detach() for n, b in buffers.items()},
                "persistent": sorted(n for n in buffers if n in persistent),
                "state": {key: _plain_state(getattr(*_owner(module, key))) for key in _state_keys(module)},
                "modules": [path for path, _ in module.named_modules() if path][:MAX_ATTRIBUTES],
                "attributes": public_attributes(module)}

    def _module(self, name: str, ident: Any) -> nn.Module:
        entry = self.modules.get(ident) if type(ident) is int else None
        if entry is None or entry[0] != name:
            raise Refused(f"your code ran a `{name}` that this test did not build with the reference (a module kept "
                          "from another test?): refused")
        return entry[1]

    # -- the checks of a forward or backward callback --------------------------------------------------------
    def _checked_inputs(self, name: str, module: nn.Module, message: dict) -> dict:
        """The parameters and buffers sent, checked against the reference's names and shapes; the state checked."""
        tensors = {}
        for what, expected in (("params", dict(module.named_parameters())), ("buffers", dict(module.named_buffers()))):
            sent = message.get(what)
            if not isinstance(sent, dict) or set(sent) != set(expected):
                raise Refused(f"the grading process sent `{name}`'s {what} under other names than the reference's "
                              f"({sorted(expected)[:8]}): refused")
            for key, value in sent.items():
                want = expected[key]
                if not (isinstance(value, torch.Tensor) and value.shape == want.shape
                        and value.dtype.is_floating_point == want.dtype.is_floating_point):
                    raise Refused(f"`{name}`'s {key} should be a tensor of shape {tuple(want.shape)}: refused")
                tensors[key] = value
        state = message.get("state")
        if not isinstance(state, dict) or set(state) != set(_state_keys(module)):
            raise Refused(f"the grading process sent `{name}`'s state under other names than the reference's: refused")
        if not isinstance(message.get("training"), bool) or not (message.get("seed") is None
                                                                 or type(message.get("seed")) is int):
            raise Refused(f"the grading process sent a malformed call of `{name}`: refused")
        sent = [*tensor_leaves(message["args"]), *tensor_leaves(message["kwargs"]), *tensor_leaves(state)]
        largest = max((max(t.shape, default=1) for t in sent), default=1)
        work = sum(t.numel() for t in sent) * largest
        if work > MAX_WORK:
            raise Refused(f"`{name}` was called on tensors too large to be run with the reference ({work:,} numbers "
                          f"times their largest dimension, over {MAX_WORK:,}): call it on smaller ones")
        return tensors

    @staticmethod
    def _run(module: nn.Module, message: dict, tensors: dict) -> Any:
        """The reference ``module`` on the parameters and state sent, in the mode sent, dropout seeded as sent."""
        module.train(message["training"])
        for key, value in message["state"].items():
            setattr(*_owner(module, key), value)
        with torch.random.fork_rng(devices=[], enabled=message["seed"] is not None):
            if message["seed"] is not None:
                torch.manual_seed(message["seed"])
            return functional_call(module, tensors, tuple(message["args"]), dict(message["kwargs"]), strict=True)

    def _vjp(self, name: str, module: nn.Module, message: dict, tensors: dict) -> dict:
        grad_outputs = message.get("grad_outputs")
        if not isinstance(grad_outputs, list):
            raise Refused(f"the backward callback of `{name}` sent no output gradients: refused")
        params = set(dict(module.named_parameters()))
        tensors = {k: v.detach().clone().requires_grad_(k in params and v.is_floating_point())
                   for k, v in tensors.items()}
        args = [_leaf(a) for a in message["args"]]
        kwargs = {k: _leaf(v) for k, v in message["kwargs"].items()}
        with torch.enable_grad():
            leaves = tensor_leaves(self._run(module, {**message, "args": args, "kwargs": kwargs}, tensors))
        if len(leaves) != len(grad_outputs):
            raise Refused(f"the backward callback sent {len(grad_outputs)} output gradients for {len(leaves)} outputs")
        pairs = [(o, g) for o, g in zip(leaves, grad_outputs) if g is not None and o.requires_grad]
        if any(not isinstance(g, torch.Tensor) or g.shape != o.shape for o, g in pairs):
            raise Refused("the backward callback sent an output gradient of the wrong shape")
        inputs = [a for a in [*args, *kwargs.values()] if _floating(a)]
        targets = inputs + [tensors[k] for k in tensors if k in params]
        grads = (torch.autograd.grad(sum((o * g.to(o.dtype)).sum() for o, g in pairs), targets, allow_unused=True)
                 if pairs and targets else [None] * len(targets))
        found = iter(grads)
        return {"args": [next(found) if _floating(a) else None for a in args],
                "kwargs": {k: next(found) if _floating(v) else None for k, v in kwargs.items()},
                "params": {k: next(found) for k in tensors if k in params}}


def _floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _leaf(value: Any) -> Any:
    return value.detach().clone().requires_grad_(True) if _floating(value) else value


_INITIALISERS = ("normal_", "uniform_", "fill_", "zero_", "bernoulli_", "exponential_", "random_", "geometric_",
                 "log_normal_", "cauchy_", "erfinv_", "clamp_", "mul_", "add_", "div_", "sub_", "copy_")


@contextmanager
def _meta_without_initialisers():
    """The ``meta`` device, with the tensor initialisers (``normal_``, ``uniform_``...) returning a meta tensor
    unchanged: a module's sizes do not depend on them, and a meta ``normal_`` (``nn.Embedding``'s) runs torch's
    reference ops, whose first use imports torch._dynamo (800 modules, over a second). Only the reference's process
    (``reference_host``'s child, one thread) builds modules this way; the methods come back after."""
    saved = {name: getattr(torch.Tensor, name) for name in _INITIALISERS}

    def skipping(original):
        def method(self, *args, **kwargs):
            return self if self.is_meta else original(self, *args, **kwargs)
        return method

    try:
        for name, original in saved.items():
            setattr(torch.Tensor, name, skipping(original))
        with torch.device("meta"):
            yield
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)


@functools.lru_cache(maxsize=256)
def _size(cls: type, args: tuple, kwargs: tuple) -> int:
    """The numbers in the parameters and buffers of ``cls(*args, **kwargs)``, built on the ``meta`` device (no data,
    no initialisation: ``_meta_without_initialisers``); kept per arguments (a lab's tests build the same few sizes
    again and again)."""
    with _meta_without_initialisers():
        module = cls(*args, **dict(kwargs))
    return sum(t.numel() for t in [*module.parameters(), *module.buffers()])


def _plain_state(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value
