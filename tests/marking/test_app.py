"""The marking application without a browser (Starlette's test client): the token, the CSRF field, the headers, the
sanitised answer, the marker's name, the 409 of a stale save. The same in Chromium: test_marking_browser.py."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402 - after the skip: the marking extra

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.audit import audit_log  # noqa: E402
from attnlab.marking.render import answer_html  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402

HOSTILE = "<img src=x onerror=alert(1)> ![tracker](http://evil.example/p.png) [click](javascript:alert(1)) **bold**"


@pytest.fixture
def client(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key, text in (("alice.ipynb", HOSTILE), ("bob.ipynb", "fine")):
            record_student(gb, "lab05", key, code={"causal_mask": (2.0, 2.0)}, written={"mirror": (text, 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.0", "Right", 2.0)])
        yield TestClient(create_app(gb, "secret-token", hosts=["testserver"]), follow_redirects=False)


def _answer_id(client, path: str) -> str:
    return re.search(r'name="answer" value="([0-9a-f]+)"', client.get(path).text).group(1)


def csrf_of(client, path: str = "/") -> str:
    """The CSRF value the server put in the page's forms (it lives in the server-side session, never in a cookie)."""
    return re.search(r'name="csrf" value="([^"]+)"', client.get(path).text).group(1)


def _signed_in(client, token="secret-token") -> str:
    signed_in = client.get(f"/?token={token}")
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"  # the token leaves the address bar
    return csrf_of(client)


def test_the_token_is_needed_once_then_the_session_cookie_carries_it(client):
    assert client.get("/").status_code == 403
    assert client.get("/?token=secret-tokeN").status_code == 403
    assert client.get("/audit.csv").status_code == 403
    page = client.get("/audit?token=secret-token&x=1")
    assert (page.status_code, page.headers["location"]) == (303, "/audit?x=1")
    (cookie,) = page.headers.get_list("set-cookie")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "secret-token" not in cookie
    assert client.get("/audit.csv").status_code == 200  # the cookie, no token in the URL
    assert "Marking as <strong>instructor</strong>" in client.get("/").text


def test_every_page_has_the_safety_headers(client):
    client.get("/?token=secret-token")
    headers = client.get("/").headers
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "img-src data:;" in csp and "script-src 'nonce-" in csp
    assert (headers["x-frame-options"], headers["referrer-policy"]) == ("DENY", "same-origin")


def test_a_form_without_its_csrf_field_is_refused_and_a_stale_save_is_shown(client):
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
    assert stale.status_code == 409 and "instructor saved a mark for this answer first" in stale.text
    assert "mine" in stale.text
    negative = client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "version": "-1", "answer": answer})
    assert negative.status_code == 400 and "version &#39;-1&#39; is not a whole number" in negative.text
    group = client.post("/l/lab05/q/mirror/groups", data={"csrf": csrf, "member": f"{answer}:\u00b2"})
    assert group.status_code == 400 and "member&#39;s version &#39;\u00b2&#39; is not a whole number" in group.text


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
    from attnlab.records.bundle_names import HIDDEN_TESTS, MANIFEST

    folder = tmp_path / "course" / "autograder" / "lab05"
    folder.mkdir(parents=True)
    (folder / MANIFEST).write_text('{"lab": "lab05"}')
    (folder / HIDDEN_TESTS).write_text("")
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
        client = TestClient(create_app(gb, "t", guides, hosts=["testserver"]))
        page = client.get("/l/lab05/q/mirror/1?token=t").text  # redirected to the page
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


def test_attnlab_mark_add_marker_prints_a_token_that_signs_in_as_that_marker(tmp_path, capsys):
    from attnlab.cli import main

    with open_gradebook(tmp_path / "gradebook.db") as gb:
        record_student(gb, "lab05", "alice.ipynb", code={}, written={"mirror": ("text", 2.0)})
    assert main(["mark", str(tmp_path), "--add-marker", "ann"]) == 0
    token = re.search(r"token \(shown once; give it to ann alone\): (\S+)", capsys.readouterr().out).group(1)
    assert main(["mark", str(tmp_path), "--add-marker", "instructor"]) == 2
    assert "the server's own token" in capsys.readouterr().err
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        client = TestClient(create_app(gb, "server-token", hosts=["testserver"]))
        assert "Marking as <strong>ann</strong>" in client.get(f"/?token={token}").text


def test_invisible_and_bidi_characters_in_an_answer_and_a_name_show_visibly(tmp_path):
    html = str(answer_html("the score is \u202e01 / 1\u202c and alice\u200b"))
    assert "\u202e" not in html and "&lt;U+202E&gt;01 / 1&lt;U+202C&gt;" in html and "alice&lt;U+200B&gt;" in html
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        record_student(gb, "lab05", "alice\u200b.ipynb", code={}, written={"mirror": ("x", 2.0)})
        client = TestClient(create_app(gb, "t", hosts=["testserver"]))
        csrf = re.search(r'name="csrf" value="([^"]+)"', client.get("/l/lab05/q/mirror/1?token=t").text).group(1)
        page = client.post("/names", data={"csrf": csrf, "back": "/l/lab05/q/mirror/1"}).text
        assert "alice&lt;U+200B&gt;.ipynb" in page and "alice\u200b" not in page


