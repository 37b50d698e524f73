"""The whole marking flow in headless Chromium (issue 44's "done when"): two markers, each signed in with a token of
their own (``add_marker``, as the instructor makes them), mark one lab05 class: ann by groups (a group applied, undone,
applied again), bob one by one by keyboard with only the unmarked answers shown, where he sees typeset maths and the
student's own numbers beside the answer; every page either of them visits is checked with axe-core (no serious or
critical violation); the audit log names each marker for what they did, and its page fits 1,280 px."""

from __future__ import annotations

import re
import time

import pytest
from chromium_browser import CHROMIUM, NO_AXE, NO_CHROMIUM, launch

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.app import create_app
from attnlab.marking.audit import audit_log, check_chain
from attnlab.marking.markers import add_marker
from attnlab.marking.records import MARKED
from attnlab.marking.serve import hosts
from attnlab.marking.store import MarkStore, effective_scores

from .classroom import record_student
from .student_notebook import write_notebook
from .test_accessibility import AXE, RUN_AXE
from .test_maths import MATHS_ANSWER
from .test_shared_host import TOKEN, serving

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM), pytest.mark.skipif(AXE is None, reason=NO_AXE)]
RUBRIC = [("mirror.1", "Says the variance grows like d", 1.5), ("mirror.2", "Quotes the measured number", 0.5)]
PARAPHRASES = ("alice.ipynb", "bob.ipynb", "carol.ipynb")
ANSWERS = {  # three near-paraphrases (one group), one in maths, one that quotes the student's own table
    "alice.ipynb": "The variance of q.k grew like d: I measured 63.2 for d = 64, because each term has variance 1.",
    "bob.ipynb": "I measured the variance of q.k as 63.2 for d = 64: it grows like d because each term has variance 1.",
    "carol.ipynb": "Each term has variance 1 so the variance of q.k grows like d; measured 63.2 for d = 64.",
    "dan.ipynb": MATHS_ANSWER,
    "erin.ipynb": "It climbs to 0.953 for d = 1024, so softmax saturates.",
}


@pytest.fixture
def book(tmp_path):
    """The class, erin's graded notebook on disk (her own outputs: a table with 0.953), and the markers' tokens."""
    sha = write_notebook(tmp_path / "erin.ipynb")
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key, text in ANSWERS.items():
            record_student(gb, "lab05", key, code={}, written={"mirror": (text, 2.0)},
                           **({"path": str(tmp_path / key), "sha": sha} if key == "erin.ipynb" else {}))
        MarkStore(gb).ensure_rubric("lab05", "mirror", RUBRIC)
        yield gb


class Visits:
    """The pages a marker's browser showed, each checked with axe-core when it is shown (``check``)."""

    def __init__(self):
        self.found: list[tuple[str, str, list]] = []  # (what, address, serious or critical violations)

    def check(self, page, label: str) -> None:
        page.add_script_tag(path=str(AXE))
        self.found.append((label, page.url, page.evaluate(RUN_AXE)))


def _signed_in(browser, base: str, store: MarkStore, name: str, visits: Visits):
    token = add_marker(store, name)
    page = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 800}).new_page()  # axe injected
    page.goto(f"{base}/?token={token}")
    assert token not in page.url and page.is_visible(f"text=Marking as {name}")
    visits.check(page, f"{name}: labs")
    return page


def _apply_group_one(page, base: str, visits: Visits) -> str:
    page.goto(f"{base}/l/lab05/q/mirror/groups")
    visits.check(page, "ann: groups")
    group = page.locator("#group-1")
    assert group.locator("input[name=member]").count() == 3
    group.locator("input[value='mirror.1']").check()
    group.locator(".apply-group").click()
    page.wait_for_selector("#message")  # the groups page has no message until a POST's answer
    visits.check(page, "ann: applied")
    return page.inner_text("#message")


