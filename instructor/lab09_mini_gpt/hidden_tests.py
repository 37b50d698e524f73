"""Hidden tests of Lab 09 (a mini-GPT), against the narrow interface.

Every test draws its inputs from ``rng`` only and compares the student's answer with a trusted value:
pure-Python tokenizer and BPE answers computed here, ``nn.MultiheadAttention`` and ``F.layer_norm`` on the
same weights, the reference (the solution's code) on the same randomised weights (LayerNorm included), and,
for sampling, the softmax the samples should follow. A blank notebook scores 0.

Questions and points (56 in all):

    CharTokenizer         3
    bpe_pair_counts       2
    bpe_merge             3
    BPETokenizer          6
    get_batch             3
    CausalSelfAttention  10     the key-value cache 4
    GPTBlock              5     the cache passed on to attn 2
    MiniGPT              10     the cache's positions 3
    sample_next           6
    generate              8     on the student's own MiniGPT, passed to generate as an object built by create;
                                the cache 3 (the tokens, and what the model is fed)

What the narrow interface cannot carry, and how the tests work around it:

- sampling: ``sample_next``, ``get_batch`` and ``generate`` get seeded ``torch.Generator`` objects (a CPU generator
  travels with its state). Their draws need not equal the reference's (``torch.multinomial``, top-k-then-gather and
  inverse-CDF samplers are all correct), so sampling is checked statistically: tens of thousands of draws in one
  call (one per row), each frequency within Bernstein's bound of its probability (``allowed_deviation``: a correct
  sampler fails a test with probability below ``FALSE_FAILURE = 1e-9``), while every catalogued mistake is off by
  at least 0.05. That the generator is honoured is checked by equality: two generators seeded alike give the same
  draws, and another seed other draws, with enough draws that a correct sampler repeats itself with probability
  below 1e-9 (the bound is in a comment at each check).
- a module as an argument: ``generate(model, ...)`` gets a ``MiniGPT`` the test creates by name (the object stays
  in the student's process). The expected tokens are computed by the test BEFORE the student's ``generate`` runs
  (greedy decoding on the logits of the student's own model, fetched through the narrow interface), so a
  ``generate`` that changes the model cannot make its own check agree, and a wrong ``MiniGPT`` does not cost the
  ``generate`` points twice, as long as its forward runs.
- what ``generate(..., use_cache=True)`` feeds the model: the test records the model's forward calls
  (``record_forward``, ``forward_calls``: the shape of each call's ``idx``, and ``use_cache``) and checks them against
  the contract (the cropped prompt, then one token per step, the cropped context again when the cache is full, as
  the model's ``cache_length()`` tells; ``cached_greedy_expected``, run by the grader on the same model before
  generate runs). The record is made in the student's process: evidence of what the code did, never proof.
- the tokenizer is built by name; its ``encode``, ``decode`` and ``vocab_size`` are read through the object.

Tolerances: ``checks.tolerance``, scaled by the size of the values and the depth of the computation (``CSA_DEPTH``,
``BLOCK_DEPTH``, ``gpt_depth``).
"""

from __future__ import annotations

from collections import Counter

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import randint, randn

# regex: GPT-2's pre-split pattern needs \p{L} (BPETokenizer); a dependency of the kit. Each question graded on its
# own (docs/CURRICULUM.md): the block's tests run with the reference CausalSelfAttention, MiniGPT's with the reference
# GPTBlock (built and run by the grader: grading/worker/module_calls.py), so a wrong mask costs its own question only;
# generate's with the reference sample_next (drawing from the student's generator, whose state comes back), so a wrong
# sampler costs sample_next's points only. BPETokenizer is not: its training calls bpe_merge once per chunk and merge,
# thousands of times per test, more callbacks than a test may make (reference_calls.MAX_CALLBACKS)
suite = HiddenSuite("lab09_mini_gpt", allowed_imports=("regex",),
                    graded_on_reference={"GPTBlock": ("CausalSelfAttention",), "MiniGPT": ("GPTBlock",),
                                         "generate": ("sample_next",)})

F32, F64 = torch.float32, torch.float64
# Layers of computation, for checks.tolerance (float32 gradients of size ~50 carry cancellation errors of ~1e-4 that
# differ between correct forms, F.scaled_dot_product_attention against attention by hand; the tolerance scales with
# the values and these depths): attention is three (qkv, softmax(q k^T) v, output projection), a block three more (two
# layer norms, an MLP of two layers), MiniGPT embeddings, its blocks and the final norm and head.
CSA_DEPTH = 3
BLOCK_DEPTH = CSA_DEPTH + 3


def gpt_depth(num_layers: int) -> int:
    return 1 + num_layers * BLOCK_DEPTH + 2

TOK = "CharTokenizer"
PAIRS = "bpe_pair_counts"
MERGE = "bpe_merge"
BATCH = "get_batch"
CSA = "CausalSelfAttention"
BLOCK = "GPTBlock"
GPT = "MiniGPT"
SAMPLE = "sample_next"
GEN = "generate"

ALPHABET = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'-\n") + ["é", "æ"]


# ----------------------------------------------------------------------------------------------- helpers
def random_text(rng, length: int, alphabet_size: int) -> str:
    chars = [ALPHABET[i] for i in torch.randperm(len(ALPHABET), generator=rng)[:alphabet_size].tolist()]
    picks = torch.randint(len(chars), (length,), generator=rng).tolist()
    return "".join(chars[i] for i in picks)


def int_list(value, name: str) -> list[int]:
    assert isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value), (
        f"{name} should be a list of Python ints, got {type(value).__name__}"
        + (f" of {type(value[0]).__name__}" if isinstance(value, (list, tuple)) and value else ""))
    return list(value)


# The false-failure probability of a statistical test, fixed in advance: a correct sampler fails a test with
# probability below FALSE_FAILURE = 1e-9. A test checks at most 40 frequencies (sample_frequencies...: 2 rows x
# (5 + 6 + 4) tokens = 30), so each frequency may be off by chance with probability at most PER_FREQUENCY = 2.5e-11.
FALSE_FAILURE = 1e-9
PER_FREQUENCY = FALSE_FAILURE / 40


def allowed_deviation(probs: torch.Tensor, n: int) -> torch.Tensor:
    """The deviation |frequency - p| that n draws exceed with probability at most PER_FREQUENCY (Bernstein's
    inequality for a sum of n Bernoulli(p) draws: P(|f - p| >= t) <= 2 exp(-n t^2 / (2 (p (1 - p) + t / 3))),
    solved for t). With L = ln(2 / 2.5e-11) = 25.1: t = 0.037 at p = 0.5 and n = 10,000, 0.026 at n = 20,000;
    every catalogued mistake is off by at least 0.05."""
    log_term = torch.log(torch.tensor(2.0 / PER_FREQUENCY, dtype=F64))
    var = probs * (1 - probs)
    return (log_term / 3 + torch.sqrt(log_term**2 / 9 + 2 * n * var * log_term)) / n


def frequencies_match(ids, probs: torch.Tensor, *, what: str) -> None:
    """ids (N,) long, drawn from probs (V,): every frequency within ``allowed_deviation`` of its probability."""
    n, v = ids.shape[0], probs.shape[0]
    assert int(ids.min()) >= 0 and int(ids.max()) < v, f"{what}: ids outside 0 .. {v - 1}"
    freq = torch.bincount(ids, minlength=v).to(F64) / n
    impossible = (probs == 0) & (freq > 0)
    if impossible.any():
        j = int(impossible.nonzero()[0])
        raise AssertionError(f"{what}: token {j} was drawn {int(freq[j] * n)} times out of {n} but its probability "
                             "is 0 (it is outside the top k)")
    bound = allowed_deviation(probs, n)
    err = (freq - probs).abs()
    if (err > bound).any():
        j = int((err - bound).argmax())
        raise AssertionError(f"{what}: token {j} was drawn with frequency {freq[j].item():.4f} over {n} draws, "
                             f"expected probability {probs[j].item():.4f} (largest deviation allowed "
                             f"{bound[j].item():.4f})")


def expected_probs(logits: torch.Tensor, temperature: float, top_k: int | None) -> torch.Tensor:
    """softmax(logits / T) over the top_k largest logits, in float64; logits (V,)."""
    scaled = logits.to(F64) / temperature
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.softmax(scaled, dim=-1)


def distinct_logits(rng, v: int, spread: float = 1.0) -> torch.Tensor:
    """(V,) logits whose probabilities are all at least a few percent apart, none tiny."""
    base = torch.linspace(0.0, spread * 1.6, v, dtype=F64)
    return base[torch.randperm(v, generator=rng)]


