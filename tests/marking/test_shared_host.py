"""`attnlab mark` on a host shared with other users' servers, attacked for real: the marking application and a
neighbour's server on two loopback ports (uvicorn, in threads), the neighbour's page submitting a form and a fetch to
the marking server in headless Chromium (Debian's, through Playwright), a second marking server in the same browser;
and the same attack from a plain HTTP client."""

from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager

import pytest

pytest.importorskip("starlette")
import httpx  # noqa: E402 - after the skip: the marking extra
import uvicorn  # noqa: E402
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.responses import HTMLResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.audit import audit_log  # noqa: E402
from attnlab.marking.serve import free_port, hosts  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402

TOKEN = "the-instructors-token"


@contextmanager
def serving(make_app):
    """``make_app(port)`` served on a free 127.0.0.1 port in a thread: yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(port), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _neighbour(target: str, csrf: str):
    """A neighbour's page that posts a rubric edit to ``target`` at once, with the victim's right CSRF value (as if
    it had leaked: only the origin check is left to refuse it), after planting cookies for 127.0.0.1."""
    page = f"""<!doctype html><title>neighbour</title>
<form id="f" method="post" action="{target}/l/lab05/q/mirror/rubric">
<input name="csrf" value="{csrf}"><input name="item" value="mirror.1"><input name="points" value="0">
<input name="back" value="1"></form>
<script>
document.cookie = "attnlab_mark_csrf={csrf}; path=/";
fetch("{target}/l/lab05/q/mirror/rubric", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "application/x-www-form-urlencoded"}},
  body: "csrf={csrf}&item=mirror.1&points=0.5&back=1"}}).finally(() => document.getElementById("f").submit());
</script>"""
    return lambda port: Starlette(routes=[Route("/", lambda request: HTMLResponse(page))])


@pytest.fixture
def book(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key in ("alice.ipynb", "bob.ipynb"):
            record_student(gb, "lab05", key, code={}, written={"mirror": ("text", 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.1", "Right", 2.0)])
        yield gb


def _marking(book):
    return lambda port: create_app(book, TOKEN, hosts=hosts("127.0.0.1", port))


def _points(book) -> float:
    return MarkStore(book).rubric("lab05", "mirror")[0].points


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_a_neighbours_page_on_another_port_cannot_change_marks_in_chromium(book):
    sync_api = pytest.importorskip("playwright.sync_api")
    with serving(_marking(book)) as victim, serving(_marking(book)) as other, sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context().new_page()
        page.goto(f"{victim}/?token={TOKEN}")
        assert page.url == f"{victim}/" and TOKEN not in page.url  # the token left the address bar at once
        csrf = page.locator("input[name=csrf]").first.input_value()
        page.goto(f"{other}/?token={TOKEN}")  # a second marking server in the same browser
        with serving(_neighbour(victim, csrf)) as neighbour:
            with page.expect_navigation(url=re.compile(r"/rubric$")) as posted:
                page.goto(neighbour)
            assert posted.value.status == 403
            assert "another site or port" in page.inner_text("body")
        assert _points(book) == 2.0 and audit_log(book) == []  # neither the form nor the fetch wrote anything
        for base in (victim, other):  # neither server logged the other out
            assert page.goto(f"{base}/l/lab05/q/mirror/1").status == 200
        page.locator("#rubric input[name=points]").fill("1.5")
        page.locator("#rubric button").click()  # the page's own form: same origin, accepted
        page.wait_for_selector("text=Saved.")
        assert _points(book) == 1.5
        browser.close()


def test_a_neighbour_with_a_plain_http_client_is_refused_too(book):
    with serving(_marking(book)) as victim:
        port = victim.rsplit(":", 1)[1]
        with httpx.Client(base_url=victim, follow_redirects=False) as client:
            signed_in = client.get(f"/?token={TOKEN}")
            assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"
            csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/").text).group(1)
            form = {"csrf": csrf, "item": "mirror.1", "points": "0", "back": "1"}
            for headers in ({"Origin": "http://127.0.0.1:1"}, {"Sec-Fetch-Site": "same-site"},
                            {"Host": f"rebound.example:{port}"}):
                assert client.post("/l/lab05/q/mirror/rubric", data=form, headers=headers).status_code in (403, 421)
            assert _points(book) == 2.0
            assert client.post("/l/lab05/q/mirror/rubric", data=form,
                               headers={"Origin": f"http://127.0.0.1:{port}"}).status_code == 303
            assert _points(book) == 0.0


def test_a_slow_groups_page_never_holds_up_another_markers_request(book, monkeypatch):
    from attnlab.marking import group_pages

    def slow_groups(answers, *args):  # the grouping of a large class, made slow on purpose
        time.sleep(6)
        return []
    monkeypatch.setattr(group_pages, "answer_groups", slow_groups)
    with serving(_marking(book)) as victim, httpx.Client(base_url=victim, timeout=30) as first, \
            httpx.Client(base_url=victim, timeout=30) as second:
        for client in (first, second):
            client.get(f"/?token={TOKEN}")
        slow = threading.Thread(target=lambda: first.get("/l/lab05/q/mirror/groups"))
        slow.start()
        time.sleep(0.5)
        start = time.monotonic()
        assert second.get("/").status_code == 200 and slow.is_alive()
        assert time.monotonic() - start < 4  # answered while the groups page is still being made (blocked: 5.5 s)
        slow.join()
