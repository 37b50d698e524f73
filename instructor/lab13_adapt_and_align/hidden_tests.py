"""Hidden tests of Lab 13 (adapting and aligning a pretrained model), against the narrow interface.

Every test draws its inputs from ``rng`` only and compares the student's answer with a trusted value: the LoRA
layer written out here in float64 from the base layer's and the adapter's randomised weights, the response-only
cross-entropy and summed log-probabilities written position by position, the DPO loss from its formula, and the
reference (the solution's code) on the same randomised inputs, with gradients. A blank notebook scores 0: a property
test first checks values against the formula.

Questions and points (29 in all):

    LoRALinear          8     merge() 2
    apply_lora          6
    sft_loss            5
    sequence_logprob    4
    dpo_loss            6

``apply_lora`` builds the student's own ``LoRALinear`` (a module proxy cannot carry the ``nn.Linear`` it wraps over
the wire): its tests read which layers were wrapped and which parameters train (names and gradients), and one test
(1 point) the adapted model's logits. A ``LoRALinear`` whose parameters are not ``base.*``, ``A`` and ``B`` costs
``apply_lora`` too; the notebook says so.

Tolerances: ``checks.tolerance``, scaled by the size of the values and the depth of the computation.
"""

from __future__ import annotations

import math

import torch

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import randint, randn
from attnlab.grading.worker.api import ObjectRef

LORA = "LoRALinear"
APPLY = "apply_lora"
SFT = "sft_loss"
SEQ = "sequence_logprob"
DPO = "dpo_loss"

# Each question graded on its own (docs/CURRICULUM.md): apply_lora runs with the reference LoRALinear (built and run
# by the grader), so a wrong adapter costs its own question only
suite = HiddenSuite("lab13_adapt_and_align", graded_on_reference={"apply_lora": ("LoRALinear",)})

F32, F64 = torch.float32, torch.float64


# ---------------------------------------------------------------------------------------------- LoRALinear
def lora_expected(state: dict, x: torch.Tensor, scale: float, prefix: str = "") -> torch.Tensor:
    """x W^T + b + scale * x A^T B^T, written out in float64."""
    w, a, b = (state[f"{prefix}{n}"].to(F64) for n in ("base.weight", "A", "B"))
    out = x.to(F64) @ w.T + scale * (x.to(F64) @ a.T) @ b.T
    bias = state.get(f"{prefix}base.bias")
    return (out if bias is None else out + bias.to(F64)).to(x.dtype)


def lora_pair(student, ref, rng, d_in: int, d_out: int, r: int, alpha: float, *, bias: bool = True, dtype=F64,
              randomize: bool = True) -> tuple[ObjectRef, ObjectRef, dict]:
    """LoRALinear(Linear(d_in, d_out, bias=bias), r=r, alpha=alpha) on both sides, the same random parameters."""
    built = []
    for api in (ref, student):
        base = api.create("Linear", d_in, d_out, bias=bias)
        built.append(api.create(LORA, base, r=r, alpha=alpha).to(dtype))
    r_mod, s_mod = built
    want, got = r_mod.param_shapes(), s_mod.param_shapes()
    assert got == want, (f"LoRALinear(Linear({d_in}, {d_out}), r={r}) should have the parameters {want} (base.weight, "
                         f"base.bias, A (r, in), B (out, r)), got {got}")
    state = r_mod.state_dict()
    if randomize:
        state = checks.randomize_state(state, rng, scale=0.5)
        r_mod.load_state_dict(state)
    else:  # the same base layer, each side's own A and B as its constructor made them
        state = {k: v for k, v in state.items() if k.startswith("base.")}
    s_mod.load_state_dict(state)
    return s_mod, r_mod, state


LORA_SHAPES = ((8, 6, 2, 4.0, True), (5, 11, 1, 1.0, False), (12, 7, 4, 16.0, True), (16, 16, 8, 8.0, True))


