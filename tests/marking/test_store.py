"""The marks store and ``effective_scores``, on SQLite and on a real throwaway PostgreSQL server (skipped only where
no PostgreSQL server binaries are installed; CI installs them)."""

from __future__ import annotations

import csv
import io
import threading

import pytest

from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.marking.audit import audit_csv, audit_log, check_chain
from attnlab.marking.records import AWAITING, CHANGED, GRADED, MARKED, MarkConflict, MarkingError
from attnlab.marking.store import MarkStore, effective_scores

from .classroom import record_student

LAB = "lab05"
RUBRIC = [("mirror.0", "Quotes the measured accuracy", 1.0), ("mirror.1", "Explains the same representation", 1.0),
          ("mirror.2", "No measured number", -0.5)]


@pytest.fixture
def book(target):
    with open_gradebook(target) as gb:
        for i, text in enumerate(["It scores 0.5 because both orders look the same.", "", "No idea."]):
            record_student(gb, LAB, f"s{i}.ipynb", code={"attention": (2.0 - i, 3.0)},
                           written={"mirror": (text, 2.0)})
        MarkStore(gb).ensure_rubric(LAB, "mirror", RUBRIC)
        yield gb


def test_unmarked_written_answers_await_marking_and_code_keeps_the_grader_score(book):
    scores = effective_scores(book, LAB)
    assert sorted(scores) == ["s0.ipynb", "s1.ipynb", "s2.ipynb"]
    mirror = scores["s0.ipynb"]["mirror"]
    assert (mirror.score, mirror.max_score, mirror.status) == (None, 2.0, AWAITING)
    code = scores["s1.ipynb"]["attention"]
    assert (code.score, code.max_score, code.status, code.reason) == (1.0, 3.0, GRADED, None)
    answers = MarkStore(book).answers(LAB, "mirror")
    assert [(a.key, a.kind, a.text) for a in answers][:2] == [
        ("s0.ipynb", "written", "It scores 0.5 because both orders look the same."), ("s1.ipynb", "written", "")]


def test_a_mark_scores_the_items_plus_the_adjustment_within_the_points(book):
    store = MarkStore(book)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0", "mirror.1"], adjustment=0.25, comment="Good",
                    marker="ann", version=0)
    store.save_mark(LAB, "s2.ipynb", "mirror", items=["mirror.2"], marker="ann", version=0)
    scores = effective_scores(book, LAB)
    first = scores["s0.ipynb"]["mirror"]
    assert (first.score, first.status, first.comment) == (2.0, MARKED, "Good")  # 2.25 kept within 2 points
    assert first.rubric == [("Quotes the measured accuracy", 1.0), ("Explains the same representation", 1.0)]
    assert scores["s2.ipynb"]["mirror"].score == 0.0  # -0.5 kept at 0
    assert scores["s1.ipynb"]["mirror"].status == AWAITING


def test_an_items_points_edited_once_apply_to_every_answer_that_has_it(book):
    store = MarkStore(book)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0"], marker="ann", version=0)
    store.save_mark(LAB, "s2.ipynb", "mirror", items=["mirror.0", "mirror.1"], marker="ann", version=0)
    store.save_mark(LAB, "s1.ipynb", "mirror", items=["mirror.1"], marker="ann", version=0)
    store.set_item_points(LAB, "mirror", "mirror.0", 0.5, marker="bob", expected=1.0)
    scores = effective_scores(book, LAB)
    assert [scores[k]["mirror"].score for k in ("s0.ipynb", "s1.ipynb", "s2.ipynb")] == [0.5, 1.0, 1.5]
    with pytest.raises(MarkConflict, match="changed mirror.0's points to 0.5"):
        store.set_item_points(LAB, "mirror", "mirror.0", 2, marker="ann", expected=1.0)  # ann saw the old points
    store.ensure_rubric(LAB, "mirror", RUBRIC)  # the bundle's rubric again: the edited points stay
    assert store.rubric(LAB, "mirror")[0].points == 0.5


