"""A grading command imports only what grading uses: no plotting (the reference's ``import matplotlib.pyplot`` is
deferred, ``attnlab.kit.plotting`` imports matplotlib where it draws), no sympy (torch imports it for a backward pass
given ``grad_outputs``; the executor asks for one scalar instead), no report, no Hugging Face libraries. Each command
runs as a whole process under ``python -X importtime``, which lists every module the grader imported, in the
batch's forked grader processes too (the worker's zygote is a process of its own and may import what it likes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab05_self_attention"
BUNDLE = ROOT / "autograder" / LAB
SOLUTION = ROOT / "solutions" / LAB / f"{LAB}.ipynb"
BLANK = ROOT / "labs" / LAB / f"{LAB}.ipynb"
UNUSED = ("matplotlib", "sympy", "attnlab.report", "transformers", "datasets", "copydetect", "nbformat", "pandas")


def _imported(argv: list[str], cwd: Path) -> tuple[set[str], subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {line.split("|")[2].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "attnlab.grading.runner" in names  # the listing is there
    return names, proc


def _fresh_process(code: str) -> list[str]:
    """What ``code`` printed, run in a fresh Python (nothing imported before it), split into words."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={"MPLBACKEND": "Agg", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def _unused(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == u or n.startswith(u + ".") for u in UNUSED))


def test_the_reference_does_import_pyplot():
    """What the other tests rest on: grading runs the reference, whose code imports pyplot and attnlab.kit.plotting."""
    code = (BUNDLE / "reference.py").read_text()
    assert "import matplotlib.pyplot as plt" in code and "from attnlab.kit.plotting import" in code


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_one_grade_imports_no_plotting(tmp_path, as_json):
    names, proc = _imported(["-m", "attnlab.cli", "grade", LAB, str(SOLUTION), *(["--json"] if as_json else [])],
                            ROOT)
    assert _unused(names) == []
    if as_json:
        assert json.loads(proc.stdout)[0]["score"] == 30.0
    else:
        assert "30.0 / 37" in proc.stdout and "7 points awaiting marking" in proc.stdout


def test_a_batch_imports_no_plotting(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(SOLUTION, subs / "solution.ipynb")
    shutil.copy(BLANK, subs / "blank.ipynb")
    names, proc = _imported(["-m", "attnlab.cli", "grade", LAB, str(subs), "--out", str(tmp_path / "out"),
                             "--jobs", "2", "--json"], ROOT)
    assert _unused(names) == []
    assert {Path(r["submission"]).name: r["score"] for r in json.loads(proc.stdout)} == {
        "solution.ipynb": 30.0, "blank.ipynb": 0.0}
    assert "2 graded" in proc.stderr


def test_the_gradescope_runner_imports_no_plotting(tmp_path):
    bundle = tmp_path / "source" / "bundle"
    shutil.copytree(BUNDLE, bundle, ignore=shutil.ignore_patterns("*.zip"))  # the runner locks its bundle away
    (tmp_path / "submission").mkdir()
    shutil.copy(SOLUTION, tmp_path / "submission" / "mine.ipynb")
    results = tmp_path / "results" / "results.json"
    names, _ = _imported(["-m", "attnlab.grading.bridges.gradescope_run", "--lab", LAB, "--bundle", str(bundle),
                          "--submission", str(tmp_path / "submission"), "--results", str(results)], tmp_path)
    assert _unused(names) == []
    assert json.loads(results.read_text())["score"] == 30.0


def test_deferred_pyplot_is_the_real_module_on_first_use():
    """The stand-in a trusted namespace binds answers from the real module once used (here, in a fresh process)."""
    code = ("from attnlab.grading.worker.api import LocalStudent\n"
            "import sys\n"
            "ref = LocalStudent.from_code('import matplotlib.pyplot as plt\\nimport math\\n'\n"
            "                             'def size():\\n    return plt.rcParams[\"figure.figsize\"][0]\\n')\n"
            "assert 'matplotlib' not in sys.modules, 'imported at once'\n"
            "ns = ref.executor.namespace\n"
            "print(ns['size']() > 0, 'matplotlib.pyplot' in sys.modules, ns['math'].pi > 3)\n")
    assert _fresh_process(code) == ["True", "True", "True"]


def test_a_students_pyplot_import_is_deferred_in_the_worker_and_real_on_use():
    """The graded cells run with plotting imports deferred (the worker does not pay for pyplot unless graded code
    draws); a function that draws gets the real module."""
    code = ("import sys\n"
            "from attnlab.grading.worker.process import _prepare_namespace, run_cells\n"
            "ns = _prepare_namespace()\n"
            "cells = [{'index': 2, 'source': 'import matplotlib.pyplot as plt\\nimport math\\n'},\n"
            "         {'index': 4, 'source': 'def size():\\n    return plt.rcParams[\"figure.figsize\"][0] % 7\\n'}]\n"
            "assert all(c['ok'] for c in run_cells(cells, ns, 60))\n"
            "print('matplotlib' in sys.modules, 'IPython' in sys.modules)\n"
            "print(ns['size']() > 0, 'matplotlib.pyplot' in sys.modules)\n")
    assert _fresh_process(code) == ["False", "False", "True", "True"]  # a % that Python reads imports no IPython
