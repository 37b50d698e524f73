"""nbgrader branch: the lab as an nbgrader source notebook, and the course's nbgrader_config.py.

Runs on the common notebook (after replace_tests, drop_marker_cells and insert_setup_cell, before the student and
solution branches split). Solution blocks become nbgrader's ``### BEGIN SOLUTION`` regions in solution cells; each
``grader.check`` cell becomes an autograded test cell worth the question's points that requires the public checks
to pass and, inside ``### BEGIN HIDDEN TESTS``, runs the hidden tests; prose, set-up and given code are locked.
Experiment and demo cells (tagged ``otter_ignore``, which Otter and attnlab's grader skip) start with the cell
magic ``%%experiment``: they run for the student, and nbgrader's Validate and autograde skip them (nbgrader sets
``NBGRADER_EXECUTION`` then), so grading never re-runs training.
"""

from __future__ import annotations

import copy

from .markers import BEGIN_SOLUTION, END_SOLUTION, META, SOLUTION_SUFFIX
from .strip_solutions import NOT_WRITTEN

TEST_CELL = '''\
# Checks of `{question}`: they must pass (nbgrader's Validate runs them).
from attnlab.grading.nbgrader_bridge import require_checks

require_checks(grader, "{question}", globals())
### BEGIN HIDDEN TESTS
from attnlab.grading.nbgrader_bridge import run_hidden_tests

run_hidden_tests(globals(), "{lab}", "{question}")
### END HIDDEN TESTS'''

CONFIG = '''\
"""nbgrader's configuration for this course (written by `attnlab build`; edit instructor/course.yml instead).

    cd nbgrader && nbgrader generate_assignment lab05_self_attention && nbgrader autograde lab05_self_attention
"""

c = get_config()  # noqa: F821 - nbgrader provides it
c.CourseDirectory.course_id = {course!r}
# The kit raises NotImplementedError("... not written yet") in its own stubs; nbgrader's stub says the same.
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError(\\"{not_written}\\")"}}
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600
'''


SETUP_SUFFIX = '''

# nbgrader: cells that start with %%experiment run here, and are skipped while nbgrader validates or grades.
from attnlab.grading.nbgrader_bridge import register_experiment_magic

register_experiment_magic()'''
EXPERIMENT_MAGIC = "%%experiment\n"


def _nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution,
            "task": False}
    if grade:
        meta["points"] = points
    return meta


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


def nbgrader_source(nb, *, lab_id: str, points: dict[str, float]):
    """``points``: question -> points (the hidden tests' total), given to the question's test cell."""
    nb = copy.deepcopy(nb)
    for i, cell in enumerate(nb.cells):
        label = cell.metadata.get(META, {})
        cell_id = f"{lab_id}-cell-{i:03d}"
        if label.get("role") == "check":
            question = label["question"]
            cell.source = TEST_CELL.format(question=question, lab=lab_id)
            cell.metadata["nbgrader"] = _nbgrader_meta(f"test_{question}", grade=True, locked=True,
                                                       points=float(points[question]))
            continue
        if label.get("role") == "setup":
            cell.source += SETUP_SUFFIX
        elif cell.cell_type == "code" and "otter_ignore" in cell.metadata.get("tags", []):
            cell.source = EXPERIMENT_MAGIC + cell.source
        solution = _solution_source(cell.source) if cell.cell_type == "code" else None
        if solution is not None:
            cell.source = solution
            cell.metadata["nbgrader"] = _nbgrader_meta(cell_id, solution=True)
        elif cell.cell_type == "markdown" or label.get("role") == "setup":
            cell.metadata["nbgrader"] = _nbgrader_meta(cell_id, locked=True)
    return nb


def nbgrader_config(course_name: str) -> str:
    return CONFIG.format(course=course_name, not_written=NOT_WRITTEN)
