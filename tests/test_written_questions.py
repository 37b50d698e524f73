"""The written questions of the labs (issue 29): a lab that has them has two or three, each tied to a measurement
(its reference answer quotes numbers, its prompt asks for the student's own), and no "What to look for" cell
left that gives the conclusion away. Labs without written questions yet are listed, not failed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnlab.buildchain.transforms.parse_questions import parse_questions
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.course import load_course

ROOT = Path(__file__).resolve().parents[1]
LABS = load_course(ROOT).labs
WITH_WRITTEN = ("lab01", "lab02", "lab03", "lab04", "lab05", "lab06", "lab07", "lab08", "lab09", "lab10", "lab11")


def _written(lab):
    return [q for q in parse_questions(read_master(lab.master))[1] if q.manual]


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_a_lab_with_written_questions_has_two_or_three_tied_to_its_own_numbers(lab):
    written = _written(lab)
    if not written:
        assert not lab.id.startswith(WITH_WRITTEN), f"{lab.id} lost its written questions"
        pytest.skip(f"{lab.id} has no written question yet")
    assert 2 <= len(written) <= 3, [q.name for q in written]
    for q in written:
        assert re.search(r"\d\.\d", q.reference), f"{q.name}: the reference answer quotes no measured number"
        assert re.search(r"\b(your|you)\b", q.prompt), f"{q.name}: the prompt does not ask for the student's own"
        assert re.match(rf"\*\*Written question \({q.points:g} points?\)\.\*\*", q.prompt), (
            f"{q.name}: start the prompt with **Written question ({q.points:g} points).**")
    assert "What to look for" not in lab.master.read_text(), f"{lab.id} still has a 'What to look for' cell"
