"""Hidden tests of Lab 10 (pretrained Transformers), against the narrow interface.

Every test draws its inputs from ``rng`` only and compares the student's answer with a trusted value: labels
and masks computed here, BERT's frequencies (statistically, Bernstein's bound), the reference on the same
randomised weights (LayerNorm included), ``nn.TransformerEncoderLayer`` on those weights, and a GPT-2 forward
pass written here from the Hugging Face checkpoint's own tensors (``gpt2_forward``; ``tests/test_lab10_gpt2.py``
checks it against ``transformers``' ``GPT2LMHeadModel``, which grading does not need). A blank notebook scores 0.

Questions and points (29 in all):

    mask_tokens          6
    mlm_loss             3
    BertEncoder          8
    SequenceClassifier   4     built around the student's own BertEncoder, passed to create as an object
    load_gpt2_weights    8     the student's given GPT2, passed as an object; the function returns it (its handle)

What the narrow interface cannot carry, and how the tests work around it:

- masking draws random numbers: a correct ``mask_tokens`` need not draw the reference's numbers, so the shares
  (selected, ``[MASK]``, each replacement token) are checked against BERT's probabilities within Bernstein's
  bound (a correct answer fails a test with probability below ``FALSE_FAILURE = 1e-9``); what does not depend on
  chance (labels at the selected positions, specials never selected, unselected positions unchanged) exactly.
- a module as an argument: ``SequenceClassifier(encoder, C)`` and ``load_gpt2_weights(model, state_dict)`` get
  objects the test created by name; they stay in the student's process.

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

# Each question graded on its own (docs/CURRICULUM.md): SequenceClassifier is built around the reference BertEncoder
# (built and run by the grader), so a wrong encoder costs its own question only
suite = HiddenSuite("lab10_pretrained_transformers", graded_on_reference={"SequenceClassifier": ("BertEncoder",)})

F32, F64 = torch.float32, torch.float64
MASK_ID = 4  # the lab's vocabulary: <pad> 0, [CLS] 1, [SEP] 2, <unk> 3, [MASK] 4
BLOCK_DEPTH = 6  # an encoder block: attention (3), two layer norms, a feed-forward network


def bert_depth(num_layers: int) -> int:
    return 2 + num_layers * BLOCK_DEPTH


MASK = "mask_tokens"
LOSS = "mlm_loss"
BERT = "BertEncoder"
CLF = "SequenceClassifier"
GPT = "load_gpt2_weights"


# ----------------------------------------------------------------------------------------------- helpers
# A test checks at most 20 shares, so each may be off by chance with probability at most FALSE_FAILURE / 20.
FALSE_FAILURE = 1e-9
PER_SHARE = FALSE_FAILURE / 20


def allowed_deviation(p: float, n: int) -> float:
    """The deviation |share - p| that n Bernoulli(p) draws exceed with probability at most PER_SHARE (Bernstein:
    P(|f - p| >= t) <= 2 exp(-n t^2 / (2 (p (1 - p) + t / 3))), solved for t; the same bound as Lab 09)."""
    log_term = math.log(2.0 / PER_SHARE)
    return (log_term / 3 + math.sqrt(log_term**2 / 9 + 2 * n * p * (1 - p) * log_term)) / n


def share_matches(count: int, n: int, p: float, *, what: str) -> None:
    share = count / n
    bound = allowed_deviation(p, n)
    assert abs(share - p) <= bound, (f"{what}: {share:.4f} ({count} of {n}), expected {p:.4f} (a correct answer "
                                     f"stays within {bound:.4f} of it, but for a chance below 1e-9)")


def ids_with_specials(rng, B: int, L: int, vocab_size: int) -> torch.Tensor:
    """(B, L): [CLS] first, random ordinary ids, a few random specials inside, right padding of random length."""
    ids = torch.randint(MASK_ID + 1, vocab_size, (B, L), generator=rng)
    inside = torch.rand(B, L, generator=rng) < 0.1
    ids = torch.where(inside, torch.randint(0, MASK_ID + 1, (B, L), generator=rng), ids)
    lengths = torch.randint(2, L + 1, (B,), generator=rng)
    ids = ids.masked_fill(torch.arange(L)[None, :] >= lengths[:, None], 0)
    ids[:, 0] = 1
    return ids


def masked_pair(student, ids, vocab_size, p, seed, mask_id=MASK_ID):
    res = student.call(MASK, ids, mask_id, vocab_size, p=p, generator=torch.Generator().manual_seed(seed))
    out = res.output
    assert isinstance(out, (tuple, list)) and len(out) == 2, (
        f"mask_tokens should return (inputs, labels), got {type(out).__name__}")
    inputs, labels = (checks.expect_tensor(t, name=n, shape=tuple(ids.shape), dtype=torch.long)
                      for t, n in zip(out, ("inputs", "labels")))
    assert not res.modified, "mask_tokens changed ids in place: build new tensors"
    return inputs, labels


def deterministic_parts(ids, inputs, labels, mask_id, vocab_size) -> torch.Tensor:
    """What does not depend on chance; returns the selected positions."""
    selected = labels != -100
    special = ids <= mask_id
    assert not (selected & special).any(), (
        f"a special id (<= mask_id={mask_id}: pad, [CLS], ...) was selected; only ordinary tokens may be")
    assert torch.equal(labels[selected], ids[selected]), "labels should hold the original id at every selected position"
    assert ((labels == -100) | selected).all() and torch.equal(inputs[~selected], ids[~selected]), (
        "positions that are not selected should keep their id in inputs and have the label -100")
    chosen = inputs[selected]
    assert ((chosen == mask_id) | ((chosen > mask_id) & (chosen < vocab_size))).all(), (
        f"a selected position should become [MASK] ({mask_id}) or an ordinary token ({mask_id + 1} .. {vocab_size - 1})")
    return selected


# ------------------------------------------------------------------------------------------- mask_tokens
@suite.test(MASK, points=1)
def mask_tokens_p1_selects_every_ordinary_position(student, ref, rng):
    vocab_size = randint(rng, 12, 40)
    ids = ids_with_specials(rng, 6, 12, vocab_size)
    inputs, labels = masked_pair(student, ids, vocab_size, 1.0, randint(rng, 0, 10**6))
    expected = torch.where(ids > MASK_ID, ids, torch.full_like(ids, -100))
    assert torch.equal(labels, expected), (
        "with p=1 every ordinary position is selected: labels should be the id at ordinary positions, -100 at "
        f"specials; row 0 gave {labels[0].tolist()}, expected {expected[0].tolist()}")
    deterministic_parts(ids, inputs, labels, MASK_ID, vocab_size)
    inputs, labels = masked_pair(student, ids, vocab_size, 0.0, randint(rng, 0, 10**6))
    assert (labels == -100).all() and torch.equal(inputs, ids), "with p=0 nothing is selected: inputs = ids"


@suite.test(MASK, points=2)
def mask_tokens_shares_follow_berts_rule(student, ref, rng):
    """One ordinary token o everywhere: P([MASK]) = 0.8, P(o) = 0.1 + 0.1 / n, P(j != o) = 0.1 / n per token."""
    n_ordinary = randint(rng, 4, 7)
    vocab_size = MASK_ID + 1 + n_ordinary
    o = randint(rng, MASK_ID + 1, vocab_size - 1)
    ids = torch.full((500, 60), o)
    ids[:, 0] = 1
    ids[:, -5:] = 0
    p = 0.15 + 0.35 * float(torch.rand(1, generator=rng))
    inputs, labels = masked_pair(student, ids, vocab_size, p, randint(rng, 0, 10**6))
    selected = deterministic_parts(ids, inputs, labels, MASK_ID, vocab_size)
    n_ordinary_positions = int((ids > MASK_ID).sum())
    share_matches(int(selected.sum()), n_ordinary_positions, p, what=f"the share of ordinary positions selected (p={p:.3f})")
    chosen = inputs[selected]
    n = chosen.numel()
    share_matches(int((chosen == MASK_ID).sum()), n, 0.8, what="the share of selected positions turned into [MASK]")
    share_matches(int((chosen == o).sum()), n, 0.1 + 0.1 / n_ordinary,
                  what="the share of selected positions left unchanged (10%, plus random draws that hit the original)")
    for j in range(MASK_ID + 1, vocab_size):
        if j != o:
            share_matches(int((chosen == j).sum()), n, 0.1 / n_ordinary,
                          what=f"the share of selected positions replaced by token {j} (10% spread evenly over "
                               f"the {n_ordinary} ordinary tokens)")


@suite.test(MASK, points=1)
def mask_tokens_mask_id_and_vocab_size_are_honoured(student, ref, rng):
    mask_id = randint(rng, 5, 9)
    vocab_size = mask_id + 1 + randint(rng, 3, 20)
    ids = torch.randint(0, vocab_size, (300, 30), generator=rng)
    inputs, labels = masked_pair(student, ids, vocab_size, 0.5, randint(rng, 0, 10**6), mask_id=mask_id)
    selected = deterministic_parts(ids, inputs, labels, mask_id, vocab_size)
    share_matches(int((inputs[selected] == mask_id).sum()), int(selected.sum()), 0.8,
                  what=f"the share of selected positions turned into [MASK] with mask_id={mask_id}")


@suite.test(MASK, points=2)
def mask_tokens_honours_the_generator(student, ref, rng):
    vocab_size = randint(rng, 20, 60)
    ids = ids_with_specials(rng, 40, 30, vocab_size)
    seed = randint(rng, 0, 10**6)
    a = masked_pair(student, ids, vocab_size, 0.3, seed)
    b = masked_pair(student, ids, vocab_size, 0.3, seed)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), (
        "the same generator seed should give the same inputs and labels: pass generator to every random draw")
    c = masked_pair(student, ids, vocab_size, 0.3, seed + 1)
    # about 900 ordinary positions, each selected with probability 0.3: two seeds agree on all with chance < 1e-100
    assert not torch.equal(a[1], c[1]), "another generator seed should select other positions"


# ---------------------------------------------------------------------------------------------- mlm_loss
def random_labels(rng, B, L, V, p=0.3):
    labels = torch.randint(0, V, (B, L), generator=rng)
    keep = torch.rand(B, L, generator=rng) < p
    keep[0, 0] = True
    return labels.masked_fill(~keep, -100)


@suite.test(LOSS, points=1)
def mlm_loss_against_a_loss_computed_here(student, ref, rng):
    B, L, V = randint(rng, 1, 4), randint(rng, 3, 9), randint(rng, 5, 30)
    logits = randn(rng, B, L, V, scale=2.0)
    labels = random_labels(rng, B, L, V)
    selected = labels != -100
    logp = torch.log_softmax(logits, dim=-1)[selected]  # (n, V)
    expected = -logp.gather(1, labels[selected][:, None]).mean()
    out = checks.expect_tensor(student.call(LOSS, logits, labels).output, name="mlm_loss", shape=())
    checks.assert_close(out, expected, name=f"mlm_loss over {int(selected.sum())} selected of {B * L} positions",
                        depth=2)


@suite.test(LOSS, points=1)
def mlm_loss_gradients_float64(student, ref, rng):
    B, L, V = randint(rng, 2, 4), randint(rng, 4, 10), randint(rng, 5, 20)
    logits = randn(rng, B, L, V)
    labels = random_labels(rng, B, L, V, p=0.2)
    s, _ = checks.compare_call(student, ref, LOSS, logits, labels, grad=True, rng=rng, depth=2)
    grad = s.grads.get(0)
    assert grad is not None and torch.all(grad[labels == -100] == 0), (
        "positions labelled -100 should get no gradient: they are not part of the loss")


@suite.test(LOSS, points=1)
def mlm_loss_float32_one_selected_position(student, ref, rng):
    logits = randn(rng, 3, 5, 11, dtype=F32)
    labels = torch.full((3, 5), -100)
    labels[randint(rng, 0, 2), randint(rng, 0, 4)] = randint(rng, 0, 10)
    checks.compare_call(student, ref, LOSS, logits, labels, depth=2)


# ------------------------------------------------------------------------------------------- BertEncoder
def bert_args(rng, num_layers=None):
    h = randint(rng, 1, 4)
    # d_model >= 4: with d_model = 2 each LayerNorm outputs +-1 per position, so every position can come out the same
    # and a classifier that pools the mean (or the last position) matches the [CLS] one
    d = h * randint(rng, max(2, -(-4 // h)), 5)
    return dict(vocab_size=randint(rng, 10, 30), max_len=randint(rng, 6, 10), d_model=d, num_heads=h,
                num_layers=num_layers or randint(rng, 1, 2), d_ff=randint(rng, 8, 24))


def bert_ids(rng, B, L, vocab_size):
    lengths = torch.randint(1, L + 1, (B,), generator=rng)
    lengths[0] = L
    ids = torch.randint(1, vocab_size, (B, L), generator=rng)
    ids = ids.masked_fill(torch.arange(L)[None, :] >= lengths[:, None], 0)
    ids[:, 0] = 1
    return ids, lengths


def torch_bert(state: dict, args: dict, ids: torch.Tensor) -> torch.Tensor:
    """The encoder on ``state`` (float64), with F.layer_norm and nn.TransformerEncoderLayer (True = blocked)."""
    d, L = args["d_model"], ids.shape[1]
    x = state["tok_emb.weight"][ids] + state["pos_emb.weight"][:L]
    x = F.layer_norm(x, (d,), state["norm.weight"], state["norm.bias"])
    for i in range(args["num_layers"]):
        layer = nn.TransformerEncoderLayer(d, args["num_heads"], args["d_ff"], dropout=0.0, batch_first=True).double()
        p = f"blocks.{i}."
        sa = p + "self_attn."
        layer.load_state_dict({
            "self_attn.in_proj_weight": torch.cat([state[sa + f"{n}_proj.weight"] for n in "qkv"]),
            "self_attn.in_proj_bias": torch.cat([state[sa + f"{n}_proj.bias"] for n in "qkv"]),
            "self_attn.out_proj.weight": state[sa + "out_proj.weight"],
            "self_attn.out_proj.bias": state[sa + "out_proj.bias"],
            "linear1.weight": state[p + "ff.linear1.weight"], "linear1.bias": state[p + "ff.linear1.bias"],
            "linear2.weight": state[p + "ff.linear2.weight"], "linear2.bias": state[p + "ff.linear2.bias"],
            "norm1.weight": state[p + "norm1.weight"], "norm1.bias": state[p + "norm1.bias"],
            "norm2.weight": state[p + "norm2.weight"], "norm2.bias": state[p + "norm2.bias"]})
        layer.train()  # no fast path: pads keep their outputs
        with torch.no_grad():
            x = layer(x, src_key_padding_mask=ids == 0)
    return x


@suite.test(BERT, points=3)
def bert_against_torch_encoder_layers_with_padding(student, ref, rng):
    args = bert_args(rng, num_layers=2)
    s_mod, r_mod = checks.build_pair(student, ref, BERT, **args, rng=rng, dtype=F64)
    ids, lengths = bert_ids(rng, 4, args["max_len"], args["vocab_size"])
    out = checks.expect_tensor(s_mod.call(ids).output, name="BertEncoder's output",
                               shape=(4, args["max_len"], args["d_model"]), dtype=F64)
    expected = torch_bert(r_mod.state_dict(), args, ids)
    real = ids != 0
    checks.assert_close(out[real], expected[real], depth=bert_depth(2),
                        name="BertEncoder at real tokens (expected: norm(tok_emb + pos_emb), then the blocks with "
                             "pads masked as keys; nn.TransformerEncoderLayer on the same weights)")


@suite.test(BERT, points=2)
def bert_against_reference_with_gradients(student, ref, rng):
    args = bert_args(rng)
    s_mod, r_mod = checks.build_pair(student, ref, BERT, **args, rng=rng, dtype=F64)
    ids, _ = bert_ids(rng, 3, randint(rng, 2, args["max_len"]), args["vocab_size"])
    ids[:, -1] = randint(rng, 1, args["vocab_size"] - 1)  # every position real: pads' outputs are unspecified
    checks.compare_module_call(s_mod, r_mod, ids, rng=rng, grad=True, depth=bert_depth(args["num_layers"]))


@suite.test(BERT, points=1)
def bert_more_padding_changes_no_real_output(student, ref, rng):
    args = bert_args(rng)
    s_mod, _ = checks.build_pair(student, ref, BERT, **args, rng=rng, dtype=F64)
    L = args["max_len"] - 3
    ids, lengths = bert_ids(rng, 3, L, args["vocab_size"])
    longer = torch.cat([ids, torch.zeros(3, 3, dtype=torch.long)], dim=1)
    a = s_mod.call(ids).output
    b = s_mod.call(longer).output
    real = ids != 0
    checks.assert_close(b[:, :L][real], a[real], depth=bert_depth(args["num_layers"]),
                        name="the outputs at real tokens after appending three pads (pads must be masked as keys)")


@suite.test(BERT, points=1)
def bert_float32_dropout_eval_and_train(student, ref, rng):
    args = bert_args(rng)
    s_mod, r_mod = checks.build_pair(student, ref, BERT, **args, dropout=0.3, rng=rng)
    ids, _ = bert_ids(rng, 2, args["max_len"], args["vocab_size"])
    ids[:, -1] = 5
    checks.compare_module_call(s_mod, r_mod, ids, depth=bert_depth(args["num_layers"]),
                               name="BertEncoder in eval mode (dropout 0.3 inactive)")
    out = s_mod.call(ids, train=True).output
    assert torch.isfinite(out).all() and out.shape == (2, args["max_len"], args["d_model"]), (
        "BertEncoder in train mode should return a finite (B, L, d) tensor")


@suite.test(BERT, points=1)
def bert_too_long_is_a_value_error(student, ref, rng):
    # the error earns its point only with a working encoder: a forward that only raises gets none
    args = bert_args(rng)
    model, r_mod = checks.build_pair(student, ref, BERT, **args, rng=rng, dtype=F64)
    ids, _ = bert_ids(rng, 2, args["max_len"], args["vocab_size"])
    checks.compare_module_call(model, r_mod, ids, depth=bert_depth(args["num_layers"]),
                               name=f"BertEncoder on {args['max_len']} tokens (max_len) against the reference, before "
                                    "the check that a longer sequence raises")
    L = args["max_len"] + randint(rng, 1, 3)
    checks.expect_student_error(lambda: model.call(torch.ones(1, L, dtype=torch.long)), "ValueError",
                         what=f"a sequence of {L} tokens with max_len={args['max_len']}",
                         mentions=(str(L), str(args["max_len"])))


# ------------------------------------------------------------------------------------ SequenceClassifier
def classifier_pair(student, ref, rng, dtype=F64):
    args = bert_args(rng)
    C = randint(rng, 2, 5)
    s_enc, r_enc = student.create(BERT, **args), ref.create(BERT, **args)
    s_mod, r_mod = student.create(CLF, s_enc, C), ref.create(CLF, r_enc, C)
    for m in (s_mod, r_mod):
        m.to(dtype)
    r_shapes, s_shapes = r_mod.param_shapes(), s_mod.param_shapes()
    assert s_shapes == r_shapes, (f"SequenceClassifier should have the parameters {sorted(r_shapes)} (encoder.* and "
                                  f"head.*), got {sorted(s_shapes)}")
    state = checks.randomize_state(r_mod.state_dict(), rng)
    r_mod.load_state_dict(state)
    s_mod.load_state_dict({k: v for k, v in state.items() if k in r_shapes})
    return args, C, s_enc, s_mod, r_mod, state


@suite.test(CLF, points=2)
def classifier_head_on_cls_against_reference_with_gradients(student, ref, rng):
    args, C, _, s_mod, r_mod, state = classifier_pair(student, ref, rng)
    ids, _ = bert_ids(rng, 4, args["max_len"], args["vocab_size"])
    s, _ = checks.compare_module_call(s_mod, r_mod, ids, rng=rng, grad=True, depth=bert_depth(args["num_layers"]) + 1)
    checks.expect_tensor(s.output, name="SequenceClassifier's logits", shape=(4, C))


@suite.test(CLF, points=1)
def classifier_logits_are_head_of_position_zero(student, ref, rng):
    args, C, _, s_mod, r_mod, state = classifier_pair(student, ref, rng)
    ids, _ = bert_ids(rng, 3, args["max_len"], args["vocab_size"])
    r_enc = ref.create(BERT, **args)
    r_enc.to(F64)
    r_enc.load_state_dict({k.removeprefix("encoder."): v for k, v in state.items() if k.startswith("encoder.")})
    first = r_enc.call(ids).output[:, 0]  # (B, d)
    expected = first @ state["head.weight"].T + state["head.bias"]
    checks.assert_close(s_mod.call(ids).output, expected, depth=bert_depth(args["num_layers"]) + 1,
                        name="SequenceClassifier's logits (expected: from the encoder's output at the [CLS] "
                             "position only)")


@suite.test(CLF, points=1)
def classifier_uses_the_encoder_it_was_given(student, ref, rng):
    args, C, s_enc, s_mod, r_mod, state = classifier_pair(student, ref, rng)
    ids, _ = bert_ids(rng, 2, args["max_len"], args["vocab_size"])
    before = s_mod.call(ids).output
    enc_state = checks.randomize_state(s_enc.state_dict(), rng)
    s_enc.load_state_dict(enc_state)  # new weights in the encoder object that was passed in
    after = s_mod.call(ids).output
    assert not torch.allclose(before, after), (
        "new weights loaded into the encoder passed to SequenceClassifier did not change its logits: keep that "
        "encoder as self.encoder (do not build a new one)")


# ------------------------------------------------------------------------------------- load_gpt2_weights
def gpt2_config(rng) -> dict:
    h = randint(rng, 1, 3)
    return dict(vocab_size=randint(rng, 10, 30), block_size=randint(rng, 5, 9), d_model=h * randint(rng, 3, 6),
                num_heads=h, num_layers=randint(rng, 2, 3))


def hf_checkpoint(rng, cfg: dict, prefix: str = "") -> dict:
    """A random GPT-2 checkpoint in Hugging Face's names and layouts (Conv1D weights (in, out)), float64."""
    V, T, d = cfg["vocab_size"], cfg["block_size"], cfg["d_model"]
    shapes = {"wte.weight": (V, d), "wpe.weight": (T, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(cfg["num_layers"]):
        for name, shape in [("ln_1", (d,)), ("ln_2", (d,)), ("attn.c_attn", (d, 3 * d)), ("attn.c_proj", (d, d)),
                            ("mlp.c_fc", (d, 4 * d)), ("mlp.c_proj", (4 * d, d))]:
            shapes[f"h.{i}.{name}.weight"] = shape
            shapes[f"h.{i}.{name}.bias"] = (shape[-1],)
    sd = {prefix + k: randn(rng, *s, scale=0.4) for k, s in shapes.items()}
    for i in range(cfg["num_layers"]):  # layer norms near 1, so activations keep a sensible size
        for ln in ("ln_1", "ln_2"):
            sd[f"{prefix}h.{i}.{ln}.weight"] = sd[f"{prefix}h.{i}.{ln}.weight"] + 1.0
    sd[prefix + "ln_f.weight"] = sd[prefix + "ln_f.weight"] + 1.0
    return sd


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def gpt2_forward(sd: dict, ids: torch.Tensor, num_heads: int, eps: float = 1e-5) -> torch.Tensor:
    """GPT-2's logits from a Hugging Face state dict (no prefix), written from OpenAI's model: (B, T) -> (B, T, V)."""
    B, T = ids.shape
    d = sd["wte.weight"].shape[1]
    x = sd["wte.weight"][ids] + sd["wpe.weight"][:T]  # (B, T, d)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    i = 0
    while f"h.{i}.ln_1.weight" in sd:
        p = f"h.{i}."
        h = F.layer_norm(x, (d,), sd[p + "ln_1.weight"], sd[p + "ln_1.bias"], eps)
        q, k, v = (h @ sd[p + "attn.c_attn.weight"] + sd[p + "attn.c_attn.bias"]).split(d, dim=-1)  # Conv1D: x W + b
        q, k, v = (t.reshape(B, T, num_heads, d // num_heads).transpose(1, 2) for t in (q, k, v))  # (B, h, T, d_h)
        att = (q @ k.transpose(-2, -1) / math.sqrt(d // num_heads)).masked_fill(future, float("-inf")).softmax(-1)
        merged = (att @ v).transpose(1, 2).reshape(B, T, d)
        x = x + merged @ sd[p + "attn.c_proj.weight"] + sd[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (d,), sd[p + "ln_2.weight"], sd[p + "ln_2.bias"], eps)
        x = x + gelu_tanh(h @ sd[p + "mlp.c_fc.weight"] + sd[p + "mlp.c_fc.bias"]) @ sd[p + "mlp.c_proj.weight"] \
            + sd[p + "mlp.c_proj.bias"]
        i += 1
    x = F.layer_norm(x, (d,), sd["ln_f.weight"], sd["ln_f.bias"], eps)
    return x @ sd["wte.weight"].T  # the tied embedding


def expected_state(sd: dict, num_layers: int) -> dict:
    """The lab's names for each checkpoint tensor, Conv1D weights transposed (no prefix)."""
    out = {"tok_emb.weight": sd["wte.weight"], "pos_emb.weight": sd["wpe.weight"], "ln_f.weight": sd["ln_f.weight"],
           "ln_f.bias": sd["ln_f.bias"], "lm_head.weight": sd["wte.weight"]}
    for i in range(num_layers):
        for theirs, ours, transpose in [("ln_1", "ln1", False), ("ln_2", "ln2", False), ("attn.c_attn", "attn.qkv", True),
                                        ("attn.c_proj", "attn.proj", True), ("mlp.c_fc", "mlp.0", True),
                                        ("mlp.c_proj", "mlp.2", True)]:
            w = sd[f"h.{i}.{theirs}.weight"]
            out[f"blocks.{i}.{ours}.weight"] = w.T if transpose else w
            out[f"blocks.{i}.{ours}.bias"] = sd[f"h.{i}.{theirs}.bias"]
    return out


def loaded_gpt2(student, cfg, sd):
    model = student.create("GPT2", **cfg)
    model.to(F64)
    res = student.call(GPT, model, sd)
    assert res.output == model.handle, (
        f"load_gpt2_weights should return the model it was given, got {type(res.output).__name__}")
    return model


@suite.test(GPT, points=3)
def gpt2_logits_against_a_forward_pass_on_the_checkpoint(student, ref, rng):
    cfg = gpt2_config(rng)
    sd = hf_checkpoint(rng, cfg)
    model = loaded_gpt2(student, cfg, sd)
    ids = torch.randint(cfg["vocab_size"], (2, cfg["block_size"]), generator=rng)
    logits = model.call(ids).output
    assert isinstance(logits, (tuple, list)), "the given GPT2 returns (logits, loss): was GPT2 changed?"
    expected = gpt2_forward(sd, ids, cfg["num_heads"])
    checks.assert_close(logits[0], expected, depth=1 + 8 * cfg["num_layers"] + 2,
                        name="GPT2's logits after load_gpt2_weights (expected: GPT-2's forward pass on the "
                             "checkpoint's tensors)")


@suite.test(GPT, points=3)
def gpt2_every_tensor_in_its_place(student, ref, rng):
    cfg = gpt2_config(rng)
    sd = hf_checkpoint(rng, cfg)
    state = loaded_gpt2(student, cfg, sd).state_dict()
    for name, expected in expected_state(sd, cfg["num_layers"]).items():
        got = state.get(name)
        assert got is not None and tuple(got.shape) == tuple(expected.shape), (
            f"{name}: shape {None if got is None else tuple(got.shape)}, expected {tuple(expected.shape)}")
        checks.assert_close(got, expected, name=f"{name} after loading (Conv1D weights are (in, out): transpose them)")


@suite.test(GPT, points=1)
def gpt2_prefixed_names_and_mask_buffers(student, ref, rng):
    cfg = gpt2_config(rng)
    sd = hf_checkpoint(rng, cfg, prefix="transformer.")
    T = cfg["block_size"]
    for i in range(cfg["num_layers"]):
        sd[f"transformer.h.{i}.attn.bias"] = torch.ones(1, 1, T, T, dtype=F64).tril()
        sd[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4, dtype=F64)
    sd["lm_head.weight"] = sd["transformer.wte.weight"]
    model = loaded_gpt2(student, cfg, sd)
    ids = torch.randint(cfg["vocab_size"], (2, T), generator=rng)
    plain = {k.removeprefix("transformer."): v for k, v in sd.items()}
    checks.assert_close(model.call(ids).output[0], gpt2_forward(plain, ids, cfg["num_heads"]),
                        depth=1 + 8 * cfg["num_layers"] + 2,
                        name="GPT2's logits after loading a checkpoint with 'transformer.' names, attention mask "
                             "buffers and lm_head.weight")


@suite.test(GPT, points=1)
def gpt2_wrong_shape_is_a_value_error(student, ref, rng):
    cfg = gpt2_config(rng)
    # the error earns its point only with a working loader: one that only raises gets none
    good = hf_checkpoint(rng, cfg)
    ids = torch.randint(cfg["vocab_size"], (1, cfg["block_size"]), generator=rng)
    checks.assert_close(loaded_gpt2(student, cfg, good).call(ids).output[0], gpt2_forward(good, ids, cfg["num_heads"]),
                        depth=1 + 8 * cfg["num_layers"] + 2,
                        name="GPT2's logits after load_gpt2_weights of a right checkpoint (expected: GPT-2's forward "
                             "pass on its tensors), before the check that a wrong shape raises")
    sd = hf_checkpoint(rng, {**cfg, "vocab_size": cfg["vocab_size"] + 3})
    model = student.create("GPT2", **cfg)
    model.to(F64)
    checks.expect_student_error(lambda: student.call(GPT, model, sd), "ValueError",
                         what=f"a checkpoint with {cfg['vocab_size'] + 3} tokens into a GPT2 of {cfg['vocab_size']}",
                         mentions=("tok_emb",))
