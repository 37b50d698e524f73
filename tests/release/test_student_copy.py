"""What a released student repository tells students: its copy of the contract cites no file only the course's
authors have, and the README's advice on show_source works with read-only check cells."""

from __future__ import annotations

import re
from pathlib import Path

from attnlab.course import load_course
from attnlab.release.readme import student_contract

ROOT = Path(__file__).resolve().parents[2]
AUTHORS_ONLY = re.compile(r"instructor/|make test|benchmarks/|tests/|catalogue\.py|hidden_tests|autograder/")


def test_the_students_contract_cites_no_file_they_do_not_have():
    course = load_course(ROOT)
    text = student_contract(course.root, list(course.labs))
    assert AUTHORS_ONLY.findall(text) == []
    assert "## Partial credit: what a mistake costs" in text and "| `MOST` | at least 60% |" in text
    assert "the grader takes exactly what is stated" in text
    assert "instructor/<lab>/catalogue.py" in (ROOT / "docs" / "CURRICULUM.md").read_text()  # the authors' copy


def test_the_readme_says_where_to_run_show_source():
    readme = (ROOT / "README.md").read_text()
    advice = readme[readme.index("show_source=True") - 300:readme.index("show_source=True")]
    assert "The check cells are read-only" in advice and "add a cell below" in advice
