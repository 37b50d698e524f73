"""The one training loop every lab reuses (d2l's single Trainer idea).

``fit`` trains any model whose batches are tuples ``(*inputs, target)``: it calls ``model(*inputs)``,
picks a loss from the shapes (or uses the one the model returns), shows a progress bar, and in a
Jupyter notebook redraws a loss/accuracy plot after every epoch. ``evaluate`` computes the mean loss
and metric of a model on a loader without changing it. Both run unchanged on CPU and CUDA.

The default loss and metric, by the shapes of the logits and the target::

    logits (B,)       target (B,) 0/1      binary cross-entropy with logits   accuracy (logit > 0)
    logits (B, C)     target (B,) ids      cross-entropy                      accuracy (argmax)
    logits (B, T, V)  target (B, T) ids    cross-entropy, pad tokens ignored  token accuracy (non-pad)

A model that returns ``(logits, loss)`` with a loss (a GPT whose ``forward(idx, targets)`` computes it)
trains on its own loss; give it its targets as an input, e.g. batches ``(x, y, y)``.
"""

from __future__ import annotations

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

__all__ = ["History", "fit", "evaluate", "default_loss", "in_notebook"]

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


def _task(logits: torch.Tensor, target: torch.Tensor) -> str | None:
    """Which default applies: "binary", "multiclass", "token", or None for shapes we do not know."""
    if logits.dim() == 1 and target.shape == logits.shape:
        return "binary"
    one_unit = logits.dim() == 2 and logits.shape[1] == 1
    if one_unit and target.dim() in (1, 2) and target.numel() == logits.shape[0]:
        return "binary"  # (B, 1) logits: one output unit, treated as binary rather than a 1-class softmax
    if logits.dim() == 2 and target.dim() == 1 and target.shape[0] == logits.shape[0] and _is_int(target):
        return "multiclass"
    if logits.dim() == 3 and target.dim() == 2 and target.shape == logits.shape[:2] and _is_int(target):
        return "token"
    return None


def default_loss(logits: torch.Tensor, target: torch.Tensor, pad_id: int | None = 0) -> torch.Tensor:
    """The loss ``fit`` uses when none is given, chosen by shapes.

    logits (B,) or (B, 1), target (B,) of 0/1  -> binary cross-entropy with logits
    logits (B, C),         target (B,) ids     -> cross-entropy
    logits (B, T, V),      target (B, T) ids   -> cross-entropy over tokens, ignoring ``pad_id``
                                                  (``pad_id=None``: every token counts)

    Returns a scalar.
    """
    task = _task(logits, target)
    if task == "binary":
        return F.binary_cross_entropy_with_logits(logits.reshape(-1), target.reshape(-1).to(logits.dtype))
    if task == "multiclass":
        return F.cross_entropy(logits, target)
    if task == "token":
        ignore = -100 if pad_id is None else pad_id
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=ignore)
    raise ValueError(
        f"fit cannot choose a loss for logits of shape {tuple(logits.shape)} and a target of shape "
        f"{tuple(target.shape)} ({target.dtype}); the default handles (B,) logits with (B,) 0/1 targets, "
        f"(B, C) with (B,) class ids, and (B, T, V) with (B, T) token ids. Pass loss_fn=... for anything else"
    )


def _auto_metric(
    logits: torch.Tensor, target: torch.Tensor, pad_id: int | None
) -> tuple[torch.Tensor, torch.Tensor | int, str] | None:
    """``(correct, count, name)`` for the batch, or None when accuracy does not apply to these shapes."""
    task = _task(logits, target)
    if task == "binary":
        predicted = logits.detach().reshape(-1) > 0
        truth = target.reshape(-1) > 0.5
        return (predicted == truth).sum(), truth.numel(), "accuracy"
    if task == "multiclass":
        return (logits.detach().argmax(-1) == target).sum(), target.numel(), "accuracy"
    if task == "token":
        hits = logits.detach().argmax(-1) == target
        if pad_id is None:
            return hits.sum(), target.numel(), "token accuracy"
        real = target != pad_id
        return (hits & real).sum(), real.sum(), "token accuracy"
    return None