@suite.test(LORA, points=2)
def lora_starts_as_its_base_and_trains_a_and_b_only(student, ref, rng):
    for d_in, d_out, r, alpha, bias in LORA_SHAPES[:3]:
        s_mod, r_mod, _ = lora_pair(student, ref, rng, d_in, d_out, r, alpha, bias=bias, randomize=False)
        state = s_mod.state_dict()
        assert bool((state["B"] == 0).all()), f"B should start at zero (r={r}): the adapted layer starts as the base"
        assert state["A"].abs().max().item() > 0, "A should start random (not zero): with A = B = 0 nothing trains"
        x = randn(rng, 3, d_in)
        base = state["base.weight"].to(F64)
        want = x @ base.T + (state["base.bias"] if bias else 0.0)
        checks.assert_close(s_mod.call(x).output, want, name=f"LoRALinear(Linear({d_in}, {d_out}), r={r}) right after "
                                                             "construction against its base layer")
        res = s_mod.call(x, grad=True, grad_outputs=[randn(rng, 3, d_out)])
        trains = sorted(res.param_grads)
        assert trains == ["A", "B"], (f"the parameters that require grad should be ['A', 'B'] (the base layer "
                                      f"frozen: requires_grad_(False)), got {trains}")
        scale = s_mod.attr("scale")
        assert isinstance(scale, (int, float)) and math.isclose(scale, alpha / r), (
            f"scale should be alpha / r = {alpha / r}, got {scale!r}")


@suite.test(LORA, points=3)
def lora_formula_float64(student, ref, rng):
    for d_in, d_out, r, alpha, bias in LORA_SHAPES:
        alpha = alpha * (0.5 + randint(rng, 0, 4) / 4)
        s_mod, _, state = lora_pair(student, ref, rng, d_in, d_out, r, alpha, bias=bias)
        x = randn(rng, 2, randint(rng, 1, 5), d_in)
        checks.assert_close(s_mod.call(x).output, lora_expected(state, x, alpha / r),
                            name=f"LoRALinear(Linear({d_in}, {d_out}, bias={bias}), r={r}, alpha={alpha:g}) against "
                                 "x W^T + b + (alpha / r) x A^T B^T")


@suite.test(LORA, points=1)
def lora_gradients_and_float32(student, ref, rng):
    s_mod, r_mod, _ = lora_pair(student, ref, rng, 10, 6, 3, 6.0)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 4, 10), grad=True, rng=rng,
                               name="LoRALinear(Linear(10, 6), r=3, alpha=6) with the gradients of x, A and B")
    s_mod, r_mod, _ = lora_pair(student, ref, rng, 24, 12, 4, 4.0, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 5, 24, dtype=F32), grad=True, rng=rng, depth=2,
                               name="LoRALinear(Linear(24, 12), r=4, alpha=4) in float32")


def merged_through_container(student, s_mod: ObjectRef):
    """The container Sequential(s_mod) after the given merge_lora: its state (keys '0.weight', '0.bias')."""
    box = student.create("Sequential", s_mod)
    student.call("merge_lora", box)
    return box


@suite.test(LORA, points=2)
def lora_merge_equals_the_adapted_layer(student, ref, rng):
    for d_in, d_out, r, alpha, bias in (LORA_SHAPES[0], LORA_SHAPES[1], LORA_SHAPES[2]):
        s_mod, _, state = lora_pair(student, ref, rng, d_in, d_out, r, alpha, bias=bias)
        box = merged_through_container(student, s_mod)
        keys = sorted(box.state_dict())
        want_keys = ["0.bias", "0.weight"] if bias else ["0.weight"]
        assert keys == want_keys, (f"merge() should return a plain nn.Linear (parameters weight{', bias' if bias else ''}"
                                   f"); the merged layer holds {[k[2:] for k in keys]}")
        merged = box.state_dict()
        w = state["base.weight"] + (alpha / r) * state["B"] @ state["A"]
        checks.assert_close(merged["0.weight"], w, name=f"merge().weight (r={r}, alpha={alpha:g}) against "
                                                        "W + (alpha / r) B A")
        if bias:
            checks.assert_close(merged["0.bias"], state["base.bias"], name="merge().bias against the base's bias")
        x = randn(rng, 3, d_in)
        checks.assert_close(box.call(x).output, lora_expected(state, x, alpha / r),
                            name="the merged layer's output against the adapted layer's")
        checks.assert_close(s_mod.call(x).output, lora_expected(state, x, alpha / r),
                            name="the LoRALinear after merge() (merge must not change the layer it merges)")


