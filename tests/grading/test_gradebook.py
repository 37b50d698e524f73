"""The gradebook on SQLite. The backend-independent tests (taking the ``book`` fixture) also run on a real
PostgreSQL server in test_postgres.py."""

import multiprocessing
import sqlite3
import sys
import threading

import pytest

from attnlab.grading.outputs.gradebook import InvalidResult, open_gradebook, validate_result
from attnlab.records.score_text import format_score
from attnlab.report.gradebook_csv import export_csv


def result(questions, *, errors=(), isolation="fake", elapsed_s=0.5):
    """A grading result from {question: (score, max_score, [messages])}."""
    qs = {name: {"score": s, "max_score": m, "messages": list(msgs)}
          for name, (s, m, msgs) in questions.items()}
    return {
        "submission": "/subs/x.ipynb", "score": float(sum(s for s, _, _ in questions.values())),
        "max_score": float(sum(m for _, m, _ in questions.values())), "questions": qs,
        "isolation": isolation, "elapsed_s": elapsed_s, "errors": list(errors),
    }


@pytest.fixture
def book(tmp_path):
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        yield gb


# -- backend-independent (also run on PostgreSQL) ----------------------------------------------------------
def test_record_then_rows_round_trip(book):
    book.record("lab05", "alice.ipynb", "/subs/alice.ipynb", "aa" * 32, result(
        {"softmax": (2.0, 2.0, []), "attention": (1.0, 3.0, ["rows must sum to 1", "check the mask"])},
        errors=["cell 3 raised NameError"],
    ))
    [row] = book.rows()
    assert row["lab"] == "lab05" and row["key"] == "alice.ipynb" and row["path"] == "/subs/alice.ipynb"
    assert row["sha256"] == "aa" * 32
    assert (row["score"], row["max_score"], row["isolation"], row["elapsed_s"]) == (3.0, 5.0, "fake", 0.5)
    assert row["errors"] == ["cell 3 raised NameError"]
    assert row["grader_error"] is None
    assert row["graded_at"].endswith("+00:00")  # ISO time, UTC
    # question order is the result's, not alphabetical
    assert list(row["questions"]) == ["softmax", "attention"]
    assert row["questions"]["attention"] == {
        "score": 1.0, "max_score": 3.0, "messages": ["rows must sum to 1", "check the mask"],
    }


def test_resubmission_replaces_the_earlier_rows(book):
    book.record("lab05", "bob.ipynb", "/old/bob.ipynb", "11" * 32,
                result({"a": (1.0, 1.0, []), "b": (0.0, 1.0, ["no"]), "c": (0.0, 2.0, ["no"])}))
    book.record("lab05", "bob.ipynb", "/new/bob.ipynb", "22" * 32, result({"a": (1.0, 1.0, [])}))
    [row] = book.rows("lab05")
    assert (row["path"], row["sha256"]) == ("/new/bob.ipynb", "22" * 32)
    assert (row["score"], row["max_score"]) == (1.0, 1.0)
    assert list(row["questions"]) == ["a"]  # b and c of the first submission are gone


def test_is_done_needs_same_key_same_content_and_no_grader_error(book):
    book.record("lab05", "alice.ipynb", "/s/alice.ipynb", "aa" * 32, result({"a": (1.0, 1.0, [])}))
    assert book.is_done("lab05", "alice.ipynb", "aa" * 32)
    assert not book.is_done("lab05", "alice.ipynb", "bb" * 32)  # resubmitted
    assert not book.is_done("lab06", "alice.ipynb", "aa" * 32)  # another lab
    assert not book.is_done("lab05", "bob.ipynb", "aa" * 32)
    book.record("lab05", "carol.ipynb", "/s/carol.ipynb", "cc" * 32, result({}),
                grader_error="Traceback: boom")
    assert not book.is_done("lab05", "carol.ipynb", "cc" * 32)  # retried on the next run
    assert [r["grader_error"] for r in book.rows() if r["key"] == "carol.ipynb"] == ["Traceback: boom"]