class _Meter:
    """Accumulates the loss (weighted by batch size) and the metric of one pass over a loader.

    Values stay on the device until :meth:`result`, so a pass costs one host sync, not one per step.
    """

    def __init__(self, metric: Any, pad_id: int | None):
        self.metric = metric
        self.pad_id = pad_id
        self.losses: list[torch.Tensor] = []
        self.sizes: list[int] = []
        self.correct: torch.Tensor | float = 0.0
        self.count: torch.Tensor | float = 0.0
        self.name: str | None = None

    def add(self, loss: torch.Tensor, logits: torch.Tensor, target: torch.Tensor) -> None:
        size = int(target.shape[0]) if target.dim() else 1
        self.losses.append(loss.detach())
        self.sizes.append(size)
        if self.metric is None:
            return
        if self.metric == "auto":
            found = _auto_metric(logits, target, self.pad_id)
            if found is None:
                return
            correct, count, self.name = found
        else:
            value = self.metric(logits.detach(), target)
            value = value.detach() if isinstance(value, torch.Tensor) else float(value)
            correct, count = value * size, size
            self.name = getattr(self.metric, "__name__", "metric")
        self.correct = self.correct + correct
        self.count = self.count + count

    def step_values(self) -> list[float]:
        return torch.stack(self.losses).float().cpu().tolist() if self.losses else []

    def result(self) -> tuple[float, float | None]:
        values = self.step_values()
        mean_loss = sum(v * n for v, n in zip(values, self.sizes, strict=True)) / sum(self.sizes)
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


