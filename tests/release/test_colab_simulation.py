"""Colab, simulated: a Python that has torch and Jupyter but not attnlab, the release pushed to a git repository,
one student notebook alone in an empty folder. The set-up cell installs the kit from the repository, the first
question (answered) and its check pass, and torch is left exactly as it was."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from attnlab.course import load_course
from attnlab.release import release

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _run(cmd, **kwargs):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kwargs)
    assert proc.returncode == 0, f"{cmd[:4]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _torch_fingerprint(python: Path) -> dict:
    """torch's version and the digest of its installed-files record (any reinstall rewrites it)."""
    out = _run([python, "-c", "import importlib.metadata as m, json, hashlib; d = m.distribution('torch'); "
                "print(json.dumps({'version': d.version, 'record': hashlib.sha256(d.read_text('RECORD').encode())"
                ".hexdigest(), 'files': len(d.files)}))"])
    return json.loads(out)


def _push_release(tmp: Path) -> str:
    course = load_course(ROOT)
    repo = tmp / "student-repo"
    url = f"file://{repo}"
    release(course, [course.lab("lab05")], repo, url=url)
    git = ["git", "-C", repo, "-c", "user.name=course", "-c", "user.email=course@example.invalid"]
    _run(["git", "init", "-q", "-b", "main", repo])
    _run(git + ["add", "-A"])
    _run(git + ["commit", "-q", "-m", "release"])
    return url


def _colab_python(tmp: Path) -> tuple[Path, Path]:
    """A venv with torch (this test's version, never reinstalled later) and ipykernel, and a kernelspec for it."""
    venv = tmp / "colab"
    _run([sys.executable, "-m", "venv", venv])
    python = venv / "bin" / "python"
    torch_version = torch.__version__.split("+")[0]
    _run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])  # Colab's pip is recent (git+file needs it)
    _run([python, "-m", "pip", "install", "-q", f"torch=={torch_version}", "ipykernel"])
    kernels = tmp / "kernels"
    _run([python, "-m", "ipykernel", "install", "--prefix", kernels, "--name", "colab-sim"])
    return python, kernels / "share" / "jupyter"


def _answered_first_question(tmp: Path) -> Path:
    """The released notebook alone in an empty folder, its first TODO answered with the reference's cell."""
    lab = load_course(ROOT).lab("lab05")
    student = nbformat.read(tmp / "student-repo" / "labs" / lab.id / lab.student_notebook.name, as_version=4)
    solution = nbformat.read(lab.solution_notebook, as_version=4)
    check_at = next(i for i, c in enumerate(student.cells) if c.cell_type == "code" and "grader.check(" in c.source)
    student.cells[check_at - 1].source = solution.cells[check_at - 1].source
    student.cells = student.cells[:check_at + 1]  # set-up, imports, the first question, its check
    content = tmp / "content"
    content.mkdir()
    path = content / lab.student_notebook.name
    nbformat.write(student, path)
    return path


def _outputs(cell) -> str:
    return "".join(o.get("text", "") + json.dumps(o.get("data", {})) for o in cell.get("outputs", []))


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_colab_installs_the_released_kit_and_the_first_check_passes(tmp_path):
    from nbclient import NotebookClient

    url = _push_release(tmp_path)
    python, jupyter_path = _colab_python(tmp_path)
    assert subprocess.run([python, "-c", "import attnlab"], capture_output=True).returncode != 0, "attnlab preinstalled"
    before = _torch_fingerprint(python)

    path = _answered_first_question(tmp_path)
    nb = nbformat.read(path, as_version=4)
    env_jupyter = {"JUPYTER_PATH": str(jupyter_path), "PYTHONNOUSERSITE": "1"}
    old = {k: os.environ.get(k) for k in env_jupyter}
    os.environ.update(env_jupyter)
    try:
        NotebookClient(nb, timeout=600, kernel_name="colab-sim", resources={"metadata": {"path": str(path.parent)}},
                       allow_errors=False).execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)

    setup = next(c for c in nb.cells if "attnlab_setup" in c.metadata.get("tags", []))
    said = _outputs(setup)
    assert "Installing the attnlab kit, about a minute" in said and "attnlab installed." in said
    assert "Traceback" not in said
    check = nb.cells[-1]
    assert "grader.check(" in check.source
    shown = _outputs(check)
    assert "passed" in shown and "failed" not in shown.lower(), shown
    assert _torch_fingerprint(python) == before, "installing the kit changed torch"
    where = _run([python, "-c", "import attnlab, sys; print(attnlab.__file__)"]).strip()
    assert where.startswith(str(python.parent.parent)), where  # installed from the git repository into the venv
    direct_url = _run([python, "-c", "import importlib.metadata as m; print(m.distribution('attnlab').read_text("
                       "'direct_url.json'))"])
    assert json.loads(direct_url)["url"] == url
