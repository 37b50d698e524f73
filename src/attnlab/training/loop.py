"""The one training loop every lab reuses (d2l's single Trainer idea).

``fit`` trains any model whose batches are tuples ``(*inputs, target)``: it calls ``model(*inputs)``,
optimises the loss of its task (or the one the model returns), shows a progress bar, and in a
Jupyter notebook redraws a loss/accuracy plot after every epoch. ``evaluate`` computes the mean loss
and metric of a model on a loader without changing it. Both run unchanged on CPU and CUDA.

The task says what is optimised. Pass it (``fit(..., task="language_model")``) or let ``task="auto"``
(the default) pick it from the shapes of the logits and the target, in one place, :func:`infer_task`::

    task              logits            target          loss                               metric
    "binary"          (B,) or (B, 1)    (B,) 0/1        binary cross-entropy with logits   accuracy (logit > 0)
    "classification"  (B, C)            (B,) ids        cross-entropy                      accuracy (argmax)
    "language_model"  (B, T, V)         (B, T) ids      cross-entropy, pad tokens ignored  token accuracy (non-pad)
    "regression"      target's shape    float           mean squared error                 none (never inferred)

A model that returns ``(logits, loss)`` with a loss (a GPT whose ``forward(idx, targets)`` computes it)
trains on its own loss; give it its targets as an input, e.g. batches ``(x, y, y)``.

Reading order: History; batches and outputs; tasks (losses, metrics); evaluate; the live plot; fit, then
its steps in the order it takes them.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from attnlab.device import pick_device

__all__ = ["History", "Task", "TASKS", "fit", "evaluate", "default_loss", "infer_task", "in_notebook"]

_LOSS_KEYS = ("train_loss", "val_loss")
_METRIC_KEYS = ("train_metric", "val_metric")


@dataclass
class History:
    """What ``fit`` recorded.

    train_loss, val_loss: mean loss per epoch (val_loss is empty without a val_loader)
    train_metric, val_metric: metric per epoch (empty when the metric is off or does not apply)
    step_loss: the loss of every optimizer step, in order
    seconds: wall-clock time of the whole ``fit`` call
    metric_name: "accuracy", "token accuracy", a custom metric's name, or None
    """

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    train_metric: list[float] = field(default_factory=list)
    val_metric: list[float] = field(default_factory=list)
    step_loss: list[float] = field(default_factory=list, repr=False)  # long; left out of the repr
    seconds: float = 0.0
    metric_name: str | None = None

    @property
    def epochs(self) -> int:
        """Number of completed epochs."""
        return len(self.train_loss)

    def as_dict(self) -> dict[str, Any]:
        """A plain dict (lists copied), e.g. to save as JSON or to pass to ``plot_history``."""
        return {
            "train_loss": list(self.train_loss),
            "val_loss": list(self.val_loss),
            "train_metric": list(self.train_metric),
            "val_metric": list(self.val_metric),
            "step_loss": list(self.step_loss),
            "seconds": self.seconds,
            "metric_name": self.metric_name,
        }

    def best(self, metric: str = "val_metric") -> float:
        """The best value of one per-epoch record: the lowest loss or the highest metric.

        metric: "train_loss", "val_loss", "train_metric", "val_metric", or the short forms "loss" and
        "metric" (validation when recorded, else training).
        """
        if metric in ("loss", "metric"):
            metric = f"val_{metric}" if getattr(self, f"val_{metric}") else f"train_{metric}"
        if metric not in _LOSS_KEYS + _METRIC_KEYS:
            raise ValueError(
                f"best({metric!r}): choose one of {_LOSS_KEYS + _METRIC_KEYS} "
                f"or the short forms 'loss', 'metric'"
            )
        values = getattr(self, metric)
        if not values:
            why = "pass val_loader= to fit" if metric.startswith("val") else "train for at least one epoch"
            if metric.endswith("metric") and self.metric_name is None:
                why = "no metric was recorded (metric=None, or it does not apply to these shapes)"
            raise ValueError(f"best({metric!r}): no values were recorded; {why}")
        return min(values) if metric in _LOSS_KEYS else max(values)


# ----------------------------------------------------------------------------------------------------------
# batches, outputs, losses and metrics


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to_device(o, device) for o in obj)
    return obj


def _split_batch(batch: Any) -> tuple[list[Any], torch.Tensor]:
    """``(*inputs, target)`` of one batch."""
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        got = type(batch).__name__
        if isinstance(batch, (tuple, list)):
            got = f"a {got} of length {len(batch)}"
        raise ValueError(
            f"each batch must be a tuple (*inputs, target), got {got}; "
            f"a DataLoader over TensorDataset(ids, labels) yields (ids, labels)"
        )
    *inputs, target = batch
    if not isinstance(target, torch.Tensor):
        raise ValueError(
            f"the last element of a batch must be the target tensor, got {type(target).__name__}"
        )
    return inputs, target


def _unpack_output(out: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(logits, loss or None)`` from what the model returned.

    A tensor is the logits. A pair ``(logits, loss)`` whose second element is a scalar tensor (or None)
    carries the model's own loss. Any other tuple is ``(logits, extras...)`` (attention weights, say),
    and only the logits are used.
    """
    if isinstance(out, torch.Tensor):
        return out, None
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        if len(out) == 2 and (out[1] is None or (isinstance(out[1], torch.Tensor) and out[1].dim() == 0)):
            return out[0], out[1]
        return out[0], None
    raise ValueError(
        f"the model returned {type(out).__name__}; fit expects logits (a tensor) or a tuple (logits, loss)"
    )


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


