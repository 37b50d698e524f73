"""Search a written question's answers by words and by student, unmarked only on request (``search_pages``); the
answers' starts shown as inline Markdown, escaped (``render.snippet_html``, on the groups page)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402 - after the skip: the marking extra

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402

ANSWERS = {"alice.ipynb": "The variance grows as d, so the SOFTMAX saturates.",
           "bob.ipynb": "Scaling keeps the variance at 1 <script>alert(1)</script>",
           "carol.ipynb": "No idea\u202e.", "dan.ipynb": ""}


@pytest.fixture
def client(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key, text in ANSWERS.items():
            record_student(gb, "lab05", key, code={}, written={"mirror": (text, 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.0", "Right", 2.0)])
        client = TestClient(create_app(gb, "secret-token", hosts=["testserver"]), follow_redirects=False)
        client.get("/?token=secret-token")
        yield client


def _matches(page: str) -> list[str]:
    """The students listed in the results, in order."""
    table = page.split('id="matches"')[1].split("</table>")[0]
    return re.findall(r"<tr><td><a href=\"/l/lab05/q/mirror/\d+\">\d+</a></td><td>([^<]*)</td>", table)


def test_answers_are_found_by_their_words_whatever_the_case_and_spacing(client):
    page = client.get("/l/lab05/q/mirror/search", params={"q": "the   variance"}).text
    assert "2 of 4 answers match." in page and len(_matches(page)) == 2
    one = client.get("/l/lab05/q/mirror/search", params={"q": "softmax"}).text
    assert "1 of 4 answers match." in one and "saturates" in one
    none = client.get("/l/lab05/q/mirror/search", params={"q": "attention"}).text
    assert "0 of 4 answers match." in none and _matches(none) == []


def test_a_match_is_escaped_and_shows_invisible_characters(client):
    page = client.get("/l/lab05/q/mirror/search", params={"q": "variance at"}).text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    idea = client.get("/l/lab05/q/mirror/search", params={"q": "idea"}).text
    assert "&lt;U+202E&gt;" in idea and "\u202e" not in idea


def test_answers_are_found_by_student_and_unmarked_only_on_request(client):
    names = client.get("/l/lab05/q/mirror/search", params={"student": "student-"}).text
    assert len(_matches(names)) == 4 and "alice" not in names  # aliases while names are hidden
    alias = _matches(names)[0]
    assert _matches(client.get("/l/lab05/q/mirror/search", params={"student": alias}).text) == [alias]
    store = client.app.app.state.marking.store
    key = next(k for k in ANSWERS if client.app.app.state.marking.names("lab05").alias(k) == alias)
    store.save_mark("lab05", key, "mirror", items=["mirror.0"], marker="ann", version=0)
    left = client.get("/l/lab05/q/mirror/search", params={"student": "student-", "unmarked": "1"}).text
    assert alias not in _matches(left) and len(_matches(left)) == 3


def test_the_question_page_links_to_the_search_and_an_unknown_question_is_404(client):
    assert 'href="/l/lab05/q/mirror/search"' in client.get("/l/lab05/q/mirror/1").text
    assert client.get("/l/lab05/q/nothing/search", params={"q": "x"}).status_code == 404



def test_a_mark_saved_on_the_way_to_the_search_goes_there(client):
    page = client.get("/l/lab05/q/mirror/1").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    answer = re.search(r'name="answer" value="([^"]+)"', page).group(1)
    saved = client.post("/l/lab05/q/mirror/1", data={"csrf": csrf, "answer": answer, "version": "0",
                                                     "item": "mirror.0", "go": "/l/lab05/q/mirror/search"})
    assert saved.headers["location"] == "/l/lab05/q/mirror/search?saved=1"
    off = client.post("/l/lab05/q/mirror/2", data={"csrf": csrf, "answer": "x", "version": "0", "go": "//evil/search"})
    assert "evil" not in off.headers.get("location", "")


def test_the_groups_page_shows_each_members_start_as_inline_markdown_escaped(client):
    page = client.get("/l/lab05/q/mirror/groups").text
    assert "The variance grows as d, so the SOFTMAX saturates." in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "&lt;U+202E&gt;" in page and "\u202e" not in page


def test_a_snippet_is_inline_markdown_with_its_maths_typeset_and_no_block():
    from attnlab.marking.render import snippet_html

    html = str(snippet_html("**Var** is $d$,\n\n| a | b |\n|--|--|\n<b>x</b> `c`", limit=60))
    assert html.startswith("<strong>Var</strong> is <span class=\"math inline\"><math")
    assert "<table" not in html and "<p>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and "<code>c</code>" in html
    assert "more characters" in str(snippet_html("x" * 200)) and str(snippet_html("x" * 200)).count("x") == 160
