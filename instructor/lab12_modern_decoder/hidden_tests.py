"""Hidden tests of Lab 12 (the modern decoder), against the narrow interface.

Every test draws its inputs from ``rng`` only and compares the student's answer with a trusted value: RoPE written
here with complex numbers in float64, ``torch.nn.RMSNorm`` on the same weight, grouped-query attention, the mixture
of experts and linear attention written out here from their formulas in float64 (the attention as the masked
quadratic form, linear attention's too), and the reference (the solution's code) on the same randomised weights,
with gradients. A blank notebook scores 0: a property test first checks values against the reference.

Questions and points (47 in all):

    apply_rope                    6
    RMSNorm                       4
    SwiGLU                        3
    GroupedQueryAttention        10     the key-value cache 3
    MoEFeedForward                8     the balancing loss 2
    linear_attention              4
    linear_attention_recurrent    4
    ModernDecoder                 8     the cache 2

Each question is graded on its own (docs/CURRICULUM.md): GroupedQueryAttention runs with the reference
``apply_rope``, MoEFeedForward with the reference ``SwiGLU`` experts, ModernDecoder with the reference ``RMSNorm``,
``GroupedQueryAttention``, ``SwiGLU`` and ``MoEFeedForward`` (built and run by the grader). The mixture's tests are
in float64 only: two router probabilities that tie within float32's rounding would make a correct top-k differ.

Tolerances: ``checks.tolerance``, scaled by the size of the values and the depth of the computation.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import randint, randn
from attnlab.grading.policy import forbidden_calls

ROPE = "apply_rope"
RMS = "RMSNorm"
GLU = "SwiGLU"
GQA = "GroupedQueryAttention"
MOE = "MoEFeedForward"
LIN = "linear_attention"
REC = "linear_attention_recurrent"
DEC = "ModernDecoder"

suite = HiddenSuite("lab12_modern_decoder",
                    graded_on_reference={GQA: (ROPE,), MOE: (GLU,), DEC: (RMS, GQA, GLU, MOE)})

F32, F64 = torch.float32, torch.float64
GQA_DEPTH = 4  # projections, RoPE, softmax(q k^T) v, the output projection
RMS_FORBIDDEN = ["RMSNorm", "rms_norm"]
RMS_WHY = "this lab asks you to write RMSNorm yourself: nn.RMSNorm and F.rms_norm are not allowed in the graded cells"


# ----------------------------------------------------------------------------------------------- apply_rope
def rope_expected(x: torch.Tensor, offset: int = 0, base: float = 10000.0) -> torch.Tensor:
    """RoPE by complex numbers: the pair (x[2i], x[2i+1]) as x[2i] + i x[2i+1], times exp(i p theta_i)."""
    d, t = x.shape[-1], x.shape[-2]
    pairs = torch.complex(x[..., 0::2].to(F64), x[..., 1::2].to(F64))  # (..., T, d/2)
    theta = torch.tensor([base ** (-2 * i / d) for i in range(d // 2)], dtype=F64)
    p = torch.arange(offset, offset + t, dtype=F64)
    turned = pairs * torch.polar(torch.ones(t, d // 2, dtype=F64), p[:, None] * theta[None, :])
    return torch.stack([turned.real, turned.imag], dim=-1).flatten(-2).to(x.dtype)


@suite.test(ROPE, points=2)
def rope_float64_against_complex_rotation(student, ref, rng):
    for shape, offset, base in (((2, 3, 7, 8), 0, 10000.0), ((5, 16), randint(rng, 1, 50), 10000.0),
                                ((2, 4, 6), randint(rng, 0, 9), 100.0)):
        x = randn(rng, *shape)
        kwargs = {"offset": offset} | ({} if base == 10000.0 else {"base": base})
        got = student.call(ROPE, x, **kwargs).output
        checks.assert_close(got, rope_expected(x, offset, base),
                            name=f"apply_rope(x {shape}, offset={offset}, base={base:g}) against the rotation of each "
                                 "pair (x[2i], x[2i+1]) by (offset + t) * base**(-2i/d_h)")
        checks.compare_call(student, ref, ROPE, x, grad=True, rng=rng, **kwargs)


@suite.test(ROPE, points=2)
def rope_scores_depend_on_the_offset_only(student, ref, rng):
    d = 2 * randint(rng, 3, 8)
    q, k = randn(rng, 4, 1, d), randn(rng, 4, 1, d)
    m, n = randint(rng, 0, 20), randint(rng, 0, 20)
    first = student.call(ROPE, q, offset=m).output
    checks.assert_close(first, rope_expected(q, m), name=f"apply_rope(q, offset={m}) against the reference rotation")
    shift = randint(rng, 30, 500)
    score = lambda a, b: (student.call(ROPE, q, offset=a).output * student.call(ROPE, k, offset=b).output).sum(-1)  # noqa: E731
    near, far = score(m, n), score(m + shift, n + shift)
    checks.assert_close(far, near, name=f"the scores q.k at positions ({m + shift}, {n + shift}) against ({m}, {n}): "
                                        "with RoPE a score depends only on the offset between the positions")
    other = score(m, n + 1 + randint(rng, 0, 5))
    assert (other - near).abs().max().item() > 1e-6, "the scores at another offset should differ"


@suite.test(ROPE, points=2)
def rope_offset_continues_positions_float32(student, ref, rng):
    x = randn(rng, 2, 2, 12, 16, dtype=F32)
    s = randint(rng, 1, 11)
    whole = rope_expected(x.to(F64)).to(F32)
    got = student.call(ROPE, x[..., s:, :], offset=s).output
    checks.expect_tensor(got, name="apply_rope of float32 input", shape=(2, 2, 12 - s, 16), dtype=F32)
    checks.assert_close(got, whole[..., s:, :], depth=2,
                        name=f"apply_rope(x[..., {s}:, :], offset={s}) against the rows {s}.. of apply_rope(x)")
    res = student.call(ROPE, x, offset=3)
    assert not res.modified, "apply_rope changed its input in place: build a new tensor"
    checks.expect_student_error(lambda: student.call(ROPE, randn(rng, 3, 5)), "ValueError",
                                what="apply_rope on d_h = 5", mentions=("5",))


# ------------------------------------------------------------------------------------------------- RMSNorm
def rms_expected(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    norm = nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)
    with torch.no_grad():
        norm.weight.copy_(weight)
        return norm(x)


@suite.test(RMS, points=2)
def rms_equals_torch_rmsnorm(student, ref, rng):
    for shape, eps in (((3, 5, 16), None), ((7, 9), 0.1), ((2, 1, 3, 33), 1e-3)):
        kwargs = {} if eps is None else {"eps": eps}
        s_mod, r_mod = checks.build_pair(student, ref, RMS, shape[-1], rng=rng, dtype=F64, **kwargs)
        x = randn(rng, *shape, scale=2.0, shift=0.7)
        checks.assert_close(s_mod.call(x).output, rms_expected(x, r_mod.state_dict()["weight"], eps or 1e-6),
                            name=f"RMSNorm({shape[-1]}{'' if eps is None else f', eps={eps}'}) against "
                                 "torch.nn.RMSNorm with the same weight (float64)")
    forbidden_calls.assert_not_used(student, RMS_FORBIDDEN, why=RMS_WHY)


@suite.test(RMS, points=1)
def rms_grads_and_tiny_inputs(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, RMS, 12, rng=rng, dtype=F64)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 4, 6, 12), grad=True, rng=rng, name="RMSNorm(12) with gradients")
    tiny = randn(rng, 3, 12, scale=1e-4)  # mean(x^2) ~ 1e-8: eps = 1e-6 inside the square root decides the output
    checks.assert_close(s_mod.call(tiny).output, rms_expected(tiny, r_mod.state_dict()["weight"], 1e-6),
                        name="RMSNorm on inputs of size 1e-4 (eps inside the square root: x / sqrt(mean(x^2) + eps))")


@suite.test(RMS, points=1)
def rms_float32(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, RMS, 32, rng=rng, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 3, 7, 32, dtype=F32), grad=True, rng=rng, depth=2,
                               name="RMSNorm(32) in float32 with leading dimensions")


# -------------------------------------------------------------------------------------------------- SwiGLU
def swiglu_expected(state: dict, x: torch.Tensor, prefix: str = "") -> torch.Tensor:
    w1, w2, w3 = (state[f"{prefix}{n}.weight"] for n in ("w1", "w2", "w3"))
    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


@suite.test(GLU, points=2)
def swiglu_formula_float64(student, ref, rng):
    for d, d_ff, shape in ((8, 20, (3, 5)), (16, 24, (2, 3, 4)), (5, 7, (9,))):
        s_mod, r_mod = checks.build_pair(student, ref, GLU, d, d_ff, rng=rng, dtype=F64, scale=1.0)
        x = randn(rng, *shape, d, scale=1.5)
        checks.assert_close(s_mod.call(x).output, swiglu_expected(r_mod.state_dict(), x),
                            name=f"SwiGLU({d}, {d_ff}) against w2(silu(w1 x) * w3 x)")
        checks.compare_module_call(s_mod, r_mod, x, grad=True, rng=rng, name=f"SwiGLU({d}, {d_ff}) with gradients")


@suite.test(GLU, points=1)
def swiglu_float32_dropout_eval(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, GLU, 32, 48, rng=rng, dtype=F32, dropout=0.3)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 4, 6, 32, dtype=F32), grad=True, rng=rng, depth=3,
                               name="SwiGLU(32, 48, dropout=0.3) in eval mode (float32)")


# ---------------------------------------------------------------------------------- GroupedQueryAttention
def gqa_expected(state: dict, x: torch.Tensor, h: int, h_kv: int, prefix: str = "") -> torch.Tensor:
    """The full causal pass, written out: query head j reads key-value head j // (h / h_kv)."""
    b, t, d = x.shape
    d_h = d // h
    q = (x @ state[f"{prefix}q_proj.weight"].T).view(b, t, h, d_h).transpose(1, 2)
    k = (x @ state[f"{prefix}k_proj.weight"].T).view(b, t, h_kv, d_h).transpose(1, 2)
    v = (x @ state[f"{prefix}v_proj.weight"].T).view(b, t, h_kv, d_h).transpose(1, 2)
    q, k = rope_expected(q), rope_expected(k)
    owner = torch.arange(h) // (h // h_kv)  # the key-value head of each query head
    k, v = k[:, owner], v[:, owner]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_h)
    scores = scores.masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
    out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
    return out @ state[f"{prefix}out_proj.weight"].T


