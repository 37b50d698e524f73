"""Seeds at which a catalogue mutant once kept full marks (found by ``benchmarks/seed_sweep.py --mutants``): each
must now lose points on its question there. ``tests/test_labs.py`` grades every mutant at seed 0 only; these are the
holes a wider sweep found, kept as regressions after the hidden test was fixed for every seed.

- lab08 ``model_pad_id_hardcoded`` (masks ``src != 0`` whatever ``pad_id`` says) passed
  ``model_source_pads_ignored`` at seeds 100000 and 100005: both drew ``d_model = 2``, where each post-norm
  LayerNorm outputs +-1 and the logits barely move (under 1e-8) whatever the model attends to. ``model_setup``
  now draws ``d_model >= 4``, and with a non-zero ``pad_id`` the test puts the word 0 in a source and checks it is
  read (a model masking both 0 and ``pad_id`` is the second case below).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from attnlab.course import load_course
from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import run_suite
from attnlab.grading.core.mutants import student_with

ROOT = Path(__file__).resolve().parents[1]
COURSE = load_course(ROOT)

SURVIVED = [  # (lab, mutant, seed): the mutant kept full marks on its question at that seed before the fix
    ("lab08_translation", "model_pad_id_hardcoded", 100000),
    ("lab08_translation", "model_pad_id_hardcoded", 100005),
]


@functools.lru_cache(maxsize=None)
def _bundle(lab_id: str):
    bundle = load_bundle(COURSE.lab(lab_id).autograder_dir)
    return bundle, bundle.catalogue()


def _score(lab_id: str, entry, seed: int) -> tuple[float, float, list]:
    bundle, catalogue = _bundle(lab_id)
    student = student_with(catalogue.reference_code, entry)
    q = run_suite(bundle.suite, student, bundle.reference, seed=seed, questions=[entry.question])[entry.question]
    return q["score"], q["max_score"], q["messages"]


@pytest.mark.parametrize(("lab_id", "name", "seed"), SURVIVED, ids=[f"{n}-{s}" for _, n, s in SURVIVED])
def test_a_mutant_that_once_survived_a_seed_loses_points_there(lab_id, name, seed):
    entry = next(e for e in _bundle(lab_id)[1].mutants if e.name == name)
    score, max_score, messages = _score(lab_id, entry, seed)
    assert score < max_score, f"{lab_id} mutant {name} keeps full marks at seed {seed} again: {messages}"


@pytest.mark.parametrize("seed", [100000, 100005, 7])
def test_lab08_a_model_masking_token_zero_as_well_as_pad_id_loses_points(seed):
    """Masking ``(src != 0) & (src != pad_id)`` ignores the pads (the pad check passes) but drops the word 0."""
    lab_id = "lab08_translation"
    mutant = next(e for e in _bundle(lab_id)[1].mutants if e.name == "model_pad_id_hardcoded")
    source = mutant.source.replace("(src != 0)", "((src != 0) & (src != self.pad_id))")
    assert source != mutant.source
    score, max_score, messages = _score(lab_id, dataclasses.replace(mutant, source=source), seed)
    assert score < max_score, f"a model masking token 0 as well as pad_id keeps full marks at seed {seed}"
    assert any("appending the word 0" in m for m in messages), messages
