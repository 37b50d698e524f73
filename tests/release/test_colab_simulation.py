"""Colab, simulated: a Python that has torch and Jupyter but not attnlab, the release pushed to a git repository,
one student notebook alone in an empty folder. The set-up cell installs the kit from the repository, the first
question (answered) and its check pass, and torch is left exactly as it was. Then, in that student install, the
written answers are handed in as the notebook's 'Handing in' cell says, and each route gets them."""

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


@pytest.fixture(scope="module")
def student_install(tmp_path_factory):
    """``(folder, release url, the student's python, its Jupyter path)``: the release pushed, the venv made."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    tmp = tmp_path_factory.mktemp("student")
    url = _push_release(tmp)
    return (tmp, url, *_colab_python(tmp))


def test_colab_installs_the_released_kit_and_the_first_check_passes(student_install):
    from nbclient import NotebookClient

    tmp_path, url, python, jupyter_path = student_install
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


def _pdf_text(pdf: bytes) -> str:
    """The text drawn in a PDF written by matplotlib (its content streams, inflated): the strings it shows."""
    import re
    import zlib

    out = []
    for stream in re.findall(rb"stream\r?\n(.*?)\r?\nendstream", pdf, re.S):
        try:
            out.append(zlib.decompress(stream).decode("latin-1"))
        except zlib.error:
            continue
    return "".join(re.findall(r"\((.*?)(?<!\\)\)", "".join(out)))


def _written_answered(tmp: Path, lab) -> tuple[Path, dict[str, str]]:
    """The released notebook with each written answer cell typed in (code left as handed out), saved alone in a
    folder of its own, and ``{question: the answer typed}``."""
    nb = json.loads((tmp / "student-repo" / "labs" / lab.id / lab.student_notebook.name).read_text())
    answers = {}
    for cell in nb["cells"]:
        question = cell.get("metadata", {}).get("attnlab", {}).get("written")
        if question:
            answers[question] = f"Handed in zebra{len(answers) + 1} answer for {question}"
            cell["source"] = answers[question]
    folder = tmp / "hand-in"
    folder.mkdir()
    (folder / lab.student_notebook.name).write_text(json.dumps(nb))
    return folder / lab.student_notebook.name, answers


def test_written_answers_are_handed_in_on_every_route_from_the_student_install(student_install):
    """The 'Handing in' cell's ways, from the student's install: the PDF for Gradescope (made there with only the
    venv on PATH: no LaTeX, pandoc or browser) holds each answer; the notebook itself carries them to
    `attnlab grade`, the Gradescope zip (awaiting manual grading) and nbgrader (manually graded cells)."""
    import benchmark_scripts

    from attnlab.grading.runner import grade_submission

    tmp, url, python, _ = student_install
    if subprocess.run([python, "-c", "import attnlab"], capture_output=True).returncode != 0:
        _run([python, "-m", "pip", "install", "-q", f"attnlab @ git+{url}"])  # what the set-up cell runs
    lab = load_course(ROOT).lab("lab05")
    notebook, answers = _written_answered(tmp, lab)
    assert len(answers) >= 2
    hand_in = notebook.read_text()
    assert f"python -m attnlab.kit.written_pdf {notebook.name}" in hand_in  # the way the notebook gives

    bare = {"PATH": str(python.parent), "HOME": str(tmp), "PYTHONNOUSERSITE": "1"}
    said = _run([python, "-m", "attnlab.kit.written_pdf", notebook.name], cwd=notebook.parent, env=bare)
    assert f"{len(answers)} written question(s)" in said
    text = _pdf_text((notebook.parent / f"{lab.id}-written.pdf").read_bytes())
    assert all(answer in text for answer in answers.values()), text[:2000]

    ours = grade_submission(lab.autograder_dir, notebook)["questions"]
    assert {q: ours[q]["answer"].strip() for q in answers} == answers
    assert {ours[q]["score"] for q in answers} == {None}  # awaiting a person, never 0

    ra = benchmark_scripts.load("route_agreement")
    repo = ra.build_repo([lab], tmp / "repo")
    bundle = repo / "autograder" / lab.id
    ra.grade_gradescope(bundle, notebook, tmp / "gradescope", ra.questions_of(bundle))
    tests = json.loads((tmp / "gradescope" / "autograder" / "results" / "results.json").read_text())["tests"]
    written = {t["name"].removesuffix(" (written)"): t for t in tests if t["name"].endswith(" (written)")}
    assert set(written) == set(answers) and all("score" not in t for t in written.values()), written

    ra.grade_nbgrader(repo / "nbgrader", {lab.id: {"student": notebook}}, ra.questions_of)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{repo / 'nbgrader' / 'gradebook.db'}") as gb:
        grades = {q: gb.find_grade(q, lab.id, lab.id, "student") for q in answers}
        assert all(g.needs_manual_grade and g.auto_score is None for g in grades.values())
    graded = (repo / "nbgrader" / "autograded" / "student" / lab.id / notebook.name).read_text()
    assert all(answer in graded for answer in answers.values())
