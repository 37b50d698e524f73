"""nbgrader, for real, with PATH as a fresh clone's `make test` leaves it (the venv's bin not on it): `attnlab
build` writes an nbgrader course source, and the real nbgrader CLI releases it without solutions or hidden tests,
autogrades the solution to full points, the blank notebook to 0 and a catalogued mistake to partial points, without
a "has changed" warning, and its Validate fails a notebook whose public checks fail. The student notebook of
labs/ (and the solution of solutions/) carry the same nbgrader metadata: they grade the same (lab05), and a
notebook without it is refused with what to do instead of scoring 0. Written questions are manually graded answer
cells worth their points: an answer waits for a person (0 until marked, never full marks), a blank one is 0, and a
mark set in the gradebook (as the formgrader sets it) is in `nbgrader export`."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.buildchain.pipeline import build_lab
from attnlab.buildchain.transforms.check_no_leak import solution_lines
from attnlab.buildchain.transforms.markers import GIVEN_PREFIX
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.course import load_course
from attnlab.grading.core.bundle import manifest_questions, written_questions
from attnlab.grading.core.mutants import load_catalogue
from attnlab.records.stub_text import PLACEHOLDER

ROOT = Path(__file__).resolve().parents[1]
NBGRADER = Path(sys.executable).parent / "nbgrader"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not NBGRADER.exists(), reason="nbgrader is not installed (pip install -e '.[instructor]')")]
LABS = load_course(ROOT).labs


def _nbgrader(course: Path, *args, check=True) -> str:
    """Run the nbgrader CLI in ``course`` with the venv's bin taken off PATH (nbgrader runs `alembic` from PATH:
    the course's config puts it there)."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != NBGRADER.parent.resolve()]
    env = {**os.environ, "PATH": os.pathsep.join(path)}
    proc = subprocess.run([str(NBGRADER), *args], cwd=course, capture_output=True, text=True, timeout=900, env=env)
    if check:
        assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


