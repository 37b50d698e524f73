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
