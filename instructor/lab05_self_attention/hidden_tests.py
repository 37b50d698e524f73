"""Hidden tests of Lab 05 (self-attention), written against the narrow interface.

Every test compares the student's answer with the reference on inputs drawn from ``rng`` only, so a blank
notebook (functions returning None, modules without parameters) scores 0: no test passes without a working
answer. Source checks for the forbidden library versions sit inside value tests, after the comparison.

Questions and points (30 in all):

    simple_self_attention          4
    scaled_dot_product_attention  10
    causal_mask                    2
    padding_mask                   2
    SelfAttention                  6
    AttentionClassifier            6

Tolerances are the defaults of ``checks.TOLERANCES`` everywhere. The one place where implementations may
legitimately disagree by more than that, huge scores in float32 (a near tie between two scores of size 1e4
is decided by rounding), is checked by properties only (finite, rows sum to 1, masked weights exactly 0);
the value comparison of huge scores runs in float64.
"""

from __future__ import annotations

import torch

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import padded_ids, randn, random_lengths, random_mask
from attnlab.grading.policy import forbidden_calls

# The course rules (grading/policy/rules.py: an allowlist over the graded cells) cost every question of this lab when
# broken. None: every question.
# Each question graded on its own: the classes run with the reference's helpers, and AttentionClassifier with the
# reference class SelfAttention too (built and run by the grader: grading/worker/module_calls.py; docs/CURRICULUM.md)
_HELPERS = ("scaled_dot_product_attention", "causal_mask", "padding_mask")
suite = HiddenSuite("lab05_self_attention", policy_questions=None,
                    graded_on_reference={"SelfAttention": _HELPERS, "AttentionClassifier": _HELPERS + ("SelfAttention",)})

FORBIDDEN = ["scaled_dot_product_attention", "MultiheadAttention", "multi_head_attention_forward"]
WHY = ("this lab asks you to build attention by hand: F.scaled_dot_product_attention and nn.MultiheadAttention "
       "(and F.multi_head_attention_forward behind it) are not allowed in the graded cells")

F32, F64 = torch.float32, torch.float64


# ------------------------------------------------------------------------------------------------ inputs
def key_padding(lengths: torch.Tensor, n_k: int) -> torch.Tensor:
    """(B, 1, n_k) bool: True at the real keys."""
    return (torch.arange(n_k)[None, :] < lengths[:, None])[:, None, :]


def masked_weights_are_zero(weights, mask: torch.Tensor, name: str) -> None:
    """The weights where ``mask`` is False are exactly 0 (after the shapes were checked)."""
    off = weights.masked_select(~mask.expand_as(weights))
    bad = int((off != 0).sum())
    assert bad == 0, (f"{name}: {bad} weights of masked keys are not exactly 0 (largest {off.abs().max().item():.3g}); "
                      "set the masked scores to -inf before the softmax")


# --------------------------------------------------------------------------------- simple_self_attention
@suite.test("simple_self_attention", points=1.5)
def simple_float64_batched_grad(student, ref, rng):
    x = randn(rng, 3, 5, 4)
    checks.compare_call(student, ref, "simple_self_attention", x, grad=True, rng=rng)
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test("simple_self_attention", points=1.0)
def simple_leading_dims_float32_grad(student, ref, rng):
    x = randn(rng, 2, 3, 4, 6, dtype=F32)
    checks.compare_call(student, ref, "simple_self_attention", x, grad=True, rng=rng)


@suite.test("simple_self_attention", points=0.5)
def simple_unbatched(student, ref, rng):
    x = randn(rng, 7, 3)
    checks.compare_call(student, ref, "simple_self_attention", x)


@suite.test("simple_self_attention", points=1.0)
def simple_huge_inputs_stay_finite(student, ref, rng):
    x = randn(rng, 2, 5, 8, scale=30.0)  # scores of several thousand: exp() alone overflows
    checks.compare_call(student, ref, "simple_self_attention", x, grad=True, rng=rng)


# -------------------------------------------------------------------------- scaled_dot_product_attention
SDPA = "scaled_dot_product_attention"


@suite.test(SDPA, points=1.5)
def sdpa_float64_cross_shapes_grad(student, ref, rng):
    q, k, v = randn(rng, 2, 3, 4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 6)  # n_q != n_k, d_v != d_k
    checks.compare_call(student, ref, SDPA, q, k, v, grad=True, rng=rng)
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test(SDPA, points=1.0)
def sdpa_float32_leading_dims_grad(student, ref, rng):
    q, k, v = randn(rng, 2, 3, 4, 8, dtype=F32), randn(rng, 2, 3, 6, 8, dtype=F32), randn(rng, 2, 3, 6, 5, dtype=F32)
    checks.compare_call(student, ref, SDPA, q, k, v, grad=True, rng=rng)