def _scores(course: Path, out: Path) -> dict:
    _nbgrader(course, "export", "--to", str(out))
    with open(out) as f:
        return {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _answered(release_nb: Path, source_nb: Path) -> dict:
    """The released notebook with every solution cell answered as the source answers it (markers dropped)."""
    nb = json.loads(release_nb.read_text())
    answers = {c["metadata"]["nbgrader"]["grade_id"]: c for c in _cells(source_nb) if "nbgrader" in c["metadata"]}
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            lines = _text(answers[meta["grade_id"]]).split("\n")
            cell["source"] = "\n".join(x for x in lines if x.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return nb


def _points(lab) -> tuple[float, float]:
    """(the code questions' points, the whole lab's points with its written questions)."""
    code = sum(manifest_questions(lab.autograder_dir).values())
    return code, code + sum(q.points for q in written_questions(lab.autograder_dir))


def _mutant(lab):
    """The lab's first catalogued mistake whose public checks catch it."""
    return load_catalogue(lab.catalogue)[0][0]


def _with_mistake(nb: dict, lab, mutant=None) -> dict:
    """The answered notebook plus one cell, right after the question's answer, that redefines it as a mutant
    (by default the lab's first)."""
    mutant = mutant or _mutant(lab)
    nb = json.loads(json.dumps(nb))
    at = next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("solution")
              and f"{mutant.question}" in _text(c).split("\n", 1)[0])
    nb["cells"].insert(at + 1, {"cell_type": "code", "execution_count": None, "id": "catalogued-mistake",
                                "metadata": {}, "outputs": [], "source": mutant.source.strip()})
    return nb


def _write(path: Path, nb: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """nbgrader/ and autograder/ as `attnlab build` writes them in the repository (git keeps neither nbgrader's
    source notebooks nor the zips: the build makes them on demand), built once per session."""
    repo = tmp_path_factory.mktemp("built") / "repo"
    kit = load_course(ROOT)
    for lab in kit.labs:
        for path, data in build_lab(kit, lab).items():
            rel = path.relative_to(ROOT)
            if rel.parts[0] in ("nbgrader", "autograder"):
                (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                (repo / rel).write_bytes(data)
    return repo


@pytest.fixture
def course(built, tmp_path):
    """A course folder laid out as in the repository: nbgrader/ beside autograder/ (the hidden tests' bundle)."""
    repo = tmp_path / "repo"
    shutil.copytree(built / "nbgrader", repo / "nbgrader")
    shutil.copytree(built / "autograder", repo / "autograder")
    return repo / "nbgrader"


@pytest.fixture(scope="module")
def round_trip(built, tmp_path_factory) -> tuple[Path, dict, str, str]:
    """Every lab through one nbgrader course as an instructor grades a term's labs at once: ``generate_assignment
    "*"``, three students per lab (the solution, the blank release, the solution with the lab's first catalogued
    mistake), ``autograde "*"``, one ``export``, and ``validate`` of every mistaken notebook. Returns the course, the
    scores by ``(lab, student)``, autograde's output and validate's. (nbgrader globs the assignment id; one command
    per step, not per lab, is also 4 x 12 nbgrader start-ups less.)"""
    tmp = tmp_path_factory.mktemp("round-trip")
    shutil.copytree(built / "nbgrader", tmp / "repo" / "nbgrader")
    shutil.copytree(built / "autograder", tmp / "repo" / "autograder")
    course = tmp / "repo" / "nbgrader"
    _nbgrader(course, "generate_assignment", "*", "--force")
    mistaken = []
    for lab in LABS:
        release = course / "release" / lab.id / f"{lab.id}.ipynb"
        solved = _answered(release, course / "source" / lab.id / f"{lab.id}.ipynb")
        name = f"{lab.id}.ipynb"
        _write(course / "submitted" / "solution" / lab.id / name, solved)
        _write(course / "submitted" / "blank" / lab.id / name, json.loads(release.read_text()))
        mistaken.append(_write(course / "submitted" / "mistake" / lab.id / name, _with_mistake(solved, lab)))
    autograded = _nbgrader(course, "autograde", "*", "--create", "--force")
    _nbgrader(course, "export", "--to", str(tmp / "grades.csv"))
    with open(tmp / "grades.csv") as f:
        scores = {(row["assignment"], row["student_id"]): (float(row["score"]), float(row["max_score"]))
                  for row in csv.DictReader(f)}
    # Validate runs the cells as autograde does (the solution's full score shows they pass on a right answer).
    validated = _nbgrader(course, "validate", *map(str, mistaken), check=False)
    return course, scores, autograded, validated


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_nbgrader_round_trip(round_trip, lab):
    course, scores, autograded, validated = round_trip
    release = course / "release" / lab.id / f"{lab.id}.ipynb"
    secret = solution_lines(read_master(lab.master))
    shown = [line.strip() for c in _cells(release) if not _text(c).startswith(GIVEN_PREFIX)
             for line in _text(c).split("\n")]
    assert not secret & set(shown), "the released notebook holds solution code"
    assert "run_hidden_tests" not in release.read_text(), "the released notebook holds the hidden tests"

    assert "has changed" not in autograded, autograded[-3000:]  # untouched locked and test cells: checksums match
    code, full = _points(lab)  # the written answers wait for a person: 0 until marked
    assert scores[lab.id, "solution"] == (code, full) and code > 0, scores
    assert scores[lab.id, "blank"] == (0.0, full), scores
    assert 0 < scores[lab.id, "mistake"][0] < code, scores
    assert validated.count("VALIDATION FAILED") >= len(LABS), validated[-2000:]
    assert f"check(s) of {_mutant(lab).question}" in validated, validated[-2000:]


def test_autograde_in_a_course_folder_outside_the_repository_refuses_then_grades_with_the_bundle(built, tmp_path):
    """A copy of nbgrader/ alone (a JupyterHub course directory): autograde stops before scoring anyone, non-zero,
    saying what to copy; with autograder/<lab>/ copied into the course folder, it grades right."""
    lab = LABS[0]
    course = tmp_path / "course"
    shutil.copytree(built / "nbgrader", course)
    _nbgrader(course, "generate_assignment", lab.id, "--force")
    release = course / "release" / lab.id / f"{lab.id}.ipynb"
    name = f"{lab.id}.ipynb"
    _write(course / "submitted" / "solution" / lab.id / name, _answered(release, course / "source" / lab.id / name))
    _write(course / "submitted" / "blank" / lab.id / name, json.loads(release.read_text()))
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != NBGRADER.parent.resolve()]
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_BUNDLE"}
    refused = subprocess.run([str(NBGRADER), "autograde", lab.id, "--create", "--force"], cwd=course, text=True,
                             capture_output=True, timeout=900, env={**env, "PATH": os.pathsep.join(path)})
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "autograde stopped before grading anyone" in said, said[-3000:]
    assert f"no autograder/{lab.id}/ in {course}" in said and "Copy the course repository's autograder/" in said
    assert not (course / "autograded").exists()  # nobody was scored
    shutil.copytree(built / "autograder" / lab.id, course / "autograder" / lab.id)
    _nbgrader(course, "autograde", lab.id, "--create", "--force")
    scores = _scores(course, tmp_path / "grades.csv")
    code, full = _points(lab)
    assert code > 0 and scores["solution"] == (code, full) and scores["blank"] == (0.0, full), scores


LAB05 = next(lab for lab in LABS if lab.id == "lab05_self_attention")


def test_labs_notebook_carries_nbgraders_metadata_and_grades_the_same(course, tmp_path):
    lab, name = LAB05, f"{LAB05.id}.ipynb"
    _nbgrader(course, "generate_assignment", lab.id, "--force")
    from nbformat import read
    from nbgrader.utils import compute_checksum

    release = {c.metadata["nbgrader"]["grade_id"]: c for c in read(course / "release" / lab.id / name, 4).cells
               if "nbgrader" in c.metadata}
    student = [c for c in read(lab.student_notebook, 4).cells if "nbgrader" in c.metadata]
    assert sorted(c.metadata["nbgrader"]["grade_id"] for c in student) == sorted(release)
    for cell in student:
        ours, theirs = cell.metadata["nbgrader"], release[cell.metadata["nbgrader"]["grade_id"]].metadata["nbgrader"]
        assert ours["checksum"] == compute_checksum(cell)
        assert {k: v for k, v in ours.items() if k != "checksum"} == {k: v for k, v in theirs.items() if k != "checksum"}
        if not ours["solution"]:  # the stubs differ (nbgrader writes its own); everything else is the same cell
            assert ours["checksum"] == theirs["checksum"] and cell.source == release[ours["grade_id"]].source

    without = json.loads(lab.solution_notebook.read_text())
    for cell in without["cells"]:
        cell["metadata"].pop("nbgrader", None)
    _write(course / "submitted" / "solution" / lab.id / name, json.loads(lab.solution_notebook.read_text()))
    _write(course / "submitted" / "blank" / lab.id / name, json.loads(lab.student_notebook.read_text()))
    _write(course / "submitted" / "no_metadata" / lab.id / name, without)
    # the notebook `attnlab release --url` writes: the same, but for the set-up cell's install address
    released = build_lab(dataclasses.replace(load_course(ROOT), install_spec="attnlab @ git+https://example.invalid/c"),
                         lab)[lab.student_notebook]
    assert b"example.invalid" in released
    _write(course / "submitted" / "released_blank" / lab.id / name, json.loads(released))
    # a mistake the public checks miss: only the hidden tests, which nbgrader's autograde runs, catch it
    hidden_only = next(m for m in load_catalogue(lab.catalogue)[0] if m.name == "selfattention_scale_by_d_model")
    _write(course / "submitted" / "hidden_only" / lab.id / name,
           _with_mistake(json.loads(lab.solution_notebook.read_text()), lab, hidden_only))
    said = _nbgrader(course, "autograde", lab.id, "--create", "--force", check=False)
    assert "has changed" not in said, said[-3000:]
    assert ("no_metadata/lab05_self_attention/lab05_self_attention.ipynb: this notebook has none of the course's "
            "autograded test cells") in said and "attnlab grade lab05_self_attention" in said, said[-3000:]
    scores = _scores(course, tmp_path / "grades.csv")
    code, full = _points(lab)
    assert code > 0 and scores["solution"] == (code, full) and scores["blank"] == (0.0, full), scores
    assert scores["released_blank"] == (0.0, full), scores
    assert 0 < scores["hidden_only"][0] < full, scores


LAB01 = next(lab for lab in LABS if lab.id == "lab01_text_as_vectors")


def test_written_questions_are_manually_graded_cells_and_a_gradebook_mark_reaches_the_export(course, tmp_path):
    from nbgrader.api import Gradebook

    lab, name = LAB01, f"{LAB01.id}.ipynb"
    written = written_questions(lab.autograder_dir)
    assert len(written) >= 2
    _nbgrader(course, "generate_assignment", lab.id, "--force")
    release = course / "release" / lab.id / name
    cells = {c["metadata"]["nbgrader"]["grade_id"]: c for c in _cells(release) if "nbgrader" in c["metadata"]}
    for q in written:  # nbgrader's release: the kit's placeholder, never the reference answer
        assert _text(cells[q.name]) == PLACEHOLDER and cells[q.name]["metadata"]["attnlab"]["written"] == q.name
        assert q.reference.split("\n")[0] not in release.read_text()

    solved = _answered(release, course / "source" / lab.id / name)  # the written answers: the reference
    _write(course / "submitted" / "solution" / lab.id / name, solved)
    _write(course / "submitted" / "blank" / lab.id / name, json.loads(release.read_text()))
    _nbgrader(course, "autograde", lab.id, "--create", "--force")

    code, full = _points(lab)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for q in written:
            cell = gb.find_grade_cell(q.name, lab.id, lab.id)
            assert (cell.cell_type, cell.max_score) == ("markdown", q.points)
            assert gb.find_solution_cell(q.name, lab.id, lab.id).name == q.name
            answered = gb.find_grade(q.name, lab.id, lab.id, "solution")
            assert (answered.auto_score, answered.needs_manual_grade) == (None, True)  # waits for a person
            blank = gb.find_grade(q.name, lab.id, lab.id, "blank")
            assert (blank.auto_score, blank.needs_manual_grade) == (0.0, False)  # nothing written: 0
        assert gb.find_submission(lab.id, "solution").needs_manual_grade
        assert gb.find_submission(lab.id, "solution").score == code
        # what the formgrader does when a marker scores an answer: the grade's manual_score
        marked = gb.find_grade(written[0].name, lab.id, lab.id, "solution")
        marked.manual_score = written[0].points - 0.5
        gb.db.commit()
    scores = _scores(course, tmp_path / "grades.csv")
    assert scores["solution"] == (code + written[0].points - 0.5, full), scores
    assert scores["blank"] == (0.0, full), scores


def test_a_course_named_with_spaces_and_a_slash_goes_round_nbgraders_exchange(tmp_path):
    """A course named ``DL for Text, winter 2026/27``: its course_id is the slug, so release_assignment, a
    student's list, fetch_assignment and submit, then collect and autograde work through a real exchange; the lab's
    due date is nbgrader's duedate, attnlab reads the collected submission's time from nbgrader's timestamp, and a
    submission two days late under 10% per day loses 20% of its points in nbgrader's own gradebook (the course's
    late plugin, ``grading/bridges/nbgrader_late.py``), kept as nbgrader's late penalty, not in the questions; and
    attnlab's feedback page, written by ``attnlab feedback --nbgrader``, reaches the student by release_feedback
    and fetch_feedback."""
    from datetime import datetime, timezone

    from nbgrader.api import Gradebook

    from attnlab.cli import main
    from attnlab.grading.outputs.gradebook import open_gradebook
    from attnlab.grading.scale.submission_times import submission_time
    from attnlab.late_policy import LatePolicy
    from attnlab.records.score_text import format_score

    due = datetime(2027, 2, 14, 23, 59, tzinfo=timezone.utc)
    kit = load_course(ROOT)
    lab = dataclasses.replace(LAB01, due=due, late=LatePolicy(percent=10.0))
    named = dataclasses.replace(kit, name="DL for Text, winter 2026/27", labs=(lab,))
    repo = tmp_path / "repo"
    for path, data in build_lab(named, lab).items():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("nbgrader", "autograder"):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes(data)
    course, exchange, home = repo / "nbgrader", tmp_path / "exchange", tmp_path / "student"
    slug = "dl-for-text-winter-2026-27"
    assert f"c.CourseDirectory.course_id = '{slug}'" in (course / "nbgrader_config.py").read_text()
    where = f"--Exchange.root={exchange}"
    _nbgrader(course, "generate_assignment", lab.id, "--force")
    _nbgrader(course, "release_assignment", lab.id, where)
    assert (exchange / slug / "outbound" / lab.id / f"{lab.id}.ipynb").is_file()  # one folder, not a nested path

    home.mkdir()
    (home / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.course_id = '{slug}'\n"
                                             f"c.Exchange.root = {str(exchange)!r}\n")
    assert f"{slug} {lab.id}" in _nbgrader(home, "list")
    _nbgrader(home, "fetch_assignment", lab.id)
    fetched = home / lab.id / f"{lab.id}.ipynb"
    _write(fetched, _answered(fetched, course / "source" / lab.id / f"{lab.id}.ipynb"))
    _nbgrader(home, "submit", lab.id)

    _nbgrader(course, "collect", lab.id, where)
    (student,) = [p.name for p in (course / "submitted").iterdir()]
    stamp = course / "submitted" / student / lab.id / "timestamp.txt"
    stamp.write_text("2027-02-16 10:00:00.000000 UTC")  # handed in 34 hours after the deadline: two days late
    _nbgrader(course, "autograde", lab.id, "--create", "--force")
    code, full = _points(lab)
    assert code > 0 and _scores(course, tmp_path / "grades.csv")[student] == (round(code * 0.8, 4), full)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_assignment(lab.id).duedate == due.replace(tzinfo=None)  # nbgrader keeps UTC
        submission = gb.find_submission(lab.id, student)
        assert submission.score == pytest.approx(code)  # the questions keep their points
        assert submission.late_submission_penalty == pytest.approx(code * 0.2)
    collected = course / "submitted" / student / lab.id / f"{lab.id}.ipynb"
    when, source = submission_time(f"{student}/{lab.id}.ipynb", collected)
    assert (source, when) == ("nbgrader", datetime(2027, 2, 16, 10, 0, tzinfo=timezone.utc))

    # attnlab's feedback page through nbgrader's feedback exchange: `attnlab feedback OUT --nbgrader` writes it as
    # nbgrader's feedback/<student>/<lab>/<notebook>.html, release_feedback releases it, the student fetches it.
    questions = manifest_questions(lab.autograder_dir)
    first, *rest = questions
    result = {"submission": str(collected), "score": questions[first] / 2 + sum(questions[q] for q in rest),
              "max_score": float(sum(questions.values())), "questions": {
                  q: {"score": p / 2 if q == first else p, "max_score": p, "messages": []} for q, p in questions.items()}}
    out = tmp_path / "graded"
    out.mkdir()
    with open_gradebook(out) as book:
        book.record(lab.id, f"{student}/{lab.id}/{lab.id}.ipynb", str(collected), "a" * 64, result)
    assert main(["--root", str(repo), "feedback", str(out), "--nbgrader", str(course)]) == 0
    said = _nbgrader(course, "release_feedback", lab.id, where)
    assert f"Releasing feedback for student '{student}' on assignment '{slug}/{lab.id}/{lab.id}'" in said, said[-2000:]
    _nbgrader(home, "fetch_feedback", lab.id)
    (page,) = (home / lab.id / "feedback").glob(f"*/{lab.id}.html")
    text = page.read_text()
    assert f"Total: {format_score(result['score'])} / {format_score(result['max_score'])}" in text, text[:2000]
    assert f"<code>{first}</code>: {format_score(questions[first] / 2)} / {format_score(questions[first])}" in text