def _loss_of(
    output: Any, target: torch.Tensor, loss_fn: Callable | None, pad_id: int | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, logits)``: the model's own loss when it returned one, else ``loss_fn(logits, target)``."""
    logits, loss = _unpack_output(output)
    if loss is None:
        loss = default_loss(logits, target, pad_id) if loss_fn is None else loss_fn(logits, target)
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise ValueError(
            f"the loss must be a scalar tensor, got {shape}; reduce it (e.g. .mean()) in loss_fn"
        )
    return loss, logits


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
) -> tuple[float, float | None]:
    """Mean loss and metric of ``model`` over ``loader``, in eval mode and without gradients.

    The loss is averaged over examples (each batch's mean loss weighted by its batch size); the metric
    is exact (correct / counted over the whole loader). The model's previous train/eval mode is
    restored afterwards. Batches, loss, metric, ``pad_id`` and ``device``: as in :func:`fit`.

    Returns ``(mean_loss, metric)``; the metric is None when it is off or does not apply.
    """
    _check_metric(metric)
    device = _resolve_device(model, device)
    modes = _modes(model)
    meter = _Meter(metric, pad_id)
    model.eval()
    try:
        with torch.no_grad():
            for batch in loader:
                inputs, target = _split_batch(_to_device(batch, device))
                loss, logits = _loss_of(model(*inputs), target, loss_fn, pad_id)
                meter.add(loss, logits, target)
    finally:
        _restore_modes(modes)
    if not meter.losses:
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
    model: nn.Module,
    train_loader: Iterable,
    *,
    epochs: int,
    lr: float = 1e-3,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    val_loader: Iterable | None = None,
    device: str | torch.device | None = None,
    metric: Any = "auto",
    progress: bool = True,
    live_plot: bool | None = None,
    clip_grad_norm: float | None = None,
    scheduler: Any = None,
    desc: str | None = None,
    pad_id: int | None = 0,
) -> History:
    """Train ``model`` for ``epochs`` passes over ``train_loader``; returns the :class:`History`.

    Batches: tuples ``(*inputs, target)``; the loop calls ``model(*inputs)``, so ``(ids, target)`` and
    ``(ids, lengths, target)`` both work. Tensors are moved to ``device`` (default: where the model's
    parameters are; when given, the model is moved there too). The loader must be re-iterable (a
    ``DataLoader`` or a list), since it is read once per epoch.

    Loss: a model returning ``(logits, loss)`` with a loss trains on that loss (a GPT whose
    ``forward(idx, targets)`` computes it: pass batches ``(x, y, y)``); otherwise ``loss_fn(logits, target)``,
    by default :func:`default_loss` chosen by shapes (binary, multiclass, or tokens with ``pad_id`` ignored;
    ``pad_id=None`` when id 0 is a real token, as in a character vocabulary). A model may also return
    ``(logits, extras...)``, e.g. attention weights; only the logits are used.

    optimizer: default ``torch.optim.Adam(model.parameters(), lr=lr)``; ``lr`` is used only for that default
    metric: "auto" (accuracy / token accuracy where the shapes say which), None,
        or ``f(logits, target) -> float`` (a batch mean; averaged over examples)
    clip_grad_norm: clip the gradient norm to this value before each step
    scheduler: a ``torch.optim.lr_scheduler`` built on ``optimizer``; stepped after every optimizer step
        (size it in steps: ``epochs * len(train_loader)``), except ``ReduceLROnPlateau``, stepped once per
        epoch on the validation loss (the training loss without a val_loader)
    progress: show a tqdm bar with the loss; live_plot: redraw the curves after each epoch (default: only
        inside a Jupyter kernel; never opens a window)
    desc: the progress bar's label

    The model's train/eval mode is restored when ``fit`` returns.
    """
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ValueError(f"epochs={epochs!r} must be a positive int")
    _check_metric(metric)
    if clip_grad_norm is not None and not clip_grad_norm > 0:
        raise ValueError(
            f"clip_grad_norm={clip_grad_norm!r} must be a positive number, or None for no clipping"
        )
    device = _resolve_device(model, device)
    if optimizer is None:
        if not lr > 0:
            raise ValueError(f"lr={lr!r} must be a positive learning rate, e.g. 1e-3")
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise ValueError(
                "the model has no trainable parameters (none with requires_grad=True); nothing to train"
            )
        optimizer = torch.optim.Adam(params, lr=lr)
    plateau = isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
    if scheduler is not None and getattr(scheduler, "optimizer", None) is not optimizer:
        raise ValueError(
            "the scheduler was built on a different optimizer than the one fit uses; create the optimizer "
            "yourself, build the scheduler on it, and pass both: fit(..., optimizer=opt, scheduler=sched)"
        )
    if live_plot is None:
        live_plot = in_notebook()
    elif live_plot and not in_notebook():
        live_plot = False  # outside a notebook there is nowhere to draw without opening a window
    plot = _LivePlot() if live_plot else None

    try:
        steps_per_epoch: int | None = len(train_loader)  # type: ignore[arg-type]
    except TypeError:
        steps_per_epoch = None
    bar = tqdm(total=None if steps_per_epoch is None else epochs * steps_per_epoch,
               desc=desc or "training", disable=not progress, unit="step", dynamic_ncols=True)

    history = History()
    modes = _modes(model)
    start = time.perf_counter()
    try:
        for epoch in range(1, epochs + 1):
            model.train()
            meter = _Meter(metric, pad_id)
            for step, batch in enumerate(train_loader):
                inputs, target = _split_batch(_to_device(batch, device))
                optimizer.zero_grad(set_to_none=True)
                loss, logits = _loss_of(model(*inputs), target, loss_fn, pad_id)
                loss.backward()
                if clip_grad_norm is not None:
                    nn.utils.clip_grad_norm_(model.parameters(), clip_grad_norm)
                optimizer.step()
                if scheduler is not None and not plateau:
                    scheduler.step()
                meter.add(loss, logits, target)
                bar.update(1)
                if step % 10 == 0:  # one host sync every 10 steps, not every step
                    value = loss.item()
                    _check_finite(value, epoch, step)
                    bar.set_postfix_str(f"epoch {epoch}/{epochs} loss {value:.4f}", refresh=False)
            if not meter.losses:
                raise ValueError(
                    f"train_loader yielded no batches in epoch {epoch}; pass a re-iterable loader "
                    f"(a DataLoader or a list), not a generator, and check that the dataset is not empty"
                )
            steps = meter.step_values()
            for step, value in enumerate(steps):
                _check_finite(value, epoch, step)
            history.step_loss.extend(steps)
            train_loss, train_metric = meter.result()
            history.train_loss.append(train_loss)
            if train_metric is not None:
                history.train_metric.append(train_metric)
                history.metric_name = meter.name
            postfix = f"epoch {epoch}/{epochs} loss {train_loss:.4f}"
            if val_loader is not None:
                val_loss, val_metric = evaluate(model, val_loader, loss_fn=loss_fn, device=device,
                                                metric=metric, pad_id=pad_id)
                history.val_loss.append(val_loss)
                postfix += f" val_loss {val_loss:.4f}"
                if val_metric is not None:
                    history.val_metric.append(val_metric)
                    history.metric_name = history.metric_name or meter.name
                    postfix += f" val_{_short(history.metric_name)} {val_metric:.3f}"
            if plateau:
                scheduler.step(history.val_loss[-1] if history.val_loss else train_loss)
            bar.set_postfix_str(postfix)
            history.seconds = time.perf_counter() - start
            if plot is not None:
                plot.update(history)
    finally:
        bar.close()
        _restore_modes(modes)
        history.seconds = time.perf_counter() - start
    return history


def _short(name: str | None) -> str:
    return {"accuracy": "acc", "token accuracy": "acc"}.get(name or "", name or "metric")


def _check_finite(value: float, epoch: int, step: int) -> None:
    if value != value or value in (float("inf"), float("-inf")):
        raise FloatingPointError(
            f"the loss became {value} at epoch {epoch}, step {step}; lower the learning rate (lr=...) "
            f"or clip the gradients (clip_grad_norm=1.0), and check the inputs for NaN"
        )
