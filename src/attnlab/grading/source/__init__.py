"""The submission's source, below every other part of grading: which code cells the grader runs, and each name's
definitions (`notebook_code`)."""