GQA_SHAPES = ((16, 4, 2), (12, 3, 1), (16, 4, 4), (24, 6, 3))


@suite.test(GQA, points=3)
def gqa_formula_float64(student, ref, rng):
    for d, h, h_kv in GQA_SHAPES:
        s_mod, r_mod = checks.build_pair(student, ref, GQA, d, h, h_kv, rng=rng, dtype=F64)
        x = randn(rng, 2, randint(rng, 4, 9), d)
        checks.assert_close(s_mod.call(x).output, gqa_expected(r_mod.state_dict(), x, h, h_kv),
                            name=f"GroupedQueryAttention({d}, num_heads={h}, num_kv_heads={h_kv}) against the formula "
                                 "(RoPE on q and k, query head j reads key-value head j // (h / h_kv), causal)")


@suite.test(GQA, points=2)
def gqa_against_reference_with_grads(student, ref, rng):
    for d, h, h_kv in ((16, 4, 2), (8, 2, 1)):
        s_mod, r_mod = checks.build_pair(student, ref, GQA, d, h, h_kv, rng=rng, dtype=F64)
        checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 7, d), grad=True, rng=rng,
                                   name=f"GroupedQueryAttention({d}, {h}, {h_kv}) with gradients")


@suite.test(GQA, points=1)
def gqa_causality(student, ref, rng):
    d, h, h_kv, t = 16, 4, 2, 8
    s_mod, r_mod = checks.build_pair(student, ref, GQA, d, h, h_kv, rng=rng, dtype=F64, scale=1.0)
    x = randn(rng, 2, t, d)
    base = s_mod.call(x).output
    checks.assert_close(base, gqa_expected(r_mod.state_dict(), x, h, h_kv), name="GroupedQueryAttention")
    for pos in (0, randint(rng, 1, t - 2), t - 1):
        changed = x.clone()
        changed[:, pos] += randn(rng, 2, d, scale=3.0)
        out = s_mod.call(changed).output
        before = (out[:, :pos] - base[:, :pos]).abs().max().item() if pos else 0.0
        assert before <= 1e-9, (f"changing the token at position {pos} changed an earlier output by {before:.3g}: "
                                "a position must not see the future")


