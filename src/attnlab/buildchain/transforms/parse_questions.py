"""Find the question blocks of a master and label every cell with its role.

Must run first: every later transform reads the labels (``cell.metadata[META]``) it sets.
Roles: ``marker`` (BEGIN/END raw cells, assignment config), ``test`` (public test cells),
``question`` (cells inside a question, outside its tests), ``reference`` (the Markdown cells of a written
question's reference answer, between its BEGIN/END SOLUTION raw cells), ``body`` (everything else).

A written question (Otter Assign's ``manual: true``; docs/AUTHORING.md, "Written questions") has Markdown cells
only: its prompt, then its reference answer between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` raw cells; its
configuration adds ``rubric:``, a list of ``{criterion, points}`` (negative points: a deduction) whose positive
points add up to the question's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import yaml

from .markers import (
    ASSIGNMENT_CONFIG,
    BEGIN_QUESTION,
    BEGIN_SOLUTION,
    BEGIN_TESTS,
    END_QUESTION,
    END_SOLUTION,
    END_TESTS,
    META,
    first_line,
)


class MasterError(ValueError):
    """The master notebook breaks the authoring rules; the message says where and how to fix it."""


@dataclass
class Question:
    name: str
    points: float
    tests: list[str] = field(default_factory=list)
    manual: bool = False  # a written question, marked by a person
    rubric: list[tuple[str, float]] = field(default_factory=list)  # (criterion, points) of a written question
    prompt: str = ""  # a written question's Markdown prompt, its cells joined by a blank line
    reference: str = ""  # a written question's reference answer, likewise


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
    in_tests = False  # in a written question: inside its reference answer
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
            if not current or (in_tests and not current.manual):
                raise MasterError(f"{_where(i, cell)}: END QUESTION without an open question "
                                  "(or inside BEGIN/END TESTS)")
            if current.manual:
                _close_written(i, cell, current, in_tests)
            role, current, in_tests = "marker", None, False
        elif current and current.manual:
            role, in_tests = _written_cell(i, cell, head, current, in_tests)
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
    manual = config.get("manual", False)
    if manual not in (True, False):
        raise MasterError(f"{_where(i, cell)}: manual={manual!r}; write `manual: true` for a written question")
    if not manual:
        if "rubric" in config:
            raise MasterError(f"{_where(i, cell)}: question {name!r} has a rubric but no `manual: true`; a rubric "
                              "is for a written question, marked by a person (code questions have hidden tests)")
        return Question(name, points)
    return Question(name, points, manual=True, rubric=_rubric(_where(i, cell), name, points, config.get("rubric")))


def _rubric(where: str, name: str, points: float, items) -> list[tuple[str, float]]:
    """A written question's rubric: ``[{criterion, points}]``, checked (positive points add up to ``points``)."""
    if points <= 0:
        raise MasterError(f"{where}: written question {name!r} is worth {points:g} points; give it `points:` > 0")
    if not isinstance(items, list) or not items:
        raise MasterError(f"{where}: written question {name!r} needs a `rubric:` list of items, each "
                          "`- criterion: \"...\"` with `points: N` (negative for a deduction)")
    rubric = []
    for n, item in enumerate(items, 1):
        criterion = item.get("criterion") if isinstance(item, dict) else None
        value = item.get("points") if isinstance(item, dict) else None
        if not isinstance(criterion, str) or not criterion.strip() or isinstance(value, bool) \
                or not isinstance(value, (int, float)) or value == 0:
            raise MasterError(f"{where}: rubric item {n} of {name!r} is {item!r}; write it as `- criterion: "
                              "\"what the answer does\"` and `points: N` (a non-zero number, negative for a deduction)")
        rubric.append((" ".join(criterion.split()), float(value)))
    positive = sum(p for _, p in rubric if p > 0)
    if abs(positive - points) > 1e-9:
        raise MasterError(f"{where}: the positive rubric items of {name!r} add up to {positive:g} points but the "
                          f"question is worth {points:g}; make them equal")
    return rubric


def _written_cell(i: int, cell, head: str, question: Question, in_reference: bool) -> tuple[str, bool]:
    """The role of a cell inside a written question, and whether the reference answer is open after it."""
    if cell.cell_type == "raw" and BEGIN_SOLUTION.match(head):
        if in_reference or question.reference:
            raise MasterError(f"{_where(i, cell)}: written question {question.name!r} has one reference answer: "
                              "one BEGIN SOLUTION / END SOLUTION pair")
        return "marker", True
    if cell.cell_type == "raw" and END_SOLUTION.match(head):
        if not in_reference:
            raise MasterError(f"{_where(i, cell)}: END SOLUTION without BEGIN SOLUTION in {question.name!r}")
        return "marker", False
    if cell.cell_type != "markdown":
        raise MasterError(f"{_where(i, cell)}: written question {question.name!r} (manual: true) holds Markdown "
                          "cells only: its prompt, then its reference answer between `# BEGIN SOLUTION` and "
                          "`# END SOLUTION` raw cells; a code or test cell belongs in a code question")
    text = cell.source.strip("\n")
    if in_reference:
        question.reference = f"{question.reference}\n\n{text}" if question.reference else text
        return "reference", True
    if question.reference:
        raise MasterError(f"{_where(i, cell)}: a cell after the reference answer of {question.name!r}; put the "
                          "prompt before `# BEGIN SOLUTION` and close the question after `# END SOLUTION`")
    question.prompt = f"{question.prompt}\n\n{text}" if question.prompt else text
    return "question", False


def _close_written(i: int, cell, question: Question, in_reference: bool) -> None:
    if in_reference:
        raise MasterError(f"{_where(i, cell)}: the reference answer of {question.name!r} is never closed with "
                          "`# END SOLUTION`")
    if not question.prompt or not question.reference.strip():
        raise MasterError(f"{_where(i, cell)}: written question {question.name!r} needs a Markdown prompt and a "
                          "reference answer (Markdown cells between `# BEGIN SOLUTION` and `# END SOLUTION`)")


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