# ---------------------------------------------------------------------------------------------- apply_lora
GPT_ARGS = (11, 8, 16, 2, 2)  # vocab, block, d_model, heads, layers


def gpt_pair(student, ref, rng):
    return checks.build_pair(student, ref, "TinyGPT", *GPT_ARGS, rng=rng, dtype=F64)


def wrapped_names(targets, layers: int = 2) -> list[str]:
    where = {"q_proj": "attn", "k_proj": "attn", "v_proj": "attn", "out_proj": "attn", "fc1": "mlp", "fc2": "mlp"}
    names = [f"blocks.{i}.{where[t]}.{t}" for i in range(layers) for t in targets if t in where]
    return names + (["lm_head"] if "lm_head" in targets else [])


@suite.test(APPLY, points=2)
def apply_lora_wraps_the_named_layers_and_freezes_the_rest(student, ref, rng):
    for targets in (["q_proj", "v_proj"], ["fc2", "out_proj", "lm_head"], ["k_proj"]):
        r = randint(rng, 1, 4)
        s_mod, r_mod = gpt_pair(student, ref, rng)
        res = student.call(APPLY, s_mod, targets, r=r, alpha=2.0 * r)
        ref.call(APPLY, r_mod, targets, r=r, alpha=2.0 * r)
        assert res.output == s_mod.handle, f"apply_lora should return the model it changed, got {res.output!r}"
        want = r_mod.param_shapes()
        got = s_mod.param_shapes()
        assert got == want, (f"after apply_lora(model, {targets}, r={r}) the parameters should be those of the model "
                             f"with {wrapped_names(targets)} wrapped; missing {sorted(set(want) - set(got))[:4]}, "
                             f"unexpected {sorted(set(got) - set(want))[:4]}")
        tokens = torch.randint(0, GPT_ARGS[0], (2, GPT_ARGS[1]), generator=rng)
        grads = s_mod.call(tokens, grad=True, grad_outputs=[randn(rng, 2, GPT_ARGS[1], GPT_ARGS[0])]).param_grads
        trains = sorted(grads)
        expected = sorted(f"{n}.{m}" for n in wrapped_names(targets) for m in ("A", "B"))
        assert trains == expected, (f"after apply_lora(model, {targets}) only the A and B of the wrapped layers should "
                                    f"train; these require grad: {trains[:6]}{' ...' if len(trains) > 6 else ''}")


@suite.test(APPLY, points=2)
def apply_lora_matches_by_the_layers_own_name(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng)
    student.call(APPLY, s_mod, ["fc1"], r=2, alpha=4.0)
    ref.call(APPLY, r_mod, ["fc1"], r=2, alpha=4.0)
    assert s_mod.param_shapes() == r_mod.param_shapes(), (
        "apply_lora(model, ['fc1']) should wrap exactly the layers named fc1 (blocks.i.mlp.fc1), every one of them")
    checks.expect_student_error(lambda: student.call(APPLY, gpt_pair(student, ref, rng)[0], ["q_proj", "queries"]),
                                "ValueError", what="apply_lora(model, ['q_proj', 'queries'])", mentions=("queries",))
    s_mod, _ = gpt_pair(student, ref, rng)
    checks.expect_student_error(lambda: student.call(APPLY, s_mod, ["norm1"]), "ValueError",
                                what="apply_lora(model, ['norm1']) (a LayerNorm, not an nn.Linear)",
                                mentions=("norm1",))


@suite.test(APPLY, points=1)
def apply_lora_keeps_the_model_at_first(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng)
    tokens = torch.randint(0, GPT_ARGS[0], (3, GPT_ARGS[1]), generator=rng)
    before = r_mod.call(tokens).output
    student.call(APPLY, s_mod, ["q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"], r=3, alpha=1.5)
    checks.assert_close(s_mod.call(tokens).output, before, depth=4,
                        name="the logits after apply_lora on every linear layer of the blocks (B = 0) against before")


