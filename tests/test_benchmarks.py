"""The benchmark scripts run end to end at toy sizes (their figures come from full runs, reported in notes).

The lab08 and lab09 scripts read the real data through ``attnlab.kit.datasets`` with ``../shared/data`` as the mirror,
so they are skipped where that copy is absent; the seed sweep needs no data. What is checked: the scripts still fit the
labs' reference code, and the JSON they
print holds the figures the issues ask for, with sane values.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import benchmark_scripts
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

needs_data = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data (the real datasets) is not here")


load = benchmark_scripts.load


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


@needs_data
def test_lab09_gpt_prints_val_loss_time_per_iteration_and_parameters(capsys):
    result = load("lab09_gpt").main(["--iters", "30", "--eval-batches", "20", "--layers", "1", "--heads", "2",
                                     "--d-model", "32", "--block-size", "16", "--warmup", "5", "--threads", "1"])
    assert last_json(capsys.readouterr().out) == json.loads(json.dumps(result))
    assert {"val_loss", "train_loss", "ms_per_iter", "params", "seconds", "config"} <= set(result)
    # tiny Shakespeare has 65 characters: 30 steps take a model from log(65) = 4.17 to below it
    assert 2.0 < result["val_loss"] < math.log(65)
    assert result["ms_per_iter"] > 0 and result["config"]["iters"] == 30
    embeddings, layer_norms = 65 * 32 + 16 * 32, 3 * (32 + 32)  # ln1, ln2, ln_f
    attention, mlp = (32 * 96 + 96) + (32 * 32 + 32), (32 * 128 + 128) + (128 * 32 + 32)
    assert result["params"] == embeddings + layer_norms + attention + mlp  # tied lm_head: no second (V, d)


@needs_data
def test_lab09_gpt_refuses_too_few_validation_batches():
    with pytest.raises(SystemExit):
        load("lab09_gpt").main(["--eval-batches", "5"])


@needs_data
def test_lab08_bleu_trains_for_its_budget_and_scores_with_sacrebleu(capsys):
    result = load("lab08_bleu").main(["--budget-min", "0.05", "--epochs", "1", "--d-model", "32", "--heads", "2",
                                      "--layers", "1", "--d-ff", "64", "--eval-every-min", "10", "--threads", "2"])
    out = capsys.readouterr().out
    assert last_json(out) == json.loads(json.dumps(result))
    assert 0 < result["train_s"] < 30 and result["steps"] >= 1
    assert result["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert 0.0 <= result["test_bleu"] < 20.0  # a few steps of a toy model: sacreBLEU of its greedy output
    assert len(result["curve"]) == 1 and math.isfinite(result["curve"][0]["val_loss"])
    assert "ref:" in out and "out:" in out  # three translations shown


SWEEP_LAB = "lab05_self_attention"


def test_seed_sweep_runs_reference_and_variants_and_prints_the_table(capsys):
    from attnlab.grading.core.bundle import load_bundle
    from attnlab.grading.core.mutants import load_catalogue

    sweep = load("seed_sweep")
    assert sweep.main(["--labs", "lab05", "--seeds", "2", "--start", "777", "--no-progress"]) == 0
    out = capsys.readouterr().out
    n_tests = len(load_bundle(ROOT / "autograder" / SWEEP_LAB).suite.tests)
    n_variants = len(load_catalogue(ROOT / "instructor" / SWEEP_LAB / "catalogue.py")[1])
    row = next(line.split() for line in out.splitlines() if line.startswith(SWEEP_LAB))
    assert row[1:5] == ["0", "0", "0", str(2 * n_tests * (1 + n_variants))], out  # no failure; tests x seeds
    assert "seeds 777..778, jobs 1" in out


def test_seed_sweep_reports_a_failing_entry_by_name_test_and_seed(monkeypatch):
    from attnlab.grading.core.mutants import load_catalogue, student_with

    sweep = load("seed_sweep")
    mutant = load_catalogue(ROOT / "instructor" / SWEEP_LAB / "catalogue.py")[0][0]
    ref_code = (ROOT / "autograder" / SWEEP_LAB / "reference.py").read_text()
    assert sweep.run_task((SWEEP_LAB, "mutant", mutant.name, (5,))).failures == []  # killed: not a failure
    # the same mistake posing as a variant: every test it fails is a row naming it, the test and the seed
    monkeypatch.setattr(sweep, "_student", lambda lab, kind, name: (student_with(ref_code, mutant), mutant))
    outcome = sweep.run_task((SWEEP_LAB, "variant", mutant.name, (5, 6)))
    assert outcome.failures and {f[3] for f in outcome.failures} == {5, 6}
    assert all(f[:3] == (SWEEP_LAB, "variant", mutant.name) for f in outcome.failures)
    table = sweep.table({SWEEP_LAB: outcome}, 2)
    assert f"{SWEEP_LAB} variant {mutant.name} seed=5 {outcome.failures[0][4]}" in table


def test_seed_sweep_replays_the_reference_without_changing_a_verdict(monkeypatch):
    """A mistake posing as a variant, after the reference has run at the same seeds: the replayed reference's
    answers give exactly the failures that run_suite with the real reference gives, and most of them are replayed."""
    from attnlab.grading.core.hidden import run_suite
    from attnlab.grading.core.mutants import load_catalogue, student_with

    sweep = load("seed_sweep")
    mutant = load_catalogue(ROOT / "instructor" / SWEEP_LAB / "catalogue.py")[0][0]
    bundle, ref_code = sweep._lab(SWEEP_LAB)[0], (ROOT / "autograder" / SWEEP_LAB / "reference.py").read_text()
    student = student_with(ref_code, mutant)
    assert sweep.run_task((SWEEP_LAB, "reference", sweep.REFERENCE, (5, 6))).failures == []
    computed = sweep._replay(SWEEP_LAB).computed
    monkeypatch.setattr(sweep, "_student", lambda lab, kind, name: (student, mutant))
    got = sweep.run_task((SWEEP_LAB, "variant", mutant.name, (5, 6))).failures
    expected = [(SWEEP_LAB, "variant", mutant.name, seed, *m[len("failed: "):].partition(": ")[::2])
                for seed in (5, 6) for v in run_suite(bundle.suite, student, bundle.reference, seed=seed).values()
                for m in v["messages"] if m.startswith("failed: ")]
    assert got and got == [f[:5] + (f[5][:300],) for f in expected]
    replay = sweep._replay(SWEEP_LAB)
    assert replay.replayed > replay.computed - computed  # the variant's run mostly replayed the recordings


def test_seed_sweep_checks_a_mutants_stated_loss_over_its_whole_question(monkeypatch):
    import dataclasses

    from attnlab.grading.core.mutants import load_catalogue, student_with

    sweep = load("seed_sweep")
    mutant = load_catalogue(ROOT / "instructor" / SWEEP_LAB / "catalogue.py")[0][0]
    tests = [t for t in sweep._lab(SWEEP_LAB)[0].suite.tests if t.question == mutant.question]
    outcome = sweep.run_task((SWEEP_LAB, "mutant", mutant.name, (5, 6)))
    assert outcome.failures == [] and outcome.tests_run == 2 * len(tests)  # every test of its question, each seed
    # the same mistake stating a loss it does not have: one failure per seed, with the real and the stated loss
    wrong = dataclasses.replace(mutant, loses=(0.01, 0.02))
    student = student_with((ROOT / "autograder" / SWEEP_LAB / "reference.py").read_text(), wrong)
    monkeypatch.setattr(sweep, "_student", lambda lab, kind, name: (student, wrong))
    outcome = sweep.run_task((SWEEP_LAB, "mutant", mutant.name, (5, 6)))
    assert [f[3] for f in outcome.failures] == [5, 6], outcome.failures
    assert all(f[4] == mutant.question and f[5].endswith("of the question, stated: 1% to 2%") for f in outcome.failures)


def test_sweep_ledger_counts_seeds_only_while_the_code_is_the_same(tmp_path):
    """A recorded sweep counts for its lab until one of the files it depends on changes; status names the file."""
    ledger = load("sweep_ledger")
    root = tmp_path
    (root / "autograder" / "labX").mkdir(parents=True)
    (root / "autograder" / "labX" / "hidden_tests.py").write_text("TESTS = 1\n")
    (root / "autograder" / "labX" / "labX-otter.zip").write_bytes(b"zip")  # repeats the bundle: not a dependency
    (root / "src" / "attnlab").mkdir(parents=True)
    (root / "src" / "attnlab" / "checks.py").write_text("ATOL = 1e-5\n")
    modules = {"src/attnlab/checks.py"}
    ledger.record(root, "labX", [0, 1, 2, 5], kinds=["reference", "variant"], failures=[], tests_run=8,
                  seconds=1.0, modules=modules)
    ledger.record(root, "labX", [3], kinds=["reference"], failures=[], tests_run=2, seconds=1.0, modules=modules)
    line = ledger.entries(root)[0]
    assert line["seeds"] == [[0, 2], [5, 5]] and "autograder/labX/labX-otter.zip" not in line["files"]
    assert ledger.covered(root, "labX", ["reference", "variant"]) == {0, 1, 2, 5}
    assert ledger.covered(root, "labX", ["reference"]) == {0, 1, 2, 3, 5}
    assert ledger.covered(root, "labY", ["reference"]) == set()
    (root / "src" / "attnlab" / "checks.py").write_text("ATOL = 1e-4\n")  # a tolerance changed: nothing counts
    assert ledger.covered(root, "labX", ["reference"]) == set()
    assert "src/attnlab/checks.py" in ledger.status(root, ["labX"])
    (root / "src" / "attnlab" / "checks.py").write_text("ATOL = 1e-5\n")  # back to the recorded bytes
    assert ledger.covered(root, "labX", ["reference", "variant"]) == {0, 1, 2, 5}
    (root / "src" / "attnlab" / "checks.py").write_text('"""Tolerances."""\n\nATOL = 1e-5  # float32\n')
    assert ledger.covered(root, "labX", ["reference"]) == {0, 1, 2, 3, 5}  # documentation only: still counts
    (root / "autograder" / "labX" / "hidden_tests.py").write_text("TESTS = 2\n")
    assert ledger.covered(root, "labX", ["reference"]) == set()


def test_seed_sweep_resume_skips_the_seeds_in_the_ledger(tmp_path, monkeypatch, capsys):
    sweep = load("seed_sweep")
    monkeypatch.setattr(sweep.sweep_ledger, "LEDGER", tmp_path / "ledger.jsonl")
    assert sweep.main(["--labs", "lab11", "--seeds", "2", "--start", "40", "--reference-only", "--ledger",
                       "--no-progress"]) == 0
    entry = sweep.sweep_ledger.entries(ROOT)[0]
    assert entry["seeds"] == [[40, 41]] and entry["kinds"] == ["reference"]
    assert "src/attnlab/grading/core/checks.py" in entry["files"] and "autograder/lab11_vision_transformer/reference.py" \
        in entry["files"]
    capsys.readouterr()
    assert sweep.main(["--labs", "lab11", "--seeds", "3", "--start", "40", "--reference-only", "--resume",
                       "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "skipped those in the ledger: lab11_vision_transformer 2" in out
    row = next(line.split() for line in out.splitlines() if line.startswith("lab11"))
    assert int(row[4]) == len(sweep._lab("lab11_vision_transformer")[0].suite.tests)  # one seed ran: 42