# ----------------------------------------------------------------------------------------- CharTokenizer
def tokenizer_answers(student, text: str, s: str, ids: list[int]) -> tuple:
    """(vocab_size, encode(s), decode(ids)) of the student's CharTokenizer(text)."""
    tokenizer = student.create(TOK, text)
    return (tokenizer.attr("vocab_size"), tokenizer.call(s, method="encode").output,
            tokenizer.call(ids, method="decode").output)


@suite.test(TOK, points=2)
def tokenizer_sorted_vocabulary_and_round_trip(student, ref, rng):
    for size in (5, 17, randint(rng, 20, len(ALPHABET))):
        text = random_text(rng, 300, size)
        chars = sorted(set(text))
        probe = "".join(text[i] for i in torch.randint(len(text), (40,), generator=rng).tolist())
        ids = torch.randint(len(chars), (30,), generator=rng).tolist()
        vocab_size, encoded, decoded = tokenizer_answers(student, text, probe, ids)
        assert vocab_size == len(chars), (f"CharTokenizer.vocab_size is {vocab_size} for a text with {len(chars)} "
                                          "distinct characters")
        encoded = int_list(encoded, "CharTokenizer.encode(s)")
        want = [chars.index(c) for c in probe]
        assert encoded == want, (f"CharTokenizer.encode({probe[:12]!r}...) gave {encoded[:12]}..., expected "
                                 f"{want[:12]}...: the id of a character is its position in the sorted "
                                 "vocabulary sorted(set(text)), from 0")
        want_text = "".join(chars[i] for i in ids)
        assert decoded == want_text, (f"CharTokenizer.decode({ids[:8]}...) gave {str(decoded)[:12]!r}..., "
                                      f"expected {want_text[:12]!r}...")
        back = tokenizer_answers(student, text, probe, want)[2]
        assert back == probe, (f"CharTokenizer.decode of the expected ids of {probe[:12]!r}... gave {str(back)[:12]!r}..., "
                               "expected the text itself")


@suite.test(TOK, points=1)
def tokenizer_single_character_and_newline(student, ref, rng):
    out = tokenizer_answers(student, "\n\n\n", "\n", [0, 0])
    assert tuple(out) == (1, [0], "\n\n"), f"CharTokenizer('\\n\\n\\n'): expected (1, [0], '\\n\\n'), got {tuple(out)}"
    text = random_text(rng, 200, 30)
    chars = sorted(set(text))
    out = tokenizer_answers(student, text, text, list(range(len(chars))))
    assert out[2] == "".join(chars), "decode(range(vocab_size)) should list the sorted vocabulary"
    assert int_list(out[1], "encode") == [chars.index(c) for c in text], "encode of the whole text is wrong"


# ---------------------------------------------------------------------------------------- bpe_pair_counts
def check_pairs(student, ids: list[int]) -> None:
    got = student.call(PAIRS, ids).output
    name = f"bpe_pair_counts({ids[:10]}{'...' if len(ids) > 10 else ''})"
    assert isinstance(got, dict), f"{name} should return a dict {{(a, b): count}}, got {type(got).__name__}"
    want = dict(sorted(Counter(zip(ids, ids[1:])).items()))
    if got != want:
        shown = dict(sorted(got.items(), key=repr)[:6])
        raise AssertionError(f"{name} gave the counts {shown}{'...' if len(got) > 6 else ''}, expected "
                             f"{dict(list(want.items())[:6])}{'...' if len(want) > 6 else ''}: count every adjacent "
                             "pair (ids[i], ids[i + 1]), overlapping ones too, with the pair as a tuple key")


@suite.test(PAIRS, points=1)
def pair_counts_overlapping_runs(student, ref, rng):
    check_pairs(student, [3, 3, 3])
    check_pairs(student, [7, 7, 7, 7, 7, 1, 7, 7])
    n = randint(rng, 3, 9)
    check_pairs(student, [5] * n + [2] + [5] * (n - 1))


@suite.test(PAIRS, points=1)
def pair_counts_random_lists(student, ref, rng):
    for length, alphabet in ((2, 3), (60, 4), (500, 12)):
        check_pairs(student, torch.randint(alphabet, (length,), generator=rng).tolist())
    check_pairs(student, [randint(rng, 0, 9)])
    check_pairs(student, [])