@suite.test(APPLY, points=1)
def apply_lora_adapted_model_against_reference(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng)
    targets = ["v_proj", "fc1"]
    student.call(APPLY, s_mod, targets, r=2, alpha=3.0)
    ref.call(APPLY, r_mod, targets, r=2, alpha=3.0)
    state = checks.randomize_state(r_mod.state_dict(), rng, scale=0.5)
    r_mod.load_state_dict(state)
    s_mod.load_state_dict(state)
    tokens = torch.randint(0, GPT_ARGS[0], (2, GPT_ARGS[1]), generator=rng)
    checks.compare_module_call(s_mod, r_mod, tokens, grad=True, rng=rng, depth=4,
                               name=f"TinyGPT after apply_lora(model, {targets}, r=2, alpha=3), random A and B, "
                                    "with the gradients of every A and B")


# ------------------------------------------------------------------------------------ sft_loss, sequence_logprob
def response_batch(rng, b: int, t: int, v: int, dtype=F64):
    """logits (B, T, V), tokens (B, T) right-padded with 0, response_mask (B, T): prompt, response, padding."""
    logits = randn(rng, b, t, v, scale=2.0, dtype=dtype)
    tokens = torch.randint(1, v, (b, t), generator=rng)
    mask = torch.zeros(b, t, dtype=torch.bool)
    for i in range(b):
        prompt = randint(rng, 1, t - 2)
        end = randint(rng, prompt + 1, t)
        mask[i, prompt:end] = True
        tokens[i, end:] = 0
    mask[0, 0] = True  # position 0 is never counted (nothing predicts it)
    return logits, tokens, mask