def _mark_unmarked_by_keyboard(page, visits: Visits, names: list[str]) -> tuple[dict, float]:
    """bob's turn: the unmarked answers only, each toggled with 2 and saved with s; what he saw on each."""
    page.click("text=Mark by question")
    page.click("#filter")  # only unmarked answers
    page.wait_for_url(re.compile(r"/mirror/1\?unmarked=1$"))
    visits.check(page, "bob: only unmarked")
    if names[0] in PARAPHRASES:  # answer 1 is marked (ann's group): on to the first unmarked
        with page.expect_navigation(url=re.compile(r"/mirror/\d\?unmarked=1$")):
            page.keyboard.press("u")
        visits.check(page, "bob: answer")
    seen, start = {}, time.monotonic()
    while True:
        n = int(re.search(r"/mirror/(\d)\?", page.url).group(1))
        seen[names[n - 1]] = {"maths": page.locator("#answer math mfrac").count(),
                              "outputs": page.inner_text("#outputs") if page.locator("#outputs").count() else ""}
        last = page.locator("#next-unmarked").count() == 0
        page.keyboard.press("2")
        with page.expect_navigation():  # the last one reloads at its own address: wait for the save's own answer
            page.keyboard.press("s")
        if last:
            break
        visits.check(page, "bob: answer")
    return seen, (time.monotonic() - start) / len(seen)


def test_two_markers_with_their_own_tokens_mark_a_class_by_groups_and_one_by_one(book):
    sync_api = pytest.importorskip("playwright.sync_api")
    store, visits = MarkStore(book), Visits()
    names = create_app(book, TOKEN, hosts=["x"]).app.state.marking.keys("lab05")  # the markers' order
    with serving(lambda port: create_app(book, TOKEN, hosts=hosts("127.0.0.1", port))) as base, \
            sync_api.sync_playwright() as pw:
        browser = launch(pw)
        ann = _signed_in(browser, base, store, "ann", visits)
        assert _apply_group_one(ann, base, visits) == "Applied to 3 answers."
        assert {k for (k, _), m in store.marks("lab05").items() if m.items} == set(PARAPHRASES)
        ann.click("#undo")  # the group apply, taken back at once
        ann.wait_for_selector("text=Undone: 3 changes put back.")
        visits.check(ann, "ann: undone")
        assert all(effective_scores(book, "lab05")[k]["mirror"].score is None for k in PARAPHRASES)
        assert _apply_group_one(ann, base, visits) == "Applied to 3 answers."  # all unmarked again: all ticked
        bob = _signed_in(browser, base, store, "bob", visits)
        seen, per_answer = _mark_unmarked_by_keyboard(bob, visits, names)
        bob.goto(f"{base}/l/lab05/q/mirror/search?unmarked=1")  # the unmarked answers left: none
        visits.check(bob, "bob: search unmarked")
        left = bob.inner_text("#found")
        bob.goto(f"{base}/audit")
        visits.check(bob, "bob: audit")
        wide = bob.evaluate("() => document.documentElement.scrollWidth")  # the audit page fits 1,280 px
        browser.close()
    assert [f for f in visits.found if f[2]] == []
    assert len(visits.found) == 12 and left == "0 of 5 answers match."
    assert sorted(seen) == ["dan.ipynb", "erin.ipynb"]  # only the unmarked ones, each once
    assert seen["dan.ipynb"]["maths"] == 2  # \frac and the \sum's fraction typeset as MathML
    assert "0.953" in seen["erin.ipynb"]["outputs"] and "NOT-THIS-SECTION" not in seen["erin.ipynb"]["outputs"]
    scores = effective_scores(book, "lab05")
    assert {k: (s["mirror"].score, s["mirror"].status) for k, s in scores.items()} == {
        **{k: (1.5, MARKED) for k in PARAPHRASES}, "dan.ipynb": (0.5, MARKED), "erin.ipynb": (0.5, MARKED)}
    marks = {(r["who"], r["key"]) for r in audit_log(book) if r["action"] == "mark"}
    assert marks == {("ann", k) for k in PARAPHRASES} | {("bob", "dan.ipynb"), ("bob", "erin.ipynb")}
    assert check_chain(book).holds and wide <= 1280
    print(f"time per answer by keyboard, bob's two answers with axe checks between (loaded): {per_answer:.2f} s")
