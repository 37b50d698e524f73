"""nbgrader, for real: `attnlab build` writes an nbgrader course source, and the real nbgrader CLI releases it
without solutions or hidden tests, autogrades the solution to full points, the blank notebook to 0 and a
catalogued mistake to partial points, and its Validate fails a notebook whose public checks fail."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab.buildchain.transforms.check_no_leak import GIVEN_PREFIX, solution_lines
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.course import load_course
from attnlab.grading.mutants import load_catalogue

ROOT = Path(__file__).resolve().parents[1]
NBGRADER = Path(sys.executable).parent / "nbgrader"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not NBGRADER.exists(), reason="nbgrader is not installed (pip install -e '.[instructor]')")]
LABS = load_course(ROOT).labs


def _nbgrader(course: Path, *args, check=True) -> str:
    env = {**os.environ, "PATH": f"{NBGRADER.parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # nbgrader runs alembic
    proc = subprocess.run([str(NBGRADER), *args], cwd=course, capture_output=True, text=True, timeout=900, env=env)
    if check:
        assert proc.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout + proc.stderr


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


def _mutant(lab):
    """The lab's first catalogued mistake whose public checks catch it."""
    return load_catalogue(lab.catalogue)[0][0]


def _with_mistake(nb: dict, lab) -> dict:
    """The answered notebook plus one cell, right after the question's answer, that redefines it as a mutant."""
    mutant = _mutant(lab)
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


@pytest.fixture
def course(tmp_path):
    """A course folder laid out as in the repository: nbgrader/ beside autograder/ (the hidden tests' bundle)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "nbgrader", repo / "nbgrader")
    shutil.copytree(ROOT / "autograder", repo / "autograder")
    return repo / "nbgrader"


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.id)
def test_nbgrader_round_trip(course, lab, tmp_path):
    _nbgrader(course, "generate_assignment", lab.id, "--force")
    release = course / "release" / lab.id / f"{lab.id}.ipynb"
    secret = solution_lines(read_master(lab.master))
    shown = [line.strip() for c in _cells(release) if not _text(c).startswith(GIVEN_PREFIX)
             for line in _text(c).split("\n")]
    assert not secret & set(shown), "the released notebook holds solution code"
    assert "run_hidden_tests" not in release.read_text(), "the released notebook holds the hidden tests"

    source = course / "source" / lab.id / f"{lab.id}.ipynb"
    solved = _answered(release, source)
    name = f"{lab.id}.ipynb"
    _write(course / "submitted" / "solution" / lab.id / name, solved)
    _write(course / "submitted" / "blank" / lab.id / name, json.loads(release.read_text()))
    _write(course / "submitted" / "mistake" / lab.id / name, _with_mistake(solved, lab))
    _nbgrader(course, "autograde", lab.id, "--create", "--force")
    _nbgrader(course, "export", "--to", str(tmp_path / "grades.csv"))
    with open(tmp_path / "grades.csv") as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}
    full = scores["solution"][1]
    assert full > 0 and scores["solution"] == (full, full), scores
    assert scores["blank"] == (0.0, full), scores
    assert 0 < scores["mistake"][0] < full, scores

    # Validate runs the cells as autograde does (the solution's full score shows they pass on a right answer).
    said = _nbgrader(tmp_path, "validate", str(course / "submitted" / "mistake" / lab.id / name), check=False)
    assert "VALIDATION FAILED" in said and f"check(s) of {_mutant(lab).question}" in said, said[-2000:]
