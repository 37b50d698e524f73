"""The core of grading one submission: `runner.grade_submission` reads the notebook's code (`grading/source`),
opens the lab's bundle (`bundle`), and runs its hidden suite (`hidden`) with the comparisons (`checks`) and
inputs (`inputs`) hidden tests use. Everything here
decides; nothing here trusts the student's process.
"""
