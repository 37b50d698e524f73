"""Feedback handed back (``attnlab feedback OUT --to DIR``): one page per student in a folder named by their roster
id, holding their scores, failed properties, likely mistake, a changed score's reason and the late penalty, every
student text escaped; the pages open in Chromium (Debian's, through Playwright) without a request or an error, and
the report links to them."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from chromium_browser import CHROMIUM, NO_AXE, NO_CHROMIUM, axe_core, launch

from attnlab.cli import main
from attnlab.course import load_course
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.outputs.late_work import record_late_work
from attnlab.late_policy import LabDeadline, LatePolicy
from attnlab.marking.regrades import NO_CHANGE, add_requests, checked_request, questions_by_key, resolve
from attnlab.marking.store import MarkStore
from attnlab.records import result_fields as f
from attnlab.report import build_report

LAB = "lab99_demo"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "course"
PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
DUE = datetime(2027, 2, 14, 23, 59, tzinfo=timezone.utc)


def _result(double: float, messages=(), mistake=None) -> dict:
    q = {"score": double, "max_score": 2.0, "messages": list(messages)}
    if mistake:
        q[f.MISTAKE] = {f.ENTRY: "double_plus", f.HINT: mistake}
        q[f.FAILED] = ["double_values"]
    return {"submission": "x", "score": double + 1.0, "max_score": 3.0, "isolation": "bubblewrap",
            "questions": {"double": q, "Scale": {"score": 1.0, "max_score": 1.0, "messages": []}}}


@pytest.fixture
def out(tmp_path):
    """A course with a roster (alice and bob; carol is not on it) and a gradebook of three graded submissions: bob
    lost a point to a diagnosed mistake (whose message is an HTML payload), handed in two days late under 10% a
    day, and had a score changed with a reason; carol asked for a regrade (an HTML payload), decided with no change."""
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    config = root / "instructor" / "course.yml"
    config.write_text(config.read_text() + "roster:\n  - {submission: alice, login: asmith, name: Alice Smith}\n"
                      "  - {submission: bob, login: bjones, name: Bob Jones}\n")
    out = tmp_path / "out"
    out.mkdir()
    with open_gradebook(out) as book:
        book.record(LAB, "alice.ipynb", "alice.ipynb", "a" * 64, _result(2.0))
        book.record(LAB, "bob.ipynb", "bob.ipynb", "b" * 64,
                    _result(1.0, [f"double_values: double([1, 2]) is [3, 4], expected [2, 4] {PAYLOAD}"],
                            mistake="you add x instead of doubling it"))
        book.record(LAB, "carol.ipynb", "carol.ipynb", "c" * 64, _result(0.0, ["double: not written yet"]))
        MarkStore(book).change_score(LAB, "carol.ipynb", "Scale", 0.5, reason="the weight is not a Parameter",
                                     marker="ta", version=0)
        store = MarkStore(book)
        asked = checked_request(questions_by_key(store, LAB), LAB, "carol.ipynb", "double", PAYLOAD,
                                "2027-02-17T09:00:00+00:00")
        add_requests(store, [asked], marker="ta", source="entered")
        resolve(store, LAB, 1, decision=NO_CHANGE, reason="double is not written yet", marker="ta")
        rule = LabDeadline(DUE, LatePolicy(percent=10))
        record_late_work(book, LAB, {"bob.ipynb": rule.lateness("bob.ipynb", datetime(2027, 2, 16, 9, tzinfo=timezone.utc),
                                                                "csv")})
    return root, out


def test_one_page_per_roster_id_with_what_the_student_was_told(out, tmp_path, capsys):
    root, out = out
    to = tmp_path / "handback"
    assert main(["--root", str(root), "feedback", str(out), "--to", str(to)]) == 0
    said = capsys.readouterr()
    assert f"3 feedback page(s) in {to}" in said.out and "NOT-ON-ROSTER/: carol.ipynb" in said.err
    pages = sorted(p.relative_to(to).as_posix() for p in to.rglob("*.html"))
    assert pages == ["NOT-ON-ROSTER/carol/lab99_demo.html", "asmith/lab99_demo.html", "bjones/lab99_demo.html"]
    bob = (to / "bjones" / f"{LAB}.html").read_text()
    assert "Total: 1.6 / 3" in bob  # 2 points, 20% off
    assert "2 days late: -20%" in bob and "took 0.4 points off your total" in bob
    assert "Likely mistake:</strong> you add x instead of doubling it" in bob
    assert "double([1, 2]) is [3, 4], expected [2, 4]" in bob and "<script>" not in bob and "&lt;script&gt;" in bob
    assert "<code>double</code>: 1 / 2" in bob  # the question keeps its score
    carol = (to / "NOT-ON-ROSTER" / "carol" / f"{LAB}.html").read_text()
    assert "Your score was changed from 1 to 0.5 by ta, for this reason:</p><blockquote>the weight is not a " \
        "Parameter" in carol
    assert "<code>Scale</code>: 0.5 / 1" in carol and "Late work" not in carol
    assert "Your regrade requests" in carol and "no change (decided " in carol and "double is not written yet" in carol
    assert "<script>" not in carol and "&lt;script&gt;document.title" in carol
    assert "regrade" not in bob
    alice = (to / "asmith" / f"{LAB}.html").read_text()
    assert "Total: 3 / 3" in alice and alice.count("All checks passed.") == 2


def test_nbgrader_gets_the_pages_in_its_feedback_layout_and_a_student_it_does_not_know_is_named(out, tmp_path, capsys):
    """alice submitted through nbgrader as ``asmith`` (her roster login): her page is nbgrader's
    ``feedback/asmith/<lab>/<notebook>.html`` beside her submission's timestamp and secret; bob, whom nbgrader has
    no submission of, and carol, with no secret, get no page and a line each saying why (exit 1)."""
    root, out = out
    course = tmp_path / "nbgrader"
    for sid in ("asmith", "carol"):
        sub = course / "autograded" / sid / LAB
        sub.mkdir(parents=True)
        (sub / f"{LAB}.ipynb").write_text("{}")
        (sub / "timestamp.txt").write_text(f"2027-02-14 10:00:00.000000 UTC {sid}")
    (course / "autograded" / "asmith" / LAB / "submission_secret.txt").write_text("s3cret")
    assert main(["--root", str(root), "feedback", str(out), "--nbgrader", str(course)]) == 1
    said = capsys.readouterr()
    assert f"1 page(s) for release_feedback in {course}/feedback" in said.out
    assert f"no page for bob.ipynb: nbgrader has no submission of {LAB} by bjones or bob" in said.err
    assert f"no page for carol.ipynb: {course / 'autograded' / 'carol' / LAB} has no submission_secret.txt" in said.err
    written = sorted(p.relative_to(course / "feedback").as_posix() for p in (course / "feedback").rglob("*"))
    assert written == ["asmith", f"asmith/{LAB}", f"asmith/{LAB}/{LAB}.html", f"asmith/{LAB}/submission_secret.txt",
                       f"asmith/{LAB}/timestamp.txt"]
    here = course / "feedback" / "asmith" / LAB
    assert (here / "timestamp.txt").read_text() == "2027-02-14 10:00:00.000000 UTC asmith"
    assert (here / "submission_secret.txt").read_text() == "s3cret"
    assert "Total: 3 / 3" in (here / f"{LAB}.html").read_text()
    # not an nbgrader course: a usage error naming the folder
    assert main(["--root", str(root), "feedback", str(out), "--nbgrader", str(tmp_path / "nowhere")]) == 2
    assert "has no submitted/ or autograded/ folder" in capsys.readouterr().err


def test_the_report_links_to_the_pages_and_names_students_as_the_roster_does(out):
    root, out = out
    for who in ("alice", "bob", "carol"):
        (out / "submissions" / who).mkdir(parents=True)
        (out / "submissions" / who / "feedback.md").write_text("# Feedback\n")
    roster = load_course(root).roster
    build_report(out, roster=roster)  # as `attnlab report OUT` runs it (the fixture course has no built notebooks)
    page = (out / "report.html").read_text()
    assert "Bob Jones (bob.ipynb)" in page and "Alice Smith (alice.ipynb)" in page  # the roster names the students
    assert "student-" in build_report(out, roster=roster, anonymise=True, html=out / "anon.html").html.read_text()
    assert "Bob Jones" not in (out / "anon.html").read_text()
    assert page.count("href='submissions/bob/feedback.html'") == 1
    assert "Late work" in (out / "submissions" / "bob" / "feedback.html").read_text()
    assert "<b class='changed'>Scale: score changed from 1 to 0.5 by ta</b>: the weight is not a Parameter" in page
    assert page.count("class='changed'") == 1  # carol's only: no other score was changed
    assert "Your score was changed from 1 to 0\\.5 by ta, for this reason:" in \
        (out / "submissions" / "carol" / "feedback.md").read_text()  # Markdown, escaped


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_page_opens_in_chromium_with_no_request_and_no_error(out, tmp_path):
    from playwright.sync_api import sync_playwright

    root, out = out
    to = tmp_path / "handback"
    assert main(["--root", str(root), "feedback", str(out), "--to", str(to)]) == 0
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_page()
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto((to / "bjones" / f"{LAB}.html").as_uri())
        assert page.title() == f"Feedback on {LAB}: bob.ipynb"
        assert page.locator("h1").inner_text() == f"Feedback on {LAB}: bob.ipynb"
        assert page.locator("section.late strong").inner_text() == "2 days late: -20%"
        assert page.locator("table caption").inner_text() == "Your score per question"
        assert "expected [2, 4] <script>" in page.locator("pre").first.inner_text()  # shown as text, never run
        assert page.evaluate("document.querySelectorAll('script, img').length") == 0
        page.screenshot(path=str(tmp_path / "feedback.png"), full_page=True)
        browser.close()
    assert requests == [(to / "bjones" / f"{LAB}.html").as_uri()] and errors == []


AXE = axe_core()


@pytest.mark.skipif(CHROMIUM is None or not AXE, reason=NO_AXE)
def test_the_page_passes_axe_core(out, tmp_path):
    from playwright.sync_api import sync_playwright

    root, out = out
    to = tmp_path / "handback"
    assert main(["--root", str(root), "feedback", str(out), "--to", str(to)]) == 0
    with sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context(bypass_csp=True).new_page()  # the page's CSP forbids every script, axe's too
        for who in ("asmith", "bjones", "NOT-ON-ROSTER/carol"):
            page.goto((to / who / f"{LAB}.html").as_uri())
            page.evaluate(Path(AXE).read_text())
            violations = page.evaluate("axe.run().then(r => r.violations.map(v => v.id + ': ' + v.help))")
            assert violations == [], (who, violations)
        browser.close()
