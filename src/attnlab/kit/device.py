"""Which device the labs run on, and how big their experiments are.

Every lab starts with the same three questions: where do tensors live (CPU, a CUDA GPU, Apple's MPS),
how large should the data and models be (a laptop CPU needs minutes, not hours), and what should the
first cell print so that a student and a grader can see both answers. This module answers them:

- :func:`pick_device` chooses the device (``ATTNLAB_DEVICE`` or an explicit preference wins);
- :func:`is_fast_mode` and :func:`sized` choose between a small and a full size of an experiment
  (``ATTNLAB_FAST=1`` or ``0`` forces it; otherwise small without a CUDA GPU);
- :func:`describe_device` is the one line the notebook's first cell prints.
"""

from __future__ import annotations

import functools
from typing import TypeVar

import torch

from .. import settings

__all__ = ["pick_device", "is_fast_mode", "sized", "describe_device", "available_devices"]

DEVICE_ENV = settings.DEVICE
FAST_ENV = settings.FAST

_T = TypeVar("_T")


@functools.lru_cache(maxsize=1)
def _mps_works() -> bool:
    """True when Apple's MPS backend is present and can actually allocate a tensor.

    ``torch.backends.mps.is_available()`` can be True on machines where the first allocation
    still fails (old macOS, some virtual machines), so we try one small allocation once.
    """
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        return False
    try:
        torch.zeros(1, device="mps")
    except Exception:  # any failure means "not usable", whatever its type
        return False
    return True


def available_devices() -> list[str]:
    """The device names this machine can use, e.g. ``["cpu", "cuda:0", "cuda:1"]``."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_works():
        names.append("mps")
    return names


def _check_preferred(prefer: str, source: str) -> torch.device:
    """Turn a preference like ``"cuda:1"`` into a device, or raise a ValueError that says what to do."""
    try:
        device = torch.device(prefer)
    except (RuntimeError, ValueError, TypeError) as exc:
        raise ValueError(
            f"{source}={prefer!r} is not a device name; use one of 'cpu', 'cuda', 'cuda:N', 'mps' "
            f"(available here: {', '.join(available_devices())})"
        ) from exc
    available = ", ".join(available_devices())
    if device.type == "cpu":
        return device
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{source}={prefer!r} asks for CUDA, but no CUDA GPU is available here "
                f"(available: {available}); choose one of those, or on Colab pick a GPU runtime "
                f"(Runtime > Change runtime type)"
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ValueError(
                f"{source}={prefer!r} asks for GPU number {device.index}, but this machine has "
                f"{torch.cuda.device_count()} (available: {available})"
            )
        return device
    if device.type == "mps":
        if not _mps_works():
            raise ValueError(
                f"{source}={prefer!r} asks for Apple's MPS backend, which is not available or not working "
                f"here (available: {available})"
            )
        return device
    raise ValueError(
        f"{source}={prefer!r}: the labs support 'cpu', 'cuda', 'cuda:N' and 'mps', not {device.type!r} "
        f"(available here: {available})"
    )


def pick_device(prefer: str | None = None) -> torch.device:
    """The device the labs use.

    Order: ``prefer`` if given, else the environment variable ``ATTNLAB_DEVICE`` if set (``"cpu"``,
    ``"cuda"``, ``"cuda:1"``, ``"mps"``); otherwise CUDA when available, else MPS when available and
    working, else the CPU. ``"auto"`` (or an empty string) means "choose for me".

    Raises ``ValueError`` when the preferred device is not available here, naming it and what is.
    """
    source = "prefer"
    if prefer is None or not str(prefer).strip():
        prefer = settings.get(DEVICE_ENV)
        source = DEVICE_ENV
    if not isinstance(prefer, str):
        raise ValueError(f"prefer={prefer!r} must be a device name such as 'cpu' or 'cuda', or None")
    prefer = prefer.strip()
    if prefer and prefer.lower() != "auto":
        return _check_preferred(prefer, source)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_works():
        return torch.device("mps")
    return torch.device("cpu")


def _fast_override() -> bool | None:
    """``ATTNLAB_FAST`` as a bool, or None when it is unset (or empty)."""
    value = settings.get(FAST_ENV).strip()
    if value == "":
        return None
    if value in ("1", "0"):
        return value == "1"
    raise ValueError(
        f"{FAST_ENV}={value!r} is not understood; set it to '1' (small sizes), '0' (full sizes) or unset it"
    )


def is_fast_mode() -> bool:
    """True when experiments should use their small size.

    ``ATTNLAB_FAST=1`` forces the small size and ``ATTNLAB_FAST=0`` the full size; otherwise the small size
    is used exactly when :func:`pick_device` is not a CUDA GPU.
    """
    forced = _fast_override()
    if forced is not None:
        return forced
    return pick_device().type != "cuda"


def sized(fast: _T, full: _T) -> _T:
    """``fast`` in fast mode, else ``full``: ``n_train = sized(2000, 20000)``."""
    return fast if is_fast_mode() else full


def describe_device() -> str:
    """One line for a notebook's first cell: device, torch version, and fast or full size.

    Example: ``device: cuda (NVIDIA H100) | torch 2.4.0 | full size``.
    """
    device = pick_device()
    where = str(device)
    if device.type == "cuda":
        try:
            where += f" ({torch.cuda.get_device_name(device)})"
        except Exception:  # the name is a nicety; never let it break the first cell
            pass
    forced = _fast_override()
    if forced is not None:
        size = f"{'fast' if forced else 'full'} size ({FAST_ENV}={int(forced)})"
    elif device.type == "cuda":
        size = "full size"
    else:
        size = f"fast size (no CUDA GPU; set {FAST_ENV}=0 for the full size)"
    return f"device: {where} | torch {torch.__version__} | {size}"
