"""The other graders a course already runs: Otter (`otter_bridge`), nbgrader (`nbgrader_bridge` in the student's
kernel, `nbgrader_setup` in nbgrader's process) and Gradescope's autograder entry point (`gradescope_run`).
Each opens the same bundle and hidden suite as `attnlab grade`.
"""
