"""Regrade requests in the marks store, on SQLite and on a real throwaway PostgreSQL server: added and audited,
kept once, decided once (no change, or a score change through ``change_score`` in the same transaction), nothing
written on a refused decision; imported from an LMS form's CSV, all rows or none, each bad row named with its fix;
and shown in the student's feedback (Markdown and HTML), escaped."""

from __future__ import annotations

import threading

import pytest

from attnlab.grading.outputs.feedback import feedback_markdown
from attnlab.grading.outputs.feedback_page import feedback_page
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.audit import audit_log, check_chain, readable
from attnlab.marking.marks_applied import marked_rows
from attnlab.marking.records import CHANGED, MarkConflict, MarkingError
from attnlab.marking.regrade_csv import find_key, import_requests
from attnlab.marking.regrades import (
    NO_CHANGE,
    OPEN,
    RESOLVED,
    SCORE_CHANGE,
    add_requests,
    checked_request,
    questions_by_key,
    requests_of,
    resolve,
)
from attnlab.marking.store import MarkStore, effective_scores
from attnlab.roster import Roster, Student

from .classroom import record_student

LAB = "lab05"
HOSTILE = "<script>alert(1)</script> please look at **mirror** again\u202e"
CSV = ("Timestamp,student,question,text,time\n"
       "x,s0,mirror,\"I quoted the accuracy, see line 2\",2027-02-15T10:00+01:00\n"
       "x,s1.ipynb,attention,the mask test is flaky,2027-02-15T09:30:00Z\n"
       "x,bjones,mirror,please look again,2027-02-16 08:00:00 UTC\n")


@pytest.fixture
def book(target):
    with open_gradebook(target) as gb:
        for i in range(3):
            record_student(gb, LAB, f"s{i}.ipynb", code={"attention": (2.0 - i, 3.0)},
                           written={"mirror": (f"answer {i}", 2.0)})
        MarkStore(gb).ensure_rubric(LAB, "mirror", [("mirror.0", "Right", 2.0)])
        yield gb


def _one(store, key="s0.ipynb", question="mirror", text=HOSTILE, at="2027-02-15T09:00:00+00:00"):
    added, had = add_requests(store, [checked_request(questions_by_key(store, LAB), LAB, key, question, text, at)],
                              marker="ann", source="entered")
    return added, had, requests_of(store, LAB, key)[-1]


def test_a_request_is_audited_kept_once_and_decided_once_with_no_change(book):
    store = MarkStore(book)
    assert _one(store)[:2] == (1, 0)
    added, had, r = _one(store)  # the same request again: kept once
    assert (added, had, r.status, r.text, r.entered_by) == (0, 1, OPEN, HOSTILE, "ann")
    done = resolve(store, LAB, r.id, decision=NO_CHANGE, reason="the rubric gives no point for it", marker="bo")
    assert (done.status, done.decision, done.reason, done.decided_by, done.score) == (
        RESOLVED, NO_CHANGE, "the rubric gives no point for it", "bo", None)
    rows = len(audit_log(book))
    with pytest.raises(MarkConflict, match="bo decided request"):
        resolve(store, LAB, r.id, decision=SCORE_CHANGE, score=2, reason="on second thought", marker="cy")
    assert len(audit_log(book)) == rows and effective_scores(book, LAB)["s0.ipynb"]["mirror"].status != CHANGED
    log = [(a["who"], a["action"], a["key"], a["question"], a["reason"]) for a in audit_log(book)]
    assert log[-2:] == [("ann", "regrade request", "s0.ipynb", "mirror", None),
                        ("bo", "regrade request resolved", "s0.ipynb", "mirror", "the rubric gives no point for it")]
    assert readable(audit_log(book)[-1]["after"], {}) == f"request {r.id}: no change"
    assert check_chain(book).holds