@suite.test(GQA, points=1)
def gqa_float32_dropout_eval(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, GQA, 32, 8, 2, rng=rng, dtype=F32, dropout=0.3)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 3, 12, 32, dtype=F32), grad=True, rng=rng, depth=GQA_DEPTH,
                               name="GroupedQueryAttention(32, 8, 2, dropout=0.3) in eval mode (float32)")


def gqa_cached_run(student, ref, rng, d: int, h: int, h_kv: int, chunks: tuple[int, ...]):
    t = sum(chunks)
    s_mod, r_mod = checks.build_pair(student, ref, GQA, d, h, h_kv, rng=rng, dtype=F64)
    x = randn(rng, 2, t, d)
    state = r_mod.state_dict()
    full = gqa_expected(state, x, h, h_kv)
    start = 0
    for n in chunks:
        checks.assert_close(s_mod.call(x[:, start:start + n], use_cache=True).output, full[:, start:start + n],
                            name=f"GroupedQueryAttention(x[:, {start}:{start + n}], use_cache=True) after {start} "
                                 f"cached positions (chunks {chunks}): the new tokens' RoPE positions start at "
                                 f"{start}, and they attend to every cached key and the new ones up to themselves")
        start += n
    cache = s_mod.attr("cache")
    shape = tuple(cache[0].shape) if isinstance(cache, (tuple, list)) and len(cache) == 2 else None
    assert shape == (2, h_kv, t, d // h), (
        f"after {t} cached tokens self.cache[0] has the shape {shape}, expected (B, num_kv_heads, T, d_h) = "
        f"{(2, h_kv, t, d // h)}: cache the keys and values before repeating them to num_heads heads")
    return s_mod, state, x


