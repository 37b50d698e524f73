"""The marking application on a shared host, without a browser (Starlette's test client): a neighbour's origin or
port, a planted cookie, a rebound Host, an oversized form, a write for an unknown question, each refused before
anything is stored; one token per marker, named in the audit log. Real servers and Chromium: test_shared_host.py."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402 - after the skip: the marking extra

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.audit import audit_log  # noqa: E402
from attnlab.marking.markers import add_marker  # noqa: E402
from attnlab.marking.records import MarkingError  # noqa: E402
from attnlab.marking.security import MAX_BODY_BYTES, MAX_FIELDS  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402
from .test_app import csrf_of  # noqa: E402

HOST = "127.0.0.1:8123"


@pytest.fixture
def book(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key in ("alice.ipynb", "bob.ipynb"):
            record_student(gb, "lab05", key, code={"causal_mask": (2.0, 2.0)}, written={"mirror": ("text", 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.1", "Right", 2.0)])
        yield gb


def _client(book, token="secret-token"):
    client = TestClient(create_app(book, "secret-token", hosts=[HOST]), base_url=f"http://{HOST}",
                        follow_redirects=False)
    assert client.get(f"/?token={token}").status_code == 303
    return client


def _rubric_rows(book) -> list:
    return book.transaction(lambda ex: ex("SELECT lab, question, item, points FROM rubric_items ORDER BY item")
                            .fetchall())


def _set_points(client, csrf, **headers):
    return client.post("/l/lab05/q/mirror/rubric", data={"csrf": csrf, "item": "mirror.1", "points": "0",
                                                        "back": "1"}, headers=headers)


def test_a_post_from_another_port_or_site_is_refused_before_it_is_read(book):
    client = _client(book)
    csrf = csrf_of(client)
    for headers in ({"Origin": "http://127.0.0.1:9999"}, {"Origin": "https://127.0.0.1:8123"},
                    {"Origin": "http://localhost:8123"}, {"Origin": "null"}, {"Sec-Fetch-Site": "same-site"},
                    {"Sec-Fetch-Site": "cross-site"}, {"Origin": f"http://{HOST}", "Sec-Fetch-Site": "same-site"}):
        refused = _set_points(client, csrf, **headers)
        assert refused.status_code == 403 and "another site or port" in refused.text, headers
    assert _rubric_rows(book) == [("lab05", "mirror", "mirror.1", 2.0)] and audit_log(book) == []
    done = _set_points(client, csrf, Origin=f"http://{HOST}", **{"Sec-Fetch-Site": "same-origin"})
    assert done.status_code == 303 and _rubric_rows(book) == [("lab05", "mirror", "mirror.1", 0.0)]


def test_a_planted_cookie_is_never_adopted_and_the_csrf_value_is_the_sessions(book):
    client = _client(book)
    csrf = csrf_of(client)
    assert not any(csrf in c for c in client.cookies.values())  # the CSRF value is in no cookie
    client.cookies.set("attnlab_mark_csrf", "planted")  # what a neighbour on 127.0.0.1 can set
    assert _set_points(client, "planted").status_code == 403
    stranger = TestClient(create_app(book, "secret-token", hosts=[HOST]), base_url=f"http://{HOST}")
    stranger.cookies.set("attnlab_mark_session", "secret-token")  # the old session cookie held the token itself
    assert stranger.get("/").status_code == 403
    assert _rubric_rows(book)[0][3] == 2.0


def test_two_servers_on_one_host_keep_their_own_session(book):
    first, second = (create_app(book, "secret-token", hosts=[HOST]) for _ in range(2))
    assert first.cookie != second.cookie  # a cookie name per server: opening one never logs the other out
    clients = [TestClient(app, base_url=f"http://{HOST}", follow_redirects=False) for app in (first, second)]
    for client in clients:
        assert client.get("/?token=secret-token").status_code == 303
    jar = {**dict(clients[0].cookies), **dict(clients[1].cookies)}  # one browser: one jar for both ports
    assert len(jar) == 2
    for client in clients:
        client.cookies.clear()
        client.cookies.update(jar)
        assert client.get("/").status_code == 200


def test_signing_in_redirects_to_this_server_only(book):
    client = TestClient(create_app(book, "secret-token", hosts=[HOST]), base_url=f"http://{HOST}",
                        follow_redirects=False)
    for path in ("//evil.example/", "/\\evil.example/", "///evil.example/"):
        signed_in = client.get(f"http://{HOST}{path}?token=secret-token")
        location = signed_in.headers["location"]
        assert signed_in.status_code == 303 and location[0] == "/" and location[1] not in "/\\", path


def test_a_host_that_is_not_this_server_is_refused(book):
    client = _client(book)
    for host in ("evil.example:8123", "127.0.0.1:8124", "127.0.0.1"):
        refused = client.get("/", headers={"Host": host})
        assert refused.status_code == 421 and "answers only to the address" in refused.text
    assert client.get("/", headers={"Host": HOST}).status_code == 200


def test_a_form_too_large_or_with_too_many_fields_is_refused(book):
    client = _client(book)
    csrf = csrf_of(client)
    big = client.post("/l/lab05/q/mirror/rubric", content=b"csrf=" + b"x" * (MAX_BODY_BYTES + 1),
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert big.status_code == 413
    many = "&".join([f"csrf={csrf}", "item=mirror.1", "points=0"] + ["x=1"] * MAX_FIELDS)
    assert client.post("/l/lab05/q/mirror/rubric", content=many.encode(),
                       headers={"Content-Type": "application/x-www-form-urlencoded"}).status_code == 400
    assert _rubric_rows(book)[0][3] == 2.0


def test_a_write_for_an_unknown_lab_or_question_stores_nothing(book):
    client = _client(book)
    csrf = csrf_of(client)
    for path in ("/l/lab99/q/mirror/rubric", "/l/lab05/q/nothing/rubric", "/l/lab05/q/causal_mask/rubric"):
        assert client.post(path, data={"csrf": csrf, "criterion": "new", "points": "1"}).status_code == 404
    for path in ("/l/lab99/q/mirror/empty", "/l/lab05/q/nothing/groups"):
        assert client.post(path, data={"csrf": csrf}).status_code == 404
    assert _rubric_rows(book) == [("lab05", "mirror", "mirror.1", 2.0)] and audit_log(book) == []
    with pytest.raises(MarkingError, match="no written question 'causal_mask'"):
        MarkStore(book).add_rubric_item("lab05", "causal_mask", "x", 1, marker="ann")


def test_each_marker_has_a_token_of_their_own_and_the_audit_log_names_them_by_it(book):
    store = MarkStore(book)
    ann, bob = add_marker(store, "ann"), add_marker(store, "bob")
    with pytest.raises(MarkingError, match="server's own token"):
        add_marker(store, "Instructor")
    with pytest.raises(MarkingError, match="visible characters"):
        add_marker(store, "ann\u202e")
    client = _client(book, ann)
    assert "Marking as <strong>ann</strong>" in client.get("/").text
    assert _set_points(client, csrf_of(client)).status_code == 303
    assert _client(book, bob).get("/").status_code == 200
    again = add_marker(store, "ann")  # a lost token replaced: the old one no longer signs in
    assert TestClient(create_app(book, "secret-token", hosts=[HOST]), base_url=f"http://{HOST}",
                      follow_redirects=False).get(f"/?token={ann}").status_code == 403
    assert _client(book, again).get("/").status_code == 200
    assert [(r["who"], r["action"]) for r in audit_log(book)] == [
        ("instructor", "marker added"), ("instructor", "marker added"), ("ann", "rubric points"),
        ("instructor", "marker token replaced")]


def test_the_hosts_a_server_answers_to_are_its_own_address_and_port():
    from attnlab.marking.serve import hosts

    assert hosts("127.0.0.1", 8123) == ["127.0.0.1:8123", "localhost:8123"]
    assert hosts("10.1.2.3", 9) == ["10.1.2.3:9"]
    everywhere = hosts("0.0.0.0", 9)
    assert "127.0.0.1:9" in everywhere and all(h.endswith(":9") for h in everywhere)