@suite.test(SDPA, points=0.5)
def sdpa_unbatched_single_query(student, ref, rng):
    q, k, v = randn(rng, 1, 4), randn(rng, 6, 4), randn(rng, 6, 3)
    checks.compare_call(student, ref, SDPA, q, k, v)


@suite.test(SDPA, points=1.0)
def sdpa_mask_shared_2d(student, ref, rng):
    q, k, v = randn(rng, 3, 4, 5), randn(rng, 3, 6, 5), randn(rng, 3, 6, 2)
    mask = random_mask(rng, 4, 6)  # (n_q, n_k), the same for every sequence
    s, _ = checks.compare_call(student, ref, SDPA, q, k, v, mask=mask, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], mask, "weights with a (n_q, n_k) mask")


@suite.test(SDPA, points=2.0)
def sdpa_mask_key_padding(student, ref, rng):
    q, k, v = randn(rng, 4, 3, 6), randn(rng, 4, 7, 6), randn(rng, 4, 7, 5)
    mask = key_padding(random_lengths(rng, 4, 7), 7)  # (B, 1, n_k), broadcast over the queries
    s, _ = checks.compare_call(student, ref, SDPA, q, k, v, mask=mask, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], mask, "weights with a (B, 1, n_k) padding mask")


@suite.test(SDPA, points=1.0)
def sdpa_mask_full_float32(student, ref, rng):
    q, k, v = randn(rng, 2, 5, 4, dtype=F32), randn(rng, 2, 3, 4, dtype=F32), randn(rng, 2, 3, 6, dtype=F32)
    mask = random_mask(rng, 2, 5, 3)  # (B, n_q, n_k)
    s, _ = checks.compare_call(student, ref, SDPA, q, k, v, mask=mask, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], mask, "weights with a (B, n_q, n_k) mask")


@suite.test(SDPA, points=1.0)
def sdpa_mask_heads_4d(student, ref, rng):
    q, k, v = randn(rng, 2, 3, 4, 8), randn(rng, 2, 3, 5, 8), randn(rng, 2, 3, 5, 4)  # (B, h, n, d)
    mask = key_padding(random_lengths(rng, 2, 5), 5)[:, None]  # (B, 1, 1, n_k)
    s, _ = checks.compare_call(student, ref, SDPA, q, k, v, mask=mask, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], mask, "weights with a (B, 1, 1, n_k) mask")


@suite.test(SDPA, points=1.0)
def sdpa_causal_float32(student, ref, rng):
    q, k, v = randn(rng, 3, 6, 4, dtype=F32), randn(rng, 3, 6, 4, dtype=F32), randn(rng, 3, 6, 4, dtype=F32)
    mask = torch.ones(6, 6, dtype=torch.bool).tril()
    s, _ = checks.compare_call(student, ref, SDPA, q, k, v, mask=mask)
    masked_weights_are_zero(s.output[1], mask, "weights with a causal mask")


@suite.test(SDPA, points=1.0)
def sdpa_huge_scores_stay_finite(student, ref, rng):
    # float64: values and gradients against the reference (scores of about 1e4; exp() alone overflows)
    q, k, v = randn(rng, 2, 3, 4, scale=1e4), randn(rng, 2, 5, 4), randn(rng, 2, 5, 3)
    mask = key_padding(random_lengths(rng, 2, 5), 5)
    checks.compare_call(student, ref, SDPA, q, k, v, mask=mask, grad=True, rng=rng)
    # float32: properties only (a near tie between two huge scores is decided by rounding)
    q, k, v = (t.to(F32) for t in (q, k, v))
    out, weights = student.call(SDPA, q, k, v, mask=mask).output
    checks.expect_tensor(out, name="out for huge float32 scores", shape=(2, 3, 3), dtype=F32)
    checks.expect_tensor(weights, name="weights for huge float32 scores", shape=(2, 3, 5), dtype=F32)
    checks.assert_close(weights.sum(-1), torch.ones(2, 3), name="the row sums of the weights for huge float32 scores")
    masked_weights_are_zero(weights, mask, "weights for huge float32 scores")


