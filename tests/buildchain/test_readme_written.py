"""The build writes each lab's written questions (name, points, prompt, rubric) into its instructor README."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from attnlab.buildchain.transforms.readme_written import BEGIN, END, with_written_section, written_section
from attnlab.course import load_course
from attnlab.grading.core.bundle import written_questions

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = [SimpleNamespace(name="why_scale", points=2.0, prompt="**Written question (2 points).** Why?\n\nSay why.",
                             rubric=[("Derives Var = d", 1.5), ("Quotes a | number", 0.5), ("No number", -0.5)]),
             SimpleNamespace(name="what_plot", points=1.0, prompt="Look.", rubric=[("Names the curve", 1.0)])]


def test_the_section_names_each_question_its_points_prompt_and_rubric():
    section = written_section(QUESTIONS)
    assert section.startswith(BEGIN) and section.endswith(END)
    assert "2 questions, 3 points" in section
    assert "### `why_scale` (2 points)" in section and "### `what_plot` (1 points)" in section
    assert "> **Written question (2 points).** Why?\n>\n> Say why." in section  # the prompt quoted, blank lines kept
    assert "| Derives Var = d | 1.5 |" in section and "| No number | -0.5 |" in section
    assert "| Quotes a / number | 0.5 |" in section  # a | in a criterion would split the table's cell


def test_the_section_replaces_its_old_self_and_keeps_the_notes_around_it():
    notes = "# Lab\n\nNotes before.\n\n" + written_section(QUESTIONS[:1]) + "\n\n## After\n\nNotes after.\n"
    updated = with_written_section(notes, written_section(QUESTIONS))
    assert updated.count(BEGIN) == 1 and updated.count(END) == 1
    assert updated.startswith("# Lab\n\nNotes before.\n\n") and updated.endswith("\n\n## After\n\nNotes after.\n")
    assert "what_plot" in updated
    assert with_written_section(updated, written_section(QUESTIONS)) == updated  # the build is a fixed point


def test_a_readme_without_the_section_gets_it_appended():
    updated = with_written_section("# Lab\n\nNotes.\n\n\n", written_section(QUESTIONS))
    assert updated == "# Lab\n\nNotes.\n\n" + written_section(QUESTIONS) + "\n"


@pytest.mark.parametrize("lab", [lab.id for lab in load_course(ROOT).labs])
def test_every_labs_readme_lists_its_written_questions(lab):
    readme = (ROOT / "instructor" / lab / "README.md").read_text()
    part = readme[readme.index(BEGIN):readme.index(END)]
    questions = written_questions(ROOT / "autograder" / lab)
    assert questions, f"{lab} has no written question"
    for q in questions:
        assert f"### `{q.name}` ({q.points:g} points)" in part
        assert all(r.criterion.replace("|", "/") in part for r in q.rubric)
