"""The Otter Assign markers the masters use, and the header of a filled given cell, in one place."""

import re

BEGIN_QUESTION = re.compile(r"^\s*#\s*BEGIN\s+QUESTION\s*$", re.I)
END_QUESTION = re.compile(r"^\s*#\s*END\s+QUESTION\s*$", re.I)
BEGIN_TESTS = re.compile(r"^\s*#\s*BEGIN\s+TESTS\s*$", re.I)
END_TESTS = re.compile(r"^\s*#\s*END\s+TESTS\s*$", re.I)
ASSIGNMENT_CONFIG = re.compile(r"^\s*#\s*ASSIGNMENT\s+CONFIG\s*$", re.I)
BEGIN_SOLUTION = re.compile(r"^(\s*)#\s*BEGIN\s+SOLUTION\b.*$", re.I)
END_SOLUTION = re.compile(r"^\s*#\s*END\s+SOLUTION\s*$", re.I)
SOLUTION_SUFFIX = re.compile(r"\s*#\s*SOLUTION\s*$", re.I)
ASSIGNMENT_LINE = re.compile(r"^(\s*)([\w.\[\]\"', ]+?)\s*=(?!=)\s*.+?\s*#\s*SOLUTION\s*$", re.I)

# The first words of a given cell filled by include_given (check_no_leak skips those cells).
GIVEN_PREFIX = "# Given (from "

# The internal per-cell metadata key set by parse_questions and removed by normalize.
META = "attnlab_build"


def first_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip():
            return line
    return ""
