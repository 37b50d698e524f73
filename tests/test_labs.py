"""Quality gates for every lab of the course (instructor/course.yml).

- the solution notebook scores full marks and the blank student notebook scores 0 (real grader, worker
  process, sandbox where available);
- every catalogued mutant loses points on its question and every variant keeps full marks (through the
  narrow interface, in process: fast), and the grader names the mistake (the mutant's hint) for at least
  60% of each lab's mutants;
- a solution with a catalogued mistake fails a named public check that shows its statement and, where a
  value is compared, the numbers;
- the student notebook and the installed package carry no solution line and no hidden test;
- the solution notebook runs top to bottom with every public check passing, and the blank notebook's
  checks each print one "not written yet" line, no traceback (whole notebooks: this is where executing them
  is the point).
"""

from __future__ import annotations

import functools
import os
import random
import re
import textwrap
from pathlib import Path

import nbformat
import pytest

from attnlab.buildchain.transforms.check_no_leak import solution_lines
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.course import load_course
from attnlab.grading.core.bundle import Bundle, load_bundle
from attnlab.grading.core.hidden import run_suite
from attnlab.grading.core.mutants import load_catalogue, real_loss, stated, student_with
from attnlab.grading.diagnosis.diagnose import Recorder, diagnose
from attnlab.grading.runner import grade_submission

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


# The share of a lab's mutants for which the grader names the mistake (the mutant's own hint); the issue asks 60%.
NAMED_SHARE = 0.6
# Three catalogued mistakes per lab whose public checks must fail by name, with numbers.
CHECKED_MISTAKES = {
    "lab05_self_attention": ("simple_scaled", "sdpa_softmax_dim_minus2", "sdpa_no_scale"),
    "lab06_multi_head_attention": ("split_heads_wrong_cut", "mha_scale_sqrt_d_model", "merge_heads_wrong_order"),
    "lab07_transformer_block": ("pe_sin_cos_swapped", "ln_unbiased_variance", "block_no_ff_residual"),
}


@functools.lru_cache(maxsize=None)
def _graded(lab_id: str, kind: int, name: str):
    """``(results, hints)`` of a catalogue entry graded through the narrow interface (in process), with the
    grader's diagnosis of the failed tests, as ``runner.grade_submission`` does it. Cached: the mutant test and
    the share test use the same grading."""
    lab = COURSE.lab(lab_id)
    bundle = load_bundle(lab.autograder_dir)
    catalogue = bundle.catalogue()
    entry = next(e for e in (catalogue.mutants, catalogue.variants)[kind] if e.name == name)
    recorder = Recorder(student_with(catalogue.reference_code, entry))
    results = run_suite(bundle.suite, recorder, bundle.reference, seed=0, on_result=recorder.on_result)
    hints = diagnose(bundle.suite, catalogue, recorder, results, budget_s=60.0) if kind == 0 else {}
    return results, hints


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def _split(result: dict) -> tuple[dict, dict]:
    """``(code questions, written questions)`` of a result: a written one awaits marking, with no score."""
    written = {q: v for q, v in result["questions"].items() if v.get("kind") == "written"}
    assert all(v["score"] is None and v["status"] == "awaiting marking" for v in written.values()), written
    assert result.get("awaiting_points", 0.0) == sum(v["max_score"] for v in written.values())
    return {q: v for q, v in result["questions"].items() if q not in written}, written


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_solution_notebook_scores_full_marks(lab):
    result = grade_submission(lab.autograder_dir, lab.solution_notebook)
    code, written = _split(result)
    failed = {q: [m for m in v["messages"] if m.startswith("failed")] for q, v in code.items()
              if v["score"] < v["max_score"]}
    assert result["score"] == sum(v["max_score"] for v in code.values()) > 0, \
        f"solution lost points: {failed} {result['errors']}"
    assert result["max_score"] == result["score"] + result.get("awaiting_points", 0.0)
    assert all(v["answer"].strip() for v in written.values()), "the solution's written answers were not found"
    assert result["review"] == [], f"the solution was marked for review: {result['review']}"  # rules, call evidence


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_blank_student_notebook_scores_zero_saying_not_written_yet(lab):
    result = grade_submission(lab.autograder_dir, lab.student_notebook)
    code, written = _split(result)
    earned = {q: v["messages"] for q, v in code.items() if v["score"] > 0}
    assert result["score"] == 0, f"the blank notebook earned points: {earned}"
    unsaid = {q: v["messages"] for q, v in code.items()
              if not any(m.endswith("not written yet") for m in v["messages"])}
    assert not unsaid, f"questions of the blank notebook that do not say 'not written yet': {unsaid}"
    assert all(v["answer"] == "" for v in written.values()), "the placeholder counted as an answer"
    assert result["review"] == [], f"the blank notebook was marked for review: {result['review']}"


