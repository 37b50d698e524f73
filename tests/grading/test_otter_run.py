"""Plain Otter keeps working: `otter run` with the built Otter zip grades through the in-kernel bridge."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LAB = "lab99_demo"
OTTER = Path(sys.executable).parent / "otter"


@pytest.mark.parametrize(("notebook", "expected"), [("solutions", 3.0), ("labs", 0.0)])
def test_otter_run_grades_with_the_bridge(built_course, tmp_path, notebook, expected):
    sub = tmp_path / "submission.ipynb"
    shutil.copy(built_course / notebook / LAB / f"{LAB}.ipynb", sub)
    proc = subprocess.run([str(OTTER), "run", "-a", str(built_course / "autograder" / LAB / f"{LAB}-otter.zip"),
                           str(sub), "-o", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((tmp_path / "results.json").read_text())
    scores = {t["name"]: t.get("score") for t in results["tests"] if t.get("score") is not None}
    assert scores == {"double": expected * 2 / 3, "Scale": expected / 3}
