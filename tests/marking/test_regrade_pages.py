"""The "Regrade requests" page of `attnlab mark` (Starlette's test client): the app's protections on its forms (the
session, the CSRF field, a neighbour's origin, an unknown lab or request refused before anything is stored), a
request added, a CSV pasted (all rows or none), a decision; and end to end, a request resolved in the app is in the
audit log (the chain still holds) and in the student's feedback, Markdown and HTML, as `attnlab report` and
`attnlab feedback` write them; `attnlab mark OUT --import-requests FILE` imports a CSV."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402 - after the skip: the marking extra

from attnlab.cli import main  # noqa: E402
from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.audit import audit_log, check_chain  # noqa: E402
from attnlab.marking.regrades import OPEN, RESOLVED, requests_of  # noqa: E402
from attnlab.marking.store import MarkStore, effective_scores  # noqa: E402
from attnlab.report.handback import hand_back  # noqa: E402
from attnlab.report.load import load_submissions  # noqa: E402
from attnlab.report.students import refresh_feedback  # noqa: E402
from attnlab.roster import Roster, Student  # noqa: E402

from .classroom import record_student  # noqa: E402
from .test_app import csrf_of  # noqa: E402

HOST = "127.0.0.1:8123"
PAGE = "/l/lab05/requests"
HOSTILE = "<img src=x onerror=alert(1)> look again\u202e"


@pytest.fixture
def out(tmp_path):
    """A grading output folder: its gradebook and each student's feedback.md where `attnlab grade` writes it."""
    folder = tmp_path / "out"
    folder.mkdir()
    with open_gradebook(folder) as gb:
        for key in ("alice.ipynb", "bob.ipynb"):
            record_student(gb, "lab05", key, code={"causal_mask": (1.0, 2.0)}, written={"mirror": ("text", 2.0)})
            (folder / key.removesuffix(".ipynb")).mkdir()
            (folder / key.removesuffix(".ipynb") / "feedback.md").write_text("# Feedback as graded\n")
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.1", "Right", 2.0)])
    return folder


@pytest.fixture
def book(out):
    with open_gradebook(out) as gb:
        yield gb


def _client(book):
    roster = Roster([Student("bob", login="bjones")])
    client = TestClient(create_app(book, "secret-token", hosts=[HOST], roster=roster), base_url=f"http://{HOST}",
                        follow_redirects=False)
    assert client.get("/?token=secret-token").status_code == 303
    return client


def _add(client, csrf, **fields):
    data = {"csrf": csrf, "student": "bjones", "question": "causal_mask", "text": HOSTILE} | fields
    return client.post(PAGE, data=data)


def test_the_forms_are_refused_without_the_session_csrf_or_origin_and_for_unknown_ids(book):
    client = _client(book)
    csrf = csrf_of(client, PAGE)
    assert _add(client, "wrong").status_code == 403
    neighbour = client.post(PAGE, data={"csrf": csrf, "student": "bob", "question": "mirror", "text": "x"},
                            headers={"Origin": "http://127.0.0.1:9999"})
    assert neighbour.status_code == 403
    assert client.post("/l/lab99/requests", data={"csrf": csrf}).status_code == 404
    assert client.post(f"{PAGE}/7", data={"csrf": csrf, "decision": "no change", "reason": "x"}).status_code == 404
    assert client.post(f"{PAGE}/import", data={"csrf": "wrong", "csv": "x"}).status_code == 403
    unknown = _add(client, csrf, question="nope")
    assert unknown.status_code == 400 and "bob.ipynb has no question &#39;nope&#39;" in unknown.text
    stranger = TestClient(create_app(book, "secret-token", hosts=[HOST]), base_url=f"http://{HOST}")
    assert stranger.get(PAGE).status_code == 403  # no session: no queue either
    assert requests_of(MarkStore(book), "lab05") == [] and audit_log(book) == []


def test_a_request_added_on_the_page_is_listed_escaped_and_decided(book):
    client = _client(book)
    csrf = csrf_of(client, PAGE)
    added = _add(client, csrf, asked_at="2027-02-15T10:00+01:00")
    assert (added.status_code, added.headers["location"]) == (303, f"{PAGE}?saved=added")
    page = client.get(f"{PAGE}?saved=added").text
    assert "Request added." in page and "1 open</span> of 1" in page
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt; look again&lt;U+202E&gt;" in page
    assert "2027-02-15T09:00:00+00:00" in page and "entered by instructor" in page
    (r,) = requests_of(MarkStore(book), "lab05")
    assert (r.key, r.question, r.status) == ("bob.ipynb", "causal_mask", OPEN)
    assert f'action="{PAGE}/{r.id}"' in page and "1 / 2 (graded)" in page
    bad = client.post(f"{PAGE}/{r.id}", data={"csrf": csrf, "decision": "score change", "score": "9",
                                              "reason": "flaky", "version": "0"})
    assert bad.status_code == 400 and "outside 0 to 2" in bad.text
    for version in ("\u00b2", "-1", " 0"):  # parsed as every form's version is (one way): refused, not a server error
        odd = client.post(f"{PAGE}/{r.id}", data={"csrf": csrf, "decision": "score change", "score": "2",
                                                  "reason": "flaky", "version": version})
        assert odd.status_code == 400 and f"the form&#39;s version &#39;{version}&#39; is not a whole number" in odd.text
    done = client.post(f"{PAGE}/{r.id}", data={"csrf": csrf, "decision": "score change", "score": "2",
                                               "reason": "the mask test was flaky", "version": "0"})
    assert (done.status_code, done.headers["location"]) == (303, f"{PAGE}?saved=resolved")
    again = client.post(f"{PAGE}/{r.id}", data={"csrf": csrf, "decision": "no change", "reason": "no"})
    assert again.status_code == 409 and "instructor decided request" in again.text
    shown = client.get(f"{PAGE}?status=resolved").text
    assert "score changed to 2</strong>: the mask test was flaky" in shown and "score change version 1" in shown
    assert 'id="none"' in client.get(f"{PAGE}?status=open").text
    assert effective_scores(book, "lab05")["bob.ipynb"]["causal_mask"].score == 2.0


