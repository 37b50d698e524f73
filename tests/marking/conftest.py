"""The marking tests' gradebook target, on each database the store runs on: a SQLite file, or a fresh database on a
throwaway PostgreSQL server (skipped where none is installed)."""

from __future__ import annotations

import pytest
from grading.test_postgres import fresh_database, pg_server  # noqa: F401 - pg_server: one server per test module


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request, tmp_path):
    """A gradebook's place: ``tmp_path/gradebook.db``, or a fresh PostgreSQL database's URL."""
    if request.param == "sqlite":
        yield tmp_path / "gradebook.db"
        return
    with fresh_database(request.getfixturevalue("pg_server")) as url:
        yield url
