"""Answer groups: TF-IDF and cosine clustering of a question's answers, a group marked at once, empty answers 0."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.audit import audit_log
from attnlab.marking.groups import answer_groups, mark_empty, mark_group, tfidf
from attnlab.marking.records import AWAITING, MARKED
from attnlab.marking.store import MarkStore, effective_scores
from attnlab.records.stub_text import PLACEHOLDER

from .classroom import record_student

ANSWERS = {
    "a.ipynb": "Without positions both orders get the same representation, so accuracy is 0.5.",
    "b.ipynb": "Both orders get the same representation without positions: accuracy 0.5.",
    "c.ipynb": "The learning rate was too high and training diverged.",
    "d.ipynb": "   ",
    "e.ipynb": "without positions the same representation for both orders, hence 0.5 accuracy",
    "f.ipynb": PLACEHOLDER,
    "g.ipynb": "Training diverged because the learning rate was too high.",
}


def test_tfidf_rows_are_unit_length_and_a_rare_word_weighs_more():
    vectors, vocabulary = tfidf(["the cat", "the dog", "the cat sat"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1)
    row = vectors[0]
    assert row[vocabulary.index("cat")] > row[vocabulary.index("the")] > 0  # "the" in every answer: lowest idf


def test_paraphrases_group_together_different_arguments_apart_and_empty_answers_last():
    groups = answer_groups(ANSWERS)
    assert [g.keys for g in groups] == [("a.ipynb", "b.ipynb", "e.ipynb"), ("c.ipynb", "g.ipynb"),
                                        ("d.ipynb", "f.ipynb")]
    assert groups[-1].empty and not groups[0].empty
    assert len(groups[0].terms) == 4  # the words all three share, by weight then alphabetically
    assert set(groups[0].terms) <= {"accuracy", "both", "orders", "positions", "representation", "same", "without"}


@pytest.fixture
def book(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key, text in ANSWERS.items():
            record_student(gb, "lab05", key, code={"attention": (1.0, 1.0)}, written={"mirror": (text, 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.0", "Same representation", 1.5),
                                                         ("mirror.1", "Quotes 0.5", 0.5)])
        yield gb


def test_a_group_is_marked_at_once_keeping_an_exceptions_own_items_and_skipping_a_conflict(book):
    store = MarkStore(book)
    store.save_mark("lab05", "b.ipynb", "mirror", items=["mirror.1"], marker="ann", version=0)
    seen = {"a.ipynb": 0, "b.ipynb": 1, "e.ipynb": 0}
    store.save_mark("lab05", "e.ipynb", "mirror", items=[], marker="bob", version=0)  # bob, meanwhile
    saved, conflicts = mark_group(store, "lab05", "mirror", seen, ["mirror.0"], marker="ann")
    assert (saved, conflicts) == (["a.ipynb", "b.ipynb"], ["e.ipynb"])
    scores = effective_scores(book, "lab05")
    assert [scores[k]["mirror"].score for k in ("a.ipynb", "b.ipynb", "e.ipynb")] == [1.5, 2.0, 0.0]
    assert store.marks("lab05")[("e.ipynb", "mirror")].marker == "bob"


def test_empty_answers_are_marked_zero_in_one_step(book):
    store = MarkStore(book)
    assert mark_empty(store, "lab05", "mirror", marker="ann") == 2
    scores = effective_scores(book, "lab05")
    assert [(scores[k]["mirror"].score, scores[k]["mirror"].status) for k in ("d.ipynb", "f.ipynb")] == \
        [(0.0, MARKED), (0.0, MARKED)]
    assert scores["a.ipynb"]["mirror"].status == AWAITING
    assert mark_empty(store, "lab05", "mirror", marker="ann") == 0  # already marked: nothing again


def _groups_client(book):
    import re

    from starlette.testclient import TestClient

    from attnlab.marking.app import create_app

    client = TestClient(create_app(book, "t", hosts=["testserver"]), follow_redirects=True)
    page = client.get("/l/lab05/q/mirror/groups?token=t").text
    return client, re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def _group_form(page: str, n: int):
    """The action and member values of group ``n``'s form on the groups page, and the ones ticked."""
    import re

    section = page.split(f'id="group-{n}"')[1].split("</section>")[0]
    action = re.search(r'<form method="post" action="([^"]+)"', section).group(1)
    members = re.findall(r'name="member" value="([^"]+)" id="[^"]+" ?(checked)?', section)
    return action, [m for m, _ in members], [m for m, ticked in members if ticked]


