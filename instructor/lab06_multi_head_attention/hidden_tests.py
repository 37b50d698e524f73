"""Hidden tests of Lab 06 (multi-head attention), written against the narrow interface.

Every test compares the student's answer with the reference (and, for ``MultiHeadAttention``, with
``torch.nn.MultiheadAttention`` built here with the same weights) on inputs drawn from ``rng`` only, so a
blank notebook (functions returning None, a module without parameters) scores 0. The source check for the
forbidden library versions sits inside value tests, after the comparison. The lab gives students a working
``scaled_dot_product_attention`` that they call by its bare name; ``forbidden_calls.forbidden_uses`` flags only the
library's ``F.scaled_dot_product_attention`` (an attribute), imports and strings, so that call is fine.

Questions and points (30 in all):

    split_heads          3
    merge_heads          4
    MultiHeadAttention  14
    mha_param_count      3
    repeat_kv            6

Tolerances are the defaults of ``checks.TOLERANCES`` everywhere.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import randint, randn, random_mask
from attnlab.grading.policy import forbidden_calls
from attnlab.grading.worker.executor import StudentError

# The course rules (grading/policy/rules.py: an allowlist over the graded cells) cost every question of this lab when
# broken. None: every question.
# Each question graded on its own (docs/CURRICULUM.md): MultiHeadAttention runs with the reference split_heads and
# merge_heads, so a wrong reshape costs its own question only
suite = HiddenSuite("lab06_multi_head_attention", policy_questions=None,
                    graded_on_reference={"MultiHeadAttention": ("split_heads", "merge_heads")})

FORBIDDEN = ["MultiheadAttention", "scaled_dot_product_attention", "multi_head_attention_forward"]
WHY = ("this lab asks you to build multi-head attention yourself: nn.MultiheadAttention (and "
       "F.multi_head_attention_forward behind it) and "
       "F.scaled_dot_product_attention are not allowed in the graded cells (call the given "
       "scaled_dot_product_attention by its bare name instead)")

F32, F64 = torch.float32, torch.float64
MHA = "MultiHeadAttention"


# ------------------------------------------------------------------------------------------------ inputs
def key_padding(rng: torch.Generator, batch: int, n_k: int) -> torch.Tensor:
    """(B, 1, 1, n_k) bool, True at the real keys; row 0 is full, row 1 (if any) has one real key."""
    lengths = torch.randint(1, n_k + 1, (batch,), generator=rng)
    lengths[0] = n_k
    if batch > 1:
        lengths[1] = 1
    return (torch.arange(n_k)[None, :] < lengths[:, None])[:, None, None, :]


def masked_weights_are_zero(weights, mask: torch.Tensor, name: str) -> None:
    off = weights.masked_select(~mask.expand_as(weights))
    bad = int((off != 0).sum())
    assert bad == 0, (f"{name}: {bad} weights of masked keys are not exactly 0; pass the mask on to the "
                      "attention so that it broadcasts against (B, h, n_q, n_k)")


# -------------------------------------------------------------------- nn.MultiheadAttention, same weights
def torch_mha(state: dict, d_model: int, num_heads: int, bias: bool, dtype: torch.dtype) -> nn.MultiheadAttention:
    """``nn.MultiheadAttention`` holding the q/k/v/out weights of ``state`` (our names), in eval mode."""
    module = nn.MultiheadAttention(d_model, num_heads, bias=bias, batch_first=True, dtype=dtype)
    with torch.no_grad():
        module.in_proj_weight.copy_(torch.cat([state[f"{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")]))
        module.out_proj.weight.copy_(state["out_proj.weight"])
        if bias:
            module.in_proj_bias.copy_(torch.cat([state[f"{p}.bias"] for p in ("q_proj", "k_proj", "v_proj")]))
            module.out_proj.bias.copy_(state["out_proj.bias"])
    return module.eval()


def torch_forward(module: nn.MultiheadAttention, query, key, value, mask, num_heads: int):
    """Our mask (True = allowed, broadcasting to (B, h, n_q, n_k)) in torch's convention (True = blocked)."""
    kwargs = {}
    if mask is not None:
        if mask.dim() == 2:  # (n_q, n_k)
            kwargs["attn_mask"] = ~mask
        elif mask.shape[1] == 1 and mask.shape[2] == 1:  # (B, 1, 1, n_k): a key-padding mask
            kwargs["key_padding_mask"] = ~mask[:, 0, 0, :]
        else:  # (B, 1 or h, n_q, n_k) -> (B * h, n_q, n_k)
            B, n_q, n_k = query.shape[0], query.shape[1], key.shape[1]
            kwargs["attn_mask"] = ~mask.expand(B, num_heads, n_q, n_k).reshape(B * num_heads, n_q, n_k)
    with torch.no_grad():
        out, weights = module(query, key, value, need_weights=True, average_attn_weights=False, **kwargs)
    return out, weights


