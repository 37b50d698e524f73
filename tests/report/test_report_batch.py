"""The report of a real graded batch of about 30 lab05 submissions (``conftest.lab05_batch``): the catalogue's
mistakes ranked by their true counts, the near-copies as the top pair and no pair of independent solutions, the
health rows, escaping of a hostile submission's text, and the page in a real browser (Debian's Chromium through
Playwright; never ``playwright install``): every figure renders, no console error, a screenshot saved."""

from __future__ import annotations

import html
import itertools
import re

import pytest
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch

from attnlab.cli import main
from attnlab.report import build_report

from .conftest import HOSTILE_NAME, PAYLOAD, ROOT

pytestmark = pytest.mark.slow  # grades 26 notebooks (about 3 minutes on a loaded 2-core machine)


@pytest.fixture(scope="module")
def built(lab05_batch, tmp_path_factory):
    """The report of the batch through the CLI, as a person would make it."""
    page = tmp_path_factory.mktemp("report") / "report.html"
    assert main(["--root", str(ROOT), "report", str(lab05_batch.out), "--html", str(page)]) == 0
    again = build_report(lab05_batch.out, html=page.with_name("again.html"), mutants=lab05_batch.mutants,
                         template=lab05_batch.template)
    return page, again.report


def test_the_catalogue_mistakes_are_ranked_by_their_true_counts(lab05_batch, built):
    _, report = built
    counts = {m.entries[0]: m.count for m in report.mistakes if len(m.entries) == 1}
    assert {name: counts.get(name) for name in lab05_batch.true_counts} == lab05_batch.true_counts
    ranked = [m.count for m in report.mistakes]
    assert ranked == sorted(ranked, reverse=True)
    order = [m.entries[0] for m in report.mistakes if m.entries and m.entries[0] in lab05_batch.true_counts]
    assert [lab05_batch.true_counts[n] for n in order] == sorted(lab05_batch.true_counts.values(), reverse=True)
    assert all(m.example.startswith("failed: ") for m in report.mistakes)


def test_the_near_copies_are_the_top_pair_and_independent_solutions_are_not_listed(lab05_batch, built):
    _, report = built
    top, second = report.pairs[0], report.pairs[1]
    assert {top.a, top.b} == set(lab05_batch.near_copies) and top.score == pytest.approx(1.0)
    assert second.score < top.score
    listed = {frozenset((p.a, p.b)) for p in report.pairs}
    for a, b in itertools.combinations(lab05_batch.independent, 2):
        assert frozenset((a, b)) not in listed, (a, b)
    assert top.regions_a and top.regions_b  # the side-by-side view highlights the match
    blanks = {"blank-1.ipynb", "blank-2.ipynb", "blank-3.ipynb"}
    assert not any({p.a, p.b} & blanks for p in report.pairs)  # the template is every student's: never evidence


def test_health_names_the_crash_the_rule_breach_and_the_unreadable_file(built):
    _, report = built
    h = report.health
    assert [k for k, _ in h.crashed] == [HOSTILE_NAME] and "ended the Python process" in h.crashed[0][1]
    assert [k for k, _ in h.flagged] == [HOSTILE_NAME] and "import os" in h.flagged[0][1]
    assert [k for k, _ in h.unreadable] == ["corrupt.ipynb"] and not h.timed_out and not h.grader_errors
    assert h.slowest[0][1] >= h.median_s > 0


def test_student_text_is_escaped_in_the_page_and_the_summary(built):
    page, _ = built
    text = page.read_text()
    for tag in ("<script", "<img src=x", "<b>"):  # the payload's tags, never raw: the page's own are other tags
        assert tag not in text.lower(), tag
    assert html.escape(PAYLOAD, quote=True) in text and html.escape(HOSTILE_NAME, quote=True) in text
    summary = page.with_suffix(".md").read_text()
    assert "<script" not in summary and "<img" not in summary


def test_anonymised_names_leave_no_file_name_in_any_output(lab05_batch, tmp_path):
    page = tmp_path / "anon.html"
    assert main(["--root", str(ROOT), "report", str(lab05_batch.out), "--html", str(page), "--anonymise"]) == 0
    outputs = [page, page.with_suffix(".md")] + [tmp_path / f"anon-{k}.csv" for k in ("scores", "canvas", "moodle")]
    for path in outputs:
        text = path.read_text()
        for stem in ("copy-renamed", "independent-1", "mutant-sdpa", "blank-2", "corrupt", "alert(1)"):
            assert stem not in text, (path.name, stem)
        assert re.search(r"student\\?-\d{3}", text), path.name  # Markdown escapes the hyphen


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_page_opens_from_disk_in_a_real_browser(built):
    from playwright.sync_api import sync_playwright

    page_path, report = built
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        page.wait_for_load_state("load")
        figures = page.eval_on_selector_all(
            "img[data-figure]", "imgs => imgs.map(i => [i.dataset.figure, i.complete && i.naturalWidth > 0])")
        page.locator("#pair-1 summary").click()
        page.screenshot(path=str(page_path.with_name("report.png")), full_page=True)
        title = page.title()
        shown = page.inner_text("body")
        marks = page.locator("#pair-1 mark").count()
        browser.close()
    print(f"screenshot: {page_path.with_name('report.png')}")
    assert sorted(figures) == [["mistakes", True], ["questions", True], ["timing", True], ["total", True]]
    assert errors == []
    assert title == f"{report.lab}: the class at a glance"  # the payload's script never ran
    assert PAYLOAD in shown and HOSTILE_NAME in shown  # shown as text
    assert marks > 0
