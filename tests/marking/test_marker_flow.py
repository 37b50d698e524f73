"""The marker's flow in headless Chromium, by keyboard: the answer and the rubric side by side, the reference answer
open beside them, an item toggled with 1-9 and saved with s, the next unmarked answer with u, only the unmarked
answers when asked, and the last mark undone."""

from __future__ import annotations

import re
import time

import pytest
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.app import create_app
from attnlab.marking.serve import hosts
from attnlab.marking.store import MarkStore, effective_scores

from .classroom import record_student
from .test_shared_host import TOKEN, serving

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
LONG = "A long answer. " * 400  # 6,000 characters: the rubric must stay in view beside it


@pytest.fixture
def book(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key, text in (("a.ipynb", LONG), ("b.ipynb", "second"), ("c.ipynb", "third"), ("d.ipynb", "fourth")):
            record_student(gb, "lab05", key, code={}, written={"mirror": (text, 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.1", "Right", 1.5), ("mirror.2", "Quotes", 0.5)])
        yield gb


def test_a_marker_marks_the_unmarked_answers_by_keyboard_with_the_rubric_beside_the_answer(book):
    sync_api = pytest.importorskip("playwright.sync_api")
    guides = {("lab05", "mirror"): ("Why **0.5**?", "Both orders give the same bag of words.")}
    store = MarkStore(book)
    names = create_app(book, TOKEN, hosts=["x"]).app.state.marking.keys("lab05")  # the markers' order
    store.save_mark("lab05", names[1], "mirror", items=[], marker="ann", version=0)  # answer 2 marked already
    with serving(lambda port: create_app(book, TOKEN, guides, hosts=hosts("127.0.0.1", port))) as base, \
            sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        page.goto(f"{base}/?token={TOKEN}")
        page.goto(f"{base}/l/lab05/q/mirror/1?unmarked=1")
        assert page.is_visible("text=Both orders give the same bag of words.")  # the reference answer, open
        answer, rubric = page.locator(".answer-side").bounding_box(), page.locator("#mark-form").bounding_box()
        assert rubric["x"] > answer["x"] + answer["width"] - 1 and rubric["y"] < 800  # beside it, in view
        start = time.monotonic()
        page.keyboard.press("1")
        page.keyboard.press("s")
        page.wait_for_url(re.compile(r"/mirror/3\?saved=1&unmarked=1$"))  # answer 2 was marked: skipped
        page.keyboard.press("2")
        page.keyboard.press("s")
        page.wait_for_url(re.compile(r"/mirror/4\?saved=1&unmarked=1$"))
        page.keyboard.press("u")  # the next unmarked: none after 4 but none before either, so it stays
        assert page.locator("#next-unmarked").count() == 0 and page.locator("#next").count() == 0
        page.keyboard.press("1")
        page.focus("#comment")
        page.keyboard.type("fine")
        # saves from the comment box; the page reloads at the same address, so wait for that navigation itself
        with page.expect_navigation(url=re.compile(r"/mirror/4\?saved=1&unmarked=1$")):
            page.keyboard.press("Control+Enter")
        per_answer = (time.monotonic() - start) / 3
        assert store.marks("lab05")[(names[3], "mirror")].comment == "fine"
        page.click("#undo")  # the last mark: undone, answer 4 awaits marking again
        page.wait_for_selector("text=Undone: 1 changes put back.")
        browser.close()
    scores = effective_scores(book, "lab05")
    assert [scores[k]["mirror"].score for k in names] == [1.5, 0.0, 0.5, None]
    print(f"time per answer by keyboard (the browser's own, loaded): {per_answer:.2f} s")


def test_a_toggle_is_saved_not_lost_when_the_marker_moves_on(book):
    sync_api = pytest.importorskip("playwright.sync_api")
    names = create_app(book, TOKEN, hosts=["x"]).app.state.marking.keys("lab05")
    with serving(lambda port: create_app(book, TOKEN, hosts=hosts("127.0.0.1", port))) as base, \
            sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context().new_page()
        page.goto(f"{base}/?token={TOKEN}")
        page.goto(f"{base}/l/lab05/q/mirror/2")
        page.keyboard.press("2")
        page.keyboard.press("ArrowLeft")  # moving on saves the toggle first
        page.wait_for_url(re.compile(r"/mirror/1\?saved=1$"))
        page.keyboard.press("ArrowRight")  # nothing changed here: no mark saved
        page.wait_for_url(re.compile(r"/mirror/2$"))
        assert page.is_checked("input[value='mirror.2']")
        browser.close()
    marks = MarkStore(book).marks("lab05")
    assert list(marks) == [(names[1], "mirror")] and marks[(names[1], "mirror")].items == ("mirror.2",)