def test_a_stale_mark_is_refused_never_overwritten(book):
    store = MarkStore(book)
    first = store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0"], marker="ann", version=0)
    with pytest.raises(MarkConflict, match="ann saved a mark for this answer first") as refused:
        store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.1"], marker="bob", version=0)
    assert refused.value.current == first
    second = store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0", "mirror.1"], marker="ann", version=1)
    with pytest.raises(MarkConflict):
        store.save_mark(LAB, "s0.ipynb", "mirror", items=[], marker="bob", version=1)  # bob saw version 1
    assert store.marks(LAB, "mirror")[("s0.ipynb", "mirror")] == second
    assert effective_scores(book, LAB)["s0.ipynb"]["mirror"].score == 2.0


def test_two_markers_on_two_connections_at_once_one_wins_the_other_sees_a_conflict(book, target):
    with open_gradebook(target) as other:
        stores = [MarkStore(book), MarkStore(other)]
        barrier, outcomes = threading.Barrier(2), []

        def mark(i):
            barrier.wait()
            try:
                stores[i].save_mark(LAB, "s2.ipynb", "mirror", items=[f"mirror.{i}"], marker=f"m{i}", version=0)
                outcomes.append(("saved", i))
            except MarkConflict as exc:
                outcomes.append(("conflict", exc.current.marker))

        threads = [threading.Thread(target=mark, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    (saved,), (conflict,) = [o for o in outcomes if o[0] == "saved"], [o for o in outcomes if o[0] == "conflict"]
    assert conflict[1] == f"m{saved[1]}"  # the loser is shown the winner's mark
    assert MarkStore(book).marks(LAB)[("s2.ipynb", "mirror")].items == (f"mirror.{saved[1]}",)


def test_a_score_change_on_a_code_question_needs_a_reason_and_stays_within_the_points(book):
    store = MarkStore(book)
    with pytest.raises(MarkingError, match="a reason for the change is required"):
        store.change_score(LAB, "s1.ipynb", "attention", 3, reason="  ", marker="ann", version=0)
    with pytest.raises(MarkingError, match="outside 0 to 3"):
        store.change_score(LAB, "s1.ipynb", "attention", 4, reason="appeal", marker="ann", version=0)
    store.change_score(LAB, "s1.ipynb", "attention", 3, reason="appeal: the mask test was wrong", marker="ann",
                       version=0)
    changed = effective_scores(book, LAB)["s1.ipynb"]["attention"]
    assert (changed.score, changed.status, changed.reason) == (3.0, CHANGED, "appeal: the mask test was wrong")
    with pytest.raises(MarkingError, match="is a code question"):
        store.save_mark(LAB, "s1.ipynb", "attention", items=[], marker="ann", version=0)
    with pytest.raises(MarkingError, match="unknown rubric item"):
        store.save_mark(LAB, "s1.ipynb", "mirror", items=["attention.9"], marker="ann", version=0)


def test_the_audit_log_records_who_before_after_and_why_and_exports_csv(book):
    store = MarkStore(book)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0"], comment="=HYPERLINK()", marker="ann", version=0)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0", "mirror.1"], marker="bob", version=1)
    store.set_item_points(LAB, "mirror", "mirror.1", 0.5, marker="bob")
    store.change_score(LAB, "s0.ipynb", "attention", 0, reason="similarity finding", marker="cat", version=0)
    log = audit_log(book, LAB)
    assert [(r["who"], r["action"], r["key"]) for r in log] == [
        ("ann", "mark", "s0.ipynb"), ("bob", "mark", "s0.ipynb"), ("bob", "rubric points", None),
        ("cat", "score change", "s0.ipynb")]
    assert log[0]["before"] is None and '"mirror.0"' in log[0]["after"]
    assert '"comment": "=HYPERLINK()"' in log[1]["before"]
    assert (log[3]["before"], log[3]["after"], log[3]["reason"]) == ('{"score": 2.0}', '{"score": 0.0}',
                                                                      "similarity finding")
    rows = list(csv.DictReader(io.StringIO(audit_csv(book, LAB))))
    assert [r["action"] for r in rows] == ["mark", "mark", "rubric points", "score change"]
    assert rows[1]["before"].startswith("{") and rows[3]["reason"] == "similarity finding"
    assert all(r["at"].endswith("+00:00") for r in rows)


