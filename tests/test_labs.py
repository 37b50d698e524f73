"""Quality gates for every lab of the course (instructor/course.yml).

- the solution notebook scores full marks and the blank student notebook scores 0 (real grader, worker
  process, sandbox where available);
- every catalogued mutant loses points on its question and every variant keeps full marks (through the
  narrow interface, in process: fast);
- the student notebook and the installed package carry no solution line and no hidden test;
- the solution notebook runs top to bottom with every public check passing, and the blank notebook's
  checks fail with a message (whole notebooks: this is where executing them is the point).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from attnlab.build.transforms.check_no_leak import solution_lines
from attnlab.build.transforms.read_master import read_master
from attnlab.course import load_course
from attnlab.grading.catalogue import grade_entry, load_catalogue
from attnlab.grading.runner import grade_submission, load_bundle

ROOT = Path(__file__).resolve().parents[1]
# The real data copies (tiny Shakespeare, Multi30k) beside the repository: the labs' loaders read them through
# the mirror setting instead of the internet, which this machine and CI do not reach.
SHARED_DATA = ROOT.parent / "shared" / "data"
COURSE = load_course(ROOT)
LABS = [lab for lab in COURSE.labs if lab.master.exists()]
LAB_IDS = [lab.id for lab in LABS]


def _entries(kind: int):
    out = []
    for lab in LABS:
        if lab.catalogue.exists():
            for entry in load_catalogue(lab.catalogue)[kind]:
                out.append(pytest.param(lab, entry, id=f"{lab.id}-{entry.name}"))
    return out


@pytest.fixture(scope="module")
def bundles():
    return {lab.id: load_bundle(lab.autograder_dir) for lab in LABS}


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_solution_notebook_scores_full_marks(lab):
    result = grade_submission(lab.autograder_dir, lab.solution_notebook)
    failed = {q: [m for m in v["messages"] if m.startswith("failed")] for q, v in result["questions"].items()
              if v["score"] < v["max_score"]}
    assert result["score"] == result["max_score"] > 0, f"solution lost points: {failed} {result['errors']}"


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_blank_student_notebook_scores_zero(lab):
    result = grade_submission(lab.autograder_dir, lab.student_notebook)
    earned = {q: v["messages"] for q, v in result["questions"].items() if v["score"] > 0}
    assert result["score"] == 0, f"the blank notebook earned points: {earned}"


@pytest.mark.parametrize(("lab", "entry"), _entries(0))
def test_mutant_loses_points(lab, entry, bundles):
    bundle = bundles[lab.id]
    ref_code = (lab.autograder_dir / "reference.py").read_text()
    res = grade_entry(bundle.suite, bundle.reference, ref_code, entry)
    q = res[entry.question]
    assert q["score"] < q["max_score"], f"mutant {entry.name} ({entry.why}) survived: {q['messages']}"


@pytest.mark.parametrize(("lab", "entry"), _entries(1))
def test_variant_keeps_full_marks(lab, entry, bundles):
    bundle = bundles[lab.id]
    ref_code = (lab.autograder_dir / "reference.py").read_text()
    res = grade_entry(bundle.suite, bundle.reference, ref_code, entry)
    lost = {q: [m for m in v["messages"] if m.startswith("failed")] for q, v in res.items()
            if v["score"] < v["max_score"]}
    assert not lost, f"correct variant {entry.name} ({entry.why}) lost points: {lost}"


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_student_release_has_no_solution_and_no_hidden_test(lab, bundles):
    student_text = "\n".join(c.source for c in nbformat.read(lab.student_notebook, as_version=4).cells)
    package_text = "\n".join(p.read_text() for p in (ROOT / "src" / "attnlab").rglob("*.py"))
    secret = solution_lines(read_master(lab.master))
    assert secret, "the master has no solution block"
    leaked = [s for s in secret if s in student_text.splitlines() or s in package_text]
    assert not leaked, f"solution lines reach students: {leaked[:3]}"
    names = [t.name for t in bundles[lab.id].suite.tests]
    assert names
    leaked = [n for n in names if re.search(rf"\b{re.escape(n)}\b", student_text + package_text)]
    assert not leaked, f"hidden tests reach students: {leaked[:3]}"
    assert "hidden_tests" not in student_text and "HiddenSuite" not in student_text


def _execute(path: Path, tmp_path: Path, allow_errors: bool) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env_before = dict(os.environ)
    os.environ.update({"ATTNLAB_FAST": "1", "MPLBACKEND": "Agg", "ATTNLAB_DEVICE": "cpu",
                       "ATTNLAB_DATA": str(tmp_path / "data-cache")})
    if SHARED_DATA.is_dir():
        os.environ["ATTNLAB_DATA_MIRROR"] = SHARED_DATA.as_uri()
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=allow_errors,
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    return nb


def _check_outputs(nb) -> dict[str, str]:
    out = {}
    for cell in nb.cells:
        m = re.match(r'grader\.check\("([^"]+)"\)', cell.source.strip()) if cell.cell_type == "code" else None
        if m:
            texts = [o.get("data", {}).get("text/plain", "") or o.get("text", "") for o in cell.get("outputs", [])]
            texts += [f"{o.get('ename')}: {o.get('evalue')}" for o in cell.get("outputs", [])
                      if o.get("output_type") == "error"]
            out[m.group(1)] = "\n".join(texts)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_solution_notebook_runs_top_to_bottom_and_passes_its_checks(lab, tmp_path):
    nb = _execute(lab.solution_notebook, tmp_path, allow_errors=False)
    checks = _check_outputs(nb)
    assert checks, "the notebook has no grader.check cells"
    failing = {q: t for q, t in checks.items() if "All test cases passed" not in t}
    assert not failing, f"public checks fail on the solution: {failing}"


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_blank_notebook_checks_fail_with_a_message(lab, tmp_path):
    nb = _execute(lab.student_notebook, tmp_path, allow_errors=True)
    checks = _check_outputs(nb)
    assert checks
    passing = [q for q, t in checks.items() if "All test cases passed" in t]
    assert not passing, f"public checks pass on the blank notebook: {passing}"
    for q, text in checks.items():
        assert "failed" in text.lower() or "error" in text.lower(), f"check {q} gave no message: {text!r}"