@pytest.mark.parametrize(("lab", "entry"), _entries(0))
def test_mutant_loses_points_as_stated(lab, entry):
    """A mutant loses points on its question, the share its entry states (``loses``: the policy in docs/CURRICULUM.md,
    Partial credit); at seed 0 here, at every seed in ``benchmarks/seed_sweep.py --mutants``."""
    assert entry.hint, f"mutant {entry.name} has no student-facing hint"
    res, _ = _graded(lab.id, 0, entry.name)
    q = res[entry.question]
    assert Bundle.verdict("mutant", entry, res), (
        f"mutant {entry.name} ({entry.why}) lost {real_loss(q):.0%} of {entry.question}, stated: {stated(entry)} "
        f"({q['score']}/{q['max_score']}): {q['messages']}")


# Questions built on a helper but graded on the student's own version of it (docs/CURRICULUM.md says why): the
# helper's mistake costs them too.
NOT_ISOLATED = {("lab09_mini_gpt", "BPETokenizer")}  # its training calls bpe_merge thousands of times per test


@pytest.mark.parametrize(("lab", "entry"), _entries(0))
def test_a_mutant_costs_only_the_questions_its_cell_defines(lab, entry):
    """Each question graded on its own (docs/CURRICULUM.md): a mistake costs the questions whose names its cell
    defines (its own, or both of a pair written together), never a question built on it, which is graded on the
    reference's version of what it calls (``HiddenSuite(graded_on_reference=...)``), except ``NOT_ISOLATED``."""
    res, _ = _graded(lab.id, 0, entry.name)
    own = set(re.findall(r"^(?:def|class)\s+(\w+)", textwrap.dedent(entry.source), re.M)) | {entry.question}
    own |= {q for q in res if (lab.id, q) in NOT_ISOLATED}
    lost = {q: f"{v['score']}/{v['max_score']}" for q, v in res.items() if q not in own and v["score"] < v["max_score"]}
    assert not lost, (f"mutant {entry.name} of {entry.question} also cost {lost}: grade those with the reference's "
                      f"{entry.question} (graded_on_reference in the lab's hidden tests)")


@pytest.mark.parametrize(("lab", "entry"), _entries(1))
def test_variant_keeps_full_marks(lab, entry):
    res, _ = _graded(lab.id, 1, entry.name)
    lost = {q: [m for m in v["messages"] if m.startswith("failed")] for q, v in res.items()
            if v["score"] < v["max_score"]}
    assert Bundle.verdict("variant", entry, res), f"correct variant {entry.name} ({entry.why}) lost points: {lost}"


# The grader's seed depends on the submission, so a correct notebook meets the hidden tests with seeds nobody tried:
# the reference and every variant must pass every hidden test for each of these (a float32 tolerance too tight for
# some draws, a statistical test sized too small, or a test that cannot build its case, would cost a correct student
# points). A fixed random sample of grading-sized seeds (spread, not 0..7); the variants take the first
# VARIANT_SEEDS of them: about 30 s per seed for all variants of all labs on one core, so the variants add about two
# minutes to `make test`. benchmarks/seed_sweep.py runs the same check over hundreds of seeds.
SEEDS = random.Random(20261125).sample(range(1 << 62), 8)
VARIANT_SEEDS = 3


def _lost(results: dict, seed: int) -> dict:
    return {(seed, q): [m[:300] for m in v["messages"] if m.startswith("failed")]
            for q, v in results.items() if v["score"] < v["max_score"]}


@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_the_reference_keeps_full_marks_whatever_the_seed(lab, bundles):
    bundle = bundles[lab.id]
    lost = {}
    for seed in SEEDS:
        lost |= _lost(run_suite(bundle.suite, bundle.reference, bundle.reference, seed=seed), seed)
    assert not lost, f"the reference lost points: {lost}"


@pytest.mark.parametrize(("lab", "entry"), _entries(1))
def test_a_variant_keeps_full_marks_whatever_the_seed(lab, entry, bundles):
    bundle = bundles[lab.id]
    student = student_with((lab.autograder_dir / "reference.py").read_text(), entry)
    lost = {}
    for seed in SEEDS[:VARIANT_SEEDS]:
        lost |= _lost(run_suite(bundle.suite, student, bundle.reference, seed=seed), seed)
    assert not lost, f"correct variant {entry.name} ({entry.why}) lost points: {lost}"


