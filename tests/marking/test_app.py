"""The marking application without a browser (Starlette's test client): the token, the CSRF field, the headers, the
sanitised answer, the marker's name, the 409 of a stale save. The same in Chromium: test_marking_browser.py."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402 - after the skip: the marking extra

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.render import answer_html  # noqa: E402
from attnlab.marking.security import CSRF_COOKIE  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402

HOSTILE = "<img src=x onerror=alert(1)> ![tracker](http://evil.example/p.png) [click](javascript:alert(1)) **bold**"


@pytest.fixture
def client(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key, text in (("alice.ipynb", HOSTILE), ("bob.ipynb", "fine")):
            record_student(gb, "lab05", key, code={"causal_mask": (2.0, 2.0)}, written={"mirror": (text, 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.0", "Right", 2.0)])
        yield TestClient(create_app(gb, "secret-token"), follow_redirects=False)


def _answer_id(client, path: str) -> str:
    return re.search(r'name="answer" value="([0-9a-f]+)"', client.get(path).text).group(1)


def _signed_in(client, name="ann") -> str:
    assert client.get("/?token=secret-token").status_code == 200
    csrf = client.cookies.get(CSRF_COOKIE)
    assert client.post("/name", data={"csrf": csrf, "name": name}).status_code == 303
    return csrf


def test_the_token_is_needed_once_then_the_session_cookie_carries_it(client):
    assert client.get("/").status_code == 403
    assert client.get("/?token=secret-tokeN").status_code == 403
    assert client.get("/audit.csv").status_code == 403
    page = client.get("/?token=secret-token")
    assert page.status_code == 200
    for cookie in page.headers.get_list("set-cookie"):
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/audit.csv").status_code == 200  # the cookie, no token in the URL


def test_every_page_has_the_safety_headers(client):
    headers = client.get("/?token=secret-token").headers
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "img-src 'none'" in csp and "script-src 'nonce-" in csp
    assert (headers["x-frame-options"], headers["referrer-policy"]) == ("DENY", "no-referrer")


def test_a_form_without_its_csrf_field_or_marker_is_refused(client):
    csrf = client.get("/?token=secret-token") and client.cookies.get(CSRF_COOKIE)
    assert client.post("/name", data={"name": "ann"}).status_code == 403
    no_name = client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "item": "mirror.0", "version": "0",
                                                       "answer": _answer_id(client, "/l/lab05/q/mirror/1")})
    assert no_name.status_code == 400 and "say who you are first" in no_name.text
    csrf = _signed_in(client)
    answer = _answer_id(client, "/l/lab05/q/mirror/1")
    assert client.post("/l/lab05/q/mirror/1", data={"item": "mirror.0", "version": "0", "answer": answer}).status_code \
        == 403
    other = client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "item": "mirror.0", "version": "0",
                                                     "answer": _answer_id(client, "/l/lab05/q/mirror/2")})
    assert other.status_code == 400 and "the list of answers changed" in other.text  # never the wrong student
    assert client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "item": "mirror.0", "version": "0",
                                                    "answer": answer}).status_code == 303
    stale = client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "version": "0", "comment": "mine", "answer": answer})
    assert stale.status_code == 409 and "ann saved a mark for this answer first" in stale.text and "mine" in stale.text


def test_an_answer_is_markdown_with_no_html_no_image_no_link():
    html = str(answer_html(HOSTILE))
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<a " not in html and "http://evil.example/p.png" in html  # shown as text, never fetched
    assert "<strong>bold</strong>" in html


def test_names_are_aliases_until_asked_for(client):
    csrf = _signed_in(client)
    pages = [client.get(f"/l/lab05/q/mirror/{n}").text for n in (1, 2)]
    assert all("student-" in p and "alice" not in p and "bob.ipynb" not in p for p in pages)
    assert client.post("/names", data={"csrf": csrf, "back": "/l/lab05/q/mirror/1"}).headers["location"] == \
        "/l/lab05/q/mirror/1"
    assert any("alice.ipynb" in client.get(f"/l/lab05/q/mirror/{n}").text for n in (1, 2))
    assert client.post("/names", data={"csrf": csrf, "back": "//evil.example/"}).headers["location"] == "/"
    assert not any("alice.ipynb" in client.get(f"/l/lab05/q/mirror/{n}").text for n in (1, 2))  # hidden again


def test_rubrics_and_guides_come_from_the_labs_bundle_and_edited_points_stay(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from attnlab.grading.core import bundle as bundles
    from attnlab.marking.serve import seed_rubrics

    folder = tmp_path / "course" / "autograder" / "lab05"
    folder.mkdir(parents=True)
    (folder / bundles.MANIFEST).write_text('{"lab": "lab05"}')
    (folder / bundles.HIDDEN_TESTS).write_text("")
    item = SimpleNamespace(id="mirror.1", criterion="Says why both orders look alike", points=2.0)
    monkeypatch.setattr(bundles, "written_questions", lambda where: [SimpleNamespace(
        name="mirror", prompt="Why **0.5**?", reference="Same bag of words.", rubric=(item,))] if where == folder
        else pytest.fail(f"read {where}"), raising=False)
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        record_student(gb, "lab05", "alice.ipynb", code={}, written={"mirror": ("because", 2.0)})
        store = MarkStore(gb)
        guides = seed_rubrics(store, tmp_path / "course")
        assert guides == {("lab05", "mirror"): ("Why **0.5**?", "Same bag of words.")}
        store.set_item_points("lab05", "mirror", "mirror.1", 1.5, marker="ann")
        seed_rubrics(store, tmp_path / "course")
        assert [(i.id, i.points) for i in store.rubric("lab05", "mirror")] == [("mirror.1", 1.5)]
        client = TestClient(create_app(gb, "t", guides))
        page = client.get("/l/lab05/q/mirror/1?token=t").text
        assert "<strong>0.5</strong>" in page and "Same bag of words." in page


def test_attnlab_mark_usage_errors_are_one_line_exit_2(tmp_path, capsys):
    from attnlab.cli import main

    assert main(["mark", str(tmp_path / "nothing-here")]) == 2
    assert "no gradebook at" in capsys.readouterr().err
    open_gradebook(tmp_path / "gradebook.db").close()
    assert main(["mark", str(tmp_path), "--port", "70000"]) == 2
    assert "--port 70000 is not a port" in capsys.readouterr().err
    assert main(["mark", "mysql://db/course"]) == 2
    assert "unsupported gradebook URL" in capsys.readouterr().err
