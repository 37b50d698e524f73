"""The report's figures (matplotlib, no display needed), each as a PNG ``data:`` URI the page embeds, so the page
opens from disk with nothing beside it."""

from __future__ import annotations

import base64
import io
import math

from attnlab.records.score_text import format_score

from .stats import Distribution, Mistake

DPI = 90


def _figure(width: float, height: float):
    from matplotlib.figure import Figure  # no pyplot: no global state, no backend to pick

    return Figure(figsize=(width, height), dpi=DPI, layout="tight")  # "constrained" draws much more slowly


def _whole(axis) -> None:
    """Ticks at whole numbers only on an axis that counts submissions (no 2.5 students)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def to_data_uri(fig) -> str:
    """The figure as ``data:image/png;base64,...``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _histogram(ax, d: Distribution, bins: int) -> None:
    top = d.max_score if d.max_score > 0 else max(d.values, default=1.0) or 1.0
    ax.hist(d.values, bins=bins, range=(0, top), color="#4477aa", edgecolor="white")
    ax.axvline(d.mean, color="#cc3311", linestyle="--", linewidth=1, label=f"mean {d.mean:.1f}")
    ax.axvline(d.median, color="#228833", linestyle=":", linewidth=1.5, label=f"median {d.median:.1f}")
    ax.set_xlim(0, top)
    ax.set_ylabel("submissions")
    _whole(ax.yaxis)


def _plain(label: str) -> str:
    """A label matplotlib draws as it reads (a ``$`` would start mathtext)."""
    return label.replace("$", r"\$")


def total_plot(total: Distribution) -> str:
    """Histogram of the total scores, with the mean and median marked."""
    fig = _figure(7, 3)
    ax = fig.add_subplot()
    _histogram(ax, total, bins=max(5, min(30, int(total.max_score) or 10)))
    ax.set_xlabel(f"total score (of {format_score(total.max_score)})")
    ax.legend(loc="upper left", fontsize=8)
    return to_data_uri(fig)


def question_plot(per_question: list[Distribution]) -> str:
    """One small histogram per question, titled with its share at full marks."""
    n = max(1, len(per_question))
    cols = min(3, n)
    rows = math.ceil(n / cols)
    fig = _figure(3.2 * cols, 2.3 * rows)
    for i, d in enumerate(per_question):
        ax = fig.add_subplot(rows, cols, i + 1)
        _histogram(ax, d, bins=max(2, min(20, int(d.max_score) + 1)))
        ax.set_title(f"{_plain(d.name)}\n{100 * d.full_share:.0f}% at full marks ({format_score(d.max_score)})", fontsize=8)
        ax.tick_params(labelsize=7)
    return to_data_uri(fig)


def mistakes_plot(mistakes: list[Mistake], top: int = 15) -> str:
    """Horizontal bars: the most frequent diagnosed mistakes (labelled by catalogue entry, else by question)."""
    shown = mistakes[:top]
    fig = _figure(7, 0.8 + 0.3 * max(1, len(shown)))
    ax = fig.add_subplot()
    labels = [_plain(", ".join(m.entries) if m.entries else f"{m.question}: {m.hint[:40]}") for m in shown]
    ax.barh(range(len(shown)), [m.count for m in shown], color="#ee7733")
    ax.set_yticks(range(len(shown)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("submissions")
    _whole(ax.xaxis)
    if not shown:
        ax.text(0.5, 0.5, "no mistake diagnosed", ha="center", va="center", transform=ax.transAxes)
    return to_data_uri(fig)


def timing_plot(seconds: list[float]) -> str:
    """Histogram of the grading time per submission."""
    fig = _figure(7, 2.5)
    ax = fig.add_subplot()
    ax.hist(seconds, bins=20, color="#009988", edgecolor="white")
    ax.set_xlabel("grading time per submission (s)")
    ax.set_ylabel("submissions")
    _whole(ax.yaxis)
    return to_data_uri(fig)