# --------------------------------------------------------------------------------------------- bpe_merge
def merge_reference(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def check_merge(student, ids: list[int], pair: tuple[int, int], new_id: int, note: str = "") -> None:
    got = student.call(MERGE, ids, pair, new_id).output
    got = int_list(got, "bpe_merge(...)")
    want = merge_reference(ids, pair, new_id)
    short = f"{ids[:12]}{'...' if len(ids) > 12 else ''}"
    assert got == want, (f"bpe_merge({short}, {pair}, {new_id}) gave {got[:12]}..., expected {want[:12]}...{note}")


@suite.test(MERGE, points=1)
def merge_overlapping_pairs_aaa(student, ref, rng):
    note = ": scan left to right and jump over both tokens of a merged pair (no overlaps)"
    check_merge(student, [4, 4, 4], (4, 4), 9, note)
    check_merge(student, [4, 4, 4, 4, 4], (4, 4), 9, note)
    check_merge(student, [1, 4, 4, 4, 2, 4, 4], (4, 4), 11, note)


@suite.test(MERGE, points=1)
def merge_random_lists(student, ref, rng):
    for length, alphabet in ((40, 3), (300, 5), (randint(rng, 2, 30), 2)):
        ids = torch.randint(alphabet, (length,), generator=rng).tolist()
        a, b = ids[0], ids[1]
        check_merge(student, ids, (a, b), alphabet + randint(rng, 0, 5))


@suite.test(MERGE, points=1)
def merge_pair_order_ends_and_absent(student, ref, rng):
    check_merge(student, [2, 1, 2, 1, 2], (1, 2), 8, ": the pair (a, b) means a then b")
    check_merge(student, [1, 2, 3, 1, 2], (1, 2), 8, ": the pair at the very end must be merged too")
    check_merge(student, [3, 3, 5, 6], (5, 6), 9, ": the pair at the very end must be merged too")
    check_merge(student, [5, 6, 7], (6, 5), 9, "")
    check_merge(student, [7], (7, 7), 9, "")
    check_merge(student, [], (7, 7), 9, "")


# --------------------------------------------------------------------------------------------- get_batch
def check_windows(data: torch.Tensor, x, y, block_size: int, batch_size: int) -> torch.Tensor:
    """x, y (B, T) are windows data[s:s+T] and data[s+1:s+T+1]; returns the starts s (B,)."""
    checks.expect_tensor(x, name="x of get_batch", shape=(batch_size, block_size), dtype=data.dtype)
    checks.expect_tensor(y, name="y of get_batch", shape=(batch_size, block_size), dtype=data.dtype)
    where = torch.full((int(data.max()) + 1,), -1, dtype=torch.long)
    where[data] = torch.arange(len(data))  # the data values are distinct: value -> position
    assert int(x.min()) >= 0 and int(x.max()) < len(where), "x holds values that are not in data"
    starts = where[x[:, 0]]
    assert bool((starts >= 0).all()), "x holds values that are not in data"
    positions = starts[:, None] + torch.arange(block_size)[None, :]  # (B, T)
    assert int(positions.max()) + 1 < len(data), (
        f"a window starts at {int(starts.max())}, too late for its target: with N={len(data)} and T={block_size} "
        f"the last possible start is N - T - 1 = {len(data) - block_size - 1}")
    assert torch.equal(x, data[positions]), "each row of x should be consecutive tokens of data, data[s : s + T]"
    assert torch.equal(y, data[positions + 1]), (
        "y should be x shifted by one position: y[b] = data[s + 1 : s + T + 1], for the same start s as x[b]")
    return starts


@suite.test(BATCH, points=2)
def batch_windows_and_shift(student, ref, rng):
    for n, block_size, batch_size in ((200, 16, 8), (60, 7, 30), (randint(rng, 30, 90), randint(rng, 2, 12), 5)):
        data = torch.randperm(n, generator=rng) * 3 + 1  # distinct values, so a value tells its position
        x, y = student.call(BATCH, data, block_size, batch_size, generator=seeded(rng)).output
        check_windows(data, x, y, block_size, batch_size)
    data = torch.arange(500)  # 16 starts uniform over 0 .. 491: two runs agree with probability 492^-16 < 1e-43
    check_generator_honoured(lambda g: student.call(BATCH, data, 8, 16, generator=g).output[0],
                             randint(rng, 0, 2**30), "get_batch(data (500,), 8, 16)")


@suite.test(BATCH, points=1)
def batch_every_start_reachable(student, ref, rng):
    block_size = randint(rng, 3, 10)
    n = block_size + 4  # starts 0, 1, 2, 3
    data = torch.randperm(n, generator=rng) + 10
    x, y = student.call(BATCH, data, block_size, 400, generator=seeded(rng)).output
    starts = check_windows(data, x, y, block_size, 400)
    seen = sorted(set(starts.tolist()))
    assert seen == [0, 1, 2, 3], (f"with N={n} and T={block_size} the starts should be uniform over 0..3 "
                                  f"(N - T - 1 = 3 included), 400 windows started at {seen}")
    counts = torch.bincount(starts, minlength=4).to(F64) / 400
    assert bool((counts > 0.12).all()), f"the starts are far from uniform: frequencies {counts.tolist()}"


# ------------------------------------------------------------------------------------ CausalSelfAttention
def mha_from_state(state: dict, d: int, h: int, dtype) -> nn.MultiheadAttention:
    mha = nn.MultiheadAttention(d, h, batch_first=True, dtype=dtype)
    mha.load_state_dict({"in_proj_weight": state["qkv.weight"], "in_proj_bias": state["qkv.bias"],
                         "out_proj.weight": state["proj.weight"], "out_proj.bias": state["proj.bias"]})
    return mha.eval()


def causal_attention_expected(state: dict, x: torch.Tensor, h: int) -> torch.Tensor:
    d, t = x.shape[-1], x.shape[-2]
    mha = mha_from_state(state, d, h, x.dtype)
    blocked = torch.ones(t, t, dtype=torch.bool).triu(1)  # torch's convention: True = may not attend
    with torch.no_grad():
        return mha(x, x, x, attn_mask=blocked, need_weights=False)[0]


@suite.test(CSA, points=1)
def csa_equals_torch_mha_float64(student, ref, rng):
    for d, h, block_size, t in ((16, 4, 8, 8), (12, 3, 10, 6), (8, 1, 5, 5)):
        s_mod, r_mod = checks.build_pair(student, ref, CSA, d, h, block_size, rng=rng, dtype=F64)
        x = randn(rng, 3, t, d)
        expected = causal_attention_expected(r_mod.state_dict(), x, h)  # the weights both hold, from the grader's side
        got = s_mod.call(x).output
        checks.assert_close(got, expected,
                            name=f"CausalSelfAttention({d}, {h}) against nn.MultiheadAttention with a causal mask "
                                 "(qkv split in the order q, k, v; head i takes columns i*d_h .. (i+1)*d_h - 1)")


@suite.test(CSA, points=2)
def csa_against_reference_with_grads(student, ref, rng):
    for d, h, block_size, t in ((16, 4, 8, 7), (6, 2, 12, 12)):
        s_mod, r_mod = checks.build_pair(student, ref, CSA, d, h, block_size, rng=rng, dtype=F64)
        checks.compare_module_call(s_mod, r_mod, randn(rng, 2, t, d), grad=True, rng=rng,
                                   name=f"CausalSelfAttention({d}, {h}, {block_size})")


@suite.test(CSA, points=2)
def csa_causality(student, ref, rng):
    d, h, t = 16, 4, 9
    s_mod, r_mod = checks.build_pair(student, ref, CSA, d, h, t, rng=rng, dtype=F64, scale=1.0)
    x = randn(rng, 2, t, d)
    base = s_mod.call(x).output
    checks.expect_tensor(base, name="the output of CausalSelfAttention", shape=(2, t, d), dtype=F64)
    for pos in (0, randint(rng, 1, t - 2), t - 1):
        changed = x.clone()
        changed[:, pos] += randn(rng, 2, d, scale=3.0)
        out = s_mod.call(changed).output
        before = (out[:, :pos] - base[:, :pos]).abs().max().item() if pos else 0.0
        assert before <= 1e-9, (f"changing the token at position {pos} changed the output at an earlier position "
                                f"by {before:.3g}: a position must not see the future (causal mask)")
        assert (out[:, pos] - base[:, pos]).abs().max().item() > 1e-6, (
            f"changing the token at position {pos} did not change the output at {pos}: a position must see itself")
    checks.compare_module_call(s_mod, r_mod, x, name="CausalSelfAttention")


@suite.test(CSA, points=1)
def csa_float32_and_dropout_eval(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, CSA, 32, 4, 16, rng=rng, dtype=F32, dropout=0.3)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 4, 16, 32, dtype=F32), grad=True, rng=rng,
                               depth=CSA_DEPTH, name="CausalSelfAttention(32, 4, dropout=0.3) in eval mode (float32)")


# --------------------------------------------------------------------------------------------- GPTBlock
def block_expected(state: dict, x: torch.Tensor, h: int) -> torch.Tensor:
    d = x.shape[-1]
    sub = {k.removeprefix("attn."): v for k, v in state.items() if k.startswith("attn.")}
    ln1 = F.layer_norm(x, (d,), state["ln1.weight"], state["ln1.bias"])
    x = x + causal_attention_expected(sub, ln1, h)
    ln2 = F.layer_norm(x, (d,), state["ln2.weight"], state["ln2.bias"])
    hidden = F.gelu(ln2 @ state["mlp.0.weight"].T + state["mlp.0.bias"])
    return x + hidden @ state["mlp.2.weight"].T + state["mlp.2.bias"]


@suite.test(BLOCK, points=1)
def block_pre_norm_formula_float64(student, ref, rng):
    for d, h, t in ((16, 4, 8), (12, 2, 5)):
        s_mod, r_mod = checks.build_pair(student, ref, BLOCK, d, h, t, rng=rng, dtype=F64)
        x = randn(rng, 3, t, d, scale=2.0, shift=0.5)
        expected = block_expected(r_mod.state_dict(), x, h)  # the weights both hold, from the grader's side
        checks.assert_close(s_mod.call(x).output, expected,
                            name=f"GPTBlock({d}, {h}) against x + attn(ln1(x)), then x + mlp(ln2(x)) "
                                 "(mlp = Linear(d, 4d), exact GELU, Linear(4d, d))")


@suite.test(BLOCK, points=1)
def block_against_reference_with_grads(student, ref, rng):
    for d, h, block_size, t in ((16, 4, 8, 8), (8, 2, 10, 6)):
        s_mod, r_mod = checks.build_pair(student, ref, BLOCK, d, h, block_size, rng=rng, dtype=F64)
        checks.compare_module_call(s_mod, r_mod, randn(rng, 2, t, d), grad=True, rng=rng,
                                   name=f"GPTBlock({d}, {h}, {block_size})")


@suite.test(BLOCK, points=1)
def block_float32_dropout_eval(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, BLOCK, 32, 4, 16, rng=rng, dtype=F32, dropout=0.2)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 3, 16, 32, dtype=F32), grad=True, rng=rng,
                               depth=BLOCK_DEPTH, name="GPTBlock(32, 4, dropout=0.2) in eval mode (float32)")


@suite.test(BLOCK, points=2)
def block_cache_goes_on_to_attn(student, ref, rng):
    """Fed chunk by chunk with use_cache=True, the block's outputs are those of the full causal pass."""
    d, h, t = 16, 4, 7
    s_mod, r_mod = checks.build_pair(student, ref, BLOCK, d, h, t, rng=rng, dtype=F64)
    x = randn(rng, 2, t, d)
    full = block_expected(r_mod.state_dict(), x, h)  # (2, t, d), the weights both hold, from the grader's side
    first, start = randint(rng, 2, 4), 0
    for n in (first,) + (1,) * (t - first):
        checks.assert_close(s_mod.call(x[:, start:start + n], use_cache=True).output, full[:, start:start + n],
                            name=f"GPTBlock(x[:, {start}:{start + n}], use_cache=True) after {start} cached "
                                 "positions: each new token must see the earlier ones through attn's cache")
        start += n