def test_after_marking_the_empty_answers_each_groups_apply_posts_to_the_groups_page(book):
    client, csrf = _groups_client(book)
    after = client.post("/l/lab05/q/mirror/empty", data={"csrf": csrf})
    assert after.url.path == "/l/lab05/q/mirror/groups" and "Marked 2 empty answers 0." in after.text
    action, members, _ = _group_form(after.text, 1)
    assert action == "/l/lab05/q/mirror/groups"
    applied = client.post(action, data={"csrf": csrf, "member": members, "item": ["mirror.0"]})
    assert applied.status_code == 200 and "Applied to 3 answers." in applied.text
    scores = effective_scores(book, "lab05")
    assert [scores[k]["mirror"].score for k in ("a.ipynb", "b.ipynb", "e.ipynb")] == [1.5, 1.5, 1.5]


def test_a_group_shows_its_members_already_marked_and_leaves_them_out_unless_ticked(book):
    MarkStore(book).save_mark("lab05", "b.ipynb", "mirror", items=["mirror.1"], marker="ann", version=0)
    client, csrf = _groups_client(book)
    page = client.get("/l/lab05/q/mirror/groups").text
    action, members, ticked = _group_form(page, 1)
    assert len(members) == 3 and len(ticked) == 2  # b's own mark: shown, not ticked
    assert "1 already marked" in page and "[marked: Quotes 0.5]" in page
    assert "Applied to 2 answers." in client.post(action, data={"csrf": csrf, "member": ticked,
                                                                "item": ["mirror.0"]}).text
    scores = effective_scores(book, "lab05")
    assert [scores[k]["mirror"].score for k in ("a.ipynb", "b.ipynb", "e.ipynb")] == [1.5, 0.5, 1.5]
    nobody = client.post(action, data={"csrf": csrf, "item": ["mirror.0"]})
    assert nobody.status_code == 400 and "no answer of the group was ticked" in nobody.text


def test_a_groups_label_is_content_words_never_stopwords_nor_latex_commands():
    answers = {f"{i}.ipynb": text for i, text in enumerate([
        "The variance is $\\frac{d}{1}$ because the terms are independent and each has variance one.",
        "Because the terms are independent, the variance is $\\frac{d}{1}$: each has variance one.",
        "The variance is d because each of the independent terms has variance one."])}
    (group,) = answer_groups(answers)
    assert "frac" not in group.terms and not set(group.terms) & {"the", "because", "each", "has", "are"}
    assert set(group.terms) <= {"variance", "terms", "independent"} and "variance" in group.terms


def test_the_last_action_is_undone_a_group_apply_mark_empty_or_one_mark_unless_changed_since(book):
    store = MarkStore(book)
    store.save_mark("lab05", "b.ipynb", "mirror", items=["mirror.1"], marker="ann", version=0)
    client, csrf = _groups_client(book)
    action, members, _ = _group_form(client.get("/l/lab05/q/mirror/groups").text, 1)
    page = client.post(action, data={"csrf": csrf, "member": members, "item": ["mirror.0"]}).text
    assert "Undo the group apply to 3 answers" in page
    store.save_mark("lab05", "e.ipynb", "mirror", items=[], marker="bob",
                    version=store.marks("lab05")[("e.ipynb", "mirror")].version)  # bob, since
    undone = client.post("/undo", data={"csrf": csrf, "back": "/l/lab05/q/mirror/groups"})
    assert "Undone: 2 changes put back; 1 left as another marker changed them since." in undone.text
    marks = store.marks("lab05")
    assert ("a.ipynb", "mirror") not in marks and marks[("b.ipynb", "mirror")].items == ("mirror.1",)
    assert marks[("e.ipynb", "mirror")].marker == "bob" and "Undo the" not in undone.text  # nothing left to undo
    client.post("/l/lab05/q/mirror/empty", data={"csrf": csrf})
    client.post("/undo", data={"csrf": csrf, "back": "/l/lab05/q/mirror/groups"})
    assert effective_scores(book, "lab05")["d.ipynb"]["mirror"].status == AWAITING
    assert [r["action"] for r in audit_log(book)][-2:] == ["mark undone", "mark undone"]
