"""The release build: master notebook -> student notebook, solution notebook, autograder.

``pipeline.py`` chains the small transforms in ``transforms/``; each transform is one file with one
test file (``tests/buildchain/test_<name>.py``).
"""