def test_the_audit_log_is_append_only(book):
    MarkStore(book).change_score(LAB, "s0.ipynb", "attention", 1, reason="appeal", marker="ann", version=0)
    for sql in ("UPDATE audit SET who = 'mallory'", "DELETE FROM audit"):
        with pytest.raises(Exception, match="append-only"):
            book.transaction(lambda ex, sql=sql: ex(sql), write=True)
    assert [r["who"] for r in audit_log(book)] == ["ann"]


def test_a_resubmission_with_another_answer_awaits_marking_again_the_same_answer_keeps_its_mark(book):
    store = MarkStore(book)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0"], marker="ann", version=0)
    record_student(book, LAB, "s0.ipynb", code={"attention": (2.0, 3.0)},
                   written={"mirror": ("It scores 0.5 because both orders look the same.", 2.0)})  # regraded as is
    assert effective_scores(book, LAB)["s0.ipynb"]["mirror"].score == 1.0
    record_student(book, LAB, "s0.ipynb", code={"attention": (2.0, 3.0)}, written={"mirror": ("A new answer.", 2.0)})
    again = effective_scores(book, LAB)["s0.ipynb"]["mirror"]
    assert (again.score, again.status) == (None, AWAITING)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0", "mirror.1"], marker="bob", version=1)
    assert effective_scores(book, LAB)["s0.ipynb"]["mirror"].score == 2.0


def test_marks_from_before_answer_sha_get_the_column_and_still_count(target):
    with open_gradebook(target) as gb:
        record_student(gb, LAB, "s0.ipynb", code={}, written={"mirror": ("an answer", 2.0)})
        gb.transaction(lambda ex: [ex(sql) for sql in (
            "CREATE TABLE marks (lab TEXT NOT NULL, key TEXT NOT NULL, question TEXT NOT NULL, items TEXT NOT NULL, "
            "adjustment DOUBLE PRECISION NOT NULL, comment TEXT NOT NULL, marker TEXT NOT NULL, marked_at TEXT NOT "
            "NULL, version INTEGER NOT NULL, PRIMARY KEY (lab, key, question))",
            "INSERT INTO marks VALUES ('lab05', 's0.ipynb', 'mirror', '[]', 1.5, 'ok', 'ann', 't', 1)")], write=True)
        scores = effective_scores(gb, LAB)
        assert (scores["s0.ipynb"]["mirror"].score, scores["s0.ipynb"]["mirror"].status) == (1.5, MARKED)


def test_reading_scores_takes_no_write_lock_once_the_tables_are_there(tmp_path, monkeypatch):
    """effective_scores (exports, the report) while another process holds the gradebook's write lock: no DDL, no
    wait."""
    import sqlite3

    monkeypatch.setenv("ATTNLAB_DB_RETRIES", "0")  # a write would fail at once, not after the retries
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        record_student(gb, LAB, "s0.ipynb", code={"attention": (1.0, 3.0)}, written={"mirror": ("x", 2.0)})
        MarkStore(gb)
        gb.transaction(lambda ex: ex("PRAGMA busy_timeout = 300"))  # a write would fail fast, not wait 60 s
        writer = sqlite3.connect(tmp_path / "gradebook.db", isolation_level=None)
        writer.execute("BEGIN IMMEDIATE")
        try:
            assert effective_scores(gb, LAB)["s0.ipynb"]["mirror"].status == AWAITING
        finally:
            writer.execute("ROLLBACK")
            writer.close()


def _some_audit_rows(book) -> MarkStore:
    store = MarkStore(book)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=["mirror.0"], marker="ann", version=0)
    store.set_item_points(LAB, "mirror", "mirror.0", 0.5, marker="bob")
    store.change_score(LAB, "s1.ipynb", "attention", 2, reason="appeal", marker="cat", version=0)
    return store


def test_the_audit_log_refuses_truncate_and_a_replacing_insert(book):
    _some_audit_rows(book)
    if book.dialect == "postgresql":
        attacks = ("TRUNCATE audit", "INSERT INTO audit (id, at, who, lab, action) VALUES (1, 't', 'mallory', 'x', "
                   "'y') ON CONFLICT (id) DO UPDATE SET who = 'mallory'")
    else:
        attacks = ("INSERT OR REPLACE INTO audit (id, at, who, lab, action) VALUES (1, 't', 'mallory', 'x', 'y')",
                   "REPLACE INTO audit (id, at, who, lab, action) VALUES (2, 't', 'mallory', 'x', 'y')")
    for sql in attacks:
        with pytest.raises(Exception, match="append-only"):
            book.transaction(lambda ex, sql=sql: ex(sql), write=True)
    assert [r["who"] for r in audit_log(book)] == ["ann", "bob", "cat"]
    assert check_chain(book).holds and check_chain(book).rows == 3


