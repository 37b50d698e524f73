"""``attnlab report``: the class at a glance, from a grading output folder or a gradebook.

One self-contained HTML page (figures embedded, no script, opens from disk), a Markdown summary, and per-question
score CSVs in three layouts (plain, Canvas, Moodle). Modules: ``load`` (gradebook rows, marks applied), ``stats``
(distributions, mistakes, health), ``similarity`` (copydetect's winnowing over the graded cells), ``plots``,
``page`` (HTML), ``markdown``, ``exports`` (CSV), ``model`` (``ClassReport``), ``build``
(``build_report``, what the CLI calls).
"""

from .build import ReportFiles, build_report, compute
from .model import ClassReport

__all__ = ["ClassReport", "ReportFiles", "build_report", "compute"]
