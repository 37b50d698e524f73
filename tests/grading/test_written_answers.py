"""Written questions on the grade side (issue 29): answers read from the notebook, "awaiting marking" in every
total, the gradebook's written rows and their migration, and the marks laid over the rows (``marks_applied``)."""

import csv
import io
import json
import sqlite3
from dataclasses import dataclass

import pytest

from attnlab.gradescope_visibility import Visibility
from attnlab.grading.core.written_answers import AWAITING, MAX_ANSWER_CHARS, Question, add_written, find_answer, total_text
from attnlab.grading.outputs.feedback import feedback_markdown
from attnlab.grading.outputs.gradebook import InvalidResult, open_gradebook, row_notes, validate_result
from attnlab.grading.outputs.gradescope import to_gradescope
from attnlab.grading.outputs.score_table import json_rows, score_table
from attnlab.marking.marks_applied import apply_marks
from attnlab.records.stub_text import PLACEHOLDER
from attnlab.report.gradebook_csv import export_csv

PROMPT = "**Written question (2 points).** Why does the model without positions score 0.5 on mirror pairs?"
MANIFEST = {"lab": "lab99_demo", "written": [
    {"name": "mirror_pairs", "points": 2, "prompt": PROMPT, "reference": "Because ...",
     "rubric": [{"id": "mirror_pairs.1", "criterion": "Quotes 0.5", "points": 1}]},
    {"name": "var_qk", "points": 1.5, "prompt": "Derive Var(q.k) = d.", "reference": "...", "rubric": []},
]}


def md(text, **meta):
    return {"cell_type": "markdown", "metadata": meta, "source": text}


def code(text):
    return {"cell_type": "code", "metadata": {}, "source": text, "outputs": [], "execution_count": None}


