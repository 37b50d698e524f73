"""Every figure is a PNG data URI that decodes; a ``$`` in a label is drawn as text, not mathtext."""

from __future__ import annotations

import base64

from attnlab.report import plots
from attnlab.report.stats import Distribution, Mistake

PNG = b"\x89PNG\r\n\x1a\n"


def _png(uri: str) -> bytes:
    assert uri.startswith("data:image/png;base64,")
    data = base64.b64decode(uri.split(",", 1)[1])
    assert data.startswith(PNG) and len(data) > 1000
    return data


def test_each_figure_is_an_embedded_png():
    total = Distribution("total", 30.0, [0.0, 12.5, 30.0, 30.0])
    per_q = [Distribution(f"q{i}", 2.0, [0.0, 1.0, 2.0]) for i in range(5)] + [Distribution("$x$ cost", 1.0, [1.0])]
    _png(plots.total_plot(total))
    _png(plots.question_plot(per_q))
    _png(plots.mistakes_plot([Mistake("q", "costs $5 and 50% of {x}", [], 3, ""), Mistake("q", "h", ["entry"], 1, "")]))
    _png(plots.mistakes_plot([]))
    _png(plots.timing_plot([1.0, 2.0, 30.0]))


def test_axes_that_count_submissions_have_whole_number_ticks(monkeypatch):
    """Three submissions must not give ticks at 0.5 or 2.5 students (a count axis with fractional students)."""
    figures = []
    monkeypatch.setattr(plots, "to_data_uri", lambda fig: figures.append(fig) or "")
    few = Distribution("total", 30.0, [12.5, 16.5, 30.0])
    plots.total_plot(few)
    plots.question_plot([Distribution("q", 2.0, [0.0, 1.0, 2.0])])
    plots.timing_plot([1.0, 2.0, 3.0])
    plots.mistakes_plot([Mistake("q", "h", ["entry"], 3, ""), Mistake("q", "g", [], 1, "")])
    for fig, axis in zip(figures, ("y", "y", "y", "x")):
        ax = fig.axes[0]
        ticks = (ax.get_yticks() if axis == "y" else ax.get_xticks()).tolist()
        assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), (axis, ticks)
