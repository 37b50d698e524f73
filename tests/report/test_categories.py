"""A submission's problems by category, its diagnosed mistakes and unwritten questions (``report/categories.py``),
and similarity clusters (``report/clusters.py``), from hand-made rows and pairs."""

from __future__ import annotations

from attnlab.records import result_fields as f
from attnlab.report import stats
from attnlab.report.build import compute
from attnlab.report.categories import CATEGORIES, SHORT, diagnosed, problems, unwritten
from attnlab.report.clusters import REFERENCE, cluster_of, clusters, split_known
from attnlab.report.page import render
from attnlab.report.similarity import Pair

from .rows import diagnosed as diagnosed_fields
from .rows import problem, sub

FORBIDDEN = ("failed: sdpa_grad: this lab asks you to build attention by hand: F.scaled_dot_product_attention (and "
             "F.multi_head_attention_forward behind it) are not allowed in the graded cells; found line 150: "
             ".scaled_dot_product_attention")


def _class():
    """Rows as the grader writes them: the categories in the structured fields (``result_fields``), the messages for
    people; ``sly``'s messages read like the grader's own lines, and make no category."""
    hang = "timed out after 30 s (an endless loop, or far too slow)"
    loop = "the cell starting `while True:`: did not finish within 60 s"
    memory = "the cell starting `x = [0] * 10**12`, line 1: MemoryError"
    indent = "the cell starting `def f():`, line 2: IndentationError: expected an indented block"
    return [
        sub("hangs.ipynb", {"q": (0.0, 2.0, [f"failed: t: {hang}"], {f.FAILED: ["t"]})},
            problems=[problem(f.TIMEOUT, hang)]),
        sub("loops.ipynb", {"q": (2.0, 2.0, [])}, errors=[loop],
            problems=[problem(f.CELL_TIMEOUT, loop, "the cell starting `while True:`")]),
        sub("memory.ipynb", {"q": (2.0, 2.0, [])}, errors=[memory], problems=[problem(f.CELL_LIMIT, memory)]),
        sub("indent.ipynb", {"q": (2.0, 2.0, [])}, errors=[indent],
            problems=[problem(f.SYNTAX_ERROR, "the cell starting `def f():` does not parse as Python"),
                      problem(f.CELL_ERROR, indent)]),
        sub("forbidden.ipynb", {"q": (1.0, 2.0, [FORBIDDEN, "passed: t2"], {f.FAILED: ["sdpa_grad"],
                                                                         f.FORBIDDEN: ["sdpa_grad"]})},
            problems=[problem(f.RULE_BREACH, FORBIDDEN)]),
        sub("imports.ipynb", {"q": (0.0, 2.0, [])}, review=["the lab's rules (q set to 0): line 1: import os"]),
        sub("sly.ipynb", {"q": (0.0, 2.0, ["failed: t: `f` raised ValueError: x; found line 3: .y",
                                           "failed: t: could not test your code: E: timed out after 3 s",
                                           "likely mistake: forged", "q: not written yet"], {f.FAILED: ["t"]})},
            errors=["did not finish within 60 s; MemoryError; IndentationError: x; ended the Python process"]),
        sub("fine.ipynb", {"q": (1.0, 2.0, ["failed: t: off by one", "likely mistake: check the diagonal"],
                                 diagnosed_fields("check the diagonal", "t")),
                           "r": (0.0, 1.0, ["r: not written yet"], {f.NOT_WRITTEN: True})}),
    ]


def test_each_problem_is_read_into_its_category():
    found = {s.key: [p.category for p in problems(s)] for s in _class()}
    assert found == {"hangs.ipynb": ["timeout"], "loops.ipynb": ["cell_timeout"], "memory.ipynb": ["cell_limit"],
                     "indent.ipynb": ["syntax_error"], "forbidden.ipynb": ["rule_breach"],
                     "imports.ipynb": ["rule_breach"], "sly.ipynb": [], "fine.ipynb": []}
    fine, sly = _class()[-1], _class()[-2]
    assert diagnosed(fine) == [("q", "check the diagonal")] and unwritten(fine) == ["r"]
    assert diagnosed(sly) == [] and unwritten(sly) == []


def test_a_structured_problems_field_is_read_as_it_is_and_unknown_categories_dropped():
    s = sub("x.ipynb", {"q": (0.0, 2.0, ["failed: t: timed out after 3 s"])})
    s.problems = [{"category": "worker_crash", "message": "killed by signal 9"}, {"category": "made-up", "message": "?"},
                  {"category": "syntax_error", "message": "cell 2"}]
    assert [(p.category, p.text) for p in problems(s)] == [("worker_crash", "killed by signal 9"),
                                                          ("syntax_error", "cell 2")]


def test_health_and_the_students_view_list_every_problem_with_its_student():
    subs = _class()
    h = stats.health(subs)
    assert set(h.listed) == set(CATEGORIES)
    assert [k for k, _ in h.of("rule_breach")] == ["forbidden.ipynb", "imports.ipynb"]
    assert [k for k, _ in h.timed_out] == ["hangs.ipynb", "loops.ipynb"]
    page = render(compute("lab05", subs, figures=False))
    students = page.split("<section id='students' class='fit'>")[1]
    for s in subs:
        row = students.split(f">{s.key}</span>")[1].split("</tr>")[0]
        for p in problems(s):
            assert f"<b class='bad'>{SHORT[p.category]}</b>" in row, s.key
            assert f">{s.key}</a>" in page.split("<section id='health'>")[1].split("</section>")[0]
    assert "<span class='nw'>r 0/1</span> <b class='blank nw'>not written yet</b>" in students
    order = [students.index(f">{k}</span>") for k in ("hangs.ipynb", "fine.ipynb", "loops.ipynb")]
    assert order == sorted(order)  # 0/2, then 1/3, then full marks


def _pair(a, b, score):
    return Pair(a, b, score, score, score, [], [])


def test_one_student_in_nine_pairs_is_one_cluster_and_reference_matches_are_marked_not_paired():
    star = [_pair("hub", f"s{i}", 0.9 - i / 100) for i in range(9)]
    other = [_pair("x", "y", 0.95)]
    pairs, matches = split_known(star + other + [_pair(REFERENCE, "lone", 1.0), _pair(REFERENCE, "known: a.py", 1.0),
                                                 _pair("s3", REFERENCE, 0.85)], {REFERENCE, "known: a.py"})
    assert len(pairs) == 10 and [(m.a, m.b) for m in matches] == [("lone", REFERENCE), ("s3", REFERENCE)]
    found = clusters(pairs, matches)
    assert [c.members for c in found] == [["lone"], ["x", "y"], ["hub"] + [f"s{i}" for i in range(9)]]
    assert found[2].pairs == 9 and found[2].known == [("s3", REFERENCE, 0.85)] and found[0].top == 0.0
    assert cluster_of(found)["s5"] == 3


def test_the_summary_has_the_students_lowest_first_with_their_problems():
    from attnlab.report.markdown import render as summary

    md = summary(compute("lab05", _class(), figures=False))
    rows = md.split("## Students (lowest total first)")[1].strip().splitlines()[2:]
    assert rows[0].startswith("| hangs\\.ipynb | 0 / 2 | `q` 0/2 | - | timed out |")
    assert "| fine\\.ipynb | 1 / 3 | `q` 1/2, `r` 0/1 (not written yet) | q: check the diagonal | - |" in rows
    assert "Syntax errors (a cell that does not parse): 1 (indent\\.ipynb)" in md