def _bypass_triggers(book, sql: str) -> None:
    """What someone with the database's owner rights can do: drop the guards, write, put them back."""
    if book.dialect == "postgresql":
        book.transaction(lambda ex: [ex(s) for s in ("ALTER TABLE audit DISABLE TRIGGER USER", sql,
                                                     "ALTER TABLE audit ENABLE TRIGGER USER")], write=True)
    else:
        names = [r[0] for r in book.transaction(lambda ex: ex(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit'").fetchall())]
        book.transaction(lambda ex: [ex(f"DROP TRIGGER {n}") for n in names] + [ex(sql)], write=True)
        MarkStore(book)  # the triggers are put back


@pytest.mark.parametrize("sql, row, problem", [
    ("UPDATE audit SET who = 'mallory' WHERE id = 2", 2, "does not match its digest"),
    ("UPDATE audit SET after_value = '{\"score\": 3.0}' WHERE id = 3", 3, "does not match its digest"),
    ("DELETE FROM audit WHERE id = 2", 3, "the rows between were removed"),
    ("DELETE FROM audit WHERE id = 1", 2, "does not match its digest"),
    ("UPDATE audit SET digest = NULL WHERE id = 3", 3, "has no digest"),
])
def test_the_hash_chain_shows_a_row_changed_or_removed_by_direct_sql(book, sql, row, problem):
    store = _some_audit_rows(book)
    assert check_chain(book).holds
    _bypass_triggers(book, sql)
    broken = check_chain(book)
    assert (broken.holds, broken.broken_at) == (False, row) and problem in broken.problem
    assert "altered outside attnlab" in broken.text()
    store.save_mark(LAB, "s2.ipynb", "mirror", items=[], marker="ann", version=0)  # marking goes on; still shown
    assert check_chain(book).broken_at == row


def test_audit_rows_from_before_the_chain_are_counted_and_the_chain_goes_on_after_them(target):
    with open_gradebook(target) as gb:
        record_student(gb, LAB, "s0.ipynb", code={}, written={"mirror": ("an answer", 2.0)})
        gb.transaction(lambda ex: [ex(sql) for sql in (
            "CREATE TABLE audit (id INTEGER PRIMARY KEY, at TEXT NOT NULL, who TEXT NOT NULL, lab TEXT NOT NULL, "
            "key TEXT, question TEXT, action TEXT NOT NULL, before_value TEXT, after_value TEXT, reason TEXT)",
            "INSERT INTO audit VALUES (1, 't', 'ann', 'lab05', 's0.ipynb', 'mirror', 'mark', NULL, '{}', NULL)")],
            write=True)
        store = MarkStore(gb)
        store.ensure_rubric(LAB, "mirror", RUBRIC)
        store.save_mark(LAB, "s0.ipynb", "mirror", items=[], marker="bob", version=0)
        found = check_chain(gb)
        assert (found.holds, found.rows, found.before_chain) == (True, 2, 1)
        assert "1 older rows from before the chain" in found.text()


def test_a_resubmission_resets_a_score_change_of_what_it_changed_and_says_so(book):
    store = MarkStore(book)
    store.change_score(LAB, "s0.ipynb", "mirror", 2, reason="appeal: well argued", marker="ann", version=0)
    store.change_score(LAB, "s0.ipynb", "attention", 3, reason="mask test", marker="ann", version=0)
    record_student(book, LAB, "s0.ipynb", code={"attention": (2.0, 3.0)},
                   written={"mirror": ("It scores 0.5 because both orders look the same.", 2.0)})  # the same again
    kept = effective_scores(book, LAB)["s0.ipynb"]
    assert (kept["mirror"].status, kept["attention"].status) == (CHANGED, CHANGED)
    record_student(book, LAB, "s0.ipynb", code={"attention": (2.0, 3.0)}, written={"mirror": ("New text.", 2.0)})
    again = effective_scores(book, LAB)["s0.ipynb"]
    assert (again["mirror"].score, again["mirror"].status) == (None, AWAITING)
    assert "ann's score change (appeal: well argued) was on an earlier submission: reset" == again["mirror"].note
    assert again["attention"].status == CHANGED  # the code question's submission is the same file


def test_a_code_score_change_is_reset_when_the_submitted_file_changes(book):
    store = MarkStore(book)
    store.change_score(LAB, "s1.ipynb", "attention", 3, reason="mask test", marker="ann", version=0)
    book.transaction(lambda ex: ex("UPDATE submissions SET sha256 = ? WHERE key = 's1.ipynb'", ("1" * 64,)),
                     write=True)
    after = effective_scores(book, LAB)["s1.ipynb"]["attention"]
    assert (after.score, after.status) == (1.0, GRADED) and "was on an earlier submission" in after.note
    store.change_score(LAB, "s1.ipynb", "attention", 2.5, reason="again", marker="ann", version=1)
    assert audit_log(book, LAB)[-1]["before"] == '{"score": 1.0}'  # the grader's score, not the reset change's
    assert effective_scores(book, LAB)["s1.ipynb"]["attention"].score == 2.5


def test_an_item_added_to_a_rubric_from_the_lab_gets_a_free_id(book):
    store = MarkStore(book)
    store.ensure_rubric(LAB, "other", [])
    store.gradebook.transaction(lambda ex: ex("DELETE FROM rubric_items WHERE item = 'mirror.0'"), write=True)
    added = store.add_rubric_item(LAB, "mirror", "Cites a source", 0.5, marker="ann")  # 2 items: mirror.1, mirror.2
    assert (added.id, added.position) == ("mirror.3", 3)
    assert [i.id for i in store.rubric(LAB, "mirror")] == ["mirror.1", "mirror.2", "mirror.3"]


def test_an_added_item_is_removed_only_while_unused_and_unchanged(book):
    store = MarkStore(book)
    added = store.add_rubric_item(LAB, "mirror", "Quotes the table", 1, marker="ann")
    store.set_item_points(LAB, "mirror", added.id, 0.5, marker="bea")
    with pytest.raises(MarkConflict, match="changed or removed since"):
        store.remove_rubric_item(LAB, "mirror", added.id, marker="ann", expected=1)
    store.save_mark(LAB, "s0.ipynb", "mirror", items=[added.id], marker="bea", version=0)
    with pytest.raises(MarkConflict, match="a mark applies"):
        store.remove_rubric_item(LAB, "mirror", added.id, marker="ann", expected=0.5)
    other = store.add_rubric_item(LAB, "mirror", "Unused", 2, marker="ann")
    store.remove_rubric_item(LAB, "mirror", other.id, marker="ann", expected=2)
    assert [i.id for i in store.rubric(LAB, "mirror")] == [i[0] for i in RUBRIC] + [added.id]
    assert check_chain(book).holds


def test_attnlab_mark_checks_the_chain_at_start_and_its_audit_page_says_where_it_broke(book, monkeypatch):
    import uvicorn
    from starlette.testclient import TestClient

    from attnlab.marking.app import create_app
    from attnlab.marking.serve import serve

    _some_audit_rows(book)
    monkeypatch.setattr(uvicorn, "run", lambda *args, **kwargs: None)  # the start's checks, not the server
    said = []
    serve(book, token="t", say=said.append)
    assert said[0] == f"attnlab mark: audit log: {check_chain(book).text()}" and "the hash chain holds" in said[0]
    _bypass_triggers(book, "UPDATE audit SET who = 'mallory' WHERE id = 2")
    said.clear()
    serve(book, token="t", say=said.append)
    assert said[0].startswith("attnlab mark: WARNING: the audit log was altered outside attnlab: row 2 ")
    client = TestClient(create_app(book, "t", hosts=["testserver"]))
    assert client.get("/?token=t").status_code == 200
    page = client.get("/audit").text
    assert '<p id="chain" class="error">the audit log was altered outside attnlab: row 2 ' in page
