"""Find the question blocks of a master and label every cell with its role.

Must run first: every later transform reads the labels (``cell.metadata[META]``) it sets.
Roles: ``marker`` (BEGIN/END raw cells, assignment config), ``test`` (public test cells),
``question`` (cells inside a question, outside its tests), ``body`` (everything else).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import yaml

from .markers import ASSIGNMENT_CONFIG, BEGIN_QUESTION, BEGIN_TESTS, END_QUESTION, END_TESTS, META, first_line


class MasterError(ValueError):
    """The master notebook breaks the authoring rules; the message says where and how to fix it."""


@dataclass
class Question:
    name: str
    points: float
    tests: list[str] = field(default_factory=list)


CHECK_NAME_LIMIT = 60


def check_name(source: str, index: int = 0) -> str:
    """A public test cell's name: its first line, a comment (``# rows of the weights sum to 1``); ``check N``
    for a cell without one (the build refuses those in a master: see ``parse_questions``)."""
    head = first_line(source).strip()
    if head.startswith("#"):
        name = head.lstrip("#").strip()
        if name:
            return name
    return f"check {index + 1}"


def _where(i: int, cell) -> str:
    return f"cell {i} ({cell.cell_type}: {first_line(cell.source)[:60]!r})"


def parse_questions(nb):
    """Return ``(labelled_notebook, questions)``; raises ``MasterError`` on malformed markers."""
    nb = copy.deepcopy(nb)
    questions: list[Question] = []
    current: Question | None = None
    in_tests = False
    for i, cell in enumerate(nb.cells):
        head = first_line(cell.source)
        role, qname = ("question" if current else "body"), (current.name if current else None)
        if cell.cell_type == "raw" and ASSIGNMENT_CONFIG.match(head):
            role = "marker"
        elif cell.cell_type == "raw" and BEGIN_QUESTION.match(head):
            if current:
                raise MasterError(f"{_where(i, cell)}: BEGIN QUESTION inside question {current.name!r}; "
                                  "close it with END QUESTION first")
            current = _new_question(i, cell, questions)
            questions.append(current)
            role, qname = "marker", current.name
        elif cell.cell_type == "raw" and END_QUESTION.match(head):
            if not current or in_tests:
                raise MasterError(f"{_where(i, cell)}: END QUESTION without an open question "
                                  "(or inside BEGIN/END TESTS)")
            role, current = "marker", None
        elif cell.cell_type == "raw" and BEGIN_TESTS.match(head):
            if not current or in_tests:
                raise MasterError(f"{_where(i, cell)}: BEGIN TESTS must be inside a question, once")
            role, in_tests = "marker", True
        elif cell.cell_type == "raw" and END_TESTS.match(head):
            if not in_tests:
                raise MasterError(f"{_where(i, cell)}: END TESTS without BEGIN TESTS")
            role, in_tests = "marker", False
        elif in_tests:
            _check_test_cell(i, cell, head)
            role = "test"
            current.tests.append(cell.source)
        cell.metadata[META] = {"role": role, "question": qname}
    if current:
        raise MasterError(f"question {current.name!r} is never closed with END QUESTION")
    return nb, questions


def _new_question(i: int, cell, questions: list) -> Question:
    """The question a BEGIN QUESTION cell opens (its YAML: ``name``, ``points``), checked against ``questions``."""
    try:
        config = yaml.safe_load(cell.source.split("\n", 1)[1] if "\n" in cell.source else "") or {}
    except yaml.YAMLError as exc:
        raise MasterError(f"{_where(i, cell)}: the question's configuration is not valid YAML: {exc}") from None
    if not isinstance(config, dict):
        raise MasterError(f"{_where(i, cell)}: write the question's configuration as `name: ...` and "
                          "`points: ...` lines")
    if "name" not in config:
        raise MasterError(f"{_where(i, cell)}: BEGIN QUESTION needs a `name:` line")
    name = str(config["name"])
    if any(q.name == name for q in questions):
        raise MasterError(f"{_where(i, cell)}: question {name!r} is defined twice")
    try:
        points = float(config.get("points", 1))
    except (TypeError, ValueError):
        raise MasterError(f"{_where(i, cell)}: points={config.get('points')!r} is not a number") from None
    return Question(name, points)


def _check_test_cell(i: int, cell, head: str) -> None:
    """A public test cell: code, not marked hidden, led by a comment naming the check (at most the limit)."""
    if cell.cell_type != "code":
        raise MasterError(f"{_where(i, cell)}: only code cells may stand between BEGIN and END TESTS")
    if head.lstrip().startswith("#") and "hidden" in head.lower():
        raise MasterError(f"{_where(i, cell)}: hidden tests do not belong in the master; write them "
                          "in hidden_tests.py (Otter would silently hide this cell)")
    if not head.lstrip().startswith("#") or not head.lstrip("# ").strip():
        raise MasterError(f"{_where(i, cell)}: a public test cell starts with one comment line naming, in "
                          "a student's words, what it checks, e.g. `# rows of the weights sum to 1`")
    if len(head.lstrip("# ").strip()) > CHECK_NAME_LIMIT:
        raise MasterError(f"{_where(i, cell)}: the check's name (its first comment line) has "
                          f"{len(head.lstrip('# ').strip())} characters; keep it to {CHECK_NAME_LIMIT}")
