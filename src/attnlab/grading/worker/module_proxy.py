"""The worker's side of a graded *class* run as the reference's (``GPTBlock`` on ``CausalSelfAttention``): for one
hidden test, the class's name in the student's namespace stands for ``proxy_class(name, callback)``, an
``nn.Module`` subclass whose instances the grader builds and runs (``attnlab.grading.worker.module_calls`` answers).

Calling the class (``CausalSelfAttention(d, h, block_size, dropout)``) sends a ``construct`` callback; the grader
builds the reference module with those arguments and answers with an id, its parameters and buffers (names, values)
and its state attributes (``cache``, by dotted path: ``attn.cache`` in a block). The proxy registers them under the
same names, in nested containers (``_Part``), so that ``named_parameters``, ``state_dict``, ``load_state_dict``,
``.to(dtype)``, ``.train()`` and the student's init code work as on the reference. The reference's code never comes
here.

``forward(*args, **kwargs)`` sends a ``module_forward`` callback with the module's current parameters and buffers,
the arguments, ``self.training``, the state attributes and, in training, a seed drawn from this process's generator
(the grader seeds dropout with it, and again for the backward, so the two see the same masks); the reply's output
is returned and its state set back (``self.cache``, ``self.attn.cache``). The cache comes back as plain tensors: no
gradient flows through a cached key into a later call. Gradients flow through a ``torch.autograd.Function`` whose
backward sends a ``module_vjp`` callback (the saved inputs and the output gradients) and returns the gradients of
the tensor arguments and of the parameters. The parts of a proxy (``block.attn``, every sub-layer of the reference)
hold parameters, state and the reference's plain attributes (``patch``, ``attn.num_heads``, ``mlp.0.in_features``:
``module_calls.public_attributes``) but have no forward of their own: the reference runs the whole module. Where the
student's code needs what the proxy cannot give (a part's forward, an attribute the reference does not hold), the
proxy records a shortfall (``reference_proxy.fell_short``) and the grader grades the question on the student's own
class instead (``grading/core/hidden.py``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from attnlab.grading.worker.executor import tensor_leaves
from attnlab.grading.worker.reference_proxy import detached, fell_short, floating_tensor, rebuilt, reply_value

__all__ = ["proxy_class", "ModuleProxy"]


class _Building:
    depth = 0  # > 0 while a proxy registers its own parts: torch's registration probes them first (``hasattr``)


def _missing(module: nn.Module, attr: str, where: str):
    """``module.attr`` is not there (``nn.Module.__getattr__`` raised): a public name the student's code reads is a
    shortfall of the proxy (``reference_proxy.fell_short``); the ``AttributeError`` is raised again. Not while the
    proxy registers its parts (``add_module`` and ``register_parameter`` ask ``hasattr`` of each new name)."""
    try:
        return nn.Module.__getattr__(module, attr)
    except AttributeError:
        if not attr.startswith("_") and not _Building.depth:
            name = type(module)._attnlab_name if isinstance(module, ModuleProxy) else module.__dict__["_attnlab_of"]
            fell_short(name, f"your code reads `{where}{attr}`, which the reference's `{name}` does not hold")
        raise


class _Part(nn.Module):
    """A sub-layer of a proxy module (``attn``, ``mlp``): it holds parameters, state and plain attributes, the
    reference runs it; calling it on its own, or reading what it does not hold, is a shortfall of the proxy."""

    def __init__(self, of: str, path: str):
        super().__init__()
        self._attnlab_of, self._attnlab_path = of, path

    def __getattr__(self, attr):
        return _missing(self, attr, f"{self.__dict__.get('_attnlab_path', '?')}.")

    def __getitem__(self, index):  # mlp[0], mlp[-1], as on an nn.Sequential
        return list(self._modules.values())[index]

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self) -> int:
        return len(self._modules)

    def forward(self, *args, **kwargs):
        fell_short(self._attnlab_of, f"your code calls `{self._attnlab_path}` of `{self._attnlab_of}` on its own")
        raise RuntimeError(f"`{self._attnlab_path}` is a part of the reference's `{self._attnlab_of}`, which the grader "
                           "runs as a whole")


def _owner(root: nn.Module, dotted: str) -> tuple[nn.Module, str]:
    """The module that holds the attribute ``dotted`` (``attn.cache``) below ``root``, creating parts on the way."""
    *path, leaf = dotted.split(".")
    module = root
    for at, part in enumerate(path):
        child = module._modules.get(part)
        if child is None:
            child = _Part(type(root)._attnlab_name, ".".join(path[: at + 1]))
            module.add_module(part, child)
        module = child
    return module, leaf


def _state_get(root: nn.Module, dotted: str) -> Any:
    module, leaf = _owner(root, dotted)
    return getattr(module, leaf, None)


def _state_set(root: nn.Module, dotted: str, value: Any) -> None:
    module, leaf = _owner(root, dotted)
    setattr(module, leaf, value)


class ModuleProxy(nn.Module):
    """Base of the classes ``proxy_class`` makes: an instance is the reference's module, run by the grader."""

    _attnlab_name = "Module"
    _attnlab_callback: Callable[[dict], Any] = staticmethod(lambda message: None)

    def __init__(self, *args, **kwargs):
        super().__init__()
        built = self._ask({"kind": "construct", "args": list(args), "kwargs": dict(kwargs)})
        self._attnlab_id = built["id"]
        _Building.depth += 1
        try:
            self._register(built)
        finally:
            _Building.depth -= 1

    def _register(self, built: dict) -> None:
        """The reference's parts, parameters, buffers, state and plain attributes, under the reference's names."""
        for path in built.get("modules", ()):  # every sub-layer, in the reference's order (mlp[1], a GELU, too)
            _owner(self, f"{path}.-")
        for name, value in built["parameters"].items():
            module, leaf = _owner(self, name)
            module.register_parameter(leaf, nn.Parameter(value.clone()))
        for name, value in built["buffers"].items():
            module, leaf = _owner(self, name)
            module.register_buffer(leaf, value.clone(), persistent=name in built["persistent"])
        self._attnlab_state = tuple(built["state"])
        for key, value in built["state"].items():
            _state_set(self, key, value)
        for key, value in built.get("attributes", {}).items():  # plain values: patch, attn.num_heads, proj.in_features
            module, leaf = _owner(self, key)
            if not hasattr(type(module), leaf) and leaf not in module._modules:
                setattr(module, leaf, value)

    def __getattr__(self, attr):
        return _missing(self, attr, "")

    def _ask(self, message: dict) -> Any:
        name = type(self)._attnlab_name
        return reply_value(name, type(self)._attnlab_callback({"name": name, **message}))

    def _inputs(self, args: list, kwargs: dict) -> dict:
        """What the grader needs to run the reference on the module as it is now."""
        seed = int(torch.randint(0, 2**62, (1,)).item()) if self.training else None  # dropout's masks, as drawn here
        return {"id": self._attnlab_id, "args": [detached(a) for a in args],
                "kwargs": {k: detached(v) for k, v in kwargs.items()},
                "params": {n: p.detach() for n, p in self.named_parameters()},
                "buffers": {n: b.detach() for n, b in self.named_buffers()},
                "state": {key: detached(_state_get(self, key)) for key in self._attnlab_state},
                "training": bool(self.training), "seed": seed}

    def forward(self, *args, **kwargs):
        inputs = self._inputs(list(args), kwargs)
        answer = self._ask({"kind": "module_forward", **inputs})
        output, state = answer["output"], answer["state"]
        for key in self._attnlab_state:
            _state_set(self, key, state.get(key))
        leaves = tensor_leaves(output)
        slots = [i for i, a in enumerate(args) if floating_tensor(a)] + [k for k, v in kwargs.items() if floating_tensor(v)]
        params = dict(self.named_parameters())
        tensors = [args[s] if isinstance(s, int) else kwargs[s] for s in slots] + list(params.values())
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors) and any(map(floating_tensor, leaves))):
            return output
        connected = _ModuleBackward.apply(self, (inputs, slots, list(params)), leaves, *tensors)
        return rebuilt(output, iter(connected))


