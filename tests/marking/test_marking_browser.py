"""Issue 29's "done when" for marking: `attnlab mark` (the real command, a subprocess) driven in headless Chromium by
Playwright (Debian's chromium through ``executable_path``; never a downloaded browser). Two markers in two browser
contexts mark the same lab05 class at once; a group is marked at once; a rubric item's points change and every
affected score follows; a code score is changed with a reason; the audit CSV shows it; a student's ``<script>``
answer shows as text; requests without the token or the CSRF field are refused. On SQLite and on PostgreSQL."""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch
from grading.test_postgres import fresh_database, pg_server  # noqa: F401 - pg_server: the module's server

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.markers import add_marker
from attnlab.marking.records import CHANGED, MARKED
from attnlab.marking.store import MarkStore, effective_scores
from attnlab.report import build_report
from attnlab.report.gradebook_csv import export_gradebook

from .classroom import record_student

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
sync_api = pytest.importorskip("playwright.sync_api")

LAB, Q = "lab05", "scaling_variance"  # lab05's written question (3 points); code: simple_self_attention (4)
RUBRIC = [("scaling_variance.0", "Quotes the measured variance of q.k (about d)", 1.0),
          ("scaling_variance.1", "Derives Var(q.k) = d from independent unit-variance entries", 1.0),
          ("scaling_variance.2", "Says why dividing by sqrt(d) keeps softmax out of saturation", 1.0),
          ("scaling_variance.3", "States the result without the measured number", -0.5)]
SCRIPT = "<script>document.title = 'pwned'; alert('pwned')</script> the variance is $d$"
ANSWERS = {  # three near-paraphrases, two of another argument, a hostile one, two empty
    "alice.ipynb": "The variance of q.k grew like d: I measured 63.2 for d = 64, because each term has variance 1.",
    "bob.ipynb": "I measured the variance of q.k as 63.2 for d = 64: it grows like d because each term has variance 1.",
    "carol.ipynb": "Each term has variance 1 so the variance of q.k grows like d; measured 63.2 for d = 64.",
    "dan.ipynb": "Softmax saturates without the scaling and the gradients vanish.",
    "erin.ipynb": "Without the scaling softmax saturates, so the gradients vanish.",
    "frank.ipynb": SCRIPT,
    "grace.ipynb": "",
    "heidi.ipynb": "_Type your answer here, replacing this text._",
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request, tmp_path_factory):
    """The class's gradebook: a grading output folder's SQLite file, or a database on a throwaway PostgreSQL server
    (skipped where none is installed)."""
    if request.param == "sqlite":
        yield tmp_path_factory.mktemp("grading") / "gradebook.db"
        return
    with fresh_database(request.getfixturevalue("pg_server")) as url:
        yield url


