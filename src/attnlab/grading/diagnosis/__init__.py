"""Naming the likely mistake: a lab's catalogue of known mistakes (`grading/core/mutants.py`), each compiled as a replay
candidate (`candidates`), and `diagnose`, which replays a failed test's requests against them to say which
mistake the student probably made.
"""
