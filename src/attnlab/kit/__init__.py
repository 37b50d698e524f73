"""The student kit: what a lab notebook imports in the student's kernel (on Colab too), and nothing of the instructor's
tools: the public checks and how they show (``public_check``, the test files of ``generated/public_tests/``), and the
helpers the labs use: ``seeding``, ``device``, ``expect``, ``plotting``, ``written_pdf``, ``datasets``, ``training``.
The first cell's ``start_lab`` is ``attnlab/labkit.py``, above grading's bridges (it hands nbgrader's score to the
checks), so the kit's folder imports nothing of grading."""
