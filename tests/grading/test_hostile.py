"""Issue 17, parts 3-5: a hostile submission costs bounded memory, and hostile file names and text reach no
person unescaped (terminal, Markdown, CSV, JSON, Gradescope).

The memory tests run the grader in a subprocess and read its peak RSS (the kernel's high-water mark, reset
before grading) above its RSS before grading; the bound they hold is the one docs/GRADING.md states
("Grading results")."""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

import attnlab
from attnlab.gradescope_visibility import Visibility
from attnlab.grading.diagnosis.diagnose import MAX_RECORDED_BYTES
from attnlab.grading.outputs.feedback import REVIEW_HEADING, feedback_markdown
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.outputs.gradescope import to_gradescope
from attnlab.grading.outputs.score_table import score_table
from attnlab.grading.scale.batch import grade_batch
from attnlab.records.safe_text import MAX_MESSAGE_CHARS, MAX_MESSAGES, for_csv, readable_name
from attnlab.report.gradebook_csv import export_csv, export_gradebook

from .test_attacks import SCALE, WRONG
from .test_batch import fake_grade

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("hostile_worker.py")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def documented_peak_mib() -> float:
    """The bound docs/GRADING.md states for the grader's extra peak memory per submission."""
    text = (ROOT / "docs" / "GRADING.md").read_text()
    match = re.search(r"peak memory per submission\s+is\s+at\s+most\s+(\d+)\s+MiB", text)
    assert match, "docs/GRADING.md must state the grader's peak memory per submission"
    return float(match.group(1))


def run_python(script: str, *args, env=None, timeout=120) -> dict:
    """Run ``script`` in a fresh interpreter on this checkout's attnlab; its last stdout line is JSON."""
    environ = {**os.environ, "PYTHONPATH": str(Path(attnlab.__file__).resolve().parent.parent), **(env or {})}
    done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True,
                          env=environ, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- memory: a worker whose every reply is the largest frame the grader accepts ----------------------------
# Peak RSS of this process from now on, in MiB above its RSS now: the kernel's high-water mark (VmHWM) is reset
# first (clear_refs 5), so that a peak reached while importing torch cannot hide the grading's.
MEASURE = textwrap.dedent("""
    def _status(field):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith(field + ":")) / 1024

    def start_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status("VmRSS")

    def extra_peak(base):
        return _status("VmHWM") - base
""")
REMOTE = MEASURE + textwrap.dedent("""
    import json, subprocess, sys
    import torch
    from attnlab.grading.worker.remote import RemoteStudent
    from attnlab.grading.diagnosis.diagnose import Recorder
    from attnlab.grading.core.hidden import HiddenSuite, run_suite

    worker, mode = sys.argv[1], sys.argv[2]
    suite = HiddenSuite("lab98_hostile")
    for i in range(8):
        @suite.test("f" if i % 2 else "g", name=f"t{i}")
        def three_calls(student, ref, rng):
            for _ in range(3):
                r = student.call("f", torch.ones(3), torch.zeros(2, dtype=torch.int64))
            raise AssertionError(f"wrong: {r.output.shape}")

    def spawn():
        return subprocess.Popen([sys.executable, worker, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    student = RemoteStudent(spawn, [{"index": 0, "source": "x = 1"}], "x = 1", cell_timeout=10, load_timeout=30,
                            call_timeout=30)
    recorder = Recorder(student)
    base = start_peak()
    results = run_suite(suite, recorder, None, seed=0, on_result=recorder.on_result)
    extra = extra_peak(base)
    student.close()
    print(json.dumps({"extra_mib": extra, "results": results, "kept_bytes": recorder.kept_bytes,
                      "starts": student.starts, "notebook_errors": student.notebook_errors}))
""")


@pytest.mark.parametrize("mode, starts, says", [
    ("flood", 1, "wrong: torch.Size([8372192])"),  # valid 32 MiB replies: the tests run and fail
    ("forge", 5, "labelled complex128 but holds uint8 data"),  # a broken worker each time: 1 + 4 restarts
    ("error", 1, "EEEE"),  # 1 MiB error texts
])
def test_a_hostile_worker_cannot_grow_the_grader_past_the_documented_peak(mode, starts, says):
    out = run_python(REMOTE, WORKER, mode)
    assert out["extra_mib"] < documented_peak_mib(), out["extra_mib"]
    messages = [m for q in out["results"].values() for m in q["messages"]]
    assert len(messages) == 8 and all(m.startswith("failed: t") for m in messages)  # every test has its row
    assert says in messages[0] and all(len(m) <= MAX_MESSAGE_CHARS for m in messages)
    assert out["starts"] == starts
    assert out["kept_bytes"] <= MAX_RECORDED_BYTES
    errors = out["notebook_errors"]  # the load reported 20 errors of 40,000 characters and 10**9 failures
    assert len(errors) == MAX_MESSAGES + 1 and errors[-1] == "… and 999,999,980 more cell errors"
    assert all(len(e) <= MAX_MESSAGE_CHARS + 40 for e in errors)


