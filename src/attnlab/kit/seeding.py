"""One call that makes a lab's random numbers repeatable."""

from __future__ import annotations

import random

import numpy as np
import torch

__all__ = ["seed_everything"]

_MAX_SEED = 2**32 - 1  # numpy's legacy seeding accepts 0 .. 2**32 - 1


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python's ``random``, NumPy, and torch (CPU and every CUDA device) with ``seed``.

    Returns a fresh CPU ``torch.Generator`` seeded with ``seed``, for code that takes a ``generator=``
    argument (``torch.randn(..., generator=g)``, ``DataLoader(..., generator=g)``) and should not
    depend on what else consumed the global random stream.

    Note: seeding makes runs repeatable on the same machine and library versions; some CUDA kernels
    are still non-deterministic (see ``torch.use_deterministic_algorithms``).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed={seed!r} must be an int between 0 and {_MAX_SEED}")
    seed = int(seed)
    if not 0 <= seed <= _MAX_SEED:
        raise ValueError(f"seed={seed} is out of range; use an int between 0 and {_MAX_SEED}")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device (lazily) and MPS
    torch.cuda.manual_seed_all(seed)  # explicit; a no-op without CUDA
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator
