"""The report per student, from a real graded batch of lab05 notebooks that go wrong in the ways a class does: a
call that never returns (a timeout), a cell past the cell time limit, a forbidden ``F.scaled_dot_product_attention``
that costs points, an ``IndentationError`` cell. Each is listed in Health and marked in the Students view, with a
link to the student's feedback; the near-identical notebooks form one similarity cluster marked as matching the
reference solution, and an answer copied from a public solution is marked with that file (``--known``)."""

from __future__ import annotations

import functools
import re
import shutil
from types import SimpleNamespace

import nbformat
import pytest

from attnlab.cli import main
from attnlab.report import build_report

from .conftest import LAB, ROOT, renamed, variants_code

pytestmark = pytest.mark.slow  # grades 5 notebooks (about 30 s on a loaded 2-core machine)

PROBLEMS = {  # submission -> (a cell appended to the solution, the Health category it must be listed under)
    "hangs.ipynb": ("def simple_self_attention(x):\n    while True:\n        pass", "timeout"),
    "loops.ipynb": ("while True:\n    pass", "cell_timeout"),
    "forbidden.ipynb": ("def scaled_dot_product_attention(q, k, v, mask=None):\n"  # right values, by the library
                        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                        "    if mask is not None:\n"
                        "        scores = scores.masked_fill(~mask, float('-inf'))\n"
                        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), scores.softmax(-1)",
                        "rule_breach"),
    "indent.ipynb": ("def helper():\nreturn 1", "syntax_error"),
}
SHORT = {"timeout": "timed out", "cell_timeout": "cell timed out", "rule_breach": "course rules",
         "syntax_error": "syntax error"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from attnlab.demo import with_entry
    from attnlab.grading.core.mutants import load_catalogue
    from attnlab.grading.runner import grade_submission
    from attnlab.grading.scale.batch import grade_batch

    root = tmp_path_factory.mktemp("students")
    subs, out, public = root / "subs", root / "out", root / "public"
    subs.mkdir()
    public.mkdir()
    solution = ROOT / "solutions" / LAB / f"{LAB}.ipynb"
    for name, (cell, _) in PROBLEMS.items():
        nb = nbformat.read(solution, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(cell))
        nbformat.write(nb, subs / name)
    _, variants = load_catalogue(ROOT / "instructor" / LAB / "catalogue.py")
    own = variants_code(variants, 1)  # written differently from the reference...
    nbformat.write(with_entry(ROOT / "labs" / LAB / f"{LAB}.ipynb", SimpleNamespace(source=own)),
                   subs / "copied.ipynb")
    (public / "answer.py").write_text(renamed(own))  # ...but found online, with other names
    fast = functools.partial(grade_submission, cell_timeout=3, call_timeout=3)
    summary = grade_batch(ROOT / "autograder" / LAB, subs, out_dir=out, jobs=2, grade_fn=fast, progress=False)
    assert summary.failed == 0
    page = root / "report.html"
    assert main(["--root", str(ROOT), "report", str(out), "--html", str(page), "--known", str(public)]) == 0
    again = build_report(out, html=root / "again.html", reference=solution, known=[public],
                         template=ROOT / "labs" / LAB / f"{LAB}.ipynb")  # as the CLI does
    return page, again.report


def _section(html: str, name: str) -> str:
    return re.search(rf"<section id='{name}'[^>]*>(.*?)</section>", html, re.S).group(1)


def test_health_lists_the_timeout_the_cell_limit_the_forbidden_call_and_the_syntax_error(graded):
    page, report = graded
    for name, (_, category) in PROBLEMS.items():
        assert [k for k, _ in report.health.of(category)] == [name], category
    assert "ran past the 3 s cell limit" in report.health.of("cell_timeout")[0][1]
    assert "IndentationError" in report.health.of("syntax_error")[0][1]
    assert "scaled_dot_product_attention" in report.health.of("rule_breach")[0][1]
    forbidden = next(s for s in report.submissions if s.key == "forbidden.ipynb")
    assert forbidden.score < forbidden.max_score  # the forbidden call cost points, and is listed
    health = _section(page.read_text(), "health")
    for heading, key in (("Timed out", "hangs"), ("A cell ran past its time limit", "loops"),
                         ("Broke the course rules", "forbidden"), ("Syntax errors", "indent")):
        listed = re.search(rf"<h3>{re.escape(heading)}[^<]*: 1</h3>(.*?)</table>", health, re.S)
        assert listed and f"{key}.ipynb" in listed.group(1), heading


def test_the_students_view_marks_each_problem_links_the_feedback_and_puts_the_lowest_first(graded):
    page, report = graded
    students = _section(page.read_text(), "students")
    rows = re.findall(r"<tr>(.*?)</tr>", students, re.S)[1:]
    assert len(rows) == len(report.submissions)
    by_name = {re.search(r"<span id='student-\d+'>([^<]+)</span>", r).group(1): r for r in rows}
    for name, (_, category) in PROBLEMS.items():
        assert f"<b class='bad'>{SHORT[category]}</b>" in by_name[name], name
        assert f"href='out/submissions/{name[:-6]}/feedback.html'" in by_name[name]  # the page beside feedback.md
    assert (page.parent / "out" / "submissions" / "forbidden" / "feedback.md").is_file()
    # lab05: 30 code points and 7 written ones, awaiting marking here
    totals = [float(re.search(r"<span class='nw'>([\d.]+) / 37 \(7 points awaiting marking\)</span>", r).group(1))
              for r in rows]
    assert totals == sorted(totals) and totals[0] < 30  # who needs help comes first
    assert "scaled_dot_product_attention 0/10" in by_name["forbidden.ipynb"]  # the points lost, per question


def test_near_identical_notebooks_form_one_cluster_marked_as_matching_the_reference(graded):
    page, report = graded
    four = sorted(PROBLEMS)
    cluster = next(c for c in report.clusters if set(four) <= set(c.members))
    assert cluster.members == four and cluster.pairs == 6  # one cluster, not six rows to read
    assert {m for m, k, _ in cluster.known if k == "the reference solution"} == set(four)
    copied = next(c for c in report.clusters if "copied.ipynb" in c.members)
    assert copied.members == ["copied.ipynb"] and [k for _, k, _ in copied.known] == ["known: answer.py"]
    assert copied.known[0][2] == pytest.approx(1.0)  # renamed variables change nothing
    text = page.read_text()
    assert "copied.ipynb matches known: answer.py: 100%" in text
    assert ("<strong>6 pairs</strong> above the threshold in <strong>2 clusters</strong>; the table shows 6 of the 6 "
            "pairs") in text


def test_a_known_path_that_does_not_exist_is_a_usage_error(graded, capsys, tmp_path):
    page, _ = graded
    assert main(["--root", str(ROOT), "report", str(page.parent / "out"), "--html", str(tmp_path / "r.html"),
                 "--known", str(tmp_path / "nowhere")]) == 2
    assert "--known" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


def test_the_page_shows_students_health_and_clusters_in_chromium(graded, tmp_path):
    from chromium_browser import CHROMIUM, NO_CHROMIUM, launch

    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    from playwright.sync_api import sync_playwright

    page_path, _ = graded
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(page_path.as_uri())
        page.wait_for_load_state("load")
        page.locator("a[href='#student-1']").first.click()  # the index by name jumps to the row
        heights = page.eval_on_selector_all(
            "#students td:nth-child(3) .nw", "spans => spans.map(s => s.getBoundingClientRect().height)")
        line = page.eval_on_selector("#students td:nth-child(3) .nw", "s => parseFloat(getComputedStyle(s).lineHeight)")
        for section in ("health", "students", "similarity"):
            page.locator(f"#{section}").screenshot(path=str(tmp_path / f"{section}.png"))
        browser.close()
    shutil.copy(tmp_path / "students.png", page_path.with_name("students.png"))
    assert heights and max(heights) <= line * 1.5  # "16.5 / 30" on one line
