"""nbgrader branch: the lab as an nbgrader source notebook, and the course's nbgrader_config.py.

Runs on the common notebook after ``nbgrader_cells`` (which gives every branch the same nbgrader metadata): the
solution blocks of its solution cells become nbgrader's ``### BEGIN SOLUTION`` regions, and nothing else changes,
so the notebook nbgrader releases from it and the student notebook in ``labs/`` have the same cells, metadata and
(but for the stubs) sources. The test cells are the ``grader.check("name")`` cells themselves: under nbgrader,
``grader.check`` raises when a public check fails and, while nbgrader autogrades, runs the question's hidden tests
(``grading/bridges/nbgrader_bridge.py``). Experiments (tagged ``otter_ignore``) are skipped by the config's
``c.Execute.skip_cells_with_tag``, so grading never re-runs training (``grading/bridges/nbgrader_setup.py``).
"""

from __future__ import annotations

import copy

from attnlab.records.stub_text import NOT_WRITTEN, PLACEHOLDER

from .markers import BEGIN_SOLUTION, END_SOLUTION, SOLUTION_SUFFIX

CONFIG = '''\
"""nbgrader's configuration for this course (written by `attnlab build`; edit instructor/course.yml instead).

Run nbgrader in this folder (README.md, "nbgrader", has the whole flow):

    nbgrader generate_assignment lab05_self_attention     # once per lab: the gradebook's cells, and release/
    nbgrader autograde lab05_self_attention --create      # submitted/<student>/lab05_self_attention/*.ipynb
"""

import sys

try:
    from attnlab.grading.bridges.nbgrader_setup import SKIP_TAG, require_bundles, sanitize_preprocessors, tools_on_path
except ImportError as missing:  # nbgrader would go on without this file: stop it instead
    raise SystemExit(f"nbgrader_config.py: the Python running nbgrader ({{sys.executable}}) cannot import the "
                     f"attnlab kit's nbgrader set-up: install or update the kit there (pip install -e "
                     f"'.[instructor]' in the course repository), then run nbgrader again ({{missing}})") from missing

c = get_config()  # noqa: F821 - nbgrader provides it
c.CourseDirectory.course_id = {course!r}
# The kit raises NotImplementedError("... not written yet") in its own stubs; nbgrader's stub says the same.
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError(\\"{not_written}\\")"}}
# A written question's answer cell (manually graded) says what the kit's own notebooks say.
c.ClearSolutions.text_stub = {placeholder!r}
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
# nbgrader runs `alembic` to create gradebook.db: found beside this Python, with or without an activated venv.
tools_on_path()
# Experiments and demos (tagged otter_ignore; Otter and attnlab's grader skip them too) are not re-run.
c.Execute.skip_cells_with_tag = SKIP_TAG
# autograde refuses, with what to do, a notebook without the course's test cells (nbgrader would score it 0).
c.Autograde.sanitize_preprocessors = sanitize_preprocessors()
# autograde stops before anyone is scored when a lab's hidden tests (its autograder/<lab>/ bundle) cannot be found
# from this folder or a folder above it (copy autograder/ here when this folder leaves the course repository).
require_bundles(__file__)  # noqa: F821 - traitlets sets __file__ while it runs this file
{due_dates}'''

DUE_DATES = """# Each lab's due date (instructor/course.yml's due:), nbgrader's assignment duedate: written into gradebook.db
# when generate_assignment or autograde runs on the lab (a date alone: the end of that day, this machine's zone).
from attnlab.grading.bridges.nbgrader_setup import set_due_dates  # noqa: E402

set_due_dates(__file__, {dates!r})  # noqa: F821
"""

LATE = """# Each lab's late policy and extensions (instructor/course.yml's late: and extensions:): autograde records the
# penalty of a late submission as nbgrader's late_submission_penalty, apart from the question scores.
c.AssignLatePenalties.plugin_class = "attnlab.grading.bridges.nbgrader_late.CourseLatePenalty"  # noqa: F821
c.CourseLatePenalty.deadlines = {deadlines!r}  # noqa: F821
"""


def _solution_source(source: str) -> str | None:
    """The cell with nbgrader's markers, or None when it holds no solution."""
    lines, found = [], False
    for line in source.split("\n"):
        begin = BEGIN_SOLUTION.match(line)
        if begin:
            lines.append(f"{begin.group(1)}### BEGIN SOLUTION")
            found = True
        elif END_SOLUTION.match(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}### END SOLUTION")
        elif SOLUTION_SUFFIX.search(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines += [f"{indent}### BEGIN SOLUTION", SOLUTION_SUFFIX.sub("", line), f"{indent}### END SOLUTION"]
            found = True
        else:
            lines.append(line)
    return "\n".join(lines) if found else None


def nbgrader_source(nb):
    """Run on a notebook labelled by ``nbgrader_cells``: its solution code cells get nbgrader's markers. A written
    answer cell keeps its reference answer whole: nbgrader's release replaces a Markdown solution cell with its
    ``text_stub``, the kit's placeholder (``CONFIG``)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = _solution_source(cell.source)
    return nb


def nbgrader_config(course_id: str, due: dict[str, str] | None = None, late: dict[str, dict] | None = None) -> str:
    """The course's nbgrader_config.py; ``course_id``: the course's slug (``Course.slug``), never its display name;
    ``due``: lab -> its ``due:`` as course.yml writes it (the lines that set them only when a lab has one);
    ``late``: lab -> ``late_policy.deadline_to_config`` of a lab with a policy or extensions (nbgrader's late
    plugin, ``grading/bridges/nbgrader_late.py``, only when one has)."""
    dates = DUE_DATES.format(dates=dict(sorted(due.items()))) if due else ""
    dates += LATE.format(deadlines=dict(sorted(late.items()))) if late else ""
    return CONFIG.format(course=course_id, not_written=NOT_WRITTEN, placeholder=PLACEHOLDER, due_dates=dates)
