"""The Markdown summary: student text fenced or escaped, never markup."""

from __future__ import annotations

from attnlab.report import compute
from attnlab.report.markdown import render

from .rows import diagnosed, sub

NAME = "# [click](http://x) <b>.ipynb"


def test_the_summary_lists_scores_mistakes_health_and_pairs_with_student_text_inert():
    subs = [sub(NAME, {"q": (0.0, 2.0, ["failed: t: <script>x</script>\n# Total: 30 / 30", "likely mistake: hint"],
                                diagnosed("hint", "t"))},
                review=["import os"]),
            sub("ok.ipynb", {"q": (2.0, 2.0, [])})]
    md = render(compute("lab05", subs, figures=False))
    assert "| `q` | 2 | 1.00 | 1 | 50% |" in md and "| **total** | 2 | 1.00 | 1 | 50% |" in md
    assert "1. **1** x `q` (no catalogue entry): hint" in md
    assert "```text\nfailed: t: <script>x</script>\n# Total: 30 / 30\n```" in md  # fenced: inert
    assert "course rules (a forbidden call or construct): 1 (\\# \\[click\\]\\(http://x\\) &lt;b&gt;\\.ipynb)" in md
    assert "\n# [click]" not in md and "<b>" not in md
    assert "No pair above the threshold." in md
