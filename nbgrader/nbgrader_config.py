"""nbgrader's configuration for this course (written by `attnlab build`; edit instructor/course.yml instead).

Run nbgrader in this folder (README.md, "nbgrader", has the whole flow):

    nbgrader generate_assignment lab05_self_attention     # once per lab: the gradebook's cells, and release/
    nbgrader autograde lab05_self_attention --create      # submitted/<student>/lab05_self_attention/*.ipynb
"""

import sys

try:
    from attnlab.grading.bridges.nbgrader_setup import SKIP_TAG, require_bundles, sanitize_preprocessors, tools_on_path
except ImportError as missing:  # nbgrader would go on without this file: stop it instead
    raise SystemExit(f"nbgrader_config.py: the Python running nbgrader ({sys.executable}) cannot import the "
                     f"attnlab kit's nbgrader set-up: install or update the kit there (pip install -e "
                     f"'.[instructor]' in the course repository), then run nbgrader again ({missing})") from missing

c = get_config()  # noqa: F821 - nbgrader provides it
c.CourseDirectory.course_id = 'attnlab'
# The kit raises NotImplementedError("... not written yet") in its own stubs; nbgrader's stub says the same.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError(\"not written yet\")"}
# A written question's answer cell (manually graded) says what the kit's own notebooks say.
c.ClearSolutions.text_stub = '_Type your answer here, replacing this text._'
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