@pytest.fixture(scope="module")
def served(database, tmp_path_factory):
    """The class's gradebook and `attnlab mark` serving it: (gradebook, URL with the token, base URL)."""
    tmp, db = tmp_path_factory.mktemp("marking"), database
    with open_gradebook(db) as gb:
        for i, (key, text) in enumerate(ANSWERS.items()):
            record_student(gb, LAB, key, code={"simple_self_attention": (i % 5, 4.0)}, written={Q: (text, 3.0)})
        MarkStore(gb).ensure_rubric(LAB, Q, RUBRIC)
    target = str(db.parent) if isinstance(db, Path) else db  # a grading output folder, or the URL
    proc = subprocess.Popen([sys.executable, "-m", "attnlab.cli", "mark", target], cwd=tmp, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        url = _printed_url(proc)
        yield db, url, url.split("/?token=")[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _printed_url(proc) -> str:
    deadline, seen = time.monotonic() + 60, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        found = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
        if found:
            time.sleep(0.5)  # uvicorn binds just after the line
            return found.group(0)
        if not line and proc.poll() is not None:
            break
    pytest.fail(f"attnlab mark printed no URL: {''.join(seen)}")


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


def _marker(browser, url: str, name: str, db=None):
    """A browser context (its own cookies) signed in as ``name`` with a token of their own, made as the instructor
    makes it (``attnlab mark OUT --add-marker NAME``), in place of the printed URL's."""
    with open_gradebook(db, create=False) as gb:
        token = add_marker(MarkStore(gb), name)
    context = browser.new_context()
    page = context.new_page()
    page.goto(url.split("/?token=")[0] + f"/?token={token}")
    page.wait_for_selector(f"text=Marking as {name}")
    assert token not in page.url
    return context, page


def _scores(db) -> dict:
    with open_gradebook(db, create=False) as gb:
        return effective_scores(gb, LAB)


def test_requests_without_the_token_or_the_csrf_field_are_refused(served, browser):
    db, url, base = served
    stranger = browser.new_context()
    assert stranger.new_page().goto(base + "/").status == 403
    assert stranger.request.get(base + "/audit.csv").status == 403
    assert stranger.request.get(base + "/?token=wrong").status == 403
    stranger.close()
    context, page = _marker(browser, url, "ann", db)
    before = _scores(db)
    refused = page.request.post(f"{base}/l/{LAB}/q/{Q}/1", form={"item": RUBRIC[0][0], "version": "0"})
    assert refused.status == 403 and "CSRF" in refused.text()
    assert page.request.post(f"{base}/l/{LAB}/q/{Q}/1", form={"item": RUBRIC[0][0], "version": "0",
                                                               "csrf": "forged"}).status == 403
    assert _scores(db) == before  # nothing was written
    context.close()


def test_two_markers_at_once_a_conflicting_edit_is_shown_not_swallowed(served, browser):
    db, url, base = served
    (ann_ctx, ann), (bob_ctx, bob) = _marker(browser, url, "ann", db), _marker(browser, url, "bob", db)
    for page in (ann, bob):
        page.goto(f"{base}/l/{LAB}/q/{Q}/2")
    assert ann.inner_text("#student").startswith("student-")  # anonymous by default
    ann.check(f"input[value='{RUBRIC[0][0]}']")
    ann.click("#save")
    ann.wait_for_url(re.compile(r"/3\?saved=1$"))
    bob.check(f"input[value='{RUBRIC[1][0]}']")
    bob.fill("#comment", "bob's view")
    with bob.expect_response(re.compile(r"/2$")) as answered:
        bob.click("#save")
    assert answered.value.status == 409
    assert "ann saved a mark for this answer first" in bob.inner_text("#conflict")
    assert "bob's view" in bob.inner_text("#conflict")  # bob's own edit is shown, not lost
    assert bob.is_checked(f"input[value='{RUBRIC[0][0]}']")  # the form now holds ann's saved mark
    bob.check(f"input[value='{RUBRIC[1][0]}']")
    bob.click("#save")  # from ann's version: saved
    bob.wait_for_url(re.compile(r"/3\?saved=1$"))
    marked = [s[Q] for s in _scores(db).values() if s[Q].status == MARKED]
    assert [(e.score, [c for c, _ in e.rubric]) for e in marked] == [(2.0, [RUBRIC[0][1], RUBRIC[1][1]])]
    ann.keyboard.press("ArrowRight")  # next with the keyboard
    ann.wait_for_url(re.compile(rf"/l/{LAB}/q/{Q}/4$"))
    ann.keyboard.press("k")
    ann.wait_for_url(re.compile(rf"/l/{LAB}/q/{Q}/3$"))
    ann_ctx.close()
    bob_ctx.close()


def test_a_group_is_marked_at_once_and_empty_answers_zero_in_one_step(served, browser):
    db, url, base = served
    context, page = _marker(browser, url, "cat", db)
    page.goto(f"{base}/l/{LAB}/q/{Q}/groups")
    group = page.locator("#group-1")
    assert group.locator("li").count() == 3  # alice, bob and carol's paraphrases
    members = group.locator("input[name=member]")
    left_out = [i for i in range(3) if not members.nth(i).is_checked()]  # those marked before: left out unless ticked
    assert len(left_out) == group.locator("li", has_text="[marked").count()
    for i in left_out:
        members.nth(i).check()
    group.locator(f"input[value='{RUBRIC[2][0]}']").check()
    group.locator(".apply-group").click()
    page.wait_for_selector("#message")
    assert "Applied to 3 answers." in page.inner_text("#message")
    page.click("#mark-empty")
    page.wait_for_selector("text=Marked 2 empty answers 0.")
    scores = _scores(db)
    assert all(RUBRIC[2][1] in [c for c, _ in scores[k][Q].rubric] for k in ("alice.ipynb", "bob.ipynb",
                                                                            "carol.ipynb"))
    assert [(scores[k][Q].score, scores[k][Q].status) for k in ("grace.ipynb", "heidi.ipynb")] == [(0.0, MARKED)] * 2
    context.close()


def test_a_rubric_items_points_changed_once_every_affected_score_follows(served, browser):
    db, url, base = served
    context, page = _marker(browser, url, "dee", db)
    with open_gradebook(db, create=False) as gb:  # two answers with item 2 marked here, whatever ran before
        store = MarkStore(gb)
        for key in ("dan.ipynb", "erin.ipynb"):
            version = store.marks(LAB, Q).get((key, Q))
            store.save_mark(LAB, key, Q, items=[RUBRIC[2][0]], marker="dee", version=version.version if version else 0)
    before = _scores(db)
    having = [k for k, s in before.items() if RUBRIC[2][1] in [c for c, _ in s[Q].rubric]]
    assert len(having) >= 2
    page.goto(f"{base}/l/{LAB}/q/{Q}/1")
    row = page.locator("#rubric tr", has_text=RUBRIC[2][0])
    row.locator("input[name=points]").fill("0.5")
    row.locator("button").click()
    page.wait_for_selector("text=Saved.")
    after = _scores(db)
    for key, s in after.items():
        expected = before[key][Q].score - 0.5 if key in having else before[key][Q].score
        assert s[Q].score == (max(expected, 0.0) if expected is not None else None), key
    context.close()


def test_a_code_score_changed_with_a_reason_reaches_the_audit_csv(served, browser, tmp_path):
    db, url, base = served
    context, page = _marker(browser, url, "eve", db)
    page.goto(f"{base}/l/{LAB}/students")
    page.click("#students a >> nth=0")
    row = page.locator("tr#q-simple_self_attention")
    who = page.inner_text("#student")
    refused = page.request.post(page.url + "/change", form={"csrf": row.locator("input[name=csrf]").input_value(),
                                                            "question": "simple_self_attention", "score": "4",
                                                            "reason": " ", "version": "0",
                                                            "answer": row.locator("input[name=answer]").input_value()})
    assert refused.status == 400 and "a reason for the change is required" in refused.text()
    row.locator("input[name=score]").fill("4")
    row.locator("input[name=reason]").fill("appeal: the mask test was wrong")
    row.locator("button").click()
    page.wait_for_selector("text=Saved.")
    assert page.locator("tr#q-simple_self_attention .status").inner_text() == CHANGED
    changed = [k for k, s in _scores(db).items() if s["simple_self_attention"].status == CHANGED]
    assert len(changed) == 1 and _scores(db)[changed[0]]["simple_self_attention"].score == 4.0
    page.goto(base + "/audit")
    assert page.locator("#audit tr", has_text="appeal: the mask test was wrong").locator("td").nth(3).inner_text() == who
    with page.expect_download() as download:
        page.click("#export")
    rows = list(csv.DictReader(io.StringIO(Path(download.value.path()).read_text())))
    change = [r for r in rows if r["action"] == "score change"]
    assert [(r["who"], r["key"], r["question"], r["after"], r["reason"]) for r in change] == [
        ("eve", changed[0], "simple_self_attention", '{"score": 4.0}', "appeal: the mask test was wrong")]
    context.close()
    # what the marker did reaches the exports: `attnlab gradebook --csv` and the report's per-question scores
    tmp = tmp_path
    export_gradebook(db, tmp / "gradebook.csv", lab=LAB)
    book = {r["submission"]: r for r in csv.DictReader(io.StringIO((tmp / "gradebook.csv").read_text()))}
    assert book[changed[0]]["simple_self_attention"] == "4"
    assert book["grace.ipynb"][Q] == "0" and book["heidi.ipynb"][Q] == "0"  # the empty answers marked 0
    build_report(db, html=tmp / "report.html", lab=LAB)
    scores = list(csv.DictReader(io.StringIO((tmp / "report-scores.csv").read_text())))
    assert [r for r in scores if "4" in r.values()], "the changed score is in the report's scores CSV"


def test_a_script_answer_shows_as_text_and_names_only_on_request(served, browser):
    db, url, base = served
    context, page = _marker(browser, url, "fay", db)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for n in range(1, len(ANSWERS) + 1):
        page.goto(f"{base}/l/{LAB}/q/{Q}/{n}")
        if "<script>" in page.inner_text("#answer"):
            break
    else:
        pytest.fail("no page showed the <script> answer as text")
    assert page.locator("#answer script").count() == 0 and dialogs == [] and "pwned" not in page.title()
    assert "frank" not in page.content()
    page.click("#toggle-names")
    page.wait_for_selector("#student:has-text('frank.ipynb')")
    context.close()
