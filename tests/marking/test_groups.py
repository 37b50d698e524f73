"""Answer groups: TF-IDF and cosine clustering of a question's answers, a group marked at once, empty answers 0."""

from __future__ import annotations

import numpy as np
import pytest

from attnlab.buildchain.transforms.markers import PLACEHOLDER
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.groups import answer_groups, mark_empty, mark_group, tfidf
from attnlab.marking.store import AWAITING, MARKED, MarkStore, effective_scores

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