def test_a_score_change_decision_changes_the_score_in_the_same_transaction(book):
    store = MarkStore(book)
    r = _one(store, key="s1.ipynb", question="attention", text="the mask test is flaky")[2]
    with pytest.raises(MarkingError, match="outside 0 to 3"):  # refused: the request stays open, nothing audited
        resolve(store, LAB, r.id, decision=SCORE_CHANGE, score=5, reason="flaky test", marker="ann")
    rows = len(audit_log(book))
    assert requests_of(store, LAB)[0].status == OPEN and rows == 1  # the request's own row only
    done = resolve(store, LAB, r.id, decision=SCORE_CHANGE, score=2.5, reason="flaky test", marker="ann")
    assert (done.decision, done.score, done.change_version) == (SCORE_CHANGE, 2.5, 1)
    e = effective_scores(book, LAB)["s1.ipynb"]["attention"]
    assert (e.score, e.status, e.reason) == (2.5, CHANGED, f"flaky test (regrade request {r.id})")
    last = audit_log(book)[-2:]
    assert [a["action"] for a in last] == ["score change", "regrade request resolved"]
    assert (last[0]["before"], last[0]["after"]) == ('{"score": 1.0}', '{"score": 2.5}')
    assert readable(last[1]["after"], {}) == f"request {r.id}: score change, score 2.5"
    with pytest.raises(MarkingError, match="no regrade request 999"):
        resolve(store, LAB, 999, decision=NO_CHANGE, reason="x", marker="ann")
    with pytest.raises(MarkingError, match="needs a reason"):
        resolve(store, LAB, r.id, decision=NO_CHANGE, reason="  ", marker="ann")
    with pytest.raises(MarkingError, match="choose"):
        resolve(store, LAB, r.id, decision="maybe", reason="x", marker="ann")
    assert check_chain(book).holds


def test_a_request_names_a_known_submission_and_question():
    asked = {"s0.ipynb": {"mirror", "attention"}}
    with pytest.raises(MarkingError, match="no submission 's9.ipynb'"):
        checked_request(asked, LAB, "s9.ipynb", "mirror", "x", "t")
    with pytest.raises(MarkingError, match="no question 'mirorr'.*attention, mirror"):
        checked_request(asked, LAB, "s0.ipynb", "mirorr", "x", "t")
    with pytest.raises(MarkingError, match="text is empty"):
        checked_request(asked, LAB, "s0.ipynb", "mirror", " ", "t")
    with pytest.raises(MarkingError, match="at most 5,000"):
        checked_request(asked, LAB, "s0.ipynb", "mirror", "x" * 5001, "t")
    roster = Roster([Student("bob", login="bjones", email="Bob@uni.example")])
    keys = ["alice.ipynb", "bob.ipynb", "carol/lab05.ipynb"]
    assert [find_key(s, keys, roster) for s in ("alice", "bob.ipynb", "bjones", "bob@UNI.example", "carol")] == [
        "alice.ipynb", "bob.ipynb", "bob.ipynb", "bob.ipynb", "carol/lab05.ipynb"]
    with pytest.raises(MarkingError, match="no submission is 'dave'.*login or email"):
        find_key("dave", keys, roster)
    with pytest.raises(MarkingError, match="several submissions"):
        find_key("alice", ["alice.ipynb", "alice.py"])


def test_a_csv_imports_every_row_or_none_naming_each_bad_row(book):
    store = MarkStore(book)
    roster = Roster([Student("s2", login="bjones")])
    assert import_requests(store, CSV, marker="instructor", source="imported from form.csv", roster=roster) == (3, 0)
    got = [(r.key, r.question, r.asked_at, r.source) for r in requests_of(store, LAB)]
    assert got == [
        ("s0.ipynb", "mirror", "2027-02-15T09:00:00+00:00", "imported from form.csv"),
        ("s1.ipynb", "attention", "2027-02-15T09:30:00+00:00", "imported from form.csv"),
        ("s2.ipynb", "mirror", "2027-02-16T08:00:00+00:00", "imported from form.csv")]
    assert requests_of(store, LAB)[0].text == "I quoted the accuracy, see line 2"
    assert import_requests(store, CSV, marker="instructor", source="again", roster=roster) == (0, 3)
    rows = len(audit_log(book))
    bad = ("student,question,text,time\n" "s0,mirror,fine,2027-02-17T10:00Z\n" "s7,mirror,who?,2027-02-17T10:00Z\n"
           "s1,mirorr,typo,2027-02-17T10:00Z\n" "s1,mirror,no zone,2027-02-17 10:00\n" "s1,mirror,,2027-02-17T10:00Z\n")
    with pytest.raises(MarkingError) as err:
        import_requests(store, bad, marker="instructor", source="bad.csv")
    text = str(err.value)
    assert text.startswith("nothing was imported: row 3: no submission is 's7'")
    for part in ("row 4: s1.ipynb has no question 'mirorr'", "row 5: time '2027-02-17 10:00' is not an ISO time "
                 "with its zone: give it as 2027-02-14T23:59+01:00", "row 6: the request's text is empty"):
        assert part in text
    assert len(requests_of(store, LAB)) == 3 and len(audit_log(book)) == rows  # row 2 was good: not imported either
    with pytest.raises(MarkingError, match="no column.*time.*it needs student, question, text, time"):
        import_requests(store, "student,question,text\ns0,mirror,x\n", marker="instructor", source="x")
    with pytest.raises(MarkingError, match="header but no request"):
        import_requests(store, "student,question,text,time\n", marker="instructor", source="x")
    with pytest.raises(MarkingError, match="lab 'lab99' is not in the gradebook"):
        import_requests(store, "lab,student,question,text,time\nlab99,s0,mirror,x,2027-02-17T10:00Z\n",
                        marker="instructor", source="x")