# ---------------------------------------------------------------------------------------------- MiniGPT
def gpt_pair(student, ref, rng, *args, dtype=F64, **kwargs):
    """Student and reference MiniGPT with the same random weights (the tied table loaded once)."""
    r_mod = ref.create(GPT, *args, **kwargs)
    s_mod = student.create(GPT, *args, **kwargs)
    r_mod.to(dtype)
    s_mod.to(dtype)
    r_params, s_params = r_mod.param_shapes(), s_mod.param_shapes()
    if "lm_head.weight" in s_params:
        raise AssertionError("MiniGPT: lm_head.weight is a parameter of its own; tie it to the embedding table: "
                             "self.lm_head.weight = self.tok_emb.weight")
    missing, extra = sorted(set(r_params) - set(s_params)), sorted(set(s_params) - set(r_params))
    assert not missing and not extra, (f"MiniGPT should have the parameters {sorted(r_params)}; missing {missing}, "
                                       f"unexpected {extra}. Name the sub-layers exactly as the lab says.")
    for k, shape in r_params.items():
        assert s_params[k] == shape, f"MiniGPT: parameter {k!r} has shape {s_params[k]}, expected {shape}"
    state = checks.randomize_state({k: v for k, v in r_mod.state_dict().items() if k in r_params}, rng, 0.5)
    state["lm_head.weight"] = state["tok_emb.weight"]
    r_mod.load_state_dict(state)
    s_mod.load_state_dict(state)
    return s_mod, r_mod


GPT_SMALL = (13, 8, 16, 4, 2)  # vocab_size, block_size, d_model, num_heads, num_layers


@suite.test(GPT, points=2)
def gpt_logits_loss_and_grads_float64(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng, *GPT_SMALL)
    for t in (8, 5):
        idx = torch.randint(13, (3, t), generator=rng)
        targets = torch.randint(13, (3, t), generator=rng)
        checks.compare_module_call(s_mod, r_mod, idx, targets, grad=True, rng=rng,
                                   name=f"MiniGPT(idx, targets) on T={t} (logits, loss)")


@suite.test(GPT, points=1)
def gpt_without_targets(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng, 7, 6, 8, 2, 1)
    idx = torch.randint(7, (2, 6), generator=rng)
    s, r = checks.compare_module_call(s_mod, r_mod, idx, grad=True, rng=rng, name="MiniGPT(idx) without targets")
    assert s.output[1] is None, "without targets the loss should be None"


@suite.test(GPT, points=1)
def gpt_weight_tying(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng, *GPT_SMALL)
    state = s_mod.state_dict()
    assert torch.equal(state["lm_head.weight"], state["tok_emb.weight"]), "lm_head.weight should be tok_emb.weight"
    # a new table, loaded only under the name tok_emb.weight, must reach the output layer too
    table = randn(rng, 13, 16)
    s_mod.load_state_dict({"tok_emb.weight": table})
    r_mod.load_state_dict({"tok_emb.weight": table, "lm_head.weight": table})
    idx, targets = torch.randint(13, (2, 8), generator=rng), torch.randint(13, (2, 8), generator=rng)
    checks.compare_module_call(s_mod, r_mod, idx, targets, grad=True, rng=rng,
                               name="MiniGPT after loading a new tok_emb.weight (weight tying: lm_head uses it too)")


@suite.test(GPT, points=2)
def gpt_causality(student, ref, rng):
    s_mod, _ = gpt_pair(student, ref, rng, *GPT_SMALL)
    idx = torch.randint(13, (2, 8), generator=rng)
    base = checks.expect_tensor(s_mod.call(idx).output[0], name="the logits of MiniGPT", shape=(2, 8, 13), dtype=F64)
    for pos in (0, randint(rng, 1, 6), 7):
        changed = idx.clone()
        changed[:, pos] = (changed[:, pos] + 1 + torch.randint(12, (2,), generator=rng)) % 13
        out = s_mod.call(changed).output[0]
        before = (out[:, :pos] - base[:, :pos]).abs().max().item() if pos else 0.0
        assert before <= 1e-9, (f"changing the token at position {pos} changed the logits at an earlier position "
                                f"by {before:.3g}: the model must not see the future")
        assert (out[:, pos] - base[:, pos]).abs().max().item() > 1e-6, (
            f"changing the token at position {pos} did not change the logits at {pos}")


@suite.test(GPT, points=1)
def gpt_float32_dropout_eval_and_too_long(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng, 11, 10, 32, 4, 2, dtype=F32, dropout=0.2)
    idx, targets = torch.randint(11, (4, 10), generator=rng), torch.randint(11, (4, 10), generator=rng)
    checks.compare_module_call(s_mod, r_mod, idx, targets, grad=True, rng=rng, depth=gpt_depth(2),
                               name="MiniGPT(dropout=0.2) in eval mode (float32)")
    too_long = torch.randint(11, (1, 10 + randint(rng, 1, 4)), generator=rng)
    checks.expect_student_error(lambda: s_mod.call(too_long), "ValueError",
                         what=f"MiniGPT with block_size=10 on a sequence of {too_long.shape[1]}",
                         mentions=(str(too_long.shape[1]), "10"))


# ------------------------------------------------------------------------------------------- sample_next
def seeded(rng) -> torch.Generator:
    """A CPU generator with a seed drawn from ``rng`` (it travels to the student's process with its state)."""
    return torch.Generator().manual_seed(randint(rng, 0, 2**31 - 1))


def call_sample(student, logits, **kwargs):
    res = student.call(SAMPLE, logits, **kwargs)
    shown = ", ".join(f"{k}={v}" for k, v in kwargs.items() if k != "generator")
    ids = checks.expect_tensor(res.output, name=f"sample_next(..., {shown})", shape=(logits.shape[0],),
                               dtype=torch.long)
    assert not res.modified, "sample_next changed logits in place (masked_fill_, /=, ...): work on a new tensor"
    return ids