def _check_task(task: str) -> None:
    if task != "auto" and task not in TASKS:
        raise ValueError(f"task={task!r} is not understood; use 'auto' (chosen by shapes) or one of {list(TASKS)}")


def _task_for(task: str, logits: torch.Tensor, target: torch.Tensor) -> Task | None:
    """The Task of this batch (None: ``task="auto"`` and no default applies); an explicit task must fit."""
    _check_task(task)
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
    chosen = _task_for(task, logits, target)
    if chosen is None:
        raise ValueError(
            f"fit cannot choose a loss for logits of shape {tuple(logits.shape)} and a target of shape "
            f"{tuple(target.shape)} ({target.dtype}); the default handles (B,) logits with (B,) 0/1 targets, "
            f"(B, C) with (B,) class ids, and (B, T, V) with (B, T) token ids. Pass task='regression' for "
            f"real-valued targets, or loss_fn=... for anything else"
        )
    return chosen.loss(logits, target, pad_id)


class _Meter:
    """Accumulates the loss (weighted by batch size) and the metric of one pass over a loader.

    Values stay on the device until :meth:`sync` or :meth:`result`, so a pass costs a host sync every few
    steps, not one per step.
    """

    def __init__(self, metric: Any, task: str, pad_id: int | None):
        self.metric, self.task, self.pad_id = metric, task, pad_id
        self.pending: list[torch.Tensor] = []  # step losses not yet copied to the host
        self.values: list[float] = []  # step losses on the host, in order
        self.sizes: list[int] = []
        self.correct: torch.Tensor | float = 0.0
        self.count: torch.Tensor | float = 0.0
        self.name: str | None = None

    def add(self, loss: torch.Tensor, logits: torch.Tensor, target: torch.Tensor) -> None:
        size = int(target.shape[0]) if target.dim() else 1
        self.pending.append(loss.detach())
        self.sizes.append(size)
        if self.metric is None:
            return
        if self.metric == "auto":
            chosen = _task_for(self.task, logits, target)
            if chosen is None or chosen.hits is None:
                return  # accuracy does not apply to these shapes
            correct, count = chosen.hits(logits, target, self.pad_id)
            self.name = chosen.metric_name
        else:
            value = self.metric(logits.detach(), target)
            value = value.detach() if isinstance(value, torch.Tensor) else float(value)
            correct, count = value * size, size
            self.name = getattr(self.metric, "__name__", "metric")
        self.correct = self.correct + correct
        self.count = self.count + count

    @property
    def steps(self) -> int:
        return len(self.sizes)

    def sync(self) -> list[float]:
        """Copies the pending step losses to the host in one transfer; returns them (the new ones only)."""
        new = torch.stack(self.pending).float().cpu().tolist() if self.pending else []
        self.values.extend(new)
        self.pending.clear()
        return new

    def result(self) -> tuple[float, float | None]:
        self.sync()
        mean_loss = sum(v * n for v, n in zip(self.values, self.sizes, strict=True)) / sum(self.sizes)
        if self.name is None:
            return mean_loss, None
        count = float(self.count)
        return mean_loss, (float(self.correct) / count if count else float("nan"))


