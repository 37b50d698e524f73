"""How a batch is scored and a model evaluated: batches ``(*inputs, target)`` moved to the device, what the model
returned (logits, maybe its own loss), ``Objective`` (task, loss, metric, pad id) and its ``Meter`` over one pass,
the model's device and train/eval modes, and ``evaluate``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from attnlab.kit.device import pick_device

from .tasks import check_task, default_loss, task_for


def to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(o, device) for o in obj)
    return obj


def split_batch(batch: Any) -> tuple[list[Any], torch.Tensor]:
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



class Meter:
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
            chosen = task_for(self.task, logits, target)
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
class Objective:
    """How a batch is scored: the task, a custom ``loss_fn`` (or None), the metric and the pad id."""

    task: str = "auto"
    loss_fn: Callable | None = None
    metric: Any = "auto"
    pad_id: int | None = 0

    def __post_init__(self) -> None:
        check_task(self.task)
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

    def meter(self) -> Meter:
        return Meter(self.metric, self.task, self.pad_id)


def _model_device(model: nn.Module) -> torch.device:
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


def resolve_device(model: nn.Module, device: str | torch.device | None) -> torch.device:
    """The device to run on; when one is given, the model is moved there."""
    if device is None:
        return _model_device(model)
    device = pick_device(device) if isinstance(device, str) else torch.device(device)
    model.to(device)
    return device


def training_modes(model: nn.Module) -> dict[nn.Module, bool]:
    return {module: module.training for module in model.modules()}


def restore_modes(modes: dict[nn.Module, bool]) -> None:
    for module, training in modes.items():
        module.training = training


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
    objective = Objective(task, loss_fn, metric, pad_id)
    device = resolve_device(model, device)
    return evaluate_on(model, loader, objective, device)


def evaluate_on(model: nn.Module, loader: Iterable, objective: Objective,
              device: torch.device) -> tuple[float, float | None]:
    modes = training_modes(model)
    meter = objective.meter()
    model.eval()
    try:
        with torch.no_grad():
            for batch in loader:
                inputs, target = split_batch(to_device(batch, device))
                loss, logits = objective.loss(model(*inputs), target)
                meter.add(loss, logits, target)
    finally:
        restore_modes(modes)
    if not meter.steps:
        raise ValueError("the loader yielded no batches; check that the dataset is not empty")
    return meter.result()