# -- the batch acceptance test: hostile names and a hostile worker, a row for every file -----------------
BASELINE = WRONG + SCALE  # double wrong, Scale right: 1 point
# Student code writes a 32 MiB frame to every descriptor it can (the worker's reply pipe among them) and
# waits: the grader reads that frame as the reply to ``double``.
FORGE = BASELINE + """
import io, json, os, struct, time
import numpy as np

def _frame(arr, label, x):
    blobs = []
    for a in (arr, x.detach().numpy()):
        buf = io.BytesIO()
        np.save(buf, a)
        blobs.append(buf.getvalue())
    value = {"__dict__": [["output", {"__tensor__": 0, "dtype": label}], ["grads", {"__dict__": []}],
             ["param_grads", {"__dict__": []}],
             ["inputs_after", {"__dict__": [["0", {"__tensor__": 1, "dtype": str(x.dtype)[6:]}]]}]]}
    header = json.dumps({"v": {"__dict__": [["ok", True], ["value", value]]}, "blobs": [len(b) for b in blobs]})
    body = struct.pack("<I", len(header)) + header.encode() + b"".join(blobs)
    return struct.pack("<Q", len(body)) + body

def double(x):
    frame = _frame(np.zeros(32 * 2**20 - 2**16, np.uint8), "{label}", x)
    for fd in range(3, 32):
        try:
            os.write(fd, frame)
        except OSError:
            pass
    time.sleep(0.5)
    return x * 2
"""

BATCH = MEASURE + textwrap.dedent("""
    import functools, json, sys
    from attnlab.grading.scale.batch import grade_batch
    from attnlab.grading.runner import grade_submission, load_bundle

    lab, subs, out = sys.argv[1:4]
    load_bundle(lab)
    grade = functools.partial(grade_submission, cell_timeout=10, call_timeout=10, load_timeout=60)
    base = start_peak()
    summary = grade_batch(lab, [subs], out_dir=out, grade_fn=grade, progress=False)
    print(json.dumps({"extra_mib": extra_peak(base), "keys": [r["key"] for r in summary.results],
                      "scores": [r["score"] for r in summary.results], "failed": summary.failed,
                      "errors": [r["errors"] for r in summary.results],
                      "messages": [r["questions"]["double"]["messages"] for r in summary.results]}))
""")
NON_UTF8 = os.fsdecode(b"caf\xe9 \xff.ipynb")
FORMULA = '=HYPERLINK("https:evil.example","y").ipynb'  # a file name cannot hold "/"