def test_the_feedback_shows_each_request_with_its_decision_escaped(book):
    store = MarkStore(book)
    first = _one(store)[2]
    _one(store, key="s0.ipynb", question="attention", text="and this one")
    resolve(store, LAB, first.id, decision=SCORE_CHANGE, score=1.5, reason="the <b>second</b> point stands",
            marker="ann")
    row = next(r for r in marked_rows(book, LAB) if r["key"] == "s0.ipynb")
    assert [(e["question"], e["status"], e["score"]) for e in row["regrades"]] == [
        ("mirror", RESOLVED, 1.5), ("attention", OPEN, None)]
    md = feedback_markdown(row)
    section = md[md.index("## Your regrade requests"):]
    assert "### `mirror`, asked 2027-02-15 09:00 UTC: score changed to 1.5 / 2 (decided 20" in section
    assert "### `attention`" in section and "awaiting a decision" in section
    assert "<script>alert(1)</script>" in section.split("```text")[1]  # the student's text inside a fenced block
    assert "<U+202E>" in section and "the <b>second</b> point stands" in section
    page = feedback_page(row, title="Feedback")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "score changed to 1.5 / 2" in page and "the &lt;b&gt;second&lt;/b&gt; point stands" in page
    assert "awaiting a decision" in page


def test_a_gradebook_marked_before_requests_existed_gets_the_table_and_keeps_its_marks(book):
    store = MarkStore(book)
    store.change_score(LAB, "s0.ipynb", "attention", 1, reason="appeal", marker="ann", version=0)
    book.transaction(lambda ex: ex("DROP TABLE regrade_requests"), write=True)  # as a gradebook from before
    assert requests_of(MarkStore(book), LAB) == []  # made again on first use, in place
    assert _one(MarkStore(book))[:2] == (1, 0)
    assert effective_scores(book, LAB)["s0.ipynb"]["attention"].reason == "appeal" and check_chain(book).holds


def test_two_markers_deciding_one_request_at_once_one_wins_and_nothing_of_the_other_is_written(book, target):
    r = _one(MarkStore(book), key="s1.ipynb", question="attention", text="flaky")[2]
    with open_gradebook(target) as other:
        stores, barrier, outcomes = [MarkStore(book), MarkStore(other)], threading.Barrier(2), []

        def decide(i):
            barrier.wait()
            try:
                resolve(stores[i], LAB, r.id, decision=SCORE_CHANGE, score=i + 1, reason=f"m{i}", marker=f"m{i}")
                outcomes.append(("saved", i))
            except MarkConflict:
                outcomes.append(("conflict", i))

        threads = [threading.Thread(target=decide, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    (saved,) = [i for what, i in outcomes if what == "saved"]
    assert sorted(what for what, _ in outcomes) == ["conflict", "saved"]
    assert effective_scores(book, LAB)["s1.ipynb"]["attention"].score == saved + 1
    assert (requests_of(MarkStore(book), LAB)[0].decided_by, requests_of(MarkStore(book), LAB)[0].score) == (
        f"m{saved}", saved + 1)
    actions = [a["action"] for a in audit_log(book)]
    assert actions.count("score change") == 1 and actions.count("regrade request resolved") == 1
    assert check_chain(book).holds
