"""A changed score keeps what it was before and who changed it (``Effective.was``, ``changed_by``), carried onto the
marked rows the report and the feedback read (``changed_from``, ``changed_by``) and said in their words
(``change_text``)."""

from __future__ import annotations

from attnlab.grading.core.written_answers import change_text, clean_marks
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.marks_applied import marked_rows
from attnlab.marking.store import MarkStore

from .classroom import record_student


def test_a_changed_score_says_what_it_was_and_who_changed_it(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        for key in ("alice.ipynb", "bob.ipynb"):
            record_student(gb, "lab05", key, code={"causal_mask": (1.0, 2.0)}, written={"mirror": ("text", 2.0)})
        store = MarkStore(gb)
        store.ensure_rubric("lab05", "mirror", [("mirror.0", "Right", 2.0)])
        store.save_mark("lab05", "alice.ipynb", "mirror", items=["mirror.0"], marker="ann", version=0)
        store.change_score("lab05", "alice.ipynb", "mirror", 1.5, reason="a slip", marker="bea", version=0)
        store.change_score("lab05", "bob.ipynb", "mirror", 1, reason="marked on paper", marker="ann", version=0)
        store.change_score("lab05", "bob.ipynb", "causal_mask", 2, reason="regrade", marker="bea", version=0)
        effective = store.effective("lab05")
        rows = {r["key"]: r["questions"] for r in marked_rows(gb, "lab05")}
    alice = effective["alice.ipynb"]["mirror"]
    assert (alice.score, alice.was, alice.changed_by) == (1.5, 2.0, "bea")  # the mark gave 2
    assert effective["bob.ipynb"]["mirror"].was is None  # it awaited marking
    assert change_text(rows["alice.ipynb"]["mirror"]) == "changed from 2 to 1.5 by bea"
    assert change_text(rows["bob.ipynb"]["mirror"]) == "changed from awaiting marking to 1 by ann"
    assert change_text(rows["bob.ipynb"]["causal_mask"]) == "changed from 1 to 2 by bea"  # the grader's 1
    assert change_text(rows["alice.ipynb"]["causal_mask"]) == "" and effective["alice.ipynb"]["causal_mask"].was \
        is None
    kept = clean_marks(rows["bob.ipynb"]["mirror"], awaiting=False)
    assert (kept["changed_from"], kept["changed_by"]) == (None, "ann")
    assert "changed_from" not in clean_marks({"status": "marked", "changed_from": True}, awaiting=False)