def test_the_graders_notes_on_an_answers_metadata_are_shown_to_the_marker(client):
    note = "2 Markdown cells are marked as the answer to mirror: all are shown, in the notebook's order"
    gb = client.app.app.state.marking.store.gradebook
    gb.transaction(lambda ex: ex("UPDATE questions SET messages = ? WHERE question = 'mirror'", (f'["{note}"]',)),
                   write=True)
    _signed_in(client)
    page = client.get("/l/lab05/q/mirror/1").text
    assert "The grader's notes on this answer" in page and note.replace("'", "&#39;") in page


def test_an_answers_maths_keeps_its_backslashes_and_a_table_is_a_table():
    html = str(answer_html("Var is $a \\, b$ and $$\\frac{q \\cdot k}{\\sqrt{d}}$$ then <b>$x<y$</b>\n\n"
                           "| d | var |\n|---|---|\n| 64 | 63.2 |"))
    assert '<span class="math inline"><math' in html and "<mfrac>" in html
    assert '<div class="math inline"><math xmlns="http://www.w3.org/1998/Math/MathML" display="block"' in html
    assert 'application/x-tex">a \\, b</annotation>' in html and "\\frac{q \\cdot k}{\\sqrt{d}}</annotation>" in html
    assert 'application/x-tex">x&lt;y</annotation>' in html and "<b>" not in html
    assert "<table>" in html and "<td>63.2</td>" in html


def test_the_audit_page_reads_as_criteria_and_points_and_filters_by_marker(client):
    csrf = _signed_in(client)
    answer = _answer_id(client, "/l/lab05/q/mirror/1")
    client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "item": "mirror.0", "adjustment": "-0.5", "version": "0",
                                             "comment": "close", "answer": answer})
    client.post("/l/lab05/q/mirror/rubric", data={"csrf": csrf, "item": "mirror.0", "points": "1.5", "back": "1"})
    page = client.get("/audit").text
    assert "items: Right, adjustment -0.5, comment \u201cclose\u201d" in page and "Right: +1.5 points" in page
    assert '"items"' not in page and "mirror.0" not in page.split('id="audit"')[1]
    assert "items: Right" not in client.get("/audit?who=nobody").text
    assert "items: Right" in client.get("/audit?who=instructor&lab=lab05").text


def test_a_rubric_items_points_edit_is_undone_unless_changed_since(client):
    csrf = _signed_in(client)
    store = client.app.app.state.marking.store
    page = client.post("/l/lab05/q/mirror/rubric", data={"csrf": csrf, "item": "mirror.0", "points": "0.5",
                                                         "back": "1"}, follow_redirects=True).text
    assert "Undo the points of mirror.0" in page and store.rubric("lab05", "mirror")[0].points == 0.5
    undone = client.post("/undo", data={"csrf": csrf, "back": "/l/lab05/q/mirror/1"}, follow_redirects=True)
    assert "Undone: 1 changes put back." in undone.text and store.rubric("lab05", "mirror")[0].points == 2.0
    client.post("/l/lab05/q/mirror/rubric", data={"csrf": csrf, "item": "mirror.0", "points": "1", "back": "1"})
    store.set_item_points("lab05", "mirror", "mirror.0", 1.5, marker="bob")  # bob, since
    kept = client.post("/undo", data={"csrf": csrf, "back": "/l/lab05/q/mirror/1"}, follow_redirects=True)
    assert "1 left as another marker changed them since" in kept.text and store.rubric("lab05", "mirror")[0].points \
        == 1.5


def test_adding_a_rubric_item_is_undone_unless_a_mark_applies_it_since(client):
    csrf = _signed_in(client)
    store = client.app.app.state.marking.store
    page = client.post("/l/lab05/q/mirror/rubric", data={"csrf": csrf, "criterion": "Quotes the table", "points": "1",
                                                         "back": "1"}, follow_redirects=True).text
    assert "Undo adding mirror.1" in page and [i.id for i in store.rubric("lab05", "mirror")] == ["mirror.0", "mirror.1"]
    undone = client.post("/undo", data={"csrf": csrf, "back": "/l/lab05/q/mirror/1"}, follow_redirects=True)
    assert "Undone: 1 changes put back." in undone.text and [i.id for i in store.rubric("lab05", "mirror")] == \
        ["mirror.0"]
    assert "rubric item removed" in {r["action"] for r in audit_log(store.gradebook)}
    client.post("/l/lab05/q/mirror/rubric", data={"csrf": csrf, "criterion": "Quotes", "points": "1", "back": "1"})
    store.save_mark("lab05", "bob.ipynb", "mirror", items=["mirror.1"], marker="bea", version=0)  # bea uses it
    kept = client.post("/undo", data={"csrf": csrf, "back": "/l/lab05/q/mirror/1"}, follow_redirects=True)
    assert "1 left as another marker changed them since" in kept.text and len(store.rubric("lab05", "mirror")) == 2