def per_position_logprob(logits: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> list[list[float]]:
    """log p(tokens[i, t]) from logits[i, t - 1] for each counted (i, t), written position by position."""
    rows = []
    for i in range(tokens.shape[0]):
        rows.append([torch.log_softmax(logits[i, t - 1].to(F64), dim=-1)[tokens[i, t]].item()
                     for t in range(1, tokens.shape[1]) if mask[i, t]])
    return rows


@suite.test(SFT, points=2)
def sft_loss_formula_float64(student, ref, rng):
    for b, t, v in ((3, 9, 7), (5, 6, 13), (2, 12, 4)):
        logits, tokens, mask = response_batch(rng, b, t, v)
        rows = per_position_logprob(logits, tokens, mask)
        want = -sum(sum(r) for r in rows) / sum(len(r) for r in rows)
        checks.assert_close(student.call(SFT, logits, tokens, mask).output, torch.tensor(want, dtype=F64),
                            name=f"sft_loss on logits {(b, t, v)} against the mean cross-entropy over the response "
                                 "tokens (position t - 1 predicts token t; prompt, padding and position 0 not counted; "
                                 "every token weighs the same)")


@suite.test(SFT, points=2)
def sft_loss_against_reference_with_grads(student, ref, rng):
    logits, tokens, mask = response_batch(rng, 4, 10, 9)
    checks.compare_call(student, ref, SFT, logits, tokens, mask, grad=True, rng=rng)
    logits, tokens, mask = response_batch(rng, 3, 8, 6, dtype=F32)
    checks.compare_call(student, ref, SFT, logits, tokens, mask, grad=True, rng=rng, depth=2)


@suite.test(SFT, points=1)
def sft_loss_a_wrong_prompt_guess_costs_nothing(student, ref, rng):
    logits, tokens, mask = response_batch(rng, 3, 8, 6)
    base = student.call(SFT, logits, tokens, mask).output
    checks.assert_close(base, ref.call(SFT, logits, tokens, mask).output, name="sft_loss")
    moved = logits.clone()
    for i in range(3):
        for t in range(1, 8):
            if not mask[i, t]:
                moved[i, t - 1] = randn(rng, 6, scale=10.0)  # predictions of prompt and padding tokens
    checks.assert_close(student.call(SFT, moved, tokens, mask).output, base,
                        name="sft_loss after changing the logits that predict prompt and padding tokens")
    checks.expect_student_error(lambda: student.call(SFT, logits, tokens, torch.zeros_like(mask)), "ValueError",
                                what="sft_loss with an empty response_mask")


@suite.test(SEQ, points=2)
def sequence_logprob_formula_float64(student, ref, rng):
    for b, t, v in ((3, 9, 7), (4, 6, 11)):
        logits, tokens, mask = response_batch(rng, b, t, v)
        mask[1] = False  # a sequence with no response token: 0
        want = torch.tensor([sum(r) for r in per_position_logprob(logits, tokens, mask)], dtype=F64)
        got = student.call(SEQ, logits, tokens, mask).output
        checks.expect_tensor(got, name="sequence_logprob", shape=(b,), dtype=F64)
        checks.assert_close(got, want, name=f"sequence_logprob on logits {(b, t, v)} against the sum over each "
                                            "sequence's response tokens of log softmax(logits[t - 1])[tokens[t]] "
                                            "(0 for a sequence without a response token)")


@suite.test(SEQ, points=2)
def sequence_logprob_against_reference_with_grads(student, ref, rng):
    logits, tokens, mask = response_batch(rng, 4, 10, 9)
    checks.compare_call(student, ref, SEQ, logits, tokens, mask, grad=True, rng=rng)
    logits, tokens, mask = response_batch(rng, 3, 7, 5, dtype=F32)
    checks.compare_call(student, ref, SEQ, logits, tokens, mask, grad=True, rng=rng, depth=2)


# ------------------------------------------------------------------------------------------------ dpo_loss
def dpo_inputs(rng, b: int, dtype=F64):
    return [randn(rng, b, scale=3.0, shift=-12.0, dtype=dtype) for _ in range(4)]


def dpo_expected(pc, pr, rc, rr, beta):
    z = beta * ((pc - rc) - (pr - rr)).to(F64)
    return -torch.nn.functional.logsigmoid(z).mean(), beta * (pc - rc).to(F64), beta * (pr - rr).to(F64)


@suite.test(DPO, points=3)
def dpo_formula_float64(student, ref, rng):
    for b in (1, 5, 16):
        beta = (0.05, 0.1, 0.5, 2.0)[randint(rng, 0, 3)]
        args = dpo_inputs(rng, b)
        got = student.call(DPO, *args, beta=beta).output
        assert isinstance(got, (tuple, list)) and len(got) == 3, (
            f"dpo_loss should return (loss, chosen_rewards, rejected_rewards), got {type(got).__name__}")
        for value, want, what in zip(got, dpo_expected(*args, beta),
                                     ("the loss -mean(log sigmoid(beta * (chosen log-ratio - rejected log-ratio)))",
                                      "the chosen rewards beta * (policy_chosen - ref_chosen)",
                                      "the rejected rewards beta * (policy_rejected - ref_rejected)")):
            checks.assert_close(value, want, name=f"dpo_loss(beta={beta}, B={b}): {what}")


@suite.test(DPO, points=2)
def dpo_gradients_against_reference(student, ref, rng):
    checks.compare_call(student, ref, DPO, *dpo_inputs(rng, 6), grad=True, rng=rng, beta=0.3)
    checks.compare_call(student, ref, DPO, *dpo_inputs(rng, 4, dtype=F32), grad=True, rng=rng, beta=0.1, depth=2)


@suite.test(DPO, points=1)
def dpo_large_margins_stay_finite(student, ref, rng):
    pc, pr, rc, rr = dpo_inputs(rng, 4, dtype=F32)
    pr = pr + 400.0  # the rejected response far likelier under the policy: beta * margin about -200
    got = student.call(DPO, pc, pr, rc, rr, beta=0.5).output
    want = dpo_expected(pc, pr, rc, rr, 0.5)[0].to(F32)
    checks.assert_close(got[0], want, depth=2,
                        name="dpo_loss in float32 with margins near -200 (use F.logsigmoid: log(sigmoid(z)) is -inf)")