def _check_metric(metric: Any) -> None:
    if metric is None or metric == "auto" or callable(metric):
        return
    raise ValueError(
        f"metric={metric!r} is not understood; use 'auto' (accuracy where it applies), None (no metric), "
        f"or a function (logits, target) -> float"
    )


@dataclass(frozen=True)
class _Objective:
    """How a batch is scored: the task, a custom ``loss_fn`` (or None), the metric and the pad id."""

    task: str = "auto"
    loss_fn: Callable | None = None
    metric: Any = "auto"
    pad_id: int | None = 0

    def __post_init__(self) -> None:
        _check_task(self.task)
        _check_metric(self.metric)

    def loss(self, output: Any, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, logits)``: the model's own loss when it returned one, else ``loss_fn`` or the task's loss."""
        logits, loss = _unpack_output(output)
        if loss is None and self.loss_fn is not None:
            loss = self.loss_fn(logits, target)
        elif loss is None:
            loss = default_loss(logits, target, self.pad_id, task=self.task)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
            raise ValueError(
                f"the loss must be a scalar tensor, got {shape}; reduce it (e.g. .mean()) in loss_fn"
            )
        return loss, logits

    def meter(self) -> _Meter:
        return _Meter(self.metric, self.task, self.pad_id)


def _model_device(model: nn.Module) -> torch.device:
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


def _resolve_device(model: nn.Module, device: str | torch.device | None) -> torch.device:
    """The device to run on; when one is given, the model is moved there."""
    if device is None:
        return _model_device(model)
    device = pick_device(device) if isinstance(device, str) else torch.device(device)
    model.to(device)
    return device


def _modes(model: nn.Module) -> dict[nn.Module, bool]:
    return {module: module.training for module in model.modules()}


def _restore_modes(modes: dict[nn.Module, bool]) -> None:
    for module, training in modes.items():
        module.training = training


# ----------------------------------------------------------------------------------------------------------
# evaluation


def evaluate(
    model: nn.Module,
    loader: Iterable,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    device: str | torch.device | None = None,
    metric: Any = "auto",
    pad_id: int | None = 0,
    task: str = "auto",
) -> tuple[float, float | None]:
    """Mean loss and metric of ``model`` over ``loader``, in eval mode and without gradients.

    The loss is averaged over examples (each batch's mean loss weighted by its batch size); the metric
    is exact (correct / counted over the whole loader). The model's previous train/eval mode is
    restored afterwards. Batches, loss, metric, ``task``, ``pad_id`` and ``device``: as in :func:`fit`.

    Returns ``(mean_loss, metric)``; the metric is None when it is off or does not apply.
    """
    objective = _Objective(task, loss_fn, metric, pad_id)
    device = _resolve_device(model, device)
    return _evaluate(model, loader, objective, device)


def _evaluate(model: nn.Module, loader: Iterable, objective: _Objective,
              device: torch.device) -> tuple[float, float | None]:
    modes = _modes(model)
    meter = objective.meter()
    model.eval()
    try:
        with torch.no_grad():
            for batch in loader:
                inputs, target = _split_batch(_to_device(batch, device))
                loss, logits = objective.loss(model(*inputs), target)
                meter.add(loss, logits, target)
    finally:
        _restore_modes(modes)
    if not meter.steps:
        raise ValueError("the loader yielded no batches; check that the dataset is not empty")
    return meter.result()


# ----------------------------------------------------------------------------------------------------------
# live plot


def in_notebook() -> bool:
    """True when running inside a Jupyter kernel (Jupyter, JupyterLab, Colab, VS Code notebooks)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    return getattr(shell, "kernel", None) is not None or "IPKernelApp" in getattr(shell, "config", {})


def _display(obj: Any, display_id: bool = True) -> Any:
    """IPython's ``display``; a separate function so tests can replace it."""
    from IPython.display import display

    return display(obj, display_id=display_id)


class _LivePlot:
    """Redraws the training curves in one notebook output after every epoch.

    The figure is a bare ``matplotlib.figure.Figure`` (not registered with pyplot, so it neither opens a
    window nor shows twice) rendered to PNG and shown through one IPython display handle.
    """

    def __init__(self) -> None:
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(10, 3.5), layout="constrained")
        self.handle = None
        self.enabled = True

    def update(self, history: History) -> None:
        if not self.enabled:
            return
        try:
            import io

            from IPython.display import Image

            from attnlab.plotting import _draw_history

            _draw_history(self.figure, history)
            buffer = io.BytesIO()
            self.figure.savefig(buffer, format="png", dpi=90)
            image = Image(data=buffer.getvalue(), format="png")
            if self.handle is None:
                self.handle = _display(image, display_id=True)
                if self.handle is None:
                    self.enabled = False
            else:
                self.handle.update(image)
        except Exception as exc:  # a plot must never cost a student their training run
            self.enabled = False
            warnings.warn(f"live plot turned off ({type(exc).__name__}: {exc}); "
                          f"use attnlab.plotting.plot_history(history) after training", stacklevel=3)