@pytest.mark.parametrize("lab", [lab for lab in LABS if lab.catalogue.exists()],
                         ids=[lab.id for lab in LABS if lab.catalogue.exists()])
def test_the_grader_names_the_mistake_for_most_mutants(lab):
    mutants, _ = load_catalogue(lab.catalogue)
    named, wrong = [], []
    for entry in mutants:
        hint = _graded(lab.id, 0, entry.name)[1].get(entry.question)
        if hint == entry.hint:
            named.append(entry.name)
        elif hint is not None:
            wrong.append((entry.name, hint))
    share = len(named) / len(mutants)
    print(f"{lab.id}: the grader names the mistake of {len(named)} of {len(mutants)} mutants ({share:.0%})")
    assert share >= NAMED_SHARE, f"{lab.id}: mistakes named for {share:.0%} of the mutants: {named}"
    # a hint that is not the mutant's own must at least be the same words (two mutants that behave alike)
    assert all(h in {m.hint for m in mutants if m.question == next(e.question for e in mutants if e.name == n)}
               for n, h in wrong)


def _graded_namespace(lab) -> dict:
    """The solution notebook's graded cells run in this process (no set-up cell, no experiments)."""
    import torch

    ns = {"__name__": "__main__", "device": torch.device("cpu")}
    for cell in nbformat.read(lab.solution_notebook, as_version=4).cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "otter_ignore" not in tags and "attnlab_setup" not in tags \
                and not cell.source.startswith("grader.check"):
            exec(compile(cell.source, "<cell>", "exec"), ns)
    return ns


@pytest.mark.parametrize(("lab", "name"), [pytest.param(COURSE.lab(lab_id), name, id=f"{lab_id}-{name}")
                                           for lab_id, names in CHECKED_MISTAKES.items()
                                           if lab_id in LAB_IDS for name in names])
def test_a_catalogued_mistake_fails_a_named_check_with_its_statement_and_numbers(lab, name):
    from otter.test_files import ExceptionTestFile

    from attnlab.kit.public_check import format_result

    entry = next(e for e in load_catalogue(lab.catalogue)[0] if e.name == name)
    ns = _graded_namespace(lab)
    exec(textwrap.dedent(entry.source), ns)
    test_file = ExceptionTestFile.from_file(str(lab.public_tests_dir / f"{entry.question}.py"))
    test_file.run(ns)
    shown = format_result(entry.question, test_file)
    failed = [tc.name for tc, r in zip(test_file.test_cases, test_file.test_case_results) if not r.passed]
    assert failed, f"{name}: every public check of {entry.question} passes"
    assert f"[FAIL] {failed[0]}\n   " in shown, shown  # the check's name, then its message
    assert re.search(r"yours -?[0-9.]+(e-?\d+)?, expected -?[0-9.]+", shown), f"{name}: no numbers shown:\n{shown}"
    assert "Traceback" not in shown and "check_" not in shown and "public_check" not in shown


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
    failing = {q: t for q, t in checks.items() if not re.fullmatch(rf"\[pass\] {re.escape(q)}: all \d+ checks passed", t)}
    assert not failing, f"public checks fail on the solution: {failing}"


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS, ids=LAB_IDS)
def test_blank_notebook_checks_each_say_not_written_yet(lab, tmp_path):
    nb = _execute(lab.student_notebook, tmp_path, allow_errors=True)
    checks = _check_outputs(nb)
    assert checks
    for q, text in checks.items():  # the question's own name first, also when its checks stop at an earlier stub
        assert re.fullmatch(rf"\[FAIL\] {q}(\.\w+)*: (its checks use [\w.]+, which is )?not written yet", text), (
            f"check {q} of the blank notebook shows {text!r}")


def test_packaged_checks_hold_no_line_of_any_labs_secrets():
    """The kit ships every lab's public checks (a wheel holds them all, whichever labs a release names), so no
    line of them may equal a line of any lab's solution, hidden tests or catalogue (the release's leak gate)."""
    from attnlab.release.leak_gate import _kit_source_lines, secret_lines

    secrets, kit = secret_lines(COURSE), _kit_source_lines(COURSE)
    leaked = [f"{path.relative_to(ROOT)}: {line.strip()!r} (from {secrets[line.strip()]})"
              for path in sorted((ROOT / "src" / "attnlab" / "kit" / "generated" / "public_tests").rglob("*.py"))
              for line in path.read_text().splitlines() if line.strip() in secrets and line.strip() not in kit]
    assert not leaked, "rename these lines in the hidden tests (or reword the check): " + "; ".join(leaked[:5])