def compare_with_torch(student, ref, rng, *, d_model, num_heads, n_q, n_k, batch, masks, bias=True,
                       dtype=F64, cross=True):
    s_mod, r_mod = checks.build_pair(student, ref, MHA, d_model, num_heads, bias=bias, rng=rng, dtype=dtype)
    module = torch_mha(r_mod.state_dict(), d_model, num_heads, bias, dtype)
    query = randn(rng, batch, n_q, d_model, dtype=dtype)
    key = randn(rng, batch, n_k, d_model, dtype=dtype) if cross else query
    value = randn(rng, batch, n_k, d_model, dtype=dtype) if cross else query
    for mask in masks:
        expected = torch_forward(module, query, key, value, mask, num_heads)
        got = s_mod.call(query, key, value, mask=mask).output
        what = "no mask" if mask is None else f"a mask of shape {tuple(mask.shape)}"
        checks.compare_values(got, expected, name=f"MultiHeadAttention ({what}) against nn.MultiheadAttention "
                              "with the same weights (average_attn_weights=False)")


# ------------------------------------------------------------------------------------------ split_heads
@suite.test("split_heads", points=1.5)
def split_heads_values_float64_grad(student, ref, rng):
    x = randn(rng, 2, 5, 12)
    for h in (1, 3, 4, 12):
        checks.compare_call(student, ref, "split_heads", x, h, grad=True, rng=rng)


@suite.test("split_heads", points=1.0)
def split_heads_shapes_float32(student, ref, rng):
    for shape, h in (((1, 1, 8), 2), ((3, 7, 6), 6), ((4, 2, 10), 5)):
        checks.compare_call(student, ref, "split_heads", randn(rng, *shape, dtype=F32), num_heads=h)


@suite.test("split_heads", points=0.5)
def split_heads_batch_equals_position_count(student, ref, rng):
    # B == n == h: a reshape that skips the transpose still has the right shape here
    n = randint(rng, 3, 5)
    checks.compare_call(student, ref, "split_heads", randn(rng, n, n, 2 * n), n)


# ------------------------------------------------------------------------------------------ merge_heads
@suite.test("merge_heads", points=1.5)
def merge_heads_values_float64_grad(student, ref, rng):
    for shape in ((2, 3, 5, 4), (1, 1, 1, 7), (3, 6, 2, 1)):
        checks.compare_call(student, ref, "merge_heads", randn(rng, *shape), grad=True, rng=rng)


@suite.test("merge_heads", points=1.0)
def merge_heads_float32_square(student, ref, rng):
    n = randint(rng, 3, 6)
    checks.compare_call(student, ref, "merge_heads", randn(rng, 2, n, n, n, dtype=F32), grad=True, rng=rng)


@suite.test("merge_heads", points=1.5)
def merge_heads_undoes_the_reference_split(student, ref, rng):
    # merge_heads against the reference's split_heads, never against the student's own: two reshapes that are wrong
    # the same way undo each other, so a round trip through the student's two functions proves nothing
    x = randn(rng, 3, 6, 24)
    for h in (1, 2, 8, 24):
        heads = ref.call("split_heads", x, h).output
        back = student.call("merge_heads", heads).output
        checks.expect_tensor(back, name=f"merge_heads(reference split_heads(x (3, 6, 24), {h}))", shape=(3, 6, 24),
                             dtype=F64)
        checks.assert_close(back, x, name=f"merge_heads(reference split_heads(x, {h})) against x")
    y = randn(rng, 2, 4, 5, 3)
    merged = student.call("merge_heads", y).output
    checks.expect_tensor(merged, name="merge_heads(y (2, 4, 5, 3))", shape=(2, 5, 12), dtype=F64)
    again = ref.call("split_heads", merged, 4).output
    checks.assert_close(again, y, name="reference split_heads(merge_heads(y), 4) against y")


# ----------------------------------------------------------------------------------- MultiHeadAttention
@suite.test(MHA, points=2.0)
def mha_self_attention_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 12, 3, rng=rng, dtype=F64)
    x = randn(rng, 2, 5, 12)
    checks.compare_module_call(s_mod, r_mod, x, x, x, grad=True, rng=rng)
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test(MHA, points=1.5)
def mha_cross_attention_float32_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 16, 4, rng=rng, dtype=F32)
    query, memory = randn(rng, 3, 4, 16, dtype=F32), randn(rng, 3, 7, 16, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, query, memory, memory, grad=True, rng=rng)
    value = randn(rng, 3, 7, 16, dtype=F32)  # keys and values from different tensors
    checks.compare_module_call(s_mod, r_mod, query, memory, value, grad=True, rng=rng)


