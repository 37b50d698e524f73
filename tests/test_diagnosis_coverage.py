"""The diagnosis on held-out mistakes (instructor/<lab>/heldout.py, never used by the matching), a small fixed subset
run through benchmarks/diagnosis_coverage.py at one grading seed: no entry gets a wrong name (a mistake the catalogue
lacks gets none), and each labelled entry of the subset gets its mutant's hint. The full table comes from the
benchmark (every entry, several seeds)."""

from __future__ import annotations

from pathlib import Path

import benchmark_scripts
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _coverage():
    return benchmark_scripts.load("diagnosis_coverage")

# Cheap labs; labelled entries and entries labelled None (precision), one of them a cross-question cascade; lab10's
# loader returns the model it was given (its handle, numbered in the submission's process), lab10's and lab11's
# None entries raise another error than the catalogue's, or none.
SUBSET = {
    "lab01": ["tokenize_no_punct_unicode", "mec_divides_by_max_len_sum", "encode_pad_in_front"],
    "lab02": ["noise_unnormalised", "similar_query_kept"],
    "lab06": ["split_reshape_no_transpose", "mha_single_head", "mha_keys_values_swapped"],
    "lab10": ["mask_skips_pad_id_only", "gpt2_weights_only", "bert_too_long_index_error"],
    "lab11": ["patchify_columns_first", "rollout_first_layer_on_the_left", "embed_scaled_by_sqrt_d",
              "clip_logit_scale_is_tau"],
}


@pytest.mark.parametrize("lab", sorted(SUBSET))
def test_held_out_mistakes_get_no_wrong_name(lab):
    coverage = _coverage()
    cov = coverage.lab_coverage(lab, coverage.SEEDS[:1], budget_s=60.0, only=set(SUBSET[lab]))
    assert cov.labelled + cov.unlabelled == len(SUBSET[lab]), f"{lab}: held-out entries missing: {SUBSET[lab]}"
    assert not cov.wrong, f"{lab}: wrong names (a false diagnosis is worse than none): {cov.wrong}"
    assert not cov.survived, f"{lab}: held-out entries that keep full marks are no mistakes: {cov.survived}"
    assert cov.right == cov.labelled, f"{lab}: labelled held-out mistakes left unnamed: {cov.missed}"
