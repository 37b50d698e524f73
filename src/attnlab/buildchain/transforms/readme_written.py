"""The written questions in the lab's instructor README, written by the build from the master (their one owner).

``attnlab build`` replaces the part of ``instructor/<lab>/README.md`` between ``BEGIN`` and ``END`` (or appends
it) with each written question's name, points, prompt and rubric, so that an instructor reading the lab's notes sees
what a person marks, and ``attnlab build --check`` fails when the README and the master disagree. The reference
answers stay in the master and the solution notebook. The README never reaches students (the release writes
``labs/``, whose leak gate refuses rubric text).
"""

from __future__ import annotations

BEGIN = "<!-- BEGIN written questions: written by `attnlab build` from the master; edit the master, not this part -->"
END = "<!-- END written questions -->"


def _points(value: float) -> str:
    return f"{value:+g}" if value < 0 else f"{value:g}"


def written_section(questions) -> str:
    """The README part for ``questions`` (the master's manual questions: ``name``, ``points``, ``prompt``, ``rubric``
    as ``[(criterion, points)]``), between ``BEGIN`` and ``END``."""
    total = sum(q.points for q in questions)
    lines = [BEGIN, "## Written questions", "",
             f"{len(questions)} questions, {total:g} points, marked by a person in `attnlab mark` (or nbgrader's "
             "formgrader, or Gradescope's manual grading of the Otter PDF); `attnlab grade` records them as awaiting "
             "marking. Negative rubric items are deductions.", ""]
    for q in questions:
        lines += [f"### `{q.name}` ({q.points:g} points)", ""]
        lines += ["> " + line if line.strip() else ">" for line in q.prompt.strip().splitlines()]
        lines += ["", "| rubric item | points |", "|---|---|"]
        lines += [f"| {criterion.replace('|', '/')} | {_points(points)} |" for criterion, points in q.rubric]
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def with_written_section(readme: str, section: str) -> str:
    """``readme`` with its written-questions part replaced by ``section`` (appended when it has none)."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start >= 0 and end > start:
        return readme[:start] + section + readme[end + len(END):]
    return readme.rstrip("\n") + "\n\n" + section + "\n"
