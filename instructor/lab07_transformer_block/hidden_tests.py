"""Hidden tests of Lab 07 (positional encoding and the Transformer block), against the narrow interface.

Every test draws its inputs from ``rng`` only and compares the student's answer with a trusted value: the
sinusoidal formula computed here in float64, ``F.layer_norm``, ``F.gelu``, the reference (the solution's
code) and ``nn.TransformerEncoderLayer`` built here with the same weights. A blank notebook (functions
returning None, modules without parameters) scores 0: the tests that expect an error first check a value,
and the source checks for the forbidden library versions sit inside value tests, after the comparison.

The student's function ``layer_norm`` has the same name as ``F.layer_norm``; ``forbidden_calls.forbidden_uses`` flags
only attribute access (``F.layer_norm``, ``torch.layer_norm``), imports and strings, so the student's own
bare calls are fine.

Questions and points (30 in all):

    sinusoidal_positional_encoding   5
    LearnedPositionalEmbedding       4
    layer_norm                       7
    FeedForward                      4
    TransformerEncoderBlock         10

Tolerances: ``checks.tolerance`` (scaled by the size of the values and the depth of the computation: a block is
``BLOCK_DEPTH = 4`` layers, its input gradient twice that; the float32 comparison with ``nn.TransformerEncoderLayer``
takes its expected values from that layer run in float64 on the same weights), except (1) the float32 positional
table, compared with
``atol = 1e-5 + 8 * max_len * eps32``: an angle p * w of size up to max_len carries a float32 rounding error
of about max_len * eps32 whatever the formula (measured: at most 0.7 * max_len * eps32 over the exp, pow,
outer-product and loop forms), and (2) ``layer_norm`` of inputs shifted by 1e4 in float32, compared with
atol 2e-2: correct two-pass forms are off by at most 4e-3 there, the naive E[x^2] - E[x]^2 by 1 or NaN.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import randint, randn
from attnlab.grading.policy import forbidden_calls

# The course rules (grading/policy/rules.py: an allowlist over the graded cells) cost every question of this lab when
# broken. None: every question.
# Each question graded on its own (docs/CURRICULUM.md): the block runs with the reference FeedForward (built and run
# by the grader), so a wrong feed-forward costs its own question only
suite = HiddenSuite("lab07_transformer_block", policy_questions=None,
                    graded_on_reference={"TransformerEncoderBlock": ("FeedForward",)})

F32, F64 = torch.float32, torch.float64
EPS32 = torch.finfo(torch.float32).eps

PE = "sinusoidal_positional_encoding"
LPE = "LearnedPositionalEmbedding"
LN = "layer_norm"
FF = "FeedForward"
BLOCK = "TransformerEncoderBlock"

LN_FORBIDDEN = ["layer_norm"]
LN_WHY = ("this lab asks you to write layer normalization yourself: F.layer_norm / torch.layer_norm are not "
          "allowed in the graded cells")
LN_OWN_FORBIDDEN = ["LayerNorm", "group_norm", "instance_norm", "batch_norm", "native_layer_norm"]
LN_OWN_WHY = ("compute layer_norm from its formula (mean, variance, division): a library normalization "
              "(nn.LayerNorm, F.group_norm, ...) inside layer_norm is not allowed")
BLOCK_FORBIDDEN = ["TransformerEncoderLayer", "TransformerEncoder", "Transformer"]
BLOCK_WHY = ("this lab asks you to build the encoder block yourself: nn.TransformerEncoderLayer, "
             "nn.TransformerEncoder and nn.Transformer are not allowed in the graded cells")


# ------------------------------------------------------------------------------------------------ inputs
# ------------------------------------------------------------------------- sinusoidal_positional_encoding
def pe_formula(max_len: int, d_model: int) -> torch.Tensor:
    """The interleaved table, computed here in float64: PE[p, 2i] = sin(p / 10000^(2i/d)), 2i+1: cos."""
    p = torch.arange(max_len, dtype=F64)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=F64)[None, :]  # (1, d/2)
    angles = p / torch.pow(torch.tensor(10000.0, dtype=F64), two_i / d_model)  # (max_len, d/2)
    table = torch.empty(max_len, d_model, dtype=F64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles)
    return table


def check_pe(student, max_len: int, d_model: int) -> None:
    got = student.call(PE, max_len, d_model).output
    name = f"sinusoidal_positional_encoding({max_len}, {d_model})"
    checks.expect_tensor(got, name=name, shape=(max_len, d_model), dtype=F32)
    expected = pe_formula(max_len, d_model)
    atol = 1e-5 + 8 * max_len * EPS32
    checks.assert_close(got.to(F64), expected, name=f"{name} (PE[p, 2i] = sin(p / 10000^(2i/d)), "
                        "PE[p, 2i+1] = cos(...), p from 0)", rtol=0.0, atol=atol)


@suite.test(PE, points=2)
def pe_formula_small_tables(student, ref, rng):
    for max_len, d_model in [(1, 2), (3, 4), (7, 10), (50, 16), (randint(rng, 2, 80), 2 * randint(rng, 1, 40))]:
        check_pe(student, max_len, d_model)


# Entry PE[p, j] depends on p and j / d_model only, so long tables (positions up to 2047, where the angle's float32
# rounding is largest: column 0 has frequency 1 at every width) and wide ones (256 frequencies) are checked apart.
# One (2048, 512) table (4 MiB over the wire, compared in float64) took a fifth of the suite's time and raised the
# grader's peak memory by 40-84 MiB per grade (more when the diagnosis replayed the mutants on it); measured, loaded:
# benchmarks/README.md, "lab07".
LONG_AND_WIDE = [(2048, 64), (128, 512), (1000, 64)]


@suite.test(PE, points=2)
def pe_formula_long_and_wide(student, ref, rng):
    for max_len, d_model in LONG_AND_WIDE + [(randint(rng, 200, 800), 2 * randint(rng, 16, 128))]:
        check_pe(student, max_len, d_model)


@suite.test(PE, points=1)
def pe_odd_width_rejected(student, ref, rng):
    check_pe(student, 9, 6)
    odd = 2 * randint(rng, 5, 60) + 1
    checks.expect_student_error(lambda: student.call(PE, 10, odd), "ValueError",
                         what=f"sinusoidal_positional_encoding(10, {odd})", mentions=(str(odd),))


# ---------------------------------------------------------------------------- LearnedPositionalEmbedding
@suite.test(LPE, points=2)
def learned_forward_and_grads_float64(student, ref, rng):
    max_len, d = randint(rng, 10, 30), randint(rng, 3, 12)
    s_mod, r_mod = checks.build_pair(student, ref, LPE, max_len, d, rng=rng, dtype=F64)
    for n in (1, max_len // 2, max_len - 1):
        x = randn(rng, randint(rng, 1, 4), n, d)
        checks.compare_module_call(s_mod, r_mod, x, rng=rng, grad=True,
                                   name=f"LearnedPositionalEmbedding({max_len}, {d}) on a sequence of {n}")


@suite.test(LPE, points=1)
def learned_full_length_float32(student, ref, rng):
    max_len, d = randint(rng, 5, 20), randint(rng, 4, 16)
    s_mod, r_mod = checks.build_pair(student, ref, LPE, max_len, d, rng=rng, dtype=F32, scale=1.0)
    x = randn(rng, 3, max_len, d, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, x, rng=rng, grad=True,
                               name=f"LearnedPositionalEmbedding({max_len}, {d}) on a sequence of max_len (float32)")


@suite.test(LPE, points=1)
def learned_too_long_rejected(student, ref, rng):
    max_len, d = randint(rng, 4, 12), randint(rng, 2, 8)
    s_mod, r_mod = checks.build_pair(student, ref, LPE, max_len, d, rng=rng, dtype=F64)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, max_len - 1, d),
                               name=f"LearnedPositionalEmbedding({max_len}, {d})")
    too_long = randn(rng, 2, max_len + randint(rng, 1, 5), d)
    checks.expect_student_error(lambda: s_mod.call(too_long), "ValueError",
                         what=f"LearnedPositionalEmbedding({max_len}, {d}) on a sequence of {too_long.shape[1]}")


# --------------------------------------------------------------------------------------------- layer_norm
def ln_args(rng, *shape, dtype=F64, scale=1.0, shift=0.0, param_scale=1.0):
    d = shape[-1]
    x = randn(rng, *shape, dtype=dtype, scale=scale, shift=shift)
    weight = randn(rng, d, dtype=dtype, scale=param_scale, shift=1.0)
    bias = randn(rng, d, dtype=dtype, scale=param_scale)
    return x, weight, bias


def check_ln_torch(student, x, weight, bias, eps=1e-5, rtol=None, atol=None, what=""):
    got = student.call(LN, x, weight, bias, eps=eps).output
    expected = F.layer_norm(x.to(F64), x.shape[-1:], weight.to(F64), bias.to(F64), eps).to(x.dtype)
    checks.assert_close(got, expected, name=f"layer_norm{what} against F.layer_norm", rtol=rtol, atol=atol)


@suite.test(LN, points=2)
def ln_float64_leading_dims_grads(student, ref, rng):
    for shape in [(2, 3, 5, 16), (7, 9), (4, 1, 33)]:
        x, weight, bias = ln_args(rng, *shape, scale=2.0, shift=0.5)
        check_ln_torch(student, x, weight, bias, what=f" on x of shape {shape} (float64)")
        checks.compare_call(student, ref, LN, x, weight, bias, grad=True, rng=rng)
    forbidden_calls.assert_not_used(student, LN_FORBIDDEN, why=LN_WHY)
    hits = forbidden_calls.forbidden_uses_in(student, LN, LN_OWN_FORBIDDEN)
    if hits:  # a forbidden call: the whole question, like assert_not_used (only layer_norm's own code is read here)
        raise forbidden_calls.ForbiddenUse(f"{LN_OWN_WHY}; found {', '.join(hits[:5])}", LN_OWN_FORBIDDEN, hits)


@suite.test(LN, points=1)
def ln_float32_and_one_row(student, ref, rng):
    for shape in [(12,), (3, 4, 20), (64, 8)]:
        x, weight, bias = ln_args(rng, *shape, dtype=F32)
        check_ln_torch(student, x, weight, bias, what=f" on x of shape {shape} (float32)")


@suite.test(LN, points=1)
def ln_gradients_of_weight_and_bias(student, ref, rng):
    x, weight, bias = ln_args(rng, 5, 6, 10, scale=3.0, shift=-2.0, param_scale=2.0)
    check_ln_torch(student, x, weight, bias, eps=1e-3, what=" with eps=1e-3 (float64)")
    checks.compare_call(student, ref, LN, x, weight, bias, grad=True, rng=rng, eps=1e-3)
    # the expected gradients once more, from F.layer_norm itself
    gx, gw, gb = (t.detach().clone().requires_grad_(True) for t in (x, weight, bias))
    out = F.layer_norm(gx, (10,), gw, gb, 1e-3)
    go = checks.random_like_outputs(out, rng)[0]
    expected = torch.autograd.grad(out, (gx, gw, gb), go)
    got = student.call(LN, x, weight, bias, eps=1e-3, grad=True, grad_outputs=[go])
    for key, label, exp in zip((0, 1, 2), ("x", "weight", "bias"), expected):
        assert got.grads.get(key) is not None, (f"the gradient of layer_norm with respect to {label} is missing: "
                                                "keep the computation in autograd")
        checks.assert_close(got.grads[key], exp, name=f"the gradient of layer_norm with respect to {label}")


@suite.test(LN, points=1)
def ln_eps_honoured(student, ref, rng):
    for eps in (0.5, 1e-2, 1e-8):
        x, weight, bias = ln_args(rng, 4, 8, scale=0.1, shift=3.0)
        check_ln_torch(student, x, weight, bias, eps=eps, what=f" with eps={eps:g} (inside the square root)")


@suite.test(LN, points=2)
def ln_large_offset_float32(student, ref, rng):
    for d in (16, 64, 256):
        x, weight, bias = ln_args(rng, 32, d, dtype=F32, shift=1e4)
        check_ln_torch(student, x, weight, bias, rtol=1e-2, atol=2e-2,
                       what=f" on float32 inputs around 1e4 (d={d}; subtract the mean before squaring, "
                            "E[x^2] - mean^2 loses the variance)")


# -------------------------------------------------------------------------------------------- FeedForward
def ff_expected(state: dict, x: torch.Tensor, activation: str) -> torch.Tensor:
    hidden = x @ state["linear1.weight"].T + state["linear1.bias"]
    hidden = F.relu(hidden) if activation == "relu" else F.gelu(hidden, approximate="none")
    return hidden @ state["linear2.weight"].T + state["linear2.bias"]


def check_ff(student, ref, rng, activation: str, **kwargs) -> None:
    d, d_ff = randint(rng, 3, 12), randint(rng, 8, 40)
    s_mod, r_mod = checks.build_pair(student, ref, FF, d, d_ff, rng=rng, dtype=F64, scale=1.0,
                                     activation=activation, **kwargs)
    x = randn(rng, randint(rng, 1, 3), randint(rng, 1, 6), d, scale=1.5)
    got = s_mod.call(x).output
    checks.assert_close(got, ff_expected(r_mod.state_dict(), x, activation),
                        name=f'FeedForward({d}, {d_ff}, activation="{activation}") against linear2(act(linear1(x)))')
    checks.compare_module_call(s_mod, r_mod, x, rng=rng, grad=True, name=f'FeedForward(activation="{activation}")')


@suite.test(FF, points=1)
def ff_relu_float64_grads(student, ref, rng):
    check_ff(student, ref, rng, "relu")


@suite.test(FF, points=1)
def ff_gelu_exact_float64_grads(student, ref, rng):
    check_ff(student, ref, rng, "gelu")


@suite.test(FF, points=1)
def ff_dropout_after_activation(student, ref, rng):
    # eval mode: dropout is off
    check_ff(student, ref, rng, "gelu", dropout=0.5)
    # training mode: with linear2 = identity, every output is either 0 (dropped) or act(z) / (1 - p)
    d, p = 64, 0.5
    s_mod = student.create(FF, d, d, dropout=p, activation="gelu")
    s_mod.to(F64)
    w1 = randn(rng, d, d, scale=0.5)
    b1 = randn(rng, d)
    state = {"linear1.weight": w1, "linear1.bias": b1, "linear2.weight": torch.eye(d, dtype=F64),
             "linear2.bias": torch.zeros(d, dtype=F64)}
    _, unexpected = s_mod.load_state_dict(state)
    assert not unexpected, f"FeedForward could not load the parameters {unexpected}"
    x = randn(rng, 4, 8, d)
    z = x @ w1.T + b1
    kept = F.gelu(z) / (1 - p)
    out = checks.expect_tensor(s_mod.call(x, train=True).output, name="FeedForward in training mode",
                               shape=(4, 8, d), dtype=F64)
    is_zero = out.abs() <= 1e-9
    is_kept = (out - kept).abs() <= 1e-9 + 1e-6 * kept.abs()
    bad = int((~(is_zero | is_kept)).sum())
    assert bad == 0, (f"FeedForward in training mode: {bad} of {out.numel()} hidden units are neither dropped "
                      "(0) nor act(z) / (1 - p); apply the dropout after the activation: "
                      "linear2(dropout(act(linear1(x))))")
    dropped = float((is_zero & ~is_kept).float().mean())
    assert 0.3 < dropped < 0.7, (f"FeedForward(dropout=0.5) in training mode dropped {dropped:.0%} of the "
                                 "hidden units; expected about half (use nn.Dropout(dropout) on the hidden layer)")


@suite.test(FF, points=1)
def ff_unknown_activation_rejected(student, ref, rng):
    check_ff(student, ref, rng, "relu")
    bad = ["tanh", "swish", "GELU_tanh"][randint(rng, 0, 2)]
    checks.expect_student_error(lambda: student.create(FF, 4, 8, activation=bad), "ValueError",
                         what=f'FeedForward(4, 8, activation="{bad}")')


# -------------------------------------------------------------------------------- TransformerEncoderBlock
def torch_layer(state: dict, d_model: int, num_heads: int, d_ff: int, norm_first: bool,
                dtype: torch.dtype) -> nn.TransformerEncoderLayer:
    """``nn.TransformerEncoderLayer`` holding the weights of ``state`` (our names), dropout 0, eval mode."""
    module = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True,
                                        norm_first=norm_first, dtype=dtype)
    qkv = ("q_proj", "k_proj", "v_proj")
    mapped = {
        "self_attn.in_proj_weight": torch.cat([state[f"self_attn.{p}.weight"] for p in qkv]),
        "self_attn.in_proj_bias": torch.cat([state[f"self_attn.{p}.bias"] for p in qkv]),
        "self_attn.out_proj.weight": state["self_attn.out_proj.weight"],
        "self_attn.out_proj.bias": state["self_attn.out_proj.bias"],
        "linear1.weight": state["ff.linear1.weight"], "linear1.bias": state["ff.linear1.bias"],
        "linear2.weight": state["ff.linear2.weight"], "linear2.bias": state["ff.linear2.bias"],
        "norm1.weight": state["norm1.weight"], "norm1.bias": state["norm1.bias"],
        "norm2.weight": state["norm2.weight"], "norm2.bias": state["norm2.bias"],
    }
    module.load_state_dict(mapped)
    return module.eval()


def torch_masks(mask, batch: int, num_heads: int, n: int) -> dict:
    """Our mask (True = allowed, broadcasting to (B, h, n, n)) as src_mask / src_key_padding_mask (True = blocked)."""
    if mask is None:
        return {}
    if mask.dim() == 2:  # (n, n)
        return {"src_mask": ~mask}
    if mask.shape[1] == 1 and mask.shape[2] == 1:  # (B, 1, 1, n): padding over the keys
        return {"src_key_padding_mask": ~mask[:, 0, 0, :]}
    return {"src_mask": ~mask.expand(batch, num_heads, n, n).reshape(batch * num_heads, n, n)}


def block_masks(rng, batch: int, n: int) -> list:
    """None, causal (n, n), padding (B, 1, 1, n), padding & causal (B, 1, n, n), random (B, 1, n, n)."""
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    lengths = torch.randint(1, n + 1, (batch,), generator=rng)
    lengths[0] = n
    padding = (torch.arange(n)[None, :] < lengths[:, None])[:, None, None, :]
    random = (torch.rand(batch, 1, n, n, generator=rng) < 0.6) | torch.eye(n, dtype=torch.bool)
    return [None, causal, padding, padding & causal, random]


def block_setup(student, ref, rng, norm_first: bool, dtype=F64, min_d_model: int = 2, **kwargs):
    num_heads = [1, 2, 4][randint(rng, 0, 2)]
    d_model = num_heads * randint(rng, max(2, -(-min_d_model // num_heads)), 5)
    d_ff = randint(rng, d_model, 3 * d_model)
    s_mod, r_mod = checks.build_pair(student, ref, BLOCK, d_model, num_heads, d_ff, rng=rng, dtype=dtype,
                                     norm_first=norm_first, **kwargs)
    return s_mod, r_mod, d_model, num_heads, d_ff


def placement(norm_first: bool) -> str:
    return "pre-norm (norm_first=True)" if norm_first else "post-norm (norm_first=False)"


# a block is four layers of computation for checks.tolerance: attention, add & norm, feed-forward, add & norm
BLOCK_DEPTH = 4


def compare_block_with_ref(student, ref, rng, norm_first: bool, masks: bool) -> None:
    s_mod, r_mod, d, h, _ = block_setup(student, ref, rng, norm_first)
    batch, n = randint(rng, 2, 3), randint(rng, 3, 7)
    x = randn(rng, batch, n, d, scale=1.5)
    for mask in (block_masks(rng, batch, n) if masks else [None]):
        what = "no mask" if mask is None else f"a mask of shape {tuple(mask.shape)}"
        checks.compare_module_call(s_mod, r_mod, x, rng=rng, grad=True, mask=mask, depth=BLOCK_DEPTH,
                                   name=f"TransformerEncoderBlock, {placement(norm_first)}, {what}")


@suite.test(BLOCK, points=2)
def block_post_norm_float64_grads(student, ref, rng):
    compare_block_with_ref(student, ref, rng, norm_first=False, masks=False)


@suite.test(BLOCK, points=2)
def block_pre_norm_float64_grads(student, ref, rng):
    compare_block_with_ref(student, ref, rng, norm_first=True, masks=False)


@suite.test(BLOCK, points=2)
def block_masks_both_placements(student, ref, rng):
    for pre_norm in (False, True):
        compare_block_with_ref(student, ref, rng, norm_first=pre_norm, masks=True)


def library_atols(r_mod, d, h, d_ff, norm_first, x, mask, go, expected, expected_grad) -> tuple:
    """(atol of the output, atol of the gradient) for a float32 block: what nn.TransformerEncoderLayer's own float32
    computation errs by at these inputs, times checks.MEASURED_SLACK (``checks.measured_atol``); (None, None) in
    float64, where the tolerance rule keeps its full power. A post-norm block's input gradient goes through two
    LayerNorm backwards, which amplify rounding past what the size of the gradient says (5 seeds in 500 failed a
    correct block on the size rule alone)."""
    if x.dtype != F32:
        return None, None
    layer = torch_layer(r_mod.state_dict(), d, h, d_ff, norm_first, F32)
    xg = x.detach().clone().requires_grad_(True)
    out = layer(xg, **torch_masks(mask, x.shape[0], h, x.shape[1]))
    (grad,) = torch.autograd.grad(out, xg, go)
    return (checks.measured_atol(expected, out, depth=BLOCK_DEPTH),
            checks.measured_atol(expected_grad, grad, depth=2 * BLOCK_DEPTH))


@suite.test(BLOCK, points=3)
def block_equals_torch_encoder_layer(student, ref, rng):
    for norm_first, dtype in ((False, F64), (True, F64), (False, F32), (True, F32)):
        s_mod, r_mod, d, h, d_ff = block_setup(student, ref, rng, norm_first, dtype=dtype)
        # the expected values in float64 from the same (float32) weights and inputs, rounded to dtype at the end:
        # the student's float32 rounding is then the only error, bounded by checks.tolerance at BLOCK_DEPTH
        state = {k: v.to(F64) for k, v in r_mod.state_dict().items()}
        layer = torch_layer(state, d, h, d_ff, norm_first, F64)
        batch, n = randint(rng, 2, 3), randint(rng, 3, 7)
        x = randn(rng, batch, n, d, dtype=dtype, scale=1.5)
        masks = block_masks(rng, batch, n) if dtype == F64 else [None, block_masks(rng, batch, n)[3]]
        for mask in masks:
            xg = x.detach().to(F64).requires_grad_(True)
            expected = layer(xg, **torch_masks(mask, batch, h, n))
            go = checks.random_like_outputs(expected.to(dtype), rng)[0]
            (expected_grad,) = torch.autograd.grad(expected, xg, go.to(F64))
            got = s_mod.call(x, mask=mask, grad=True, grad_outputs=[go])
            what = "no mask" if mask is None else f"a mask of shape {tuple(mask.shape)}"
            name = (f"TransformerEncoderBlock ({placement(norm_first)}, {what}, {dtype}) against "
                    "nn.TransformerEncoderLayer(batch_first=True, dropout=0) with the same weights")
            atol = library_atols(r_mod, d, h, d_ff, norm_first, x, mask, go, expected, expected_grad)
            checks.assert_close(got.output, expected.detach().to(dtype), name=name, depth=BLOCK_DEPTH, atol=atol[0])
            assert got.grads.get(0) is not None, f"{name}: the gradient with respect to x is missing"
            checks.assert_close(got.grads[0], expected_grad.to(dtype), name=f"the gradient with respect to x of {name}",
                                depth=2 * BLOCK_DEPTH, atol=atol[1])
    forbidden_calls.assert_not_used(student, BLOCK_FORBIDDEN, why=BLOCK_WHY)


@suite.test(BLOCK, points=1)
def block_dropout_train_and_eval(student, ref, rng):
    for pre_norm in (False, True):
        # d_model >= 4: a post-norm block with d_model = 2 outputs LayerNorm of 2 numbers, which is +-1 (then the
        # affine map) whatever dropout did to them, so training and eval mode can agree for a correct block (a
        # correct variant did at one seed of the test_labs sample)
        s_mod, r_mod, d, h, _ = block_setup(student, ref, rng, pre_norm, min_d_model=4, dropout=0.5)
        x = randn(rng, 2, 6, d)
        checks.compare_module_call(s_mod, r_mod, x, depth=BLOCK_DEPTH,
                                   name=f"TransformerEncoderBlock(dropout=0.5) in eval mode, "
                                   f"{placement(pre_norm)} (dropout must be off in eval mode)")
        evaluated = s_mod.call(x).output
        trained = s_mod.call(x, train=True).output
        checks.expect_tensor(trained, name="TransformerEncoderBlock in training mode", shape=x.shape, dtype=F64)
        assert not torch.allclose(trained, evaluated), (
            "TransformerEncoderBlock(dropout=0.5) gives the same output in training and eval mode: apply "
            "dropout (to the attention weights, the feed-forward hidden layer and the sub-layer outputs)")