@suite.test(MHA, points=1.0)
def mha_no_bias_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 8, 2, bias=False, rng=rng, dtype=F64)
    query, memory = randn(rng, 2, 6, 8), randn(rng, 2, 3, 8)
    checks.compare_module_call(s_mod, r_mod, query, memory, memory, grad=True, rng=rng)


@suite.test(MHA, points=0.5)
def mha_one_head_and_width_one_heads(student, ref, rng):
    for d, h in ((6, 1), (6, 6)):
        s_mod, r_mod = checks.build_pair(student, ref, MHA, d, h, rng=rng, dtype=F64)
        query, memory = randn(rng, 2, 3, d), randn(rng, 2, 5, d)
        checks.compare_module_call(s_mod, r_mod, query, memory, memory, grad=True, rng=rng)


@suite.test(MHA, points=2.0)
def mha_every_mask_shape_grad(student, ref, rng):
    B, h, n_q, n_k, d = 3, 2, 4, 6, 8
    s_mod, r_mod = checks.build_pair(student, ref, MHA, d, h, rng=rng, dtype=F64)
    query, memory = randn(rng, B, n_q, d), randn(rng, B, n_k, d)
    masks = {
        "(n_q, n_k)": random_mask(rng, n_q, n_k),
        "(B, 1, 1, n_k)": key_padding(rng, B, n_k),
        "(B, 1, n_q, n_k)": random_mask(rng, B, 1, n_q, n_k),
        "(B, h, n_q, n_k)": random_mask(rng, B, h, n_q, n_k),
    }
    for shape, mask in masks.items():
        s, _ = checks.compare_module_call(s_mod, r_mod, query, memory, memory, mask=mask, grad=True, rng=rng,
                                          name=f"MultiHeadAttention.forward with a {shape} mask")
        masked_weights_are_zero(s.output[1], mask, f"weights with a {shape} mask")


@suite.test(MHA, points=0.5)
def mha_causal_self_attention_float32(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 12, 4, rng=rng, dtype=F32)
    x = randn(rng, 2, 7, 12, dtype=F32)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    s, _ = checks.compare_module_call(s_mod, r_mod, x, x, x, causal, grad=True, rng=rng)  # mask by position
    masked_weights_are_zero(s.output[1], causal, "weights with a causal mask")


@suite.test(MHA, points=2.5)
def mha_matches_torch_multihead_attention(student, ref, rng):
    B, h, n_q, n_k, d = 2, 3, 4, 5, 12
    masks = [None, random_mask(rng, n_q, n_k), key_padding(rng, B, n_k), random_mask(rng, B, 1, n_q, n_k),
             random_mask(rng, B, h, n_q, n_k)]
    compare_with_torch(student, ref, rng, d_model=d, num_heads=h, n_q=n_q, n_k=n_k, batch=B, masks=masks)
    compare_with_torch(student, ref, rng, d_model=8, num_heads=4, n_q=6, n_k=6, batch=2, bias=False,
                       cross=False, masks=[None, torch.ones(6, 6, dtype=torch.bool).tril()])
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test(MHA, points=1.0)
def mha_matches_torch_float32(student, ref, rng):
    compare_with_torch(student, ref, rng, d_model=16, num_heads=2, n_q=5, n_k=3, batch=3, dtype=F32,
                       masks=[None, key_padding(rng, 3, 3)])


@suite.test(MHA, points=1.0)
def mha_eval_mode_ignores_dropout(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 8, 2, dropout=0.5, rng=rng, dtype=F64)
    query, memory = randn(rng, 2, 5, 8), randn(rng, 2, 6, 8)
    checks.compare_module_call(s_mod, r_mod, query, memory, memory, train=False, grad=True, rng=rng,
                               name="MultiHeadAttention(dropout=0.5) in eval mode, which must not drop anything")


@suite.test(MHA, points=0.5)
def mha_dropout_acts_in_training_only_when_asked(student, ref, rng):
    # dropout=0: training mode equals the reference
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 8, 4, rng=rng, dtype=F64)
    x = randn(rng, 2, 6, 8)
    checks.compare_module_call(s_mod, r_mod, x, x, x, train=True,
                               name="MultiHeadAttention(dropout=0.0) in training mode")
    # dropout=0.5 in training mode: a different, finite output of the right shape
    s_mod, _ = checks.build_pair(student, ref, MHA, 8, 4, dropout=0.5, rng=rng, dtype=F64)
    evaluated = s_mod.call(x, x, x).output
    trained = s_mod.call(x, x, x, train=True).output
    checks.expect_tensor(trained[0], name="out in training mode with dropout=0.5", shape=(2, 6, 8), dtype=F64)
    checks.expect_tensor(trained[1], name="weights in training mode with dropout=0.5", shape=(2, 4, 6, 6), dtype=F64)
    assert not torch.allclose(trained[0], evaluated[0]), (
        "with dropout=0.5 the output in training mode equals the output in eval mode: apply the dropout "
        "to the attention weights in training mode")


