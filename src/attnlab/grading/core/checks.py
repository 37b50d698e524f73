"""Comparison helpers for hidden tests.

Every helper validates what the student returned (type, dtype, shape, finiteness) before comparing
values, and fails with a message that names the function, what differs, and by how much.
"""

from __future__ import annotations

from typing import Any

import torch

from attnlab.grading.worker.api import ObjectRef, Result, StudentAPI
from attnlab.grading.worker.executor import StudentError, tensor_leaves
from attnlab.kit.expect import unravel

# (rtol, atol) per dtype: wide enough for every correct implementation we know of (einsum, manual
# stable softmax, -1e9 masking, ...), narrow enough to catch each catalogued mistake.
TOLERANCES = {
    torch.float64: (1e-6, 1e-8),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


# Rounding slack per layer of computation, in units of eps * the size of the values (see ``tolerance``).
ROUNDING_SLACK = 64


def tolerance(dtype: torch.dtype, *, scale: float = 0.0, depth: int = 1) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing two correct computations of the same values in ``dtype``.

    The rule, written once: every floating-point operation rounds to a relative error of at most
    ``eps = torch.finfo(dtype).eps`` *of the values it combines*, not of its result, so a sum whose terms cancel
    keeps the absolute error of its terms, and two correct orders of the same sums (einsum against a loop, a fused
    kernel against a hand-written block) differ by that much. The bound therefore follows the size of the values
    in play, ``scale`` (``assert_close`` passes the largest ``|expected|``), and the number of layers the value
    went through, ``depth`` (1 for one operation, L for a block of L sub-layers; ``compare_call`` and
    ``compare_module_call`` compare gradients, which go back through the same layers, at twice the depth):
    ``atol = max(TOLERANCES atol, ROUNDING_SLACK * depth * eps * scale)``; ``rtol`` stays the table's. Integer
    dtypes compare exactly. Why 64, and what the term comes to in float64 and float32: ``benchmarks/README.md``,
    "Tolerances".
    """
    rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
    if dtype.is_floating_point and scale > 0:
        atol = max(atol, ROUNDING_SLACK * depth * torch.finfo(dtype).eps * float(scale))
    return rtol, atol


MEASURED_SLACK = 8  # a correct computation in a dtype may err this many times what the library's own does


def measured_atol(expected: torch.Tensor, library: torch.Tensor, *, depth: int = 1) -> float:
    """``atol`` for comparing a computation in ``library.dtype`` with ``expected`` (exact, computed in float64):
    the larger of ``tolerance``'s rule and ``MEASURED_SLACK`` times the error that the matching library module makes
    itself in that dtype at these inputs (``library``). The rule scales with the size of the result; where rounding
    is amplified beyond it (a LayerNorm's backward divides by the standard deviation of its input, so a small
    gradient can carry the rounding error of larger terms), the library's own error measures what a correct answer
    needs. Use it for float32 comparisons against a library module; float64 keeps the rule's full power."""
    exact = expected.detach().to(torch.float64)
    scale = float(exact.abs().max()) if exact.numel() else 0.0
    _, atol = tolerance(library.dtype, scale=scale, depth=depth)
    own = float((library.detach().to(torch.float64) - exact).abs().max()) if exact.numel() else 0.0
    return max(atol, MEASURED_SLACK * own)


def expect_tensor(value: Any, *, name: str, shape=None, dtype=None, finite: bool = True) -> torch.Tensor:
    """Check that ``value`` is a tensor of ``shape`` and ``dtype`` (when given) with finite values."""
    assert isinstance(value, torch.Tensor), f"{name} should be a torch.Tensor, got {type(value).__name__}"
    if shape is not None:
        assert tuple(value.shape) == tuple(shape), (
            f"{name} has shape {tuple(value.shape)}, expected {tuple(shape)}")
    if dtype is not None:
        assert value.dtype == dtype, f"{name} has dtype {value.dtype}, expected {dtype} (keep the input dtype)"
    if finite and (value.is_floating_point() or value.is_complex()):
        bad = (~torch.isfinite(value)).sum().item()
        assert bad == 0, f"{name} has {bad} non-finite values (nan or inf)"
    return value


def assert_close(actual: Any, expected: torch.Tensor, *, name: str, rtol=None, atol=None, depth: int = 1) -> None:
    """``actual`` equals ``expected`` within tolerance, after type, shape, dtype and finiteness checks.

    Without ``rtol``/``atol`` the tolerance is ``tolerance(dtype, scale=max |expected|, depth=depth)``."""
    expected_finite = not (expected.is_floating_point() and not torch.isfinite(expected).all())
    expect_tensor(actual, name=name, shape=expected.shape, dtype=expected.dtype, finite=expected_finite)
    if not (expected.is_floating_point() or expected.is_complex()):
        if not torch.equal(actual, expected):
            diff = (actual != expected).flatten().nonzero()
            i = int(diff[0]) if len(diff) else 0
            raise AssertionError(
                f"{name} differs from the expected values at {diff.numel()} positions, e.g. index "
                f"{unravel(i, expected.shape)}: yours {actual.flatten()[i].item()}, "
                f"expected {expected.flatten()[i].item()}")
        return
    a, e = actual.to(torch.float64), expected.to(torch.float64)
    finite_e = e[torch.isfinite(e)]
    scale = finite_e.abs().max().item() if finite_e.numel() else 0.0
    d_rtol, d_atol = tolerance(expected.dtype, scale=scale, depth=depth)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    both_nonfinite = ~torch.isfinite(e) & (a == e)
    err = (a - e).abs().masked_fill(both_nonfinite, 0.0)
    bound = atol + rtol * e.abs().masked_fill(~torch.isfinite(e), 0.0)
    bad = (err > bound) | (torch.isnan(a) != torch.isnan(e))
    if bad.any():
        i = int(torch.nan_to_num(err, nan=float("inf")).flatten().argmax())
        raise AssertionError(
            f"{name} differs from the reference: {int(bad.sum())} of {e.numel()} values off, the largest "
            f"error {err.flatten()[i].item():.3g} at index {unravel(i, e.shape)} "
            f"(yours {a.flatten()[i].item():.6g}, expected {e.flatten()[i].item():.6g}; "
            f"rtol={rtol:g}, atol={atol:g})")


def compare_values(actual: Any, expected: Any, *, name: str, rtol=None, atol=None, depth: int = 1) -> None:
    """Structural comparison: tuples and lists element by element, tensors with ``assert_close``."""
    if isinstance(expected, torch.Tensor):
        assert_close(actual, expected, name=name, rtol=rtol, atol=atol, depth=depth)
    elif isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), (
            f"{name} should be a tuple of {len(expected)} values, got {type(actual).__name__}")
        assert len(actual) == len(expected), (
            f"{name} should have {len(expected)} elements, got {len(actual)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            compare_values(a, e, name=f"{name}[{i}]", rtol=rtol, atol=atol, depth=depth)
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{name} should be a dict, got {type(actual).__name__}"
        assert set(actual) == set(expected), f"{name} has keys {sorted(actual)}, expected {sorted(expected)}"
        for k in expected:
            compare_values(actual[k], expected[k], name=f"{name}[{k!r}]", rtol=rtol, atol=atol, depth=depth)
    elif isinstance(expected, float):
        assert isinstance(actual, (int, float)) and not isinstance(actual, bool), (
            f"{name} should be a number, got {type(actual).__name__}")
        assert abs(actual - expected) <= 1e-9 + 1e-7 * abs(expected), f"{name} is {actual}, expected {expected}"
    else:
        assert type(actual) is type(expected) and actual == expected, f"{name} is {actual!r}, expected {expected!r}"


def random_like_outputs(output: Any, rng: torch.Generator) -> list:
    """A random cotangent for every floating-point tensor in ``output`` (ones would hide bugs)."""
    return [torch.randn(t.shape, generator=rng, dtype=torch.float64).to(t.dtype)
            if t.is_floating_point() else None for t in tensor_leaves(output)]  # the executor's order


def _compare_grads(s: Result, r: Result, *, name: str, rtol, atol, depth: int) -> None:
    for key, expected in r.grads.items():
        if expected is None:
            continue
        got = s.grads.get(key)
        what = f"the gradient of {name} with respect to argument {key!r}"
        assert got is not None, (f"{what} is missing: the output does not depend on it through autograd "
                                 "(avoid .detach(), .item(), .numpy() or in-place tricks on tensors)")
        assert_close(got, expected, name=what, rtol=rtol, atol=atol, depth=depth)
    param_atol = atol if atol is not None else _param_grads_atol(r.param_grads, depth)
    for key, expected in r.param_grads.items():
        if expected is None:
            continue
        got = s.param_grads.get(key)
        what = f"the gradient of {name} with respect to parameter {key!r}"
        assert got is not None, f"{what} is missing: is the parameter used in forward?"
        assert_close(got, expected, name=what, rtol=rtol, atol=param_atol, depth=depth)


def _param_grads_atol(grads: dict, depth: int) -> float | None:
    """One ``atol`` for all the parameter gradients of one backward pass, from the largest of them: they sum terms
    of the same backward pass, so a gradient that cancels to (nearly) zero keeps the rounding error of those terms
    (a key projection's bias has an exactly zero gradient, as softmax ignores a constant added to a row: its float32
    value is rounding alone: 1.7e-5 in lab06 at seed 100006, over the table's 1e-5). float64 keeps the table's atol."""
    tensors = [g for g in grads.values() if isinstance(g, torch.Tensor) and g.is_floating_point() and g.numel()]
    if not tensors:
        return None
    finite = [g.detach().abs()[torch.isfinite(g.detach())] for g in tensors]
    scale = max((float(f.max()) for f in finite if f.numel()), default=0.0)  # a non-finite value is failed apart
    return tolerance(tensors[0].dtype, scale=scale, depth=depth)[1]


def compare_call(student: StudentAPI, ref: StudentAPI, name: str, *args, grad: bool = False,
                 rng: torch.Generator | None = None, rtol=None, atol=None, check_unmodified: bool = True,
                 depth: int = 1, **kwargs) -> tuple[Result, Result]:
    """Call ``name`` on both with the same arguments; compare outputs (and gradients when ``grad``).

    ``depth``: the layers of computation of ``name`` (``tolerance``).
    ``check_unmodified``: fail when the student's call changed an input in place. The grader decides that from
    the inputs the worker echoes back, and a property of a call can only be observed inside the process that
    runs it: student code that wraps the executor's call can echo clean copies. The check catches honest
    mistakes, never a submission that fakes the echo (the sandbox, not this check, is the security boundary).
    """
    return _compare(lambda **g: ref.call(name, *args, **g, **kwargs),
                    lambda **g: student.call(name, *args, **g, **kwargs),
                    name=name, grad=grad, rng=rng, rtol=rtol, atol=atol, check_unmodified=check_unmodified,
                    depth=depth)


def _compare(call_ref, call_student, *, name: str, grad: bool, rng, rtol, atol,
             check_unmodified: bool = True, depth: int = 1) -> tuple[Result, Result]:
    """The reference first (its output shapes give the random output gradients), then the student. Gradients go
    back through the same layers: they are compared at twice the forward ``depth``."""
    r = call_ref()
    gos = None
    if grad:
        if rng is None:
            raise ValueError(f"comparing {name} with grad=True needs rng= for the random output gradients")
        gos = random_like_outputs(r.output, rng)
        r = call_ref(grad=True, grad_outputs=gos)
    s = call_student(grad=grad, grad_outputs=gos)
    compare_values(s.output, r.output, name=f"the output of {name}", rtol=rtol, atol=atol, depth=depth)
    if check_unmodified:
        assert not s.modified, (f"{name} modified its input argument(s) {s.modified} in place; "
                                "work on new tensors instead")
    if grad:
        _compare_grads(s, r, name=name, rtol=rtol, atol=atol, depth=2 * depth)
    return s, r


def randomize_state(state: dict, rng: torch.Generator, scale: float = 0.5) -> dict:
    """Random values for every floating-point entry (LayerNorm's ones and zeros hide bugs)."""
    out = {}
    for k, v in state.items():
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            out[k] = (torch.randn(v.shape, generator=rng, dtype=torch.float64) * scale).to(v.dtype)
        else:
            out[k] = v
    return out


def build_pair(student: StudentAPI, ref: StudentAPI, cls: str, *init_args, rng: torch.Generator,
               dtype: torch.dtype | None = None, randomize: bool = True, scale: float = 0.5,
               **init_kwargs) -> tuple[ObjectRef, ObjectRef]:
    """Build ``cls`` on both sides with the same random parameters, checked to have the same names."""
    r_mod = ref.create(cls, *init_args, **init_kwargs)
    s_mod = student.create(cls, *init_args, **init_kwargs)
    if dtype is not None:
        r_mod.to(dtype)
        s_mod.to(dtype)
    r_params, s_params = r_mod.param_shapes(), s_mod.param_shapes()
    missing = sorted(set(r_params) - set(s_params))
    extra = sorted(set(s_params) - set(r_params))
    assert not missing and not extra, (
        f"{cls} should have the parameters {sorted(r_params)}; missing {missing}, unexpected {extra}. "
        "Name the sub-layers exactly as the lab says.")
    for k, shape in r_params.items():
        assert s_params[k] == shape, f"{cls}: parameter {k!r} has shape {s_params[k]}, expected {shape}"
    state = r_mod.state_dict()
    if randomize:
        state = randomize_state(state, rng, scale)
        r_mod.load_state_dict(state)
    params_only = {k: v for k, v in state.items() if k in r_params}
    _, unexpected = s_mod.load_state_dict(params_only)
    assert not unexpected, f"{cls} could not load parameters {unexpected}"
    return s_mod, r_mod


def compare_module_call(s_mod: ObjectRef, r_mod: ObjectRef, *args, rng: torch.Generator | None = None,
                        grad: bool = False, method: str = "forward", train: bool = False, rtol=None,
                        atol=None, name: str | None = None, depth: int = 1, **kwargs) -> tuple[Result, Result]:
    """Run the same method on both modules; compare outputs and (with ``grad``) input/parameter gradients.

    ``depth``: the layers of computation of the module (``tolerance``)."""
    return _compare(lambda **g: r_mod.call(*args, method=method, train=train, **g, **kwargs),
                    lambda **g: s_mod.call(*args, method=method, train=train, **g, **kwargs),
                    name=name or f"{r_mod.name}.{method}", grad=grad, rng=rng, rtol=rtol, atol=atol, depth=depth)


def expect_student_error(fn, error: str, *, what: str, mentions: tuple[str, ...] = ()) -> None:
    """``fn()`` (a call into student code) must raise ``error`` (e.g. ``"ValueError"``) there, with a message that
    contains every string of ``mentions`` (the bad value it should name)."""
    try:
        fn()
    except StudentError as exc:
        text = str(exc)
        assert f"raised {error}" in text, f"{what} should raise {error}, but it {text.split(' raised ', 1)[-1][:300]}"
        message = text.split(f"raised {error}:", 1)[-1]
        for mention in mentions:
            assert mention in message, (f"{what}: the {error} message should name {mention}; "
                                        f"got {message.strip()[:200]!r}")
        return
    raise AssertionError(f"{what} should raise {error}, but it returned normally")