@suite.test(GQA, points=2)
def gqa_cache_chunks_equal_the_full_pass(student, ref, rng):
    gqa_cached_run(student, ref, rng, 16, 4, 2, (randint(rng, 2, 4), 1, 1, 1))
    gqa_cached_run(student, ref, rng, 12, 3, 1, (2, 3, 1, randint(rng, 2, 4)))


@suite.test(GQA, points=1)
def gqa_cache_holds_kv_heads_rotated(student, ref, rng):
    d, h, h_kv = 16, 4, 2
    s_mod, state, x = gqa_cached_run(student, ref, rng, d, h, h_kv, (3, 1, 2))
    cache = s_mod.attr("cache")
    assert isinstance(cache, (tuple, list)) and len(cache) == 2, (
        f"after forward(x, use_cache=True), self.cache should be the pair (k, v), got {type(cache).__name__}")
    b, t, _ = x.shape
    k = rope_expected((x @ state["k_proj.weight"].T).view(b, t, h_kv, d // h).transpose(1, 2))
    v = (x @ state["v_proj.weight"].T).view(b, t, h_kv, d // h).transpose(1, 2)
    for got, want, what in ((cache[0], k, "keys (rotated by RoPE at their own positions)"), (cache[1], v, "values")):
        checks.expect_tensor(got, name=f"the cached {what}", shape=tuple(want.shape), dtype=F64)
        checks.assert_close(got, want, name=f"the cached {what}, (B, num_kv_heads, T, d_h): num_kv_heads heads only")
    checks.assert_close(s_mod.call(x).output, gqa_expected(state, x, h, h_kv),
                        name="forward(x) without use_cache after the cache was filled (it must ignore the cache)")


# ------------------------------------------------------------------------------------------ MoEFeedForward
def moe_expected(state: dict, x: torch.Tensor, e: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, balancing loss) written out token by token."""
    flat = x.reshape(-1, x.shape[-1])
    probs = (flat @ state["router.weight"].T).softmax(dim=-1)
    out = torch.zeros_like(flat)
    assigned = torch.zeros(e, dtype=x.dtype)
    for n in range(flat.shape[0]):
        top = probs[n].topk(k)
        for p, i in zip((top.values / top.values.sum()).tolist(), top.indices.tolist()):
            out[n] += p * swiglu_expected(state, flat[n], prefix=f"experts.{i}.")
            assigned[i] += 1
    aux = e * ((assigned / (flat.shape[0] * k)) * probs.mean(dim=0)).sum()
    return out.reshape(x.shape), aux


def moe_pair(student, ref, rng, d, d_ff, e, k):
    s_mod, r_mod = checks.build_pair(student, ref, MOE, d, d_ff, e, top_k=k, rng=rng, dtype=F64, scale=1.0)
    return s_mod, r_mod, r_mod.state_dict()


@suite.test(MOE, points=3)
def moe_formula_float64(student, ref, rng):
    for d, d_ff, e, k, shape in ((8, 12, 4, 1, (2, 5)), (8, 12, 4, 2, (3, 4)), (6, 10, 5, 3, (2, 3, 3)),
                                 (4, 6, 3, 3, (7,))):
        s_mod, _, state = moe_pair(student, ref, rng, d, d_ff, e, k)
        x = randn(rng, *shape, d, scale=1.5)
        checks.assert_close(s_mod.call(x).output, moe_expected(state, x, e, k)[0],
                            name=f"MoEFeedForward({d}, {d_ff}, num_experts={e}, top_k={k}) on x {(*shape, d)} "
                                 "against each token through its top_k experts, weighted by the top_k router "
                                 "probabilities renormalised to sum to 1")


@suite.test(MOE, points=2)
def moe_against_reference_with_grads(student, ref, rng):
    for e, k in ((4, 2), (3, 1)):
        s_mod, r_mod, _ = moe_pair(student, ref, rng, 8, 16, e, k)
        checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 6, 8, scale=1.5), grad=True, rng=rng,
                                   name=f"MoEFeedForward(8, 16, {e}, top_k={k}) with gradients")


@suite.test(MOE, points=2)
def moe_balancing_loss(student, ref, rng):
    for e, k in ((4, 1), (4, 2), (5, 3)):
        s_mod, _, state = moe_pair(student, ref, rng, 8, 12, e, k)
        x = randn(rng, 3, 7, 8, scale=1.5)
        want_out, want_aux = moe_expected(state, x, e, k)
        checks.assert_close(s_mod.call(x).output, want_out, name=f"MoEFeedForward(8, 12, {e}, top_k={k})")
        aux = s_mod.attr("aux_loss")
        checks.expect_tensor(aux, name="self.aux_loss after forward", shape=(), dtype=F64)
        checks.assert_close(aux, want_aux,
                            name=f"the balancing loss E * sum_i f_i P_i (E={e}, top_k={k}; f_i the share of the N * k "
                                 "assignments that go to expert i, P_i the mean router probability of expert i)")


@suite.test(MOE, points=1)
def moe_top_k_equals_e_is_the_dense_mixture(student, ref, rng):
    s_mod, _, state = moe_pair(student, ref, rng, 6, 8, 3, 3)
    x = randn(rng, 4, 6)
    flat = x
    probs = (flat @ state["router.weight"].T).softmax(dim=-1)
    dense = sum(probs[:, i:i + 1] * swiglu_expected(state, flat, prefix=f"experts.{i}.") for i in range(3))
    checks.assert_close(s_mod.call(x).output, dense,
                        name="MoEFeedForward with top_k = num_experts: every expert, weighted by its router probability")


# ---------------------------------------------------------------------------------------- linear attention
def linear_expected(q, k, v, eps=1e-6):
    """The masked quadratic form: A = tril(phi(q) phi(k)^T), out = A v / (row sums of A + eps)."""
    phi_q, phi_k = F.elu(q.to(F64)) + 1, F.elu(k.to(F64)) + 1
    t = q.shape[-2]
    a = (phi_q @ phi_k.transpose(-2, -1)) * torch.ones(t, t, dtype=F64).tril()
    return ((a @ v.to(F64)) / (a.sum(dim=-1, keepdim=True) + eps)).to(q.dtype)


def qkv(rng, *lead, t, d_k, d_v, dtype=F64):
    return randn(rng, *lead, t, d_k, dtype=dtype), randn(rng, *lead, t, d_k, dtype=dtype), \
        randn(rng, *lead, t, d_v, dtype=dtype)


@suite.test(LIN, points=2)
def linear_attention_float64(student, ref, rng):
    for lead, t, d_k, d_v in (((2, 3), 7, 4, 5), ((1,), 12, 8, 8), ((), 5, 3, 2)):
        q, k, v = qkv(rng, *lead, t=t, d_k=d_k, d_v=d_v)
        got = student.call(LIN, q, k, v).output
        checks.expect_tensor(got, name=f"linear_attention on {(*lead, t)}", shape=(*lead, t, d_v), dtype=F64)
        checks.assert_close(got, linear_expected(q, k, v),
                            name=f"linear_attention(q, k, v) on {(*lead, t, d_k)} against sum_j<=t (phi(q_t).phi(k_j)) "
                                 "v_j / (sum_j<=t phi(q_t).phi(k_j) + eps), phi = elu + 1")
    q, k, v = qkv(rng, 2, t=6, d_k=4, d_v=3)
    checks.assert_close(student.call(LIN, q, k, v, eps=0.5).output, linear_expected(q, k, v, 0.5),
                        name="linear_attention(..., eps=0.5): eps added to the denominator")


@suite.test(LIN, points=1)
def linear_attention_grads(student, ref, rng):
    q, k, v = qkv(rng, 2, 2, t=8, d_k=4, d_v=6)
    checks.compare_call(student, ref, LIN, q, k, v, grad=True, rng=rng)


@suite.test(LIN, points=1)
def linear_attention_float32_causal(student, ref, rng):
    q, k, v = qkv(rng, 3, t=10, d_k=8, d_v=8, dtype=F32)
    res = student.call(LIN, q, k, v)
    checks.assert_close(res.output, linear_expected(q, k, v), depth=3, name="linear_attention in float32")
    assert not res.modified, "linear_attention changed its inputs in place"
    pos = randint(rng, 1, 8)
    k2 = k.clone()
    k2[:, pos] += 2.0
    out = student.call(LIN, q, k2, v).output
    assert (out[:, :pos] - res.output[:, :pos]).abs().max().item() <= 1e-6, (
        f"changing the key at position {pos} changed an earlier output: linear attention must be causal")


def state_expected(k, v, state=None):
    phi_k = F.elu(k.to(F64)) + 1
    s, z = phi_k.transpose(-2, -1) @ v.to(F64), phi_k.sum(dim=-2)
    return (s, z) if state is None else (state[0] + s, state[1] + z)


@suite.test(REC, points=2)
def recurrent_equals_the_formula(student, ref, rng):
    for lead, t, d_k, d_v in (((2, 3), 6, 4, 5), ((), 9, 3, 3)):
        q, k, v = qkv(rng, *lead, t=t, d_k=d_k, d_v=d_v)
        out = student.call(REC, q, k, v).output
        assert isinstance(out, (tuple, list)) and len(out) == 2, (
            "linear_attention_recurrent should return (output, (S, z))")
        checks.assert_close(out[0], linear_expected(q, k, v),
                            name=f"the output of linear_attention_recurrent on {(*lead, t, d_k)} (phi = elu + 1)")
        want_s, want_z = state_expected(k, v)
        assert isinstance(out[1], (tuple, list)) and len(out[1]) == 2, "the state should be the pair (S, z)"
        checks.assert_close(out[1][0], want_s, name="the state S after the last token, sum_j phi(k_j) v_j^T")
        checks.assert_close(out[1][1], want_z, name="the state z after the last token, sum_j phi(k_j)")


@suite.test(REC, points=1)
def recurrent_state_carried_over(student, ref, rng):
    q, k, v = qkv(rng, 2, t=9, d_k=4, d_v=3)
    s = randint(rng, 2, 7)
    first = student.call(REC, q[:, :s], k[:, :s], v[:, :s]).output
    checks.assert_close(first[0], linear_expected(q, k, v)[:, :s], name=f"the first {s} outputs")
    state = state_expected(k[:, :s], v[:, :s])
    res = student.call(REC, q[:, s:], k[:, s:], v[:, s:], state=state)
    checks.assert_close(res.output[0], linear_expected(q, k, v)[:, s:],
                        name=f"the outputs {s}.. from the state after {s} tokens: the sums start from state")
    assert not res.modified, "linear_attention_recurrent changed its inputs (the state?) in place: S = S + ..., not +="


@suite.test(REC, points=1)
def recurrent_grads_float32(student, ref, rng):
    q, k, v = qkv(rng, 2, t=6, d_k=4, d_v=4)
    checks.compare_call(student, ref, REC, q, k, v, grad=True, rng=rng)
    q, k, v = qkv(rng, 2, t=6, d_k=4, d_v=4, dtype=F32)
    out = student.call(REC, q, k, v).output
    checks.assert_close(out[0], linear_expected(q, k, v), depth=3, name="linear_attention_recurrent in float32")


# ------------------------------------------------------------------------------------------- ModernDecoder
def decoder_pair(student, ref, rng, *args, dtype=F64, **kwargs):
    """Student and reference ModernDecoder with the same random weights (the tied table loaded once)."""
    r_mod, s_mod = ref.create(DEC, *args, **kwargs), student.create(DEC, *args, **kwargs)
    r_mod.to(dtype)
    s_mod.to(dtype)
    r_params, s_params = r_mod.param_shapes(), s_mod.param_shapes()
    if "lm_head.weight" in s_params:
        raise AssertionError("ModernDecoder: lm_head.weight is a parameter of its own; tie it to the embedding table: "
                             "self.lm_head.weight = self.tok_emb.weight")
    missing, extra = sorted(set(r_params) - set(s_params)), sorted(set(s_params) - set(r_params))
    assert not missing and not extra, (f"ModernDecoder should have the parameters {sorted(r_params)[:8]}...; missing "
                                       f"{missing[:6]}, unexpected {extra[:6]}. Name the sub-layers as the lab says.")
    for k, shape in r_params.items():
        assert s_params[k] == shape, f"ModernDecoder: parameter {k!r} has shape {s_params[k]}, expected {shape}"
    state = checks.randomize_state({k: v for k, v in r_mod.state_dict().items() if k in r_params}, rng, 0.5)
    state["lm_head.weight"] = state["tok_emb.weight"]
    r_mod.load_state_dict(state)
    s_mod.load_state_dict(state)
    return s_mod, r_mod


DEC_SMALL = (13, 8, 16, 4, 2, 2, 24)  # vocab, block_size, d_model, num_heads, num_kv_heads, num_layers, d_ff


@suite.test(DEC, points=3)
def decoder_logits_loss_and_grads_float64(student, ref, rng):
    s_mod, r_mod = decoder_pair(student, ref, rng, *DEC_SMALL)
    for t in (8, 5):
        idx, targets = torch.randint(13, (3, t), generator=rng), torch.randint(13, (3, t), generator=rng)
        checks.compare_module_call(s_mod, r_mod, idx, targets, grad=True, rng=rng,
                                   name=f"ModernDecoder(idx, targets) on T={t} (logits, loss)")
    s_mod, r_mod = decoder_pair(student, ref, rng, 7, 6, 8, 2, 1, 1, 12)
    s, _ = checks.compare_module_call(s_mod, r_mod, torch.randint(7, (2, 6), generator=rng), grad=True, rng=rng,
                                      name="ModernDecoder(idx) without targets, one key-value head")
    assert s.output[1] is None, "without targets the loss should be None"


@suite.test(DEC, points=1)
def decoder_with_experts(student, ref, rng):
    s_mod, r_mod = decoder_pair(student, ref, rng, 11, 8, 16, 4, 2, 2, 12, num_experts=3, top_k=2)
    idx, targets = torch.randint(11, (2, 8), generator=rng), torch.randint(11, (2, 8), generator=rng)
    checks.compare_module_call(s_mod, r_mod, idx, targets, grad=True, rng=rng,
                               name="ModernDecoder(..., num_experts=3, top_k=2): ffn = MoEFeedForward")


@suite.test(DEC, points=1)
def decoder_weight_tying_and_longer_than_block(student, ref, rng):
    s_mod, r_mod = decoder_pair(student, ref, rng, *DEC_SMALL)
    table = randn(rng, 13, 16)
    s_mod.load_state_dict({"tok_emb.weight": table})
    r_mod.load_state_dict({"tok_emb.weight": table, "lm_head.weight": table})
    idx = torch.randint(13, (2, 8 + randint(rng, 1, 8)), generator=rng)  # longer than block_size: RoPE has no table
    checks.compare_module_call(s_mod, r_mod, idx, torch.randint(13, tuple(idx.shape), generator=rng), grad=True, rng=rng,
                               name=f"ModernDecoder after a new tok_emb.weight (lm_head is tied to it), on T={idx.shape[1]} "
                                    "> block_size=8 (no ValueError: there is no position table)")


@suite.test(DEC, points=2)
def decoder_cache_chunks(student, ref, rng):
    s_mod, r_mod = decoder_pair(student, ref, rng, *DEC_SMALL)
    idx = torch.randint(13, (3, 8), generator=rng)
    full = r_mod.call(idx).output[0]
    first = randint(rng, 2, 4)
    for chunks in ((first,) + (1,) * (8 - first), (1, 2, 5)):
        s_mod.call(method="reset_cache")
        start = 0
        for n in chunks:
            got = s_mod.call(idx[:, start:start + n], use_cache=True).output[0]
            checks.assert_close(got, full[:, start:start + n],
                                name=f"ModernDecoder(idx[:, {start}:{start + n}], use_cache=True) after {start} cached "
                                     "tokens: use_cache goes on to every block")
            start += n
        length = s_mod.call(method="cache_length").output
        assert length == 8, f"after 8 tokens fed with use_cache=True, cache_length() is {length}"


@suite.test(DEC, points=1)
def decoder_float32_dropout_eval_causal(student, ref, rng):
    s_mod, r_mod = decoder_pair(student, ref, rng, 11, 10, 32, 4, 2, 2, 48, dtype=F32, dropout=0.2)
    idx, targets = torch.randint(11, (4, 10), generator=rng), torch.randint(11, (4, 10), generator=rng)
    s, _ = checks.compare_module_call(s_mod, r_mod, idx, targets, grad=True, rng=rng, depth=2 + 2 * (GQA_DEPTH + 4),
                                      name="ModernDecoder(dropout=0.2) in eval mode (float32)")
    pos = randint(rng, 1, 8)
    changed = idx.clone()
    changed[:, pos] = (changed[:, pos] + 1) % 11
    out = s_mod.call(changed).output[0]
    assert (out[:, :pos] - s.output[0][:, :pos]).abs().max().item() <= 1e-5, (
        f"changing the token at position {pos} changed the logits before it: the model must not see the future")