def notebook(*cells) -> bytes:
    return json.dumps({"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def answer_cell(name, text):
    return md(text, attnlab={"written": name, "points": 2})


def code_result():
    return {"submission": "/subs/alice.ipynb", "lab": "lab99_demo", "score": 1.0, "max_score": 3.0,
            "questions": {"double": {"score": 0.0, "max_score": 2.0, "messages": ["failed: double_values"]},
                          "Scale": {"score": 1.0, "max_score": 1.0, "messages": ["passed: scale_values"]}},
            "errors": [], "review": [], "isolation": "fake", "elapsed_s": 1.0}


# -- reading the answer ------------------------------------------------------------------------------------
def test_the_answer_is_the_cell_its_metadata_names_else_the_first_markdown_after_the_prompt():
    q = Question("mirror_pairs", 2.0, PROMPT)
    cells = json.loads(notebook(md(PROMPT), answer_cell("var_qk", "other answer"),
                                answer_cell("mirror_pairs", ["Without positions ", "the two orders match: 0.51."])))
    assert find_answer(cells["cells"], q) == "Without positions the two orders match: 0.51."
    # metadata lost (a student copied the cell): the first Markdown cell after the prompt, code cells skipped
    lost = [md("# Part 2"), md(PROMPT + "\n"), code("x = 1"), md("My own words: 0.5 because ..."), md("later")]
    assert find_answer(lost, q) == "My own words: 0.5 because ..."
    assert find_answer([md("# no prompt here"), md("text")], q) == ""
    # the answer cell copied (metadata and all) and the copy written in: the written one
    copied = [answer_cell("mirror_pairs", PLACEHOLDER), answer_cell("mirror_pairs", "the copy's text")]
    assert find_answer(copied, q) == "the copy's text"


@pytest.mark.parametrize("text", [PLACEHOLDER, "  \n", f"\n{PLACEHOLDER}  \n", ""])
def test_an_unchanged_placeholder_or_whitespace_is_an_empty_answer(text):
    assert find_answer([answer_cell("mirror_pairs", text)], Question("mirror_pairs", 2.0)) == ""


def test_a_long_answer_is_cut_with_a_note_and_kept_as_text():
    text = "<script>alert(1)</script>" + "x" * (MAX_ANSWER_CHARS + 500)
    got = find_answer([answer_cell("mirror_pairs", text)], Question("mirror_pairs", 2.0))
    assert got.startswith("<script>alert(1)</script>") and len(got) < MAX_ANSWER_CHARS + 200
    assert got.endswith("more characters cut by the grader: an answer keeps its first 20,000]")
    assert f"{len(text) - MAX_ANSWER_CHARS:,} more characters" in got


def test_add_written_records_awaiting_never_zero_nor_full_and_leaves_code_scores_alone():
    data = notebook(md(PROMPT), answer_cell("mirror_pairs", "0.5, since no order is seen"))
    result = add_written(code_result(), MANIFEST, data)
    assert result["questions"]["double"] == code_result()["questions"]["double"]  # code: unchanged, no kind
    assert result["score"] == 1.0 and result["max_score"] == 6.5 and result["awaiting_points"] == 3.5
    assert result["questions"]["mirror_pairs"] == {
        "score": None, "max_score": 2.0, "messages": [], "kind": "written", "status": AWAITING,
        "answer": "0.5, since no order is seen"}
    assert result["questions"]["var_qk"]["answer"] == "" and result["questions"]["var_qk"]["score"] is None
    assert add_written(result, MANIFEST, data)["max_score"] == 6.5  # a second call adds nothing
    # an old bundle (no written list) and an unreadable notebook
    assert "awaiting_points" not in add_written(code_result(), {"lab": "x"}, b"")
    assert add_written(code_result(), MANIFEST, b"not json")["questions"]["mirror_pairs"]["answer"] == ""


def test_validate_result_keeps_written_entries_and_refuses_a_code_question_without_a_score():
    r = validate_result(add_written(code_result(), MANIFEST, None))
    assert r["questions"]["var_qk"]["score"] is None and r["questions"]["var_qk"]["status"] == AWAITING
    assert r["awaiting_points"] == 3.5 and "kind" not in r["questions"]["double"]
    bad = code_result()
    bad["questions"]["double"]["score"] = None
    with pytest.raises(InvalidResult, match=r"\['double'\]\['score'\] is None"):
        validate_result(bad)
    lying = code_result()  # a status that says marked on an unmarked answer is dropped, not believed
    lying["questions"]["w"] = {"score": None, "max_score": 1.0, "kind": "written", "status": "marked"}
    assert validate_result(lying)["questions"]["w"]["status"] == AWAITING


# -- every total says it -----------------------------------------------------------------------------------
def test_totals_table_json_feedback_and_gradescope_say_points_awaiting_marking():
    result = add_written(code_result(), MANIFEST, notebook(answer_cell("mirror_pairs", "# Heading\n<b>x</b>")))
    assert total_text(1.0, 6.5, 3.5) == "1 / 6.5 (3.5 points awaiting marking)"
    assert total_text(2.0, 3.0, 1.0) == "2 / 3 (1 point awaiting marking)" and total_text(2, 3, 0) == "2 / 3"
    assert "3.5 points awaiting marking" in row_notes(result)
    table = score_table([result], width=None)
    assert "3.5 points awaiting marking" in table and "lost: double 0/2" in table and "mirror_pairs" not in table
    assert " 1.0 / 6.5 " in table  # half points shown, not rounded away
    assert json_rows([result])[0]["awaiting_points"] == 3.5
    fb = feedback_markdown(result)
    assert "**Total: 1 / 6.5 (3.5 points awaiting marking)**" in fb
    assert "## `mirror_pairs`: awaiting marking (2 points)" in fb and "| `var_qk` | awaiting marking (1.5 points) |" in fb
    assert fb.count("No answer was found in your notebook") == 1  # var_qk's; mirror_pairs has an answer
    assert "mirror_pairs`: 0" not in fb and "<b>x</b>" not in fb  # never 0; the answer is not echoed as markup
    gs = to_gradescope(result, Visibility(hidden_tests="visible"))
    assert gs["output"] == "Total: 1 / 6.5 (3.5 points awaiting marking)" and gs["score"] == 1.0
    written = next(t for t in gs["tests"] if t["name"] == "mirror_pairs (written)")
    assert "score" not in written and "max_score" not in written  # neither 0 nor full marks in the autograder
    assert written["output"].startswith("2 points awaiting marking: a person marks this answer")


# -- the gradebook -----------------------------------------------------------------------------------------
def test_gradebook_round_trip_of_a_written_answer_and_its_csv(tmp_path):
    result = add_written(code_result(), MANIFEST, notebook(answer_cell("mirror_pairs", "=1+1 is 0.5")))
    with open_gradebook(tmp_path / "g.db") as book:
        book.record("lab99_demo", "alice.ipynb", "/subs/alice.ipynb", "aa" * 32, result)
        [row] = book.rows()
        assert row["awaiting_points"] == 3.5 and row["score"] == 1.0 and row["max_score"] == 6.5
        assert row["questions"]["mirror_pairs"] == {"score": None, "max_score": 2.0, "messages": [],
                                                    "kind": "written", "answer": "=1+1 is 0.5", "status": AWAITING}
        assert "kind" not in row["questions"]["double"]
        export_csv(book, tmp_path / "g.csv")
    kinds = sqlite3.connect(tmp_path / "g.db").execute("SELECT question, kind, score FROM questions").fetchall()
    assert sorted(kinds) == [("Scale", "code", 1.0), ("double", "code", 0.0), ("mirror_pairs", "written", None),
                             ("var_qk", "written", None)]
    header, line = list(csv.reader(io.StringIO((tmp_path / "g.csv").read_text())))
    assert header == ["submission", "score", "max_score", "double", "Scale", "mirror_pairs", "var_qk",
                      "awaiting_marking", "notes"]
    assert line == ["alice.ipynb", "1", "6.5", "0", "1", "", "", "3.5", "3.5 points awaiting marking"]


OLD_SCHEMA = """CREATE TABLE submissions (lab TEXT NOT NULL, key TEXT NOT NULL, path TEXT NOT NULL,
    sha256 TEXT NOT NULL, score DOUBLE PRECISION NOT NULL, max_score DOUBLE PRECISION NOT NULL,
    isolation TEXT NOT NULL, elapsed_s DOUBLE PRECISION NOT NULL, graded_at TEXT NOT NULL, errors TEXT NOT NULL,
    grader_error TEXT, PRIMARY KEY (lab, key));
CREATE TABLE questions (lab TEXT NOT NULL, key TEXT NOT NULL, question TEXT NOT NULL, position INTEGER NOT NULL,
    score DOUBLE PRECISION NOT NULL, max_score DOUBLE PRECISION NOT NULL, messages TEXT NOT NULL,
    PRIMARY KEY (lab, key, question));
INSERT INTO submissions VALUES ('lab99_demo', 'bob.ipynb', '/s/bob.ipynb', 'bb', 2, 3, 'old', 1, 't', '[]', NULL);
INSERT INTO questions VALUES ('lab99_demo', 'bob.ipynb', 'double', 0, 2, 2, '["passed"]');
INSERT INTO questions VALUES ('lab99_demo', 'bob.ipynb', 'Scale', 1, 0, 1, '["failed"]');"""


def test_an_old_gradebook_is_migrated_in_place_and_then_takes_awaiting_rows(tmp_path):
    path = tmp_path / "old.db"
    sqlite3.connect(path).executescript(OLD_SCHEMA)
    with open_gradebook(path, create=False) as book:
        [bob] = book.rows()
        assert bob["questions"] == {"double": {"score": 2.0, "max_score": 2.0, "messages": ["passed"]},
                                    "Scale": {"score": 0.0, "max_score": 1.0, "messages": ["failed"]}}
        assert "awaiting_points" not in bob
        book.record("lab99_demo", "alice.ipynb", "/subs/alice.ipynb", "aa" * 32, add_written(code_result(), MANIFEST, None))
        assert [r["key"] for r in book.rows()] == ["alice.ipynb", "bob.ipynb"]
    columns = {r[1]: r[3] for r in sqlite3.connect(path).execute("PRAGMA table_info(questions)")}
    assert columns["score"] == 0 and {"details", "kind", "answer"} <= set(columns)  # score: NULL allowed now
    with open_gradebook(path, create=False) as book:  # opening again: nothing to migrate, rows intact
        assert book.rows()[0]["questions"]["var_qk"]["score"] is None


# -- the marks -------------------------------------------------------------------------------------------
@dataclass
class Effective:  # marking.store.Effective's fields (written_spec.md section 4)
    score: float | None
    max_score: float
    status: str
    rubric: list
    comment: str | None = None
    reason: str | None = None
    was: float | None = None
    changed_by: str | None = None


def test_marks_are_laid_over_a_row_and_the_feedback_shows_rubric_comment_and_reason(tmp_path):
    result = add_written(code_result(), MANIFEST, notebook(answer_cell("mirror_pairs", "0.5")))
    with open_gradebook(tmp_path / "g.db") as book:
        book.record("lab99_demo", "alice.ipynb", "/subs/alice.ipynb", "aa" * 32, result)
        [row] = book.rows()
    apply_marks(row, {
        "mirror_pairs": Effective(1.5, 2.0, "marked", [("Quotes 0.5", 1.0), ("Explains **why**", 1.0),
                                                       ("No own number", -0.5)], "Good; quote *your* run."),
        "double": Effective(1.0, 2.0, "changed", [], None, "appeal: the test's tolerance was too tight"),
        "Scale": Effective(1.0, 1.0, "graded", []),
    })
    assert row["score"] == 3.5 and row["awaiting_points"] == 1.5  # 1 + 1 + 1.5 marked; var_qk still waits
    fb = feedback_markdown({**row, "submission": row["path"]})
    assert "**Total: 3.5 / 6.5 (1.5 points awaiting marking)**" in fb
    assert "## `mirror_pairs`: 1.5 / 2" in fb and "- Quotes 0\\.5 (+1)" in fb and "- No own number (-0.5)" in fb
    assert "Explains \\*\\*why\\*\\*" in fb  # a marker's text is escaped as a student's is
    assert "Comment from your marker:" in fb and "Good; quote *your* run." in fb
    assert "## `double`: 1 / 2" in fb and "appeal: the test's tolerance was too tight" in fb
    assert "## `var_qk`: awaiting marking (1.5 points)" in fb


# -- end to end: the grader, a batch and the report on the fixture course ------------------------------------
@pytest.fixture
def written_lab(built_course, tmp_path, monkeypatch):
    """The fixture course's lab99_demo bundle with a written question in its manifest, and a submission: the
    solution notebook with the answer cell the build writes (written_spec.md section 2), answered."""
    import shutil

    monkeypatch.setenv("ATTNLAB_SANDBOX", "off")
    monkeypatch.delenv("ATTNLAB_GRADING_SECRET", raising=False)
    lab_dir = tmp_path / "autograder" / "lab99_demo"
    shutil.copytree(built_course / "autograder" / "lab99_demo", lab_dir)
    manifest = json.loads((lab_dir / "manifest.json").read_text())
    manifest["written"] = MANIFEST["written"][:1]
    (lab_dir / "manifest.json").write_text(json.dumps(manifest))
    nb = json.loads((built_course / "solutions" / "lab99_demo" / "lab99_demo.ipynb").read_text())
    nb["cells"] += [md(PROMPT), answer_cell("mirror_pairs", "It scores 0.5: <script>x()</script>")]
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "alice.ipynb").write_text(json.dumps(nb))
    return lab_dir, subs / "alice.ipynb"


def test_grade_submission_batch_and_report_carry_the_awaiting_answer(written_lab, tmp_path):
    from attnlab.grading.runner import grade_submission
    from attnlab.grading.scale.batch import grade_batch
    from attnlab.report import build_report

    lab_dir, alice = written_lab
    res = grade_submission(lab_dir, alice)
    assert res["questions"]["double"]["score"] == 2.0 and res["questions"]["Scale"]["score"] == 1.0  # unchanged
    assert res["score"] == 3.0 and res["max_score"] == 5.0 and res["awaiting_points"] == 2.0
    assert res["questions"]["mirror_pairs"]["answer"] == "It scores 0.5: <script>x()</script>"
    out = tmp_path / "out"
    grade_batch(lab_dir, [alice.parent], out_dir=out)
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert "**Total: 3 / 5 (2 points awaiting marking)**" in feedback
    gs = json.loads((out / "submissions" / "alice" / "results.json").read_text())
    assert gs["score"] == 3.0 and [t["name"] for t in gs["tests"]][-1] == "mirror_pairs (written)"
    done = build_report(out, html=tmp_path / "rep" / "report.html")
    summary = done.markdown.read_text()
    assert "| `mirror_pairs` (1 awaiting marking) | 2 | - | - | - |" in summary  # no mean of 0 for unmarked answers
    assert "3 / 5 (2 points awaiting marking)" in summary
    scores = (tmp_path / "rep" / "report-scores.csv").read_text().splitlines()
    assert scores[1].split(",")[2:] == ["5", "2", "1", "", "2 points awaiting marking"]
    canvas = list(csv.reader(io.StringIO((tmp_path / "rep" / "report-canvas.csv").read_text())))
    assert canvas[0][-1] == "lab99_demo: points awaiting marking" and canvas[1][-1] == "(read only)"
    assert canvas[2][-3:] == ["", "3", "2"]
    assert "<script>x()</script>" not in (tmp_path / "rep" / "report.html").read_text()


def test_marks_from_the_marking_store_reach_the_csv_the_report_and_the_feedback_files(written_lab, tmp_path):
    """A marker marks alice's written answer (two rubric items and a comment) and changes a code score with a reason
    (marking.store): `attnlab gradebook --csv`, the report's CSVs and alice's refreshed feedback.md follow."""
    from attnlab.grading.scale.batch import grade_batch
    from attnlab.marking.store import MarkStore
    from attnlab.report import build_report
    from attnlab.report.gradebook_csv import export_gradebook

    lab_dir, alice = written_lab
    out = tmp_path / "out"
    grade_batch(lab_dir, [alice.parent], out_dir=out)
    with open_gradebook(out) as book:
        store = MarkStore(book)
        store.ensure_rubric("lab99_demo", "mirror_pairs", [("mirror_pairs.1", "Quotes 0.5", 1.0),
                                                           ("mirror_pairs.2", "Explains why", 1.0),
                                                           ("mirror_pairs.3", "No own number", -0.5)])
        store.save_mark("lab99_demo", "alice.ipynb", "mirror_pairs", items=["mirror_pairs.1", "mirror_pairs.3"],
                        comment="Quote your own run's number.", marker="ta1", version=0)
        store.change_score("lab99_demo", "alice.ipynb", "double", 1.5, reason="similarity finding: shared code",
                           marker="ta2", version=0)
    export_gradebook(out, tmp_path / "g.csv")
    header, line = list(csv.reader(io.StringIO((tmp_path / "g.csv").read_text())))
    assert dict(zip(header, line)) == {
        "submission": "alice.ipynb", "score": "3", "max_score": "5", "double": "1.5", "Scale": "1",
        "mirror_pairs": "0.5", "awaiting_marking": "0", "notes": ""}  # 1.5 + 1 + (1 - 0.5)
    build_report(out, html=tmp_path / "rep" / "report.html")
    canvas = list(csv.reader(io.StringIO((tmp_path / "rep" / "report-canvas.csv").read_text())))
    assert canvas[2][-5:] == ["1.5", "1", "0.5", "3", "0"]
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert "**Total: 3 / 5**" in feedback and "awaiting" not in feedback
    assert "## `mirror_pairs`: 0.5 / 2" in feedback and "- Quotes 0\\.5 (+1)" in feedback
    assert "- No own number (-0.5)" in feedback and "Explains why" not in feedback
    assert "Quote your own run's number." in feedback
    assert "## `double`: 1.5 / 2" in feedback and "similarity finding: shared code" in feedback


def test_the_gradescope_runner_keeps_written_questions_awaiting_when_nothing_could_be_graded(written_lab, tmp_path,
                                                                                            capsys):
    from attnlab.grading.bridges.gradescope_run import run

    lab_dir, _ = written_lab
    (tmp_path / "empty").mkdir()
    result = run(lab="lab99_demo", bundle=str(lab_dir), submission=str(tmp_path / "empty"),
                 results=str(tmp_path / "results.json"))
    assert result["score"] == 0.0 and result["max_score"] == 5.0 and result["awaiting_points"] == 2.0
    assert "lab99_demo: 0 / 5 (2 points awaiting marking)" in capsys.readouterr().out
    tests = {t["name"]: t for t in json.loads((tmp_path / "results.json").read_text())["tests"]}
    assert tests["double"]["score"] == 0.0 and "score" not in tests["mirror_pairs (written)"]


def test_attnlab_report_says_what_awaits_marking_and_what_it_refreshed():
    from types import SimpleNamespace

    from attnlab.report.students import marking_lines

    assert marking_lines([SimpleNamespace(awaiting_points=2.0), SimpleNamespace(awaiting_points=0.0),
                          SimpleNamespace(awaiting_points=1.5)], 3) == [
        "3.5 points awaiting marking in 2 submission(s): mark them with `attnlab mark`",
        "3 feedback file(s) written again with the marks"]
    assert marking_lines([SimpleNamespace(awaiting_points=0.0)], 0) == []


def test_answer_metadata_not_as_built_is_never_taken_silently():
    from attnlab.grading.core.written_answers import answer_notes

    q, names = Question("mirror_pairs", 2.0, PROMPT), {"mirror_pairs", "var_qk"}
    on_code = {**code("# my answer: 0.5"), "metadata": {"attnlab": {"written": "mirror_pairs"}}}
    text, notes = answer_notes([md(PROMPT), on_code, md("what I wrote")], q, names)
    assert text == "what I wrote"  # the prompt's fallback, said so
    assert [n.split(":")[0] for n in notes] == ["a code cell is marked as the answer to mirror_pairs",
                                               "no cell is marked as the answer to mirror_pairs (its metadata was lost)"]
    twice = [answer_cell("mirror_pairs", "first part"), md("x"), answer_cell("mirror_pairs", "second part")]
    text, notes = answer_notes(twice, q, names)
    assert text.startswith("first part") and text.endswith("second part")  # the marker reads both
    assert notes == ["2 Markdown cells are marked as the answer to mirror_pairs: all are shown, in the notebook's "
                     "order"]
    text, notes = answer_notes([answer_cell("mirror_pairs", "mine"), answer_cell("var_q", "typo'd")], q, names)
    assert (text, notes) == ("mine", ["a cell is marked as the answer to 'var_q', which is no written question of "
                                      "this lab: not read"])
    assert answer_notes([answer_cell("mirror_pairs", "fine")], q, names) == ("fine", [])
    result = add_written(code_result(), MANIFEST, notebook(*twice))
    assert result["questions"]["mirror_pairs"]["messages"] == [
        "2 Markdown cells are marked as the answer to mirror_pairs: all are shown, in the notebook's order"]