def test_export_csv_columns_and_values(book, tmp_path):
    # bob's result is the most complete: its order decides; carol's extra question comes last.
    book.record("lab05", "alice.ipynb", "/s/a", "a" * 64, result({"attention": (3.0, 3.0, [])}))
    book.record("lab05", "bob.ipynb", "/s/b", "b" * 64,
                result({"softmax": (0.5, 2.0, []), "attention": (1.25, 3.0, [])}))
    book.record("lab05", "carol.ipynb", "/s/c", "c" * 64,
                result({"embedding": (1.0, 1.0, []), "softmax": (0.1 + 0.2, 2.0, [])}))
    book.record("lab06", "alice.ipynb", "/s/a6", "d" * 64, result({"other": (1.0, 1.0, [])}))
    n = export_csv(book, tmp_path / "out" / "lab05.csv", lab="lab05")
    assert n == 3
    assert (tmp_path / "out" / "lab05.csv").read_text() == (
        "submission,score,max_score,softmax,attention,embedding,notes\n"
        "alice.ipynb,3,3,,3,,\n"
        "bob.ipynb,1.75,5,0.5,1.25,,\n"
        "carol.ipynb,1.3,3,0.3,,1,\n"
    )
    with pytest.raises(ValueError, match=r"several labs \(lab05, lab06\).*lab="):
        export_csv(book, tmp_path / "all.csv")


def test_export_csv_with_a_roster_names_each_student_and_flags_the_unknown(book, tmp_path):
    from attnlab.roster import Roster, Student

    book.record("lab05", "alice.ipynb", "/s/a", "a" * 64, result({"attention": (3.0, 3.0, [])}))
    book.record("lab05", "zed.ipynb", "/s/z", "z" * 64, result({"attention": (1.0, 3.0, [])}))
    roster = Roster([Student("alice", name="Alice Smith", login="asmith", email="a@uni.example")])
    assert export_csv(book, tmp_path / "g.csv", roster=roster) == 2
    assert (tmp_path / "g.csv").read_text() == (
        "submission,name,login,email,score,max_score,attention,notes\n"
        "alice.ipynb,Alice Smith,asmith,a@uni.example,3,3,3,\n"
        "zed.ipynb,NOT ON ROSTER: zed,zed,,1,3,1,\n"
    )


def test_export_csv_of_an_empty_gradebook_has_the_header_only(book, tmp_path):
    assert export_csv(book, tmp_path / "e.csv") == 0
    assert (tmp_path / "e.csv").read_text() == "submission,score,max_score,notes\n"


def test_record_rejects_an_invalid_result_and_keeps_the_old_rows(book):
    book.record("lab05", "alice.ipynb", "/s/a", "a" * 64, result({"a": (1.0, 1.0, [])}))
    bad = result({"a": (1.0, 1.0, [])})
    bad["questions"]["a"]["score"] = "full"
    with pytest.raises(InvalidResult, match=r"\['a'\]\['score'\] is 'full'"):
        book.record("lab05", "alice.ipynb", "/s/a", "b" * 64, bad)
    assert [r["sha256"] for r in book.rows()] == ["a" * 64]


# -- SQLite specifics -------------------------------------------------------------------------------------
def test_sqlite_uses_wal_and_a_directory_means_gradebook_db(tmp_path):
    with open_gradebook(tmp_path) as gb:
        gb.record("lab05", "a.ipynb", "/s/a", "a" * 64, result({}))
    conn = sqlite3.connect(tmp_path / "gradebook.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT key FROM submissions").fetchall() == [("a.ipynb",)]
    conn.close()


def test_concurrent_writers_on_one_sqlite_file(tmp_path):
    """Threads with their own connections (each as separate as another process would be) and threads
    sharing one connection all write at once; every row arrives."""
    db = tmp_path / "gb.db"
    shared = open_gradebook(db)
    barrier = threading.Barrier(6)
    errors = []

    def writer(worker):
        try:
            barrier.wait()
            own = worker % 2 == 0
            gb = open_gradebook(db) if own else shared  # opening also races on CREATE TABLE
            for i in range(100):
                gb.record("lab05", f"w{worker}-{i}.ipynb", "/s", "0" * 64, result({"q": (1.0, 1.0, [])}))
                assert gb.is_done("lab05", f"w{worker}-{i}.ipynb", "0" * 64)
            if own:
                gb.close()
        except Exception as exc:  # surfaced below with the worker's number
            errors.append((worker, repr(exc)))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(shared.rows("lab05")) == 6 * 100
    shared.close()