# -------------------------------------------------------------------------------------------- the masks
@suite.test("causal_mask", points=1.0)
def causal_mask_values(student, ref, rng):
    for n in (1, 2, 5, int(torch.randint(6, 12, (1,), generator=rng))):
        checks.compare_call(student, ref, "causal_mask", n)


@suite.test("causal_mask", points=1.0)
def causal_mask_device_argument(student, ref, rng):
    n = int(torch.randint(3, 9, (1,), generator=rng))
    checks.compare_call(student, ref, "causal_mask", n, device="cpu")
    checks.compare_call(student, ref, "causal_mask", n, "cpu")
    checks.compare_call(student, ref, "causal_mask", n, device=None)


@suite.test("padding_mask", points=1.0)
def padding_mask_values(student, ref, rng):
    checks.compare_call(student, ref, "padding_mask", torch.tensor([3, 1, 4]), 4)
    checks.compare_call(student, ref, "padding_mask", torch.tensor([2]), 2)


@suite.test("padding_mask", points=1.0)
def padding_mask_longer_max_len(student, ref, rng):
    lengths = torch.randint(1, 8, (6,), generator=rng)
    checks.compare_call(student, ref, "padding_mask", lengths, 9)  # max_len above every length


# ---------------------------------------------------------------------------------------- SelfAttention
@suite.test("SelfAttention", points=1.0)
def selfattention_default_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "SelfAttention", 8, rng=rng, dtype=F64)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 3, 5, 8), grad=True, rng=rng)
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test("SelfAttention", points=1.0)
def selfattention_dk_dv_differ(student, ref, rng):
    # d_k = 4 != d_model = 6: the scale is 1/sqrt(d_k); d_v = 5 is the output width
    s_mod, r_mod = checks.build_pair(student, ref, "SelfAttention", 6, d_k=4, d_v=5, rng=rng, dtype=F64)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 7, 6), grad=True, rng=rng)


@suite.test("SelfAttention", points=1.0)
def selfattention_positional_args_float32(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "SelfAttention", 10, 3, 7, rng=rng, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 4, 6, 10, dtype=F32), grad=True, rng=rng)


@suite.test("SelfAttention", points=1.0)
def selfattention_no_bias(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "SelfAttention", 8, bias=False, rng=rng, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 4, 8, dtype=F32), grad=True, rng=rng)


@suite.test("SelfAttention", points=2.0)  # the mask is a case of the contract: ignoring it costs a PART (CURRICULUM)
def selfattention_with_masks(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "SelfAttention", 6, rng=rng, dtype=F64)
    x = randn(rng, 3, 5, 6)
    padding = key_padding(random_lengths(rng, 3, 5), 5)
    s, _ = checks.compare_module_call(s_mod, r_mod, x, mask=padding, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], padding, "SelfAttention weights with a padding mask")
    lower = torch.tril(torch.ones(5, 5, dtype=torch.bool))  # causal
    s, _ = checks.compare_module_call(s_mod, r_mod, x, lower, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], lower, "SelfAttention weights with a causal mask")


# ---------------------------------------------------------------------------------- AttentionClassifier
@suite.test("AttentionClassifier", points=1.5)
def classifier_no_padding_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "AttentionClassifier", 15, 8, rng=rng, dtype=F64)
    ids = torch.randint(1, 15, (3, 6), generator=rng)
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)


@suite.test("AttentionClassifier", points=2.0)
def classifier_padding_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "AttentionClassifier", 20, 6, rng=rng, dtype=F64)
    ids = padded_ids(rng, random_lengths(rng, 5, 7), 7, 20)
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)


@suite.test("AttentionClassifier", points=1.0)
def classifier_mostly_padding(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "AttentionClassifier", 12, 4, rng=rng, dtype=F64)
    lengths = torch.randint(1, 4, (4,), generator=rng)
    checks.compare_module_call(s_mod, r_mod, padded_ids(rng, lengths, 10, 12))  # at least 7 pads per row


@suite.test("AttentionClassifier", points=1.0)
def classifier_multiclass_float32(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "AttentionClassifier", 20, 8, num_classes=3, rng=rng, dtype=F32)
    ids = padded_ids(rng, random_lengths(rng, 4, 6), 6, 20)
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)


@suite.test("AttentionClassifier", points=0.5)
def classifier_batch_of_one(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "AttentionClassifier", 10, 4, rng=rng, dtype=F32)
    ids = padded_ids(rng, torch.tensor([3]), 5, 10)
    # logits (1,), not a 0-d tensor (squeeze() instead of squeeze(-1)); with grad=True the shape is also
    # checked where the output gradient flows in
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)
