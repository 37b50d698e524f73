"""Shared fixtures: a built copy of the fixture course (tests/fixtures/course) in a temp folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURE_COURSE = Path(__file__).parent / "fixtures" / "course"


@pytest.fixture(scope="session")
def built_course(tmp_path_factory) -> Path:
    """The fixture course, built once per session (read-only for tests: copy it to modify)."""
    from attnlab.buildchain.pipeline import build
    from attnlab.course import load_course

    root = tmp_path_factory.mktemp("course") / "course"
    shutil.copytree(FIXTURE_COURSE, root)
    course = load_course(root)
    build(course, list(course.labs))
    return root
