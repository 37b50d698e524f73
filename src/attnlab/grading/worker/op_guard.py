"""The worker's operator-level guard of rule 5: the forbidden operations the student's code RAN during a graded call,
whatever route reached them (a name, ``getattr`` with a built string, ``torch.ops.aten...``, ``torch._C._nn``, an
alias such as ``torch.native_group_norm``, a library class, code evaluated from a string or an unpickled object).

Two of PyTorch's own hooks, active only while a graded call runs (``begin``/``end``), in the worker only:

- a ``torch.overrides.TorchFunctionMode`` sees every call of a torch function at the Python level (``F.layer_norm``,
  ``torch._C._nn.scaled_dot_product_attention``, ``torch.ops.aten.x``, a module's ``F.multi_head_attention_forward``),
  composite ones included (``layer_norm``, ``scaled_dot_product_attention``, ``lstm_cell``);
- a ``torch.utils._python_dispatch.TorchDispatchMode`` sees the ``aten`` operators below autograd
  (``native_layer_norm``, ``convolution``, ``_scaled_dot_product_flash_attention_for_cpu``), including those that
  library code calls inside a function the first mode saw. It is entered only inside such a function, and not for
  the ``ELEMENTARY`` ones (indexing, arithmetic, ``matmul``, ``softmax``, views...), which run one kernel of their own
  name and no library code: a dispatch mode in Python on every operator would slow a batch down.

Each sighting of an operation of the lab's families (``policy/forbidden_ops.FAMILIES`` of the watched names) is
recorded at the innermost frame of the student's cells on the Python stack (``<cell N>``, its line), as
``aten.<operation>``: what the grader checks and costs (``call_evidence``). Library frames and code evaluated from
strings are walked past, so code a library runs on the student's behalf is the student's; a stack without a cell
(the worker's own backward pass, a reference proxy's packing) is nobody's.
"""

from __future__ import annotations

import sys
from typing import Callable, Iterable

from attnlab.grading.policy.forbidden_ops import OWNER, op_name, ops_for

MAX_DEPTH = 200  # frames walked up to the student's cell


# Torch functions that run one operator of their own name and no library code, so nothing forbidden can run inside
# them: the first mode notes them and runs them without the dispatch mode (nearly every call an answer makes).
ELEMENTARY = frozenset({
    "__get__", "__set__", "__getitem__", "__setitem__", "__len__", "__iter__", "__contains__", "__bool__", "__index__",
    "__format__", "__repr__", "__hash__", "__float__", "__int__",
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
    "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__mod__", "__matmul__", "__rmatmul__", "__neg__",
    "__pow__", "__rpow__", "__abs__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
    "__xor__", "__invert__", "__iand__", "__ior__",
    "add", "add_", "sub", "mul", "mul_", "div", "div_", "neg", "pow", "abs", "exp", "log", "sqrt", "rsqrt", "square",
    "tanh", "sigmoid", "relu", "clamp", "clamp_min", "maximum", "minimum", "reciprocal", "sin", "cos",
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "outer", "dot", "softmax", "log_softmax", "linear",
    "sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "cumsum", "logsumexp", "norm", "var",
    "view", "view_as", "reshape", "reshape_as", "transpose", "permute", "contiguous", "unsqueeze", "squeeze",
    "expand", "expand_as", "repeat", "repeat_interleave", "flatten", "unflatten", "t", "narrow", "select", "split",
    "chunk", "unbind", "cat", "stack", "gather", "index_select", "masked_fill", "masked_fill_", "where", "tril",
    "triu", "zeros_like", "ones_like", "full_like", "empty_like", "new_zeros", "new_ones", "new_full", "new_empty",
    "size", "dim", "numel", "item", "tolist", "to", "float", "double", "type", "type_as", "clone", "detach",
    "requires_grad_", "copy_", "fill_", "zero_", "isclose", "allclose", "equal", "all", "any", "isfinite", "isnan",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "masked_select", "scatter",
    "is_floating_point", "is_complex", "cpu", "numpy", "_set_grad_enabled", "_has_compatible_shallow_copy_type",
    "_parse_to", "_unsafe_view", "lift_fresh", "tensor", "as_tensor", "from_numpy",
    "empty", "zeros", "ones", "full", "arange", "linspace", "eye", "randn", "rand", "randint", "randperm",
    "uniform_", "normal_", "bernoulli", "bernoulli_", "multinomial", "kaiming_uniform_", "xavier_uniform_",
    "embedding", "dropout", "gelu", "silu", "one_hot", "topk", "sort", "argsort",
    "grad", "backward", "_softmax_backward_data", "embedding_dense_backward",  # the backward of what was seen
})


class _State:
    ops: frozenset = frozenset()
    modes: tuple = ()  # the mode classes entered for a graded call (the function guard)
    record: Callable | None = None  # (call, cell, line) -> None, set by install


def _cell_frame(frame):
    """The innermost frame of a notebook cell (``<cell N>``) at or above ``frame``, else None."""
    for _ in range(MAX_DEPTH):
        if frame is None:
            return None
        name = frame.f_code.co_filename
        if name.startswith("<cell ") and name.endswith(">") and name[6:-1].isdigit():
            return frame
        frame = frame.f_back
    return None


def _saw(name: str) -> None:
    """A guarded operation ``name`` ran: record it at the student's innermost cell frame, if any."""
    if _State.record is not None:
        frame = _cell_frame(sys._getframe(2))
        if frame is not None:
            _State.record(f"{OWNER}.{name}", int(frame.f_code.co_filename[6:-1]), frame.f_lineno)


def _modes() -> tuple:
    """The two mode classes (built once torch is imported): each notes what it sees and runs it unchanged."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class FunctionGuard(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = op_name(func)
            if name in _State.ops:
                _saw(name)
            if name in ELEMENTARY:
                return func(*args, **(kwargs or {}))
            with DispatchGuard():  # what library code inside it runs, below autograd
                return func(*args, **(kwargs or {}))

    class DispatchGuard(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # Left True, torch wraps __torch_dispatch__ in _disable_dynamo, whose first call imports torch._dynamo
            # (sympy, torch.distributed: hundreds of modules, in each fresh worker). This guard never compiles.
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = op_name(func)
            if name in _State.ops:
                _saw(name)
            return func(*args, **(kwargs or {}))

    return (FunctionGuard,)  # it enters DispatchGuard itself, around what is not ELEMENTARY


def install(names: Iterable[str], record: Callable) -> frozenset:
    """Guard the operations of the watched ``names`` (``forbidden_ops.ops_for``); ``record(call, cell, line)``
    counts a sighting. Returns the operations guarded (none: the guard never runs)."""
    _State.ops, _State.record = ops_for(names), record
    if _State.ops and not _State.modes:
        _State.modes = _modes()
    return _State.ops


def begin() -> Callable[[], None]:
    """Enter the guard for one graded call; returns what leaves it (safe to call when nothing is guarded)."""
    if not _State.ops:
        return lambda: None
    entered = []
    for mode_class in _State.modes:  # fresh modes for each call: nothing carries over from the last one
        mode = mode_class()
        mode.__enter__()
        entered.append(mode)

    def leave() -> None:
        for mode in reversed(entered):
            try:
                mode.__exit__(None, None, None)
            except Exception:  # noqa: BLE001 - the student's code left the mode stack changed: the worker goes on
                pass

    return leave
