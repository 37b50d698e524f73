"""The Gradescope zip grades with attnlab's grader when its run_autograder runs in a scratch folder laid
out like Gradescope's /autograder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import nbformat
import pytest

from attnlab.grading.worker import sandbox
from attnlab.grading.worker.sandbox.host import others_cannot_run

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


def _run(root: Path, **env_vars) -> dict:
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), ATTNLAB_PYTHON=sys.executable, **env_vars)
    proc = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text()) | {"stdout": proc.stdout}


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
    assert {t["name"]: t["score"] for t in res["tests"]} == {"Your notebook": 0.0, "double": 2.0, "Scale": 1.0}


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="Gradescope runs the grader as root")
def test_run_autograder_makes_the_bundle_root_only(built_course, tmp_path):
    root = _layout(tmp_path, built_course, built_course / "labs" / LAB / f"{LAB}.ipynb")
    os.chmod(root / "source" / "bundle", 0o755)  # as unzipped on Gradescope: world-readable
    _run(root)
    assert (root / "source" / "bundle").stat().st_mode & 0o777 == 0o700


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


STEAL = """\
import glob, os
import torch

class Scale(torch.nn.Module):  # honest, so the test also shows that grading itself ran
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * self.weight

stolen = ""
for path in glob.glob("/autograder*/source/bundle/reference.py") + glob.glob("{root}/source/bundle/reference.py"):
    try:
        stolen = open(path).read()
    except OSError:
        pass
if stolen:
    exec(stolen)
else:
    def double(x):
        return x * 3
"""


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0, reason="Gradescope runs the grader as root")
def test_world_readable_bundle_is_locked_away_when_only_setpriv_isolates(built_course):
    """Gradescope containers often lack namespaces, leaving setpriv (another uid, no private file system).
    /autograder is world-readable there; run_autograder must still keep the reference out of reach."""
    why = sandbox.available(sandbox.SETPRIV) or others_cannot_run(sys.executable)
    if why:
        pytest.skip(f"setpriv-only cannot run here: {why}")
    scratch = Path(tempfile.mkdtemp(prefix="attnlab-gs-", dir="/tmp"))
    try:
        os.chmod(scratch, 0o755)  # like /autograder: every user can walk in
        root = _layout(scratch, built_course, None)
        for folder, _dirs, files in os.walk(root):
            os.chmod(folder, 0o755)
            for f in files:
                os.chmod(os.path.join(folder, f), 0o755 if f in ("run_autograder", "setup.sh") else 0o644)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(STEAL.format(root=root))])
        nbformat.write(nb, root / "submission" / "mine.ipynb")
        res = _run(root, ATTNLAB_SANDBOX=sandbox.SETPRIV)
        assert "[setpriv-only as uid" in res["stdout"]  # the isolation this test is about was in force
        assert {t["name"]: t["score"] for t in res["tests"]} == {"Your notebook": 0.0, "double": 0.0, "Scale": 1.0}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