class _ModuleBackward(torch.autograd.Function):
    """Connects the grader's outputs to the tensor arguments and the parameters: its backward asks for the VJP."""

    @staticmethod
    def forward(ctx, proxy, call, outputs, *tensors):
        ctx.proxy, ctx.call = proxy, call
        ctx.mark_non_differentiable(*[o for o in outputs if not floating_tensor(o)])
        return tuple(o.clone() for o in outputs)

    @staticmethod
    def backward(ctx, *grad_outputs):
        inputs, slots, names = ctx.call
        grads = ctx.proxy._ask({"kind": "module_vjp", **inputs,
                                "grad_outputs": [g if floating_tensor(g) else None for g in grad_outputs]})
        by_slot = {**dict(enumerate(grads.get("args", []))), **grads.get("kwargs", {})}
        params = grads.get("params", {})
        return (None, None, None, *[by_slot.get(s) for s in slots], *[params.get(n) for n in names])


def proxy_class(name: str, callback: Callable[[dict], Any]) -> type:
    """A class called ``name`` whose instances are the reference's ``name``, built and run by the grader through
    ``callback(message) -> reply`` (the worker's pipes; ``reference_proxy.reply_value`` reads the reply)."""
    return type(name, (ModuleProxy,), {"_attnlab_name": name, "_attnlab_callback": staticmethod(callback),
                                       "__qualname__": name, "__module__": "__main__"})