def test_a_pasted_csv_imports_all_rows_or_none(book):
    client = _client(book)
    csrf = csrf_of(client, PAGE)
    bad = client.post(f"{PAGE}/import", data={"csrf": csrf, "csv": "student,question,text,time\n"
                                              "alice,mirror,ok,2027-02-15T10:00Z\nzed,mirror,who,2027-02-15T10:00Z\n"})
    assert bad.status_code == 400 and "nothing was imported: row 3: no submission is &#39;zed&#39;" in bad.text
    assert requests_of(MarkStore(book), "lab05") == []
    good = client.post(f"{PAGE}/import", data={"csrf": csrf, "csv": "student,question,text,time\n"
                                               "alice,mirror,ok,2027-02-15T10:00Z\nbjones,mirror,hi,2027-02-15T11:00Z\n"})
    assert (good.status_code, good.headers["location"]) == (303, f"{PAGE}?saved=2")
    assert [r.key for r in requests_of(MarkStore(book), "lab05")] == ["alice.ipynb", "bob.ipynb"]
    assert "Imported 2 request(s)." in client.get(f"{PAGE}?saved=2").text


def test_a_request_resolved_in_the_app_reaches_the_audit_log_and_the_feedback(out, book, tmp_path):
    client = _client(book)
    csrf = csrf_of(client, PAGE)
    assert _add(client, csrf, student="alice", question="mirror", asked_at="2027-02-15T10:00Z").status_code == 303
    (r,) = requests_of(MarkStore(book), "lab05")
    done = client.post(f"{PAGE}/{r.id}", data={"csrf": csrf, "decision": "no change",
                                               "reason": "the <b>rubric</b> asks for a measured number"})
    assert done.status_code == 303 and requests_of(MarkStore(book), "lab05")[0].status == RESOLVED
    last = audit_log(book)[-1]
    assert (last["who"], last["action"], last["key"], last["reason"]) == (
        "instructor", "regrade request resolved", "alice.ipynb", "the <b>rubric</b> asks for a measured number")
    assert check_chain(book).holds
    audit = client.get("/audit").text
    assert f"request {r.id}: no change" in audit and "regrade request resolved" in audit
    lab, subs = load_submissions(out)
    assert refresh_feedback(out, subs) == 2  # the written question: both files are written again
    md = (out / "alice" / "feedback.md").read_text()
    assert "## Your regrade requests" in md and "asked 2027-02-15 10:00 UTC: no change (decided" in md
    assert "the <b>rubric</b> asks for a measured number" in md.split("The reason:")[1]
    assert "&lt;img" not in md and "<img src=x onerror=alert(1)>" in md.split("```text")[1]
    assert "regrade" not in (out / "bob" / "feedback.md").read_text()
    hand_back(out, tmp_path / "handback", lab=lab)
    page = (tmp_path / "handback" / "alice" / "lab05.html").read_text()
    assert "Your regrade requests" in page and "the &lt;b&gt;rubric&lt;/b&gt; asks for a measured number" in page
    assert "<img" not in page and re.search(r"no change \(decided \d{4}-\d\d-\d\d \d\d:\d\d UTC\)", page)


def test_attnlab_mark_imports_a_csv_and_names_a_bad_row(out, tmp_path, capsys):
    good = tmp_path / "form.csv"
    good.write_text("Email,Student,Question,Text,Time\nx,alice,mirror,\"see, again\",2027-02-15T10:00Z\n",
                    encoding="utf-8-sig")
    assert main(["mark", str(out), "--import-requests", str(good)]) == 0
    assert "1 regrade request(s) imported from form.csv" in capsys.readouterr().out
    assert main(["mark", str(out), "--import-requests", str(good)]) == 0
    assert "0 regrade request(s) imported from form.csv (1 already there" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    bad.write_text("student,question,text,time\nalice,mirror,x,yesterday\n")
    assert main(["mark", str(out), "--import-requests", str(bad)]) != 0
    assert "row 2: time 'yesterday' is not an ISO time with its zone" in capsys.readouterr().err
    with open_gradebook(out) as gb:
        (r,) = requests_of(MarkStore(gb), "lab05")
        assert (r.text, r.source, r.entered_by) == ("see, again", "imported from form.csv", "instructor")
