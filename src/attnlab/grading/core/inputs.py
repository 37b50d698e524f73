"""Random inputs for hidden tests, drawn from the grader's generator only (the student cannot predict them)."""

from __future__ import annotations

import torch

F64 = torch.float64


def randn(rng: torch.Generator, *shape: int, dtype: torch.dtype = F64, scale: float = 1.0,
          shift: float = 0.0) -> torch.Tensor:
    """Normal values drawn in float64 (the same numbers whatever ``dtype``), then cast."""
    return (torch.randn(shape, generator=rng, dtype=F64) * scale + shift).to(dtype)


def randint(rng: torch.Generator, low: int, high: int) -> int:
    """An int in [low, high]."""
    return int(torch.randint(low, high + 1, (1,), generator=rng))


def random_mask(rng: torch.Generator, *shape: int, p: float = 0.5) -> torch.Tensor:
    """A random bool mask, True with probability ``p``, with at least one True in every row (last dim)."""
    mask = torch.rand(shape, generator=rng) < p
    keep = torch.randint(shape[-1], shape[:-1] + (1,), generator=rng)
    return mask.scatter(-1, keep, True)


def random_lengths(rng: torch.Generator, batch: int, max_len: int) -> torch.Tensor:
    """Lengths in [1, max_len]; the first row is full and the second (when there is one) has length 1."""
    lengths = torch.randint(1, max_len + 1, (batch,), generator=rng)
    lengths[0] = max_len
    if batch > 1:
        lengths[1] = 1
    return lengths


def padded_ids(rng: torch.Generator, lengths: torch.Tensor, max_len: int, vocab_size: int) -> torch.Tensor:
    """Right-padded token ids (B, max_len): real ids in [1, vocab_size), then 0."""
    ids = torch.randint(1, vocab_size, (len(lengths), max_len), generator=rng)
    return ids.masked_fill(torch.arange(max_len)[None, :] >= lengths[:, None], 0)
