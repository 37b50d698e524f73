"""``fit``, the one training loop every lab reuses, and its steps in the order it takes them: check the
arguments, an epoch of optimizer steps (losses synced to the host every 10 steps and checked to be finite),
validation, a plateau scheduler's step, the progress bar and the live plot."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from .evaluation import Meter, Objective, evaluate_on, resolve_device, restore_modes, split_batch, to_device, training_modes
from .history import History
from .live_plot import live_plot_for


def fit(
    model: nn.Module, train_loader: Iterable, *, epochs: int, lr: float = 1e-3,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    optimizer: torch.optim.Optimizer | None = None, val_loader: Iterable | None = None,
    device: str | torch.device | None = None, metric: Any = "auto", progress: bool = True,
    live_plot: bool | None = None, clip_grad_norm: float | None = None, scheduler: Any = None,
    desc: str | None = None, pad_id: int | None = 0, task: str = "auto",
) -> History:
    """Train ``model`` for ``epochs`` passes over ``train_loader``; returns the :class:`History`.

    Batches: tuples ``(*inputs, target)``; the loop calls ``model(*inputs)``, so ``(ids, target)`` and
    ``(ids, lengths, target)`` both work. Tensors are moved to ``device`` (default: where the model's
    parameters are; when given, the model is moved there too). The loader must be re-iterable (a
    ``DataLoader`` or a list), since it is read once per epoch.

    task: what is optimised, and which accuracy is reported (see :data:`TASKS`): "binary", "classification",
        "language_model" (tokens, ``pad_id`` ignored; ``pad_id=None`` when id 0 is a real token, as in a
        character vocabulary), "regression" (mean squared error, no accuracy), or "auto" (the default):
        chosen from the shapes of each batch by :func:`infer_task`.
    Loss: a model returning ``(logits, loss)`` with a loss trains on that loss (a GPT whose
    ``forward(idx, targets)`` computes it: pass batches ``(x, y, y)``); otherwise ``loss_fn(logits, target)``,
    by default the task's loss (:func:`default_loss`). A model may also return ``(logits, extras...)``,
    e.g. attention weights; only the logits are used.

    optimizer: default ``torch.optim.Adam(model.parameters(), lr=lr)``; ``lr`` is used only for that default
    metric: "auto" (the task's accuracy, if it has one), None,
        or ``f(logits, target) -> float`` (a batch mean; averaged over examples)
    clip_grad_norm: clip the gradient norm to this value before each step
    scheduler: a ``torch.optim.lr_scheduler`` built on ``optimizer``; stepped after every optimizer step
        (size it in steps: ``epochs * len(train_loader)``), except ``ReduceLROnPlateau``, stepped once per
        epoch on the validation loss (the training loss without a val_loader)
    progress: show a tqdm bar with the loss; live_plot: redraw the curves after each epoch (default: only
        inside a Jupyter kernel; never opens a window)
    desc: the progress bar's label

    The model's train/eval mode is restored when ``fit`` returns. A loss that is NaN or infinite stops
    training with a FloatingPointError (checked every 10 steps and at the end of each epoch).
    """
    _check_epochs(epochs)
    objective = Objective(task, loss_fn, metric, pad_id)  # checks task and metric
    _check_clip(clip_grad_norm)
    device = resolve_device(model, device)
    optimizer = optimizer if optimizer is not None else _default_optimizer(model, lr)
    _check_scheduler(scheduler, optimizer)
    run = _Run(model, objective, optimizer, scheduler, clip_grad_norm, device, epochs)
    plot = live_plot_for(live_plot)
    bar = _progress_bar(train_loader, epochs, desc, progress)

    history, modes, start = History(), training_modes(model), time.perf_counter()
    try:
        for epoch in range(1, epochs + 1):
            _epoch(run, train_loader, val_loader, epoch, history, bar)
            history.seconds = time.perf_counter() - start
            if plot is not None:
                plot.update(history)
    finally:
        bar.close()
        restore_modes(modes)
        history.seconds = time.perf_counter() - start
    return history


# the steps of fit, in the order it takes them


def _check_epochs(epochs: Any) -> None:
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs={epochs!r} must be a positive int")


def _check_clip(clip_grad_norm: float | None) -> None:
    if clip_grad_norm is not None and not clip_grad_norm > 0:
        raise ValueError(
            f"clip_grad_norm={clip_grad_norm!r} must be a positive number, or None for no clipping"
        )


def _default_optimizer(model: nn.Module, lr: float) -> torch.optim.Optimizer:
    """Adam over the trainable parameters."""
    if not lr > 0:
        raise ValueError(f"lr={lr!r} must be a positive learning rate, e.g. 1e-3")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(
            "the model has no trainable parameters (none with requires_grad=True); nothing to train"
        )
    return torch.optim.Adam(params, lr=lr)


def _check_scheduler(scheduler: Any, optimizer: torch.optim.Optimizer) -> None:
    if scheduler is not None and getattr(scheduler, "optimizer", None) is not optimizer:
        raise ValueError(
            "the scheduler was built on a different optimizer than the one fit uses; create the optimizer "
            "yourself, build the scheduler on it, and pass both: fit(..., optimizer=opt, scheduler=sched)"
        )


def _is_plateau(scheduler: Any) -> bool:
    """ReduceLROnPlateau steps once per epoch on a loss; every other scheduler after every optimizer step."""
    return isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)


@dataclass(frozen=True)
class _Run:
    """What every step of one ``fit`` call needs."""

    model: nn.Module
    objective: Objective
    optimizer: torch.optim.Optimizer
    scheduler: Any
    clip_grad_norm: float | None
    device: torch.device
    epochs: int



def _progress_bar(train_loader: Iterable, epochs: int, desc: str | None, progress: bool) -> tqdm:
    try:
        steps_per_epoch: int | None = len(train_loader)  # type: ignore[arg-type]
    except TypeError:  # a loader without a length: the bar counts steps without a total
        steps_per_epoch = None
    return tqdm(total=None if steps_per_epoch is None else epochs * steps_per_epoch,
                desc=desc or "training", disable=not progress, unit="step", dynamic_ncols=True)


def _epoch(run: _Run, train_loader: Iterable, val_loader: Iterable | None, epoch: int, history: History,
           bar: tqdm) -> None:
    """Train on every batch, validate, step a plateau scheduler; the results go into ``history`` and the bar."""
    meter = _train_epoch(run, train_loader, epoch, bar)
    summary = _record_training(history, meter, epoch, run.epochs)
    if val_loader is not None:
        summary += _validate(run, val_loader, history, meter.name)
    _step_plateau(run.scheduler, history)
    bar.set_postfix_str(summary)


def _train_epoch(run: _Run, train_loader: Iterable, epoch: int, bar: tqdm) -> Meter:
    """One pass over the training data, an optimizer step per batch; returns the epoch's meter."""
    run.model.train()
    meter = run.objective.meter()
    for step, batch in enumerate(train_loader):
        inputs, target = split_batch(to_device(batch, run.device))
        run.optimizer.zero_grad(set_to_none=True)
        loss, logits = run.objective.loss(run.model(*inputs), target)
        loss.backward()
        if run.clip_grad_norm is not None:
            nn.utils.clip_grad_norm_(run.model.parameters(), run.clip_grad_norm)
        run.optimizer.step()
        if run.scheduler is not None and not _is_plateau(run.scheduler):
            run.scheduler.step()
        meter.add(loss, logits, target)
        bar.update(1)
        if step % 10 == 0:  # one host sync every 10 steps, not every step
            latest = _sync_losses(meter, epoch)
            bar.set_postfix_str(f"epoch {epoch}/{run.epochs} loss {latest:.4f}", refresh=False)
    if not meter.steps:
        raise ValueError(
            f"train_loader yielded no batches in epoch {epoch}; pass a re-iterable loader "
            f"(a DataLoader or a list), not a generator, and check that the dataset is not empty"
        )
    _sync_losses(meter, epoch)
    return meter


def _sync_losses(meter: Meter, epoch: int) -> float:
    """Brings the step losses not yet seen to the host and stops at the first that is not finite (each step's loss
    is checked once, here); returns the latest loss."""
    first = len(meter.values)
    new = meter.sync()
    for offset, value in enumerate(new):
        if not math.isfinite(value):
            raise FloatingPointError(
                f"the loss became {value} at epoch {epoch}, step {first + offset}; lower the learning rate "
                f"(lr=...) or clip the gradients (clip_grad_norm=1.0), and check the inputs for NaN"
            )
    return meter.values[-1]


def _record_training(history: History, meter: Meter, epoch: int, epochs: int) -> str:
    """Adds the epoch's training loss and metric to ``history``; returns the progress bar's summary."""
    history.step_loss.extend(meter.values)
    train_loss, train_metric = meter.result()
    history.train_loss.append(train_loss)
    if train_metric is not None:
        history.train_metric.append(train_metric)
        history.metric_name = meter.name
    return f"epoch {epoch}/{epochs} loss {train_loss:.4f}"


def _validate(run: _Run, val_loader: Iterable, history: History, metric_name: str | None) -> str:
    """Evaluates on the validation data, adds it to ``history``; returns the progress bar's addition."""
    val_loss, val_metric = evaluate_on(run.model, val_loader, run.objective, run.device)
    history.val_loss.append(val_loss)
    summary = f" val_loss {val_loss:.4f}"
    if val_metric is not None:
        history.val_metric.append(val_metric)
        history.metric_name = history.metric_name or metric_name
        summary += f" val_{_short(history.metric_name)} {val_metric:.3f}"
    return summary


def _step_plateau(scheduler: Any, history: History) -> None:
    """A ReduceLROnPlateau steps on the epoch's validation loss (the training loss without validation data)."""
    if _is_plateau(scheduler):
        scheduler.step(history.val_loss[-1] if history.val_loss else history.train_loss[-1])


def _short(name: str | None) -> str:
    return {"accuracy": "acc", "token accuracy": "acc"}.get(name or "", name or "metric")