def check_distribution(student, rng, v: int, temperature: float, top_k: int | None, n: int = 30000,
                       dtype=F64) -> None:
    rows = [distinct_logits(rng, v), distinct_logits(rng, v, spread=2.0) + 5.0]
    logits = torch.stack(rows).repeat(n // 2, 1).to(dtype)  # (n, V): rows alternate between the two
    kwargs = {"temperature": temperature} | ({} if top_k is None else {"top_k": top_k})
    ids = call_sample(student, logits, generator=seeded(rng), **kwargs)
    for r, row in enumerate(rows):
        frequencies_match(ids[r::2], expected_probs(row, temperature, top_k),
                          what=f"sample_next with temperature={temperature}, top_k={top_k}, V={v}")


@suite.test(SAMPLE, points=1)
def sample_temperature_zero_is_argmax(student, ref, rng):
    logits = randn(rng, 400, 20, scale=2.0)
    top2 = logits.topk(2, dim=-1)
    near_tie = top2.values[:, 1] + torch.linspace(1e-4, 1e-2, 400, dtype=F64)  # the best logit barely ahead
    logits = logits.scatter(1, top2.indices[:, :1], near_tie[:, None])
    ids = call_sample(student, logits, temperature=0.0)
    wrong = int((ids != logits.argmax(-1)).sum())
    assert wrong == 0, (f"temperature 0 should give the argmax of each row, without sampling: {wrong} of 400 rows "
                        "(whose two best logits differ by 1e-4 .. 1e-2) got another token")
    ids = call_sample(student, logits.to(F32), temperature=0, top_k=5)
    assert torch.equal(ids, logits.argmax(-1)), "temperature 0 (with top_k=5) should give the argmax of each row"


def check_generator_honoured(draw, seed: int, what: str) -> None:
    """``draw(generator)`` twice with generators seeded alike must agree, and differ with another seed.

    The first part is exact. The second can fail a correct sampler only if two independent runs draw the same
    values everywhere; each caller sizes its draws so that this has probability below FALSE_FAILURE (the bound
    is in a comment at each call)."""
    first, again = draw(torch.Generator().manual_seed(seed)), draw(torch.Generator().manual_seed(seed))
    assert torch.equal(first, again), (
        f"{what} with two generators seeded alike gave different results: draw every random number with "
        "generator=generator (torch.multinomial(..., generator=generator), torch.randint(..., generator=generator))")
    other = draw(torch.Generator().manual_seed(seed + 1))
    assert not torch.equal(first, other), f"{what} gave the same result for the seeds {seed} and {seed + 1}"


@suite.test(SAMPLE, points=2)
def sample_frequencies_follow_softmax_of_temperature(student, ref, rng):
    check_distribution(student, rng, 5, 1.0, None)
    check_distribution(student, rng, 6, 0.5, None)
    check_distribution(student, rng, 4, 2.0, None, dtype=F32)
    # 300 rows of distinct_logits (V = 7, logits 0 .. 1.6), top 5: no probability above 4.95 / 15.6 < 0.32, so two
    # independent draws of a row agree with probability sum p^2 <= max p < 0.32, all 300 rows below 0.32^300
    logits = torch.stack([distinct_logits(rng, 7) for _ in range(300)])
    check_generator_honoured(lambda g: call_sample(student, logits, temperature=1.0, top_k=5, generator=g),
                             randint(rng, 0, 2**30), "sample_next(logits (300, 7), top_k=5)")


@suite.test(SAMPLE, points=2)
def sample_top_k(student, ref, rng):
    check_distribution(student, rng, 8, 1.0, 3)
    check_distribution(student, rng, 6, 0.7, 2)
    ids = call_sample(student, randn(rng, 40, 9), top_k=1)
    assert ids.shape == (40,), "top_k=1 should return one id per row"
    # The notebook's tie rule: every logit equal to the k-th largest is kept. top_k=2 of [2, 1, 1, 1, 0, -1]
    # keeps four tokens (probabilities 0.475 and 3 x 0.175); breaking the tie draws one of the three 1s 0.269 and
    # the other two never, off by at least 0.09 against a bound of 0.02 at n = 20,000.
    tied = torch.tensor([2.0, 1.0, 1.0, 1.0, 0.0, -1.0], dtype=F64)[torch.randperm(6, generator=rng)]
    ids = call_sample(student, tied.repeat(20000, 1), top_k=2, generator=seeded(rng))
    frequencies_match(ids, expected_probs(tied, 1.0, 2),
                      what=f"sample_next(logits, top_k=2) with logits {[round(x) for x in tied.tolist()]}, tied at "
                           "the 2nd largest (keep every logit equal to the k-th largest, so here 4 tokens)")


@suite.test(SAMPLE, points=1)
def sample_top_k_at_least_vocab(student, ref, rng):
    check_distribution(student, rng, 4, 1.0, 4, n=20000)
    check_distribution(student, rng, 4, 1.0, 4 + randint(rng, 1, 6), n=20000)


# ---------------------------------------------------------------------------------------------- generate
def gen_model(student, ref, rng, vocab: int, block_size: int):
    """The student's own MiniGPT with random weights (big enough for clear argmaxes)."""
    s_mod = student.create(GPT, vocab, block_size, 16, 4, 1)
    s_mod.to(F64)
    shapes = s_mod.param_shapes()
    state = {k: randn(rng, *shape, scale=1.0 if k.endswith("emb.weight") else 0.5) for k, shape in shapes.items()}
    state["lm_head.weight"] = state.get("tok_emb.weight")
    s_mod.load_state_dict({k: v for k, v in state.items() if v is not None})
    return s_mod


def call_generate(student, s_mod, idx, new: int, **kwargs):
    res = student.call(GEN, s_mod, idx, new, **kwargs)
    out = checks.expect_tensor(res.output, name=f"generate(model, idx {tuple(idx.shape)}, {new})",
                               shape=(idx.shape[0], idx.shape[1] + new), dtype=torch.long)
    assert torch.equal(out[:, : idx.shape[1]], idx), "the output of generate should start with idx, unchanged"
    return out


# The expected tokens of generate come from the grader, computed BEFORE the student's generate runs: the test decodes
# greedily itself, asking the student's model for its logits through the narrow interface (the model as the
# student built it, on the test's weights). Why the student's model and not the reference MiniGPT: a wrong MiniGPT
# then costs its own points only, not the generate points a second time. Why before: a generate that changes the
# model (replaces model.forward, say) would otherwise make the model agree with whatever it generated.
def greedy_expected(s_mod, idx: torch.Tensor, new: int, block_size: int) -> torch.Tensor:
    """idx (B, T0) followed by ``new`` argmax tokens of the model, each from the last block_size tokens."""
    out = idx
    for _ in range(new):
        logits = s_mod.call(out[:, -block_size:]).output[0]
        checks.expect_tensor(logits, name="the logits of MiniGPT", shape=(*out[:, -block_size:].shape, logits.shape[-1]),
                             dtype=F64)
        out = torch.cat([out, logits[:, -1].argmax(-1)[:, None]], dim=1)
    return out


def check_greedy(got: torch.Tensor, want: torch.Tensor, t0: int, block_size: int) -> None:
    for t in range(t0, want.shape[1]):
        assert torch.equal(got[:, t], want[:, t]), (
            f"with temperature 0, token {t} should be the argmax of the model's logits at the last position of "
            f"the last block_size={block_size} tokens before it (crop the context to idx[:, -block_size:]); "
            "generate must only call the model, never change it")


def sliding_case(student, ref, rng, block_size: int, tries: int = 20, cached: bool = False):
    """A model and prompts whose greedy continuation depends on the sliding window: in some row the tokens
    generated once the context is full are not all equal (a random model with tied embeddings often repeats one
    token, and then no crop at all is distinguishable from the right one). Each try has fresh weights. Returns the
    model, the prompt, the expected tokens and (``cached``: the contract's loop with the cache,
    ``cached_greedy_expected``) the tokens fed at each step, else None."""
    for _ in range(tries):
        s_mod = gen_model(student, ref, rng, 12, block_size)
        idx = torch.randint(12, (8, 3), generator=rng)
        want, feeds = (cached_greedy_expected(s_mod, idx, block_size + 5, block_size) if cached
                       else (greedy_expected(s_mod, idx, block_size + 5, block_size), None))
        if any(len(set(row)) > 1 for row in want[:, block_size:].tolist()):
            break
    return s_mod, idx, want, feeds


@suite.test(GEN, points=2)
def generate_greedy_crops_to_block_size(student, ref, rng):
    block_size = randint(rng, 4, 7)
    s_mod, idx, want, _ = sliding_case(student, ref, rng, block_size)
    out = call_generate(student, s_mod, idx, block_size + 5, temperature=0.0)
    check_greedy(out, want, 3, block_size)


@suite.test(GEN, points=1)
def generate_prompt_longer_than_block_size(student, ref, rng):
    block_size = randint(rng, 3, 6)
    s_mod = gen_model(student, ref, rng, 10, block_size)
    idx = torch.randint(10, (2, block_size + randint(rng, 1, 5)), generator=rng)
    want = greedy_expected(s_mod, idx, 4, block_size)
    out = call_generate(student, s_mod, idx, 4, temperature=0.0)
    check_greedy(out, want, idx.shape[1], block_size)


@suite.test(GEN, points=2)
def generate_samples_the_last_position(student, ref, rng):
    s_mod = gen_model(student, ref, rng, 6, 8)
    for _ in range(20):  # a prompt whose first position's distribution differs from its last one's by 0.1 or more
        # somewhere, so that sampling the wrong position cannot pass by chance: over 10,000 rows each frequency is
        # within allowed_deviation (at most 0.037) of its probability, and 0.1 > 2 x 0.037
        prompt = torch.randint(6, (1, 3), generator=rng)  # 3 positions: the last and two others
        logits = s_mod.call(prompt).output[0]  # before generate runs (see greedy_expected)
        checks.expect_tensor(logits, name="the logits of MiniGPT", shape=(1, 3, 6), dtype=F64)
        if (expected_probs(logits[0, 0], 0.8, 4) - expected_probs(logits[0, -1], 0.8, 4)).abs().max() >= 0.1:
            break
    last = logits[0, -1]
    n = 10000
    out = call_generate(student, s_mod, prompt.repeat(n, 1), 1, temperature=0.8, top_k=4, generator=seeded(rng))
    frequencies_match(out[:, -1], expected_probs(last, 0.8, 4),
                      what="the first token of generate(model, idx, 1, temperature=0.8, top_k=4) over many rows "
                           "(sample from the logits of the last position, passing temperature and top_k on)")
    call_generate(student, s_mod, prompt.repeat(3, 1), 3, temperature=1.3)
    # another seed must give other tokens: at temperature T = max(1, range of the logits / ln 2) no token of the
    # first step has probability above 2 / (2 + 5) (V = 6), so the first tokens of 50 rows agree between two
    # independent runs with probability at most (2/7)^50 < 1e-27
    temperature = max(1.0, float(last.max() - last.min()) / 0.6931)
    check_generator_honoured(lambda g: call_generate(student, s_mod, prompt.repeat(50, 1), 4,
                                                     temperature=temperature, generator=g),
                             randint(rng, 0, 2**30), f"generate(model, idx (50, 3), 4, temperature={temperature:.3g})")


# ---------------------------------------------------------------------------------------- BPETokenizer
# GPT-2's pre-split pattern (the notebook gives it to students as GPT2_SPLIT_PATTERN); the expected merges and ids
# are computed here, in the grader, by a plain-Python byte-level BPE.
SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# Characters of several scripts and widths in UTF-8: ASCII, accents (2 bytes), CJK (3), emoji (4, with a skin-tone
# modifier and a zero-width joiner), a combining accent, digits, punctuation and white space runs.
UNICODE = (list("abcdefghijklmnopqrstuvwxyz      ") + list("éèàüñøçÆß") + list("日本語中文한국") + list(".,;!?'-\"()")
           + list("0123456789") + ["\n", "\t", "  ", "\u0301", "🙂", "😀", "👍🏽", "\u200d", "🇫🇷", "𝔘"])
WORDS = ["the", "there", "then", "hug", "hugs", "bag", "big", "dog", "é", "été", "don't", "42", "4242", "...", "!",
         "café", "🙂", "日本"]


def split_chunks(text: str) -> list[str]:
    import regex  # the grader's copy of the pre-split; regex is a dependency of the kit

    return regex.findall(SPLIT, text)


def bpe_train_expected(text: str, vocab_size: int) -> dict[tuple[int, int], int]:
    """The merges of byte-level BPE with the pre-split: most frequent pair, the first counted on ties."""
    chunks = [list(c.encode("utf-8")) for c in split_chunks(text)]
    merges: dict[tuple[int, int], int] = {}
    for new_id in range(256, vocab_size):
        counts: dict[tuple[int, int], int] = {}
        for chunk in chunks:
            for pair in zip(chunk, chunk[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        pair = max(counts, key=counts.get)
        chunks = [merge_reference(c, pair, new_id) for c in chunks]
        merges[pair] = new_id
    return merges


def bpe_encode_expected(text: str, merges: dict) -> list[int]:
    ids: list[int] = []
    for chunk in split_chunks(text):
        chunk_ids = list(chunk.encode("utf-8"))
        for pair, new_id in merges.items():
            chunk_ids = merge_reference(chunk_ids, pair, new_id)
        ids.extend(chunk_ids)
    return ids


def token_bytes(merges: dict) -> dict[int, bytes]:
    vocab = {i: bytes([i]) for i in range(256)}
    for (a, b), new_id in merges.items():
        vocab[new_id] = vocab[a] + vocab[b]
    return vocab


def student_bpe(student, text: str, vocab_size: int):
    """The student's BPETokenizer trained on text, and its merges (a dict {(a, b): id}) as checked here."""
    tok = student.create("BPETokenizer")
    tok.call(text, vocab_size, method="train")
    merges = tok.attr("merges")
    assert isinstance(merges, dict) and all(
        isinstance(k, tuple) and len(k) == 2 and isinstance(v, int) for k, v in merges.items()), (
        f"BPETokenizer.merges should be a dict {{(a, b): new_id}}, got {type(merges).__name__}")
    return tok, {tuple(k): v for k, v in merges.items()}


def assert_learned_the_merges(merges: dict, text: str, vocab_size: int, test: str) -> None:
    """The student's merges count against the reference's on the same text: a tokenizer that never merges passes a
    round trip and never crosses a chunk, so those tests earn their points only with the merges learned."""
    want = len(bpe_train_expected(text, vocab_size))
    assert len(merges) == want, (f"train(text, {vocab_size}) learned {len(merges)} merges where the reference learns "
                                 f"{want} (vocab_size - 256 unless no pair is left), so {test} says nothing about "
                                 "your tokenizer: merge the most frequent pair of each step")


def random_words(rng, count: int) -> str:
    picks = torch.randint(len(WORDS), (count,), generator=rng).tolist()
    seps = torch.randint(4, (count,), generator=rng).tolist()
    return "".join(WORDS[i] + (" ", " ", "\n", "  ")[s] for i, s in zip(picks, seps))


def random_unicode(rng, length: int) -> str:
    return "".join(UNICODE[i] for i in torch.randint(len(UNICODE), (length,), generator=rng).tolist())


def show_merges(merges: dict, limit: int = 6) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in list(merges.items())[:limit]) + (", ...}" if len(merges) > limit
                                                                                      else "}")


@suite.test("BPETokenizer", points=1)
def bpe_tokenizer_hug_hugs_by_hand(student, ref, rng):
    tok, merges = student_bpe(student, "hug hugs", 259)
    want = {(104, 117): 256, (256, 103): 257, (32, 257): 258}
    assert merges == want, (f"BPETokenizer().train('hug hugs', 259) learned {show_merges(merges)}, expected {want} "
                            "('hu', 'hug', ' hug': the chunks are 'hug' and ' hugs', ties go to the pair counted first)")
    got = int_list(tok.call("hugs hug", method="encode").output, "BPETokenizer.encode")
    assert got == [257, 115, 258], f"encode('hugs hug') gave {got}, expected [257, 115, 258]"
    assert tok.call([258, 257], method="decode").output == " hughug", "decode([258, 257]) should be ' hughug'"
    assert tok.attr("vocab_size") == 259, "vocab_size should be 256 + the number of merges"


@suite.test("BPETokenizer", points=2)
def bpe_tokenizer_merges_and_ids_match_reference(student, ref, rng):
    for count, extra in ((60, 30), (200, randint(rng, 40, 80))):
        text = random_words(rng, count)
        tok, merges = student_bpe(student, text, 256 + extra)
        want = bpe_train_expected(text, 256 + extra)
        if merges != want:
            first = next((i for i, (a, b) in enumerate(zip(merges.items(), want.items())) if a != b),
                         min(len(merges), len(want)))
            raise AssertionError(
                f"train on a text of {len(text)} characters, vocab_size={256 + extra}: merge {first} is "
                f"{list(merges.items())[first] if first < len(merges) else 'missing'}, expected "
                f"{list(want.items())[first] if first < len(want) else 'none'} (count the pairs inside each chunk "
                "of GPT2_SPLIT_PATTERN, add the counts up, take the most frequent, the first counted on ties)")
        probe = random_words(rng, 40)
        got = int_list(tok.call(probe, method="encode").output, "BPETokenizer.encode")
        expected = bpe_encode_expected(probe, want)
        assert got == expected, (f"encode({probe[:30]!r}...) gave {got[:12]}..., expected {expected[:12]}...: split "
                                 "with GPT2_SPLIT_PATTERN, then apply the merges to each chunk in the order learned")
    # Order matters: trained on 'ab' x4 and 'bc' x3 (one word a line), the merges are ab -> 256, then bc -> 257.
    # In 'abcbcbc', bc is the most frequent pair, but the merges apply in the order learned: [256, 99, 257, 257];
    # merging the most frequent learned pair first gives [97, 257, 257, 257].
    tok, merges = student_bpe(student, "ab\nab\nab\nab\nbc\nbc\nbc", 258)
    if merges == {(97, 98): 256, (98, 99): 257}:
        got = int_list(tok.call("abcbcbc", method="encode").output, "BPETokenizer.encode")
        assert got == [256, 99, 257, 257], (
            f"encode('abcbcbc') after learning ab -> 256 then bc -> 257 gave {got}, expected [256, 99, 257, 257]: "
            "apply the merges in the order they were learned (ab first), not the pair most frequent in the text")
    # Chunks: runs of three spaces teach (32, 32) inside the white-space chunk ('  ' before ' dog'); in the probe's
    # runs of four and five spaces the last space starts the next word's chunk (' big'), so an encode that applies
    # the merges to the whole text joins spaces of two chunks and gets other ids than the chunk-by-chunk encode.
    text = "dog   dog   big   dog"
    tok, merges = student_bpe(student, text, 256 + 8)
    if merges == bpe_train_expected(text, 256 + 8):
        probe = "dog    big     dog  dog"
        got = int_list(tok.call(probe, method="encode").output, "BPETokenizer.encode")
        want = bpe_encode_expected(probe, merges)
        assert got == want, (
            f"encode({probe!r}) after training on {text!r} gave {got}, expected {want}: split the text with "
            "GPT2_SPLIT_PATTERN first and merge inside each chunk only ('   ' and ' big' are two chunks: the space "
            "that starts ' big' is never merged with the spaces before it)")


@suite.test("BPETokenizer", points=1)
def bpe_tokenizer_merges_never_cross_chunks(student, ref, rng):
    # "g" + space is the most frequent pair of the raw bytes here: without the pre-split it is merged. Runs of three
    # spaces teach the merge (32, 32) inside a chunk ("  " before " dog"); the probe's double spaces are two
    # chunks, " " and " dog", so an encode that merges across chunks joins them.
    words = ["dog", "big", "bag", "dig", "fig"]
    picks = torch.randint(len(words), (120,), generator=rng).tolist()
    seps = torch.randint(3, (120,), generator=rng).tolist()
    text = "".join(words[i] + ("   " if s == 0 else " ") for i, s in zip(picks, seps))
    tok, merges = student_bpe(student, text, 256 + 40)
    assert_learned_the_merges(merges, text, 256 + 40, "a check that merges never cross chunks")
    vocab = token_bytes(merges)
    crossing = [vocab[i] for i in merges.values() if len(split_chunks(vocab[i].decode("utf-8", "replace"))) > 1]
    assert not crossing, (f"these tokens span two chunks of GPT2_SPLIT_PATTERN: {crossing[:5]}: learn merges "
                          "inside each chunk only")
    doubled = "  ".join(words[i] for i in torch.randint(len(words), (20,), generator=rng).tolist())
    probe = doubled + " " + random_words(rng, 20)
    ids = int_list(tok.call(probe, method="encode").output, "BPETokenizer.encode")
    student_vocab = token_bytes(merges)
    assert all(0 <= i < len(student_vocab) for i in ids), "encode gave ids outside the vocabulary"
    ends, pos = set(), 0
    for i in ids:
        pos += len(student_vocab[i])
        ends.add(pos)
    cuts, pos = [], 0
    for chunk in split_chunks(probe):
        pos += len(chunk.encode("utf-8"))
        cuts.append(pos)
    missing = [c for c in cuts if c not in ends]
    assert not missing, ("encode produced a token that spans two chunks of GPT2_SPLIT_PATTERN (a chunk ends at "
                         f"byte {missing[0]} in the middle of a token): apply the merges to each chunk separately")


@suite.test("BPETokenizer", points=2)
def bpe_tokenizer_round_trip_any_unicode(student, ref, rng):
    text, vocab_size = random_unicode(rng, 600), 256 + randint(rng, 20, 60)
    tok, merges = student_bpe(student, text, vocab_size)
    assert_learned_the_merges(merges, text, vocab_size, "a round trip")
    for length in (0, 1, 7, 80, 300):
        s = random_unicode(rng, length)
        ids = int_list(tok.call(s, method="encode").output, "BPETokenizer.encode")
        assert all(0 <= i < 256 + len(merges) for i in ids), (
            f"encode({s[:20]!r}) gave ids outside 0 .. {255 + len(merges)}: encode the UTF-8 bytes of the text")
        back = tok.call(ids, method="decode").output
        assert back == s, (f"decode(encode(s)) gave {str(back)[:40]!r}, not s = {s[:40]!r}: work on s.encode('utf-8') "
                           "and decode the joined bytes with .decode('utf-8', errors='replace')")
    broken = tok.call([240, 159], method="decode").output  # the first two bytes of a four-byte emoji
    assert broken == "\ufffd", (f"decode([240, 159]) gave {broken!r}, expected '\\ufffd': a piece of a character "
                                "is replaced (errors='replace'), not an error")


# ----------------------------------------------------------------------------------------- key-value cache
def cached_keys_values(state: dict, x: torch.Tensor, h: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys and values of every position of x (B, T, d), as (B, h, T, d_h), from qkv's weights."""
    b, t, d = x.shape
    qkv = x @ state["qkv.weight"].T + state["qkv.bias"]  # (B, T, 3d)
    k, v = qkv[..., d:2 * d], qkv[..., 2 * d:]
    return tuple(part.reshape(b, t, h, d // h).transpose(1, 2) for part in (k, v))  # (B, h, T, d_h)


def csa_cached_run(student, ref, rng, d: int, h: int, chunks: tuple[int, ...]):
    """The student's layer fed x chunk by chunk with use_cache=True; each chunk's output against the full causal
    pass (nn.MultiheadAttention on the same weights, computed here). Returns the state and x."""
    t = sum(chunks)
    s_mod, r_mod = checks.build_pair(student, ref, CSA, d, h, t, rng=rng, dtype=F64)
    x = randn(rng, 2, t, d)
    state = r_mod.state_dict()
    full = causal_attention_expected(state, x, h)
    start = 0
    for n in chunks:
        got = s_mod.call(x[:, start:start + n], use_cache=True).output
        checks.assert_close(got, full[:, start:start + n],
                            name=f"CausalSelfAttention(x[:, {start}:{start + n}], use_cache=True) after {start} "
                                 f"cached positions (chunks {chunks}): each new token attends to the cached keys "
                                 f"0 .. {start - 1} and to the new ones up to itself")
        start += n
    return s_mod, state, x


@suite.test(CSA, points=1)
def csa_cache_one_token_at_a_time(student, ref, rng):
    csa_cached_run(student, ref, rng, 16, 4, (randint(rng, 2, 4), 1, 1, 1, 1))
    csa_cached_run(student, ref, rng, 8, 2, (1, 1, 1))


@suite.test(CSA, points=2)
def csa_cache_several_new_tokens(student, ref, rng):
    csa_cached_run(student, ref, rng, 12, 3, (2, 3, 1, randint(rng, 2, 4)))


@suite.test(CSA, points=1)
def csa_cache_holds_every_key_and_value(student, ref, rng):
    d, h = 16, 4
    s_mod, state, x = csa_cached_run(student, ref, rng, d, h, (3, 1, 2))
    cache = s_mod.attr("cache")
    assert isinstance(cache, (tuple, list)) and len(cache) == 2, (
        f"after forward(x, use_cache=True), self.cache should be the pair (k, v), got {type(cache).__name__}")
    want_k, want_v = cached_keys_values(state, x, h)
    for got, want, name in ((cache[0], want_k, "keys"), (cache[1], want_v, "values")):
        checks.expect_tensor(got, name=f"the cached {name}", shape=tuple(want.shape), dtype=F64)
        checks.assert_close(got, want, name=f"the cached {name} after 3 + 1 + 2 tokens, (B, h, T_past, d_h): every "
                                             "position's, in order (append the new ones after the cached ones)")
    plain = s_mod.call(x).output  # use_cache=False: the full pass, and the cache untouched
    checks.assert_close(plain, causal_attention_expected(state, x, h),
                        name="forward(x) without use_cache after the cache was filled (it must ignore the cache)")
    after = s_mod.attr("cache")
    assert isinstance(after, (tuple, list)) and after[0].shape == want_k.shape, (
        "forward(x) with use_cache=False changed self.cache: leave it as it is")


def gpt_cached_logits(s_mod, idx: torch.Tensor, chunks: tuple[int, ...], full: torch.Tensor) -> None:
    start = 0
    for n in chunks:
        got = s_mod.call(idx[:, start:start + n], use_cache=True).output[0]
        checks.assert_close(got, full[:, start:start + n],
                            name=f"MiniGPT(idx[:, {start}:{start + n}], use_cache=True) after {start} cached tokens: "
                                 f"the positions are {start} .. {start + n - 1} (start at cache_length()), "
                                 "and use_cache goes on to every block")
        start += n


@suite.test(GPT, points=3)
def gpt_cache_positions_continue(student, ref, rng):
    s_mod, r_mod = gpt_pair(student, ref, rng, *GPT_SMALL)
    idx = torch.randint(13, (3, 8), generator=rng)
    full = r_mod.call(idx).output[0]  # the reference, without the cache
    first = randint(rng, 2, 4)
    gpt_cached_logits(s_mod, idx, (first,) + (1,) * (7 - first) + (1,), full)
    length = s_mod.call(method="cache_length").output
    assert length == 8, f"after 8 tokens fed with use_cache=True, cache_length() is {length}"
    checks.expect_student_error(lambda: s_mod.call(idx[:, :1], use_cache=True), "ValueError",
                         what="MiniGPT(1 token, use_cache=True) with 8 cached and block_size=8", mentions=("8",))
    s_mod.call(method="reset_cache")
    gpt_cached_logits(s_mod, idx, (1, 2, 5), full)


def assert_same_tokens(got: torch.Tensor, want: torch.Tensor, what: str,
                       expected: str = "the tokens of use_cache=False") -> None:
    if not torch.equal(got, want):
        row, col = (got != want).nonzero()[0].tolist()
        raise AssertionError(f"{what}: token {col} of row {row} is {int(got[row, col])}, expected "
                             f"{int(want[row, col])} ({expected}), also once the text is longer than "
                             "block_size, where the model may only see the last block_size tokens")


# The cache tests grade generate on the model it is given: their expected tokens and feeds come from the contract's
# loop with the cache (``cached_greedy_expected``, the reference's generate), run by the grader on the student's own
# model before generate runs. A model whose cached passes differ from its full ones, or whose cache_length() stays 0
# (a CausalSelfAttention or MiniGPT that ignores use_cache), costs its own question's points, not generate's a second
# time: a correct generate gets these tokens and these feeds from that model.
CACHED = "the tokens the model gives with the cache, fed as the contract says"


def cache_length(s_mod) -> int:
    """The model's ``cache_length()``, which generate decides with: an int (or a one-number tensor)."""
    length = s_mod.call(method="cache_length").output
    try:
        return int(length.item() if isinstance(length, torch.Tensor) else length)
    except (TypeError, ValueError, RuntimeError):
        raise AssertionError(f"cache_length() of MiniGPT returned {repr(length)[:60]}, expected an int") from None


def cached_greedy_expected(s_mod, idx: torch.Tensor, new: int, block_size: int) -> tuple[torch.Tensor, list[int]]:
    """idx (B, T0) followed by ``new`` argmax tokens of the model with its cache, and the tokens fed at each step, by
    the contract: the cache emptied first, the cropped prompt, then the one token just drawn, and the cropped context
    again (the cache emptied) whenever the model's ``cache_length()`` says the next token would not fit; the cache
    emptied at the end."""
    s_mod.call(method="reset_cache")
    out, feeds = idx, []
    feed = idx[:, -block_size:]  # (B, <= block_size)
    for _ in range(new):
        if cache_length(s_mod) + feed.shape[1] > block_size:  # full: the window slides, the cache is refilled
            s_mod.call(method="reset_cache")
            feed = out[:, -block_size:]
        feeds.append(feed.shape[1])
        logits = s_mod.call(feed, use_cache=True).output[0]
        checks.expect_tensor(logits, name="the logits of MiniGPT(idx, use_cache=True)",
                             shape=(*feed.shape, logits.shape[-1]), dtype=F64)
        out = torch.cat([out, logits[:, -1].argmax(-1)[:, None]], dim=1)  # (B, T + 1)
        feed = out[:, -1:]  # (B, 1): the token just drawn
    s_mod.call(method="reset_cache")
    return out, feeds


def assert_cache_emptied(s_mod, what: str) -> None:
    """The contract: generate empties the cache at the end (whatever the sampled tokens, so at every seed)."""
    length = s_mod.call(method="cache_length").output
    assert length == 0, (f"after {what}, cache_length() is {length}: generate must empty the model's cache at the "
                         "end (and at the start: the model may hold another call's cache)")


def fed(call) -> tuple | None:
    """One recorded forward call (from the student's process: its form is checked) as (shape of idx, use_cache)."""
    args, kwargs = (call.get("args"), call.get("kwargs")) if isinstance(call, dict) else (None, None)
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return None
    idx = args[0] if args else kwargs.get("idx")
    use_cache = kwargs.get("use_cache", args[2] if len(args) > 2 else False)
    shape = idx.get("tensor") if isinstance(idx, dict) else None
    return (shape, use_cache) if isinstance(shape, list) else None


def generate_fed_only_new(student, s_mod, idx, new: int, block_size: int, want: list[int], **kwargs):
    """generate(model, idx, new, use_cache=True, ...) with the model's forward calls recorded (in the student's
    process: evidence of what the code did); the calls must feed only the tokens the cache lacks. Returns the output,
    for the caller to check the tokens first."""
    s_mod.record_forward()
    out = call_generate(student, s_mod, idx, new, use_cache=True, **kwargs)
    calls = [fed(call) for call in s_mod.forward_calls()]
    if not calls:  # the tokens came right without the model's forward attribute (``MiniGPT.forward(model, ...)``
        return out, (True, "")  # through the class): no evidence of the feeding either way, and none held against it
    b = idx.shape[0]
    assert all(c is not None and c[1] is True for c in calls), (
        f"generate(model, idx, {new}, use_cache=True) called the model without use_cache=True (or not as "
        "model(idx, use_cache=True)): with the cache, every call of the model passes use_cache=True")
    got = [c[0][1] if len(c[0]) == 2 and c[0][0] == b else tuple(c[0]) for c in calls]
    return out, (got == want, (f"generate(model, idx of {idx.shape[1]} tokens, {new}, use_cache=True) with "
                               f"block_size={block_size} fed the model T = {got[:16]} tokens per call, expected "
                               f"{want[:16]}: with the cache, feed only the tokens the cache lacks (the cropped prompt, "
                               "then the token just drawn), and the cropped context idx[:, -block_size:] only when the "
                               "cache is full: emptying the cache and feeding the whole context at every step gives "
                               "the right tokens but none of the cache's savings"))


@suite.test(GEN, points=2)
def generate_cache_greedy_past_block_size(student, ref, rng):
    block_size = randint(rng, 4, 7)
    s_mod, idx, want, feeds = sliding_case(student, ref, rng, block_size, cached=True)
    long_prompt = torch.randint(12, (2, block_size + randint(rng, 1, 4)), generator=rng)
    want_long, _ = cached_greedy_expected(s_mod, long_prompt, 3, block_size)
    # first a short call that leaves 1 position in a cache nobody empties (1 + the 3-token prompt <= block_size)
    call_generate(student, s_mod, idx[:, :1], 1, temperature=0.0, use_cache=True)
    assert_cache_emptied(s_mod, "generate(model, idx[:, :1], 1, use_cache=True)")
    s_mod.call(idx[:, :1], use_cache=True)  # a cache left by someone else: generate must empty it first
    for _ in range(2):  # twice on the same model: a cache left by the first call must not leak into the second
        out, (fed_ok, fed_message) = generate_fed_only_new(student, s_mod, idx, block_size + 5, block_size, feeds,
                                                           temperature=0.0)
        assert_same_tokens(out, want, f"generate(model, idx, {block_size + 5}, temperature=0, use_cache=True) with "
                                      f"block_size={block_size}", CACHED)
        assert_cache_emptied(s_mod, f"generate(model, idx, {block_size + 5}, use_cache=True)")
        assert fed_ok, fed_message
    out = call_generate(student, s_mod, long_prompt, 3, temperature=0.0, use_cache=True)
    assert_same_tokens(out, want_long, f"generate(a prompt of {long_prompt.shape[1]} tokens, block_size={block_size}, "
                                       "use_cache=True): crop the prompt to idx[:, -block_size:] first", CACHED)


@suite.test(GEN, points=1)
def generate_cache_same_samples(student, ref, rng):
    block_size = randint(rng, 5, 8)
    s_mod = gen_model(student, ref, rng, 9, block_size)
    idx = torch.randint(9, (6, 2), generator=rng)
    seed = randint(rng, 0, 2**30)
    consistent = cache_consistent(s_mod, idx, torch.randint(9, (6, 3), generator=rng))
    _, feeds = cached_greedy_expected(s_mod, idx, 2 * block_size, block_size)  # the feeds do not depend on the tokens
    plain = call_generate(student, s_mod, idx, 2 * block_size, temperature=1.0,
                          generator=torch.Generator().manual_seed(seed))
    cached, (fed_ok, fed_message) = generate_fed_only_new(student, s_mod, idx, 2 * block_size, block_size, feeds,
                                                          temperature=1.0, generator=torch.Generator().manual_seed(seed))
    if consistent:  # a model whose cached passes differ samples otherwise with the cache, whatever generate does
        assert_same_tokens(cached, plain, f"generate(..., temperature=1, use_cache=True) with the same generator "
                                          f"seed, block_size={block_size}")
    assert fed_ok, fed_message


def cache_consistent(s_mod, idx: torch.Tensor, tokens: torch.Tensor) -> bool:
    """Whether the model's cached passes give its full pass's logits (float64, to 1e-9): idx (B, T0) fed with the
    cache, then each of ``tokens`` (B, n) one at a time, against idx and tokens fed whole. Run before generate, the
    cache emptied after."""
    s_mod.call(method="reset_cache")
    steps = [s_mod.call(idx, use_cache=True).output[0][:, -1]]
    steps += [s_mod.call(tokens[:, i:i + 1], use_cache=True).output[0][:, -1] for i in range(tokens.shape[1])]
    s_mod.call(method="reset_cache")
    full = s_mod.call(torch.cat([idx, tokens], dim=1)).output[0]
    try:
        return all(bool(torch.allclose(step, full[:, idx.shape[1] - 1 + i], rtol=1e-9, atol=1e-9))
                   for i, step in enumerate(steps))
    except (TypeError, RuntimeError, IndexError):  # odd shapes: MiniGPT's own tests say so; not consistent here
        return False
