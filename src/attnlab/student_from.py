"""The rule that finds a submission's student (``--student-from``, ``student_from:`` in ``instructor/course.yml``):
none, ``folder``, or a pattern whose group is the student id; ``grading/scale/submissions.py`` applies it."""

from __future__ import annotations

import re
from pathlib import Path

FOLDER_RULE = "folder"


def student_rule(spec):
    """``None``, ``"folder"`` or a compiled pattern from the ``--student-from`` text; ``ValueError`` when the
    pattern does not compile or has no group to take the student id from."""
    if spec is None or spec == FOLDER_RULE:
        return spec
    try:
        pattern = re.compile(spec)
    except re.error as exc:
        raise ValueError(f"--student-from {spec!r} is not a regular expression ({exc})") from None
    if pattern.groups < 1:
        raise ValueError(f"--student-from {spec!r} has no group: put the student id in a group, e.g. "
                         r"'(?P<student>[^-]+)(-v\d+)?' (alice-v2.ipynb -> alice), or pass 'folder'")
    return pattern


def student_of(pattern, name: str) -> str | None:
    """The student id ``pattern`` finds in the stem of the file name ``name``, or None."""
    match = pattern.fullmatch(Path(name).stem)
    if match is None:
        return None
    student = match.groupdict().get("student") if "student" in pattern.groupindex else match.group(1)
    return student or None
