"""``History``: what one ``fit`` call recorded (losses and metrics per epoch, every step's loss, its time)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
