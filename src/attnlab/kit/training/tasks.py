"""The tasks ``fit`` knows (``binary``, ``classification``, ``language_model``, ``regression``): for each, the shapes it
expects, its loss and its accuracy (``Task``, ``TASKS``); ``infer_task`` picks one from the shapes of a batch, and
``default_loss`` is the loss ``fit`` uses when no ``loss_fn`` is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F


def _is_int(t: torch.Tensor) -> bool:
    return not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool


@dataclass(frozen=True)
class Task:
    """What ``fit`` optimises for one kind of problem: the shapes it expects, its loss, its accuracy.

    ``fits(logits, target)``: whether the shapes belong to this task. ``loss(logits, target, pad_id)``: a
    scalar. ``hits(logits, target, pad_id)``: ``(correct, count)`` of the batch, or None for no accuracy
    (``metric_name`` is then None too).
    """

    name: str
    shapes: str
    fits: Callable[[torch.Tensor, torch.Tensor], bool]
    loss: Callable[[torch.Tensor, torch.Tensor, int | None], torch.Tensor]
    hits: Callable[[torch.Tensor, torch.Tensor, int | None], tuple[torch.Tensor, Any]] | None = None
    metric_name: str | None = None


def _binary_fits(logits: torch.Tensor, target: torch.Tensor) -> bool:
    if logits.dim() == 1 and target.shape == logits.shape:
        return True
    # (B, 1) logits: one output unit, treated as binary rather than a 1-class softmax (whose loss is always 0)
    return logits.dim() == 2 and logits.shape[1] == 1 and target.dim() in (1, 2) and target.numel() == logits.shape[0]


def _binary_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits.reshape(-1), target.reshape(-1).to(logits.dtype))


def _binary_hits(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> tuple[torch.Tensor, int]:
    predicted = logits.detach().reshape(-1) > 0
    truth = target.reshape(-1) > 0.5
    return (predicted == truth).sum(), truth.numel()


def _classification_fits(logits: torch.Tensor, target: torch.Tensor) -> bool:
    return logits.dim() == 2 and target.dim() == 1 and target.shape[0] == logits.shape[0] and _is_int(target)


def _classification_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def _classification_hits(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> tuple[torch.Tensor, int]:
    return (logits.detach().argmax(-1) == target).sum(), target.numel()


def _language_model_fits(logits: torch.Tensor, target: torch.Tensor) -> bool:
    return logits.dim() == 3 and target.dim() == 2 and target.shape == logits.shape[:2] and _is_int(target)


def _language_model_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    ignore = -100 if pad_id is None else pad_id  # -100: cross_entropy's "ignore nothing" default
    # (B, T, V) -> (B*T, V) against (B, T) -> (B*T,)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=ignore)


def _language_model_hits(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> tuple[torch.Tensor, Any]:
    hits = logits.detach().argmax(-1) == target  # (B, T)
    if pad_id is None:
        return hits.sum(), target.numel()
    real = target != pad_id  # (B, T)
    return (hits & real).sum(), real.sum()


def _regression_fits(logits: torch.Tensor, target: torch.Tensor) -> bool:
    return logits.shape == target.shape or logits.shape == (*target.shape, 1)


def _regression_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    # (*S, 1) or (*S) -> (*S), the target's shape
    return F.mse_loss(logits.reshape(target.shape), target.to(logits.dtype))


TASKS: dict[str, Task] = {
    "binary": Task("binary", "logits (B,) or (B, 1) with a target (B,) of 0/1",
                   _binary_fits, _binary_loss, _binary_hits, "accuracy"),
    "classification": Task("classification", "logits (B, C) with a target (B,) of class ids",
                           _classification_fits, _classification_loss, _classification_hits, "accuracy"),
    "language_model": Task("language_model", "logits (B, T, V) with a target (B, T) of token ids",
                           _language_model_fits, _language_model_loss, _language_model_hits, "token accuracy"),
    "regression": Task("regression", "predictions of the target's shape (or with a trailing 1) and a float target",
                       _regression_fits, _regression_loss),
}
_INFERRED = ("binary", "classification", "language_model")  # what task="auto" may pick, tried in this order


def infer_task(logits: torch.Tensor, target: torch.Tensor) -> str | None:
    """The task ``task="auto"`` picks from the shapes of one batch, or None when no default applies.

    This is the one place where shapes decide what ``fit`` optimises::

        logits (B,) or (B, 1)   target (B,) 0/1      "binary"          BCE with logits; accuracy (logit > 0)
        logits (B, C)           target (B,) ids      "classification"  cross-entropy; accuracy (argmax)
        logits (B, T, V)        target (B, T) ids    "language_model"  cross-entropy, pad ignored; token accuracy

    Regression is never inferred (a (B,) float target looks like binary labels): pass ``task="regression"``.

    >>> infer_task(torch.zeros(4, 3), torch.tensor([0, 2, 1, 1]))
    'classification'
    """
    return next((name for name in _INFERRED if TASKS[name].fits(logits, target)), None)


def check_task(task: str) -> None:
    if task != "auto" and task not in TASKS:
        raise ValueError(f"task={task!r} is not understood; use 'auto' (chosen by shapes) or one of {list(TASKS)}")


def task_for(task: str, logits: torch.Tensor, target: torch.Tensor) -> Task | None:
    """The Task of this batch (None: ``task="auto"`` and no default applies); an explicit task must fit."""
    check_task(task)
    if task == "auto":
        name = infer_task(logits, target)
        return None if name is None else TASKS[name]
    chosen = TASKS[task]
    if not chosen.fits(logits, target):
        raise ValueError(
            f"task={task!r} expects {chosen.shapes}, got logits of shape {tuple(logits.shape)} and a target of "
            f"shape {tuple(target.shape)} ({target.dtype}); check the model's output or pick another task")
    return chosen


def default_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None = 0,
                 task: str = "auto") -> torch.Tensor:
    """The loss ``fit`` uses when no ``loss_fn`` is given: the task's (``task="auto"``: see :func:`infer_task`).

    logits (B,) or (B, 1), target (B,) of 0/1  -> binary cross-entropy with logits
    logits (B, C),         target (B,) ids     -> cross-entropy
    logits (B, T, V),      target (B, T) ids   -> cross-entropy over tokens, ignoring ``pad_id``
                                                  (``pad_id=None``: every token counts)
    task="regression": predictions shaped like the target -> mean squared error

    Returns a scalar.

    >>> default_loss(torch.zeros(2, 4), torch.tensor([0, 3]))  # uniform over 4 classes: log 4
    tensor(1.3863)
    """
    chosen = task_for(task, logits, target)
    if chosen is None:
        raise ValueError(
            f"fit cannot choose a loss for logits of shape {tuple(logits.shape)} and a target of shape "
            f"{tuple(target.shape)} ({target.dtype}); the default handles (B,) logits with (B,) 0/1 targets, "
            f"(B, C) with (B,) class ids, and (B, T, V) with (B, T) token ids. Pass task='regression' for "
            f"real-valued targets, or loss_fn=... for anything else"
        )
    return chosen.loss(logits, target, pad_id)