# ----------------------------------------------------------------------------------------------------------
# training


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
    objective = _Objective(task, loss_fn, metric, pad_id)  # checks task and metric
    _check_clip(clip_grad_norm)
    device = _resolve_device(model, device)
    optimizer = optimizer if optimizer is not None else _default_optimizer(model, lr)
    _check_scheduler(scheduler, optimizer)
    run = _Run(model, objective, optimizer, scheduler, clip_grad_norm, device, epochs)
    plot = _live_plot(live_plot)
    bar = _progress_bar(train_loader, epochs, desc, progress)

    history, modes, start = History(), _modes(model), time.perf_counter()
    try:
        for epoch in range(1, epochs + 1):
            _epoch(run, train_loader, val_loader, epoch, history, bar)
            history.seconds = time.perf_counter() - start
            if plot is not None:
                plot.update(history)
    finally:
        bar.close()
        _restore_modes(modes)
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
    objective: _Objective
    optimizer: torch.optim.Optimizer
    scheduler: Any
    clip_grad_norm: float | None
    device: torch.device
    epochs: int


def _live_plot(live_plot: bool | None) -> _LivePlot | None:
    """The live plot, only inside a notebook (outside one there is nowhere to draw without opening a window)."""
    wanted = in_notebook() if live_plot is None else live_plot and in_notebook()
    return _LivePlot() if wanted else None


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


def _train_epoch(run: _Run, train_loader: Iterable, epoch: int, bar: tqdm) -> _Meter:
    """One pass over the training data, an optimizer step per batch; returns the epoch's meter."""
    run.model.train()
    meter = run.objective.meter()
    for step, batch in enumerate(train_loader):
        inputs, target = _split_batch(_to_device(batch, run.device))
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


def _sync_losses(meter: _Meter, epoch: int) -> float:
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


def _record_training(history: History, meter: _Meter, epoch: int, epochs: int) -> str:
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
    val_loss, val_metric = _evaluate(run.model, val_loader, run.objective, run.device)
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