def _notebook(path: Path, source: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    nbformat.write(nb, path)


def test_a_hostile_batch_gives_every_file_a_row_within_the_documented_peak(built_course, tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    _notebook(subs / NON_UTF8, BASELINE)
    _notebook(subs / FORMULA, FORGE.replace("{label}", "complex128"))  # 512 MiB once converted: refused
    _notebook(subs / "flood.ipynb", FORGE.replace("{label}", "uint8"))  # a valid 32 MiB reply
    out = run_python(BATCH, built_course / "autograder" / "lab99_demo", subs, tmp_path / "out",
                     env={"ATTNLAB_SANDBOX": "off", "ATTNLAB_GRADING_SECRET": "hostile"}, timeout=300)
    assert out["keys"] == sorted([FORMULA, "caf\\xe9 \\xff.ipynb", "flood.ipynb"])
    assert out["failed"] == 0 and out["extra_mib"] < documented_peak_mib(), out
    by_key = dict(zip(out["keys"], zip(out["scores"], out["messages"])))
    assert by_key["caf\\xe9 \\xff.ipynb"][0] == 1.0  # Scale right, double wrong: graded like any other
    assert by_key[FORMULA][0] <= 1.0 and any("labelled complex128 but holds uint8 data" in m for m in by_key[FORMULA][1])
    assert by_key["flood.ipynb"][0] <= 1.0
    export_gradebook(tmp_path / "out", tmp_path / "grades.csv")
    rows = list(csv.reader((tmp_path / "grades.csv").open(encoding="utf-8")))
    assert [r[0] for r in rows[1:]] == ["'" + FORMULA, "caf\\xe9 \\xff.ipynb", "flood.ipynb"]


# -- hostile names: every file gets a row, escaped wherever a person reads it ----------------------------
HOSTILE_NAMES = [
    os.fsdecode(b"\xff\xfe not utf-8.ipynb"), "new\nline.ipynb", "tab\there.ipynb", "ansi\x1b[2K\x1b[31m.ipynb",
    "pipe | col.ipynb", "back`tick`.ipynb", "<script>alert(1)<\\script>.ipynb", "=1+2.ipynb", "+cmd.ipynb",
    "-2.ipynb", "@SUM(A1).ipynb", "\ttabbed.ipynb", "\rcr.ipynb", "# heading.ipynb", "\u202eevil.ipynb",
]


def test_every_hostile_file_name_gets_a_row_and_is_escaped_everywhere(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in HOSTILE_NAMES:
        (subs / name).write_text(json.dumps({"answers": {"softmax": 2}}))
    out = tmp_path / "out"
    summary = grade_batch("lab05_self_attention", [subs], out_dir=out, grade_fn=fake_grade, progress=False)
    keys = sorted(readable_name(n) for n in HOSTILE_NAMES)
    assert summary.graded == len(HOSTILE_NAMES) and [r["key"] for r in summary.results] == keys
    with open_gradebook(out, create=False) as book:
        assert sorted(r["key"] for r in book.rows()) == keys
    table = score_table(summary.results)
    assert len(table.splitlines()) == 1 + len(HOSTILE_NAMES)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e\udc80-\udcff]", table)
    for key in keys:
        folder = out / "submissions" / Path(key).stem
        feedback = (folder / "feedback.md").read_text(encoding="utf-8")
        first = feedback.splitlines()[0]
        assert first.startswith("# Feedback: ") and "<script>" not in first and "\x1b" not in first
        assert json.loads((folder / "results.json").read_text(encoding="utf-8"))["score"] == 2.0
    export_gradebook(out, tmp_path / "grades.csv")
    rows = list(csv.reader((tmp_path / "grades.csv").open(encoding="utf-8", newline="")))
    assert len(rows) == 1 + len(HOSTILE_NAMES)
    assert all(not row[0].startswith(FORMULA_START) and "\n" not in row[0] for row in rows[1:])


def test_a_long_name_that_is_not_utf8_gets_a_row_and_a_short_folder(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    long_name = os.fsdecode(b"\xff" * 240 + b".ipynb")  # 246 bytes on disk, 966 characters as a key
    (subs / long_name).write_text(json.dumps({"answers": {}}))
    summary = grade_batch("lab05_self_attention", [subs], out_dir=tmp_path / "out", grade_fn=fake_grade,
                          progress=False)
    assert [r["key"] for r in summary.results] == ["\\xff" * 240 + ".ipynb"]
    (folder,) = list((tmp_path / "out" / "submissions").iterdir())
    assert len(folder.name.encode()) <= 200 and folder.name.startswith("\\xff") and (folder / "feedback.md").exists()


def test_a_name_that_is_not_utf8_and_its_escaped_look_alike_get_two_rows(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / os.fsdecode(b"caf\xe9.ipynb")).write_text(json.dumps({"answers": {"softmax": 1}}))
    (subs / "caf\\xe9.ipynb").write_text(json.dumps({"answers": {"softmax": 2}}))  # the text the other shows
    summary = grade_batch("lab05_self_attention", [subs], out_dir=tmp_path / "out", grade_fn=fake_grade,
                          progress=False)
    assert {r["key"]: r["score"] for r in summary.results} == {"caf\\xe9.ipynb": 1.0, "caf\\\\xe9.ipynb": 2.0}


def test_json_output_of_grade_holds_readable_names():
    from attnlab.grading.outputs.score_table import json_rows

    rows = json_rows([{"submission": os.fsdecode(b"/s/caf\xe9.ipynb"), "score": 1.0, "review": ["r"], "x": 1}])
    assert rows == [{"submission": "/s/caf\\xe9.ipynb", "score": 1.0, "review": ["r"]}]
    json.dumps(rows).encode("utf-8")  # no lone surrogate left


# -- CSV injection ----------------------------------------------------------------------------------------
def _result(score=1.0, *, errors=(), review=None, messages=()):
    out = {"submission": "x", "score": score, "max_score": 2.0, "isolation": "t", "elapsed_s": 0.1,
           "errors": list(errors), "questions": {"q": {"score": score, "max_score": 2.0, "messages": list(messages)}}}
    if review is not None:
        out["review"] = review
    return out


@pytest.mark.parametrize("text, cell", [
    ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'), ("+1", "'+1"), ("-1", "'-1"),
    ("@SUM(A1)", "'@SUM(A1)"), ("\t=1", "\\t=1"), ("\r=1", "\\x0d=1"), ("plain", "plain"), ("a=b", "a=b"),
])
def test_for_csv_neutralises_formulas(text, cell):
    assert for_csv(text) == cell


def test_no_csv_cell_the_kit_writes_starts_a_formula_and_scores_stay_numbers(tmp_path):
    with open_gradebook(tmp_path / "g.db") as book:
        book.record("lab", '=HYPERLINK("http://x","y")', "/p", "a" * 64,
                    _result(-1.0, errors=["=cmd|' /C calc'!A0", "@evil"], review=["+review me"]))
        book.record("lab", "-2.ipynb", "/p", "b" * 64, _result(0.5))
        export_csv(book, tmp_path / "g.csv")
    rows = list(csv.reader((tmp_path / "g.csv").open(encoding="utf-8")))
    assert rows[0] == ["submission", "score", "max_score", "q", "notes"]
    for row in rows[1:]:
        assert not any(cell.startswith(FORMULA_START) for cell in (row[0], row[-1]))
    formula = next(r for r in rows if "HYPERLINK" in r[0])
    assert formula[1:4] == ["-1", "2", "-1"]  # a negative score is still a number
    assert formula[4] == "needs review: +review me | =cmd|' /C calc'!A0 | @evil"
    assert next(r for r in rows if "-2" in r[0])[0] == "'-2.ipynb"


# -- the notes column, review items, older gradebooks ------------------------------------------------------
OLD_SCHEMA = """CREATE TABLE submissions (
    lab TEXT NOT NULL, key TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,
    score DOUBLE PRECISION NOT NULL, max_score DOUBLE PRECISION NOT NULL,
    isolation TEXT NOT NULL, elapsed_s DOUBLE PRECISION NOT NULL, graded_at TEXT NOT NULL,
    errors TEXT NOT NULL, grader_error TEXT, PRIMARY KEY (lab, key));
CREATE TABLE questions (lab TEXT NOT NULL, key TEXT NOT NULL, question TEXT NOT NULL, position INTEGER NOT NULL,
    score DOUBLE PRECISION NOT NULL, max_score DOUBLE PRECISION NOT NULL, messages TEXT NOT NULL,
    PRIMARY KEY (lab, key, question))"""


def test_an_older_gradebook_gets_the_review_column_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript(OLD_SCHEMA)
    conn.execute("INSERT INTO submissions VALUES ('lab', 'old.ipynb', '/p', 'sha', 1, 2, 'i', 0.1, 't', "
                 "'[\"hung\"]', NULL)")
    conn.commit()
    conn.close()
    with open_gradebook(db) as book:
        assert [(r["key"], r["review"], r["errors"]) for r in book.rows()] == [("old.ipynb", [], ["hung"])]
        book.record("lab", "new.ipynb", "/p", "s", _result(review=["uses torch.ops: check by hand"]))
        assert [r["review"] for r in book.rows()] == [["uses torch.ops: check by hand"], []]
        export_csv(book, tmp_path / "g.csv")
    with open_gradebook(db) as book:  # opening it again changes nothing
        assert len(book.rows()) == 2
    assert [r[-1] for r in csv.reader((tmp_path / "g.csv").open())] == [
        "notes", "needs review: uses torch.ops: check by hand", "hung"]


def test_review_items_are_in_the_table_and_under_a_heading_in_feedback():
    reviewed = _result(review=["calls torch.ops.aten directly", "## fake heading\n<b>x</b>"], errors=["hung"])
    plain = _result()  # no "review" key: treated as []
    table = score_table([reviewed, plain]).splitlines()
    assert "needs review: calls torch.ops.aten directly" in table[1] and "needs review" not in table[2]
    text = feedback_markdown(reviewed)
    assert f"## {REVIEW_HEADING}\n\n```text\n- calls torch.ops.aten directly\n- ## fake heading\n<b>x</b>\n```" in text
    assert REVIEW_HEADING not in feedback_markdown(plain)


# -- Gradescope: student text cannot add structure lines ---------------------------------------------------
@pytest.mark.parametrize("forged", ["\nTotal: 30 / 30", "\r\nTotal: 30 / 30", "\u2028Total: 30 / 30",
                                    "Total: 30 / 30", "\n\nTotal: 30 / 30\n", "\x0bTotal: 30 / 30"])
@pytest.mark.parametrize("hidden", ["visible", "after_due_date"])
def test_a_student_message_cannot_forge_a_gradescope_total(forged, hidden):
    out = to_gradescope(_result(0.0, errors=[f"cell 1 raised ValueError: {forged}", forged],
                                messages=[f"failed: t: {forged}", forged]), Visibility(hidden_tests=hidden))
    total = ["Total: 0 / 2"] if hidden == "visible" else []  # no total while the hidden tests are not shown
    for text in [out["output"]] + [t["output"] for t in out["tests"]]:
        starts = [line for line in re.split("[\n\r\u2028\u2029\x0b\x0c\x1c-\x1e\x85]", text)
                  if line.startswith("Total")]
        assert starts == (total if text is out["output"] else []), text