@suite.test(MHA, points=1.5)
def mha_rejects_indivisible_width(student, ref, rng):
    # the error earns its points only with a working module: a constructor that only raises gets none
    s_mod, r_mod = checks.build_pair(student, ref, MHA, 12, 4, rng=rng, dtype=F64)
    x = randn(rng, 2, 3, 12)
    checks.compare_module_call(s_mod, r_mod, x, x, x, name="MultiHeadAttention(12, 4) against the reference (before "
                               "the check that an indivisible width raises)")
    for args in ((10, 3), (12, 5), (7, 2)):
        try:
            student.create(MHA, *args)
        except StudentError as exc:
            assert "ValueError" in str(exc), (
                f"MultiHeadAttention{args} should raise ValueError (d_model is not divisible by num_heads), "
                f"got: {exc}")
        else:
            raise AssertionError(f"MultiHeadAttention{args} should raise ValueError: {args[0]} is not divisible "
                                 f"by {args[1]}")
    for args in ((12, 4), (12, 1), (12, 12)):
        student.create(MHA, *args)  # divisible: must not raise


# -------------------------------------------------------------------------------------- mha_param_count
@suite.test("mha_param_count", points=1.5)
def param_count_with_bias(student, ref, rng):
    h = randint(rng, 2, 8)
    d = h * randint(rng, 3, 40)
    for args in ((512, 8), (64, 1), (d, h), (d, 1)):
        checks.compare_call(student, ref, "mha_param_count", *args)
    checks.compare_call(student, ref, "mha_param_count", 96, 12, bias=True)


@suite.test("mha_param_count", points=1.5)
def param_count_without_bias(student, ref, rng):
    h = randint(rng, 2, 8)
    d = h * randint(rng, 3, 40)
    for args in ((512, 8), (d, h)):
        checks.compare_call(student, ref, "mha_param_count", *args, bias=False)
    checks.compare_call(student, ref, "mha_param_count", 6, 3, False)


# ------------------------------------------------------------------------------------------- repeat_kv
@suite.test("repeat_kv", points=2.5)
def repeat_kv_values_float64_grad(student, ref, rng):
    for shape, n_rep in (((2, 3, 5, 4), 2), ((1, 2, 4, 3), 4), ((3, 4, 2, 2), 3)):
        checks.compare_call(student, ref, "repeat_kv", randn(rng, *shape), n_rep, grad=True, rng=rng)


@suite.test("repeat_kv", points=1.5)
def repeat_kv_multi_query_float32(student, ref, rng):
    # one kv head shared by all query heads (MQA), and keyword arguments
    x = randn(rng, 2, 1, 6, 8, dtype=F32)
    checks.compare_call(student, ref, "repeat_kv", x, n_rep=randint(rng, 4, 8), grad=True, rng=rng)
    checks.compare_call(student, ref, "repeat_kv", randn(rng, 2, 2, 3, 5, dtype=F32), n_rep=2)


@suite.test("repeat_kv", points=1.0)
def repeat_kv_one_is_identity(student, ref, rng):
    checks.compare_call(student, ref, "repeat_kv", randn(rng, 2, 3, 4, 5), 1, grad=True, rng=rng)
    checks.compare_call(student, ref, "repeat_kv", randn(rng, 2, 5, 3, 2), 2)


@suite.test("repeat_kv", points=1.0)
def repeat_kv_grouped_query_attention(student, ref, rng):
    # GQA: query head j attends with kv head j // n_rep; the full attention on the repeated heads
    B, h_kv, n_rep, n, d_h = 2, 2, 3, 5, 4
    k, v = randn(rng, B, h_kv, n, d_h), randn(rng, B, h_kv, n, d_h)
    q = randn(rng, B, h_kv * n_rep, n, d_h)
    k_rep = student.call("repeat_kv", k, n_rep).output
    v_rep = student.call("repeat_kv", v, n_rep).output
    for name, got in (("repeat_kv(k, 3)", k_rep), ("repeat_kv(v, 3)", v_rep)):
        checks.expect_tensor(got, name=name, shape=(B, h_kv * n_rep, n, d_h), dtype=F64)
    scores = q @ k_rep.transpose(-2, -1)
    out = torch.softmax(scores, dim=-1) @ v_rep
    for j in range(h_kv * n_rep):
        g = j // n_rep
        expected = torch.softmax(q[:, j] @ k[:, g].transpose(-2, -1), dim=-1) @ v[:, g]
        checks.assert_close(out[:, j], expected, name=f"attention of query head {j} with the repeated kv heads "
                            f"(it should use kv head {g} = {j} // {n_rep})")
