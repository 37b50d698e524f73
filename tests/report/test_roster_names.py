"""With a roster, every section of the report names a student as the roster does (``Alice Smith (alice.ipynb)``):
the mistakes' who, Health, the slowest, the similarity pairs and clusters, the Students view; on the page and in
the summary. Anonymised: aliases only, no roster name anywhere."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from attnlab.records.safe_text import markdown_inline
from attnlab.report import compute
from attnlab.report import markdown as summary
from attnlab.report.page import render
from attnlab.roster import Roster, Student

from .rows import diagnosed, problem, sub

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab05_self_attention"
ROSTER = Roster([Student("alice", name="Alice Smith"), Student("bob", name="Bob Jones")])  # carol is not on it


def _class(tmp_path: Path) -> list:
    """alice and bob hand in the same notebook (a similar pair) and make the same diagnosed mistake; carol's
    notebook timed out; alice is the slowest."""
    for who in ("alice", "bob", "carol"):
        shutil.copy(ROOT / "solutions" / LAB / f"{LAB}.ipynb", tmp_path / f"{who}.ipynb")
    wrong = {"q": (0.0, 1.0, ["likely mistake: the mask is inverted"], diagnosed("the mask is inverted", "t"))}
    return [sub("alice.ipynb", wrong, path=str(tmp_path / "alice.ipynb"), elapsed_s=9.0),
            sub("bob.ipynb", wrong, path=str(tmp_path / "bob.ipynb"), elapsed_s=2.0),
            sub("carol.ipynb", {"q": (0.0, 1.0, [])}, path=str(tmp_path / "nowhere.ipynb"), elapsed_s=1.0,
                problems=[problem("timeout", "hung")])]


def _section(page: str, name: str) -> str:
    return re.search(rf"<section id='{name}'>.*?</section>", page, re.S).group(0)


def test_every_section_names_students_as_the_roster_does(tmp_path):
    report = compute(LAB, _class(tmp_path), figures=False, roster=ROSTER)
    assert [(p.a, p.b) for p in report.pairs] == [("Alice Smith (alice.ipynb)", "Bob Jones (bob.ipynb)")]
    page = render(report)
    mistakes = _section(page, "mistakes")
    assert "Alice Smith (alice.ipynb)</a><br>" in mistakes and "Bob Jones (bob.ipynb)</a>" in mistakes
    health = _section(page, "health")
    assert "carol.ipynb</a>" in health  # not on the roster: the file name, as before
    assert "slowest: Alice Smith (alice.ipynb) (9.0 s)" in health
    similarity = _section(page, "similarity")
    assert "Alice Smith (alice.ipynb) and Bob Jones (bob.ipynb)" in similarity  # the side-by-side view
    assert "<span class='nw'>Alice Smith (alice.ipynb)</span>" in similarity  # the cluster
    assert "names as the roster does" in page
    md = summary.render(report)
    alice, bob = markdown_inline("Alice Smith (alice.ipynb)"), markdown_inline("Bob Jones (bob.ipynb)")
    assert f"Made by: {alice}, {bob}" in md
    assert f"| {alice} | {bob} |" in md  # the pairs table
    assert f"slowest: {alice} 9.0 s" in md and f"| {markdown_inline('carol.ipynb')} | 0 / 1 |" in md


def test_without_a_roster_or_anonymised_no_roster_name_is_shown(tmp_path):
    plain = render(compute(LAB, _class(tmp_path), figures=False))
    assert "Alice Smith" not in plain and "alice.ipynb and bob.ipynb" in plain
    assert "names as in the gradebook (file names)" in plain
    anonymised = compute(LAB, _class(tmp_path), figures=False, roster=ROSTER, anonymise=True)
    for text in (render(anonymised), summary.render(anonymised)):
        assert "Alice" not in text and "Bob" not in text and "alice.ipynb" not in text
    assert all(p.a.startswith("student-") and p.b.startswith("student-") for p in anonymised.pairs)