def _open_and_record(db, barrier, worker, errors):
    """One process of the race below: wait for the others, open the new gradebook, write one row."""
    try:
        barrier.wait()
        with open_gradebook(db) as gb:
            gb.record("lab05", f"p{worker}.ipynb", "/s", "0" * 64, result({"q": (1.0, 1.0, [])}))
    except Exception as exc:  # reported to the parent with the worker's number
        errors.put((worker, repr(exc)))


def test_processes_opening_a_new_sqlite_file_at_once(tmp_path):
    """Processes that create one gradebook at the same moment (batch shards started together) all
    open it and write their row. SQLite answers 'database is locked' at once, busy timeout or not, when
    two of them switch a new file to WAL together; before the retry this failed about one trial in four."""
    ctx = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    errors = ctx.Queue()
    for trial in range(12):
        db = tmp_path / f"gb{trial}.db"
        barrier = ctx.Barrier(6)
        procs = [ctx.Process(target=_open_and_record, args=(db, barrier, w, errors)) for w in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=120)
        assert [p.exitcode for p in procs] == [0] * 6
        assert errors.empty(), (trial, errors.get())
        with open_gradebook(db) as gb:
            assert sorted(r["key"] for r in gb.rows("lab05")) == [f"p{w}.ipynb" for w in range(6)]


def test_open_gradebook_errors_name_the_target_and_the_fix(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"no gradebook at .*missing.*gradebook\.db"):
        open_gradebook(tmp_path / "missing" / "gradebook.db", create=False)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(ValueError, match=r"unsupported gradebook URL 'mysql://h/db'.*postgresql://"):
        open_gradebook("mysql://h/db")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    with pytest.raises(ImportError, match=r'pip install "attnlab\[postgres\]"'):
        open_gradebook("postgresql://user:secret@localhost/grades")


@pytest.mark.parametrize("bad, message", [
    ([1, 2], r"the result is a list, expected a dict"),
    ({"score": 1.0, "max_score": 2.0}, r"has no 'questions'"),
    ({"score": True, "max_score": 2.0, "questions": {}},
     r"result\['score'\] is True: expected a finite number"),
    ({"score": float("nan"), "max_score": 2.0, "questions": {}}, r"result\['score'\] is nan"),
    ({"score": 1.0, "max_score": 2.0, "questions": {"q": 3}}, r"result\['questions'\]\['q'\] is 3"),
    ({"score": 1.0, "max_score": 2.0, "questions": {}, "errors": "oops"}, r"result\['errors'\] is 'oops'"),
    ({"score": 0, "max_score": 1, "questions": {"q": {"score": 0, "max_score": 1, "messages": [None]}}},
     r"\['messages'\] is \[None\]: expected a list of strings"),
])
def test_validate_result_names_the_bad_field(bad, message):
    with pytest.raises(InvalidResult, match=message):
        validate_result(bad)


def test_validate_result_fills_defaults_and_drops_extra_keys():
    clean = validate_result({"score": 1, "max_score": 2, "questions": {}, "hidden_source": "def t(): ..."})
    assert clean == {"submission": "", "score": 1.0, "max_score": 2.0, "questions": {},
                     "isolation": "unknown", "elapsed_s": 0.0, "errors": [], "review": [], "problems": []}


@pytest.mark.parametrize("value, text", [
    (6.0, "6"), (2.5, "2.5"), (0.1 + 0.2, "0.3"), (0.0, "0"), (-0.0, "0"), (1 / 3, "0.333333"), (12.0, "12"),
])
def test_format_score(value, text):
    assert format_score(value) == text
