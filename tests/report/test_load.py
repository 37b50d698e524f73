"""Rows from a gradebook, and the names a person reads (as in the gradebook, or anonymised)."""

from __future__ import annotations

import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.records.student_names import Names
from attnlab.report.load import ReportInputError, load_submissions

from .rows import sub


def _record(book, lab, key, score):
    book.record(lab, key, f"/subs/{key}", "0" * 64, {"score": score, "max_score": 2.0, "review": ["r"],
                                                      "questions": {"q": {"score": score, "max_score": 2.0}}})


def test_rows_of_one_lab_become_submissions(tmp_path):
    with open_gradebook(tmp_path) as book:
        _record(book, "lab05", "b.ipynb", 1.0)
        _record(book, "lab05", "a.ipynb", 2.0)
    lab, subs = load_submissions(tmp_path)
    assert lab == "lab05" and [s.key for s in subs] == ["a.ipynb", "b.ipynb"]
    assert subs[0].score == 2.0 and subs[0].review == ["r"] and subs[0].questions["q"]["max_score"] == 2.0


def test_several_labs_need_a_choice_and_an_unknown_lab_is_named(tmp_path):
    with open_gradebook(tmp_path) as book:
        _record(book, "lab05", "a.ipynb", 1.0)
        _record(book, "lab06", "a.ipynb", 1.0)
    with pytest.raises(ReportInputError, match="several labs: lab05, lab06; pass --lab"):
        load_submissions(tmp_path)
    assert load_submissions(tmp_path, "lab06")[0] == "lab06"
    with pytest.raises(ReportInputError, match="no rows of lab07"):
        load_submissions(tmp_path, "lab07")


def test_names_are_the_keys_or_aliases_that_do_not_follow_the_names():
    subs = [sub(k, {"q": (1.0, 1.0, [])}) for k in ("alice.ipynb", "bob.ipynb", "carol.ipynb")]
    plain, anon = Names(subs), Names(subs, anonymise=True)
    assert plain("bob.ipynb") == "bob.ipynb" and plain.stem("bob.ipynb") == "bob"
    aliases = sorted(anon(s.key) for s in subs)
    assert aliases == ["student-001", "student-002", "student-003"]
    assert anon.stem("bob.ipynb") == anon("bob.ipynb")
    text = "cannot read /subs/bob.ipynb: bob.ipynb (bob)"
    assert plain.scrub("bob.ipynb", text) == text
    assert anon.scrub("bob.ipynb", text) == f"cannot read {anon('bob.ipynb')}: {anon('bob.ipynb')} ({anon('bob.ipynb')})"
    assert plain.scrub("bob.ipynb", text, always=True) == anon.scrub("bob.ipynb", text)
