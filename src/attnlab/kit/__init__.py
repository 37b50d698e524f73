"""The student kit: what a lab notebook imports in the student's kernel (on Colab too), and nothing of the instructor's
tools. The first cell's ``start_lab`` (``labkit``), the public checks and how they show (``public_check``, the test
files of ``generated/public_tests/``), and the helpers the labs use: ``seeding``, ``device``, ``expect``,
``plotting``, ``written_pdf``, ``datasets``, ``training``."""
