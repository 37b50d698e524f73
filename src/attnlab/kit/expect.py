"""Value checks for the public checks students run (``grader.check``): a failure says how far off the answer is.

A public check compares a student's value with an expected one and, when they differ, shows the worst element:
its index, the student's value, the expected value, and how many values are off. It never mentions a
reference the student cannot see.

    >>> import torch
    >>> expect_close(torch.tensor([0.5, 0.5]), [0.7311, 0.2689], "weights", atol=1e-4)
    Traceback (most recent call last):
    ...
    AssertionError: weights: 2 of 2 values off, the worst at index (0,): yours 0.5, expected 0.7311 (off by 0.231)

Shapes: ``actual`` and ``expected`` have the same shape (``expected`` may be a nested list or a number,
converted to ``actual``'s dtype and device).
"""

from __future__ import annotations

from typing import Any

import torch


def unravel(flat: int, shape) -> tuple:
    """The index tuple of element ``flat`` of a row-major tensor of ``shape`` (shared with the hidden tests)."""
    idx = []
    for size in reversed(tuple(shape)):
        idx.append(flat % size if size else 0)
        flat //= size if size else 1
    return tuple(reversed(idx))


def _as_tensor(actual: Any, name: str) -> torch.Tensor:
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {type(actual).__name__}")
    return actual


SHOWN_WHOLE = 16  # a tensor with at most this many values is shown whole when its shape is wrong


def _shape_message(name: str, actual: torch.Tensor, expected: torch.Tensor) -> str:
    """The shapes, and both values when they are small (a translation one token short reads at a glance)."""
    message = f"{name} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    if 0 < actual.numel() <= SHOWN_WHOLE and 0 < expected.numel() <= SHOWN_WHOLE:
        message += f": yours {actual.detach().tolist()}, expected {expected.detach().tolist()}"
    return message


def expect_close(actual: Any, expected: Any, name: str, *, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """``actual`` equals ``expected`` within ``atol + rtol * |expected|``, element by element.

    Checks the type and shape first, then the values; NaN or inf where the expected value is finite is always off.
    """
    actual = _as_tensor(actual, name)
    expected = torch.as_tensor(expected, dtype=actual.dtype if actual.is_floating_point() else None,
                               device=actual.device)
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(_shape_message(name, actual, expected))
    a = actual.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    err = (a - e).abs()
    err = torch.where(torch.isfinite(e) & ~torch.isfinite(a), torch.full_like(err, float("inf")), err)
    err = torch.where((a == e), torch.zeros_like(err), err)  # equal infinities
    bad = err > atol + rtol * e.abs().nan_to_num(posinf=0.0, neginf=0.0)
    if not bool(bad.any()):
        return
    worst = int(torch.nan_to_num(torch.where(bad, err, torch.zeros_like(err)), nan=float("inf")).flatten().argmax())
    yours, want = a.flatten()[worst].item(), e.flatten()[worst].item()
    raise AssertionError(f"{name}: {int(bad.sum())} of {e.numel()} values off, the worst at index "
                         f"{unravel(worst, e.shape)}: yours {yours:.6g}, expected {want:.6g} "
                         f"(off by {abs(yours - want):.3g})")


def expect_equal(actual: Any, expected: Any, name: str) -> None:
    """Exact equality (integer ids, booleans, masks), showing the first position that differs."""
    actual = _as_tensor(actual, name)
    expected = torch.as_tensor(expected, device=actual.device)
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(_shape_message(name, actual, expected))
    if actual.dtype != expected.dtype and not (actual.is_floating_point() and expected.is_floating_point()):
        raise AssertionError(f"{name} has dtype {actual.dtype}, expected {expected.dtype}")
    diff = (actual != expected).flatten().nonzero()
    if len(diff):
        i = int(diff[0])
        raise AssertionError(f"{name}: {len(diff)} of {expected.numel()} values differ, the first at index "
                             f"{unravel(i, expected.shape)}: yours {actual.flatten()[i].item()}, "
                             f"expected {expected.flatten()[i].item()}")
