"""The Gradescope zip grades with attnlab's grader when its run_autograder runs in a scratch folder laid
out like Gradescope's /autograder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

LAB = "lab99_demo"


def _layout(tmp_path: Path, built_course: Path, submission: Path | None) -> Path:
    root = tmp_path / "autograder"
    for sub in ("source", "submission", "results"):
        (root / sub).mkdir(parents=True)
    with zipfile.ZipFile(built_course / "autograder" / LAB / f"{LAB}-gradescope.zip") as zf:
        zf.extractall(root / "source")
    for name in ("run_autograder", "setup.sh"):
        os.chmod(root / "source" / name, 0o755)
    if submission is not None:
        shutil.copy(submission, root / "submission" / "mine.ipynb")
    return root


def _run(root: Path) -> dict:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), ATTNLAB_PYTHON=sys.executable)
    proc = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_zip_layout(built_course):
    with zipfile.ZipFile(built_course / "autograder" / LAB / f"{LAB}-gradescope.zip") as zf:
        names = set(zf.namelist())
        assert {"setup.sh", "run_autograder", "bundle/hidden_tests.py", "bundle/reference.py",
                "bundle/manifest.json"} <= names
        assert (zf.getinfo("run_autograder").external_attr >> 16) & 0o111
        assert "bubblewrap" in zf.read("setup.sh").decode()


def test_solution_gets_full_marks(built_course, tmp_path):
    res = _run(_layout(tmp_path, built_course, built_course / "solutions" / LAB / f"{LAB}.ipynb"))
    assert res["score"] == 3.0
    assert {t["name"]: t["score"] for t in res["tests"]} == {"double": 2.0, "Scale": 1.0}


def test_blank_notebook_gets_zero(built_course, tmp_path):
    res = _run(_layout(tmp_path, built_course, built_course / "labs" / LAB / f"{LAB}.ipynb"))
    assert res["score"] == 0.0


@pytest.mark.parametrize("content", [None, b"", b"\x00\x01garbage"])
def test_missing_or_broken_submission_still_writes_results(built_course, tmp_path, content):
    root = _layout(tmp_path, built_course, None)
    if content is not None:
        (root / "submission" / "mine.ipynb").write_bytes(content)
    res = _run(root)
    assert res["score"] == 0.0
    assert res["tests"] and all(t["score"] == 0 for t in res["tests"])
    assert "notebook" in res["output"].lower() or "file" in res["output"].lower()
