"""Hidden tests of Lab 02 (Word2Vec and friends), written against the narrow interface.

Every test compares the student's answer with the reference (or with values computed here in float64) on
inputs drawn from ``rng`` only, so a blank notebook scores 0. Questions and points (34 in all):

    skipgram_pairs       4
    noise_distribution   2
    SkipGramNS           6
    skipgram_ns_grads    4
    CBOWNS               5
    most_similar         4
    analogy              3
    char_ngrams          3
    glove_loss           3

Choices the lab states (and these tests hold it to): pad id 0 in ``ids`` is never a center nor a context,
and positions count as in ``ids`` (a pad in the middle is a gap); ``window < 1`` raises ValueError;
integer counts give float32 noise, floating counts keep their dtype; cosine on ``F.normalize``d rows (a
zero row has cosine 0); equal scores are ordered by id, lower first; ``analogy`` uses unit vectors;
``char_ngrams`` keeps repeats, ordered by n then position; ``glove_loss`` is a sum and ``x_ij > 0``.
"""

from __future__ import annotations

import math

import torch

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import padded_ids, randint, randn, random_lengths
from attnlab.grading.policy import forbidden_calls

suite = HiddenSuite("lab02_word2vec")

F32, F64 = torch.float32, torch.float64


# ------------------------------------------------------------------------------------------------ helpers
def pairs_by_hand(ids: list[int], window: int) -> torch.Tensor:
    """The pairs of the contract, by a plain double loop (independent of the reference)."""
    out = [[ids[i], ids[j]] for i in range(len(ids)) for j in range(len(ids))
           if 0 < abs(i - j) <= window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)


def check_pairs(student, ids: torch.Tensor, window: int, what: str) -> None:
    got = student.call("skipgram_pairs", ids, window).output
    expected = pairs_by_hand(ids.tolist(), window)
    name = f"skipgram_pairs({what}, window={window})"
    checks.expect_tensor(got, name=name, dtype=torch.long)
    assert tuple(got.shape) == tuple(expected.shape), (
        f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)} "
        f"({len(expected)} pairs: every 0 < |i - j| <= window, no pad at either end)")
    checks.assert_close(got, expected, name=f"{name} (ordered by center position, then context position)")


def random_sentence(rng, length: int, vocab: int = 30) -> torch.Tensor:
    return torch.randint(1, vocab, (length,), generator=rng)


# ----------------------------------------------------------------------------------------- skipgram_pairs
@suite.test("skipgram_pairs", points=1.0)
def pairs_windows_and_edges(student, ref, rng):
    ids = random_sentence(rng, randint(rng, 6, 10))
    for window in (1, 2, 3):
        check_pairs(student, ids, window, f"a sentence of {len(ids)} words")
    check_pairs(student, ids[:3], 5, "a sentence of 3 words, shorter than the window")
    check_pairs(student, ids[:2], 1, "a sentence of 2 words")


@suite.test("skipgram_pairs", points=1.0)
def pairs_padding_never_paired(student, ref, rng):
    length = randint(rng, 4, 7)
    ids = torch.cat([random_sentence(rng, length), torch.zeros(randint(rng, 2, 5), dtype=torch.long)])
    for window in (1, 2, 4):
        check_pairs(student, ids, window, f"{length} words then {len(ids) - length} pads")
    middle = random_sentence(rng, 9)
    middle[[2, 5]] = 0  # removed words: gaps, not joins
    for window in (1, 2, 3):
        check_pairs(student, middle, window, f"{middle.tolist()} (pads in the middle)")


@suite.test("skipgram_pairs", points=0.5)
def pairs_none_at_all(student, ref, rng):
    for ids, what in ((random_sentence(rng, 1), "one word"), (torch.zeros(4, dtype=torch.long), "only pads"),
                      (torch.tensor([0, randint(rng, 1, 9), 0, 0]), "one word among pads")):
        check_pairs(student, ids, 2, what)


@suite.test("skipgram_pairs", points=1.0)
def pairs_long_random_sentence(student, ref, rng):
    ids = random_sentence(rng, 40, vocab=8)
    ids[torch.rand(40, generator=rng) < 0.2] = 0
    window = randint(rng, 2, 6)
    checks.compare_call(student, ref, "skipgram_pairs", ids, window)
    check_pairs(student, ids, window, "a sentence of 40 words with random pads")


@suite.test("skipgram_pairs", points=0.5)
def pairs_window_below_one_rejected(student, ref, rng):
    check_pairs(student, torch.tensor([3, 4]), 1, "[3, 4]")
    bad = -randint(rng, 1, 9)
    for window in (0, bad):
        checks.expect_student_error(lambda w=window: student.call("skipgram_pairs", torch.tensor([3, 4, 5]), w),
                             "ValueError", what=f"skipgram_pairs(ids, window={window})", mentions=(str(window),))


# ------------------------------------------------------------------------------------- noise_distribution
def noise_by_hand(counts: torch.Tensor, power: float) -> torch.Tensor:
    w = counts.to(F64) ** power
    return w / w.sum()


@suite.test("noise_distribution", points=1.0)
def noise_integer_counts_against_formula(student, ref, rng):
    counts = torch.randint(0, 1000, (50,), generator=rng)
    counts[[3, 17]] = 0  # unseen words: probability 0
    for power in (0.75, 1.0, 0.5):
        got = student.call("noise_distribution", counts, power=power).output
        name = f"noise_distribution(integer counts, power={power})"
        checks.expect_tensor(got, name=name, shape=(50,), dtype=F32)
        checks.assert_close(got.to(F64), noise_by_hand(counts, power), name=f"{name} (count^power / sum)",
                            rtol=1e-5, atol=1e-8)
    got = student.call("noise_distribution", counts).output  # the default power
    checks.assert_close(got.to(F64), noise_by_hand(counts, 0.75), name="noise_distribution(counts) (power=0.75 by default)",
                        rtol=1e-5, atol=1e-8)
    checks.assert_close(got[[3, 17]], torch.zeros(2), name="the probability of words with count 0")


@suite.test("noise_distribution", points=0.5)
def noise_float64_counts_keep_dtype(student, ref, rng):
    counts = torch.rand(30, generator=rng, dtype=F64) * 100
    checks.compare_call(student, ref, "noise_distribution", counts)
    checks.compare_call(student, ref, "noise_distribution", counts, 0.5)
    got = student.call("noise_distribution", counts).output
    checks.assert_close(got.sum(), torch.tensor(1.0, dtype=F64), name="the sum of noise_distribution(float64 counts)")


@suite.test("noise_distribution", points=0.5)
def noise_huge_counts(student, ref, rng):
    # corpus-sized counts: a billion occurrences of a word
    counts = torch.randint(1, 10**6, (20,), generator=rng) * 1000
    counts[0] = 10**9
    got = student.call("noise_distribution", counts).output
    checks.expect_tensor(got, name="noise_distribution(huge counts)", shape=(20,), dtype=F32)
    checks.assert_close(got.to(F64), noise_by_hand(counts, 0.75), name="noise_distribution(huge counts)",
                        rtol=1e-5, atol=1e-9)


# --------------------------------------------------------------------------------------------- SkipGramNS
def sgns_by_hand(state: dict, center, context, negatives) -> torch.Tensor:
    """The loss in float64 from the loaded weights: -mean[log s(u_o.v_c) + sum_k log s(-u_k.v_c)]."""
    v_in, u_out = state["in_embed.weight"].to(F64), state["out_embed.weight"].to(F64)
    v = v_in[center]  # (B, D)
    pos = torch.nn.functional.logsigmoid((u_out[context] * v).sum(-1))  # (B,)
    neg = torch.nn.functional.logsigmoid(-(u_out[negatives] * v[:, None, :]).sum(-1)).sum(-1)  # (B,)
    return -(pos + neg).mean()


def sgns_inputs(rng, vocab: int, batch: int, k: int):
    center = torch.randint(0, vocab, (batch,), generator=rng)
    context = torch.randint(0, vocab, (batch,), generator=rng)
    negatives = torch.randint(0, vocab, (batch, k), generator=rng)
    return center, context, negatives


@suite.test("SkipGramNS", points=2.0)
def sgns_float64_loss_and_grads(student, ref, rng):
    vocab, dim = 13, 6
    s_mod, r_mod = checks.build_pair(student, ref, "SkipGramNS", vocab, dim, rng=rng, dtype=F64, scale=0.7)
    center, context, negatives = sgns_inputs(rng, vocab, 7, 4)
    s, _ = checks.compare_module_call(s_mod, r_mod, center, context, negatives, grad=True, rng=rng)
    expected = sgns_by_hand(r_mod.state_dict(), center, context, negatives)
    checks.assert_close(s.output.reshape(()), expected, name="the loss against the formula "
                        "-mean_b[log s(u_o . v_c) + sum_k log s(-u_k . v_c)] (in_embed: centers, out_embed: the rest)")


@suite.test("SkipGramNS", points=1.0)
def sgns_batch_equal_to_k(student, ref, rng):
    # B == K: u_neg * v (without v[:, None]) broadcasts silently and pairs negative k with center k
    vocab, dim = 11, 5
    s_mod, r_mod = checks.build_pair(student, ref, "SkipGramNS", vocab, dim, rng=rng, dtype=F64, scale=0.7)
    center, context, negatives = sgns_inputs(rng, vocab, 4, 4)
    checks.compare_module_call(s_mod, r_mod, center, context, negatives, grad=True, rng=rng,
                               name="SkipGramNS with a batch of 4 and 4 negatives each")


@suite.test("SkipGramNS", points=1.0)
def sgns_float32_repeated_ids_and_positional(student, ref, rng):
    vocab, dim = 9, 8
    s_mod, r_mod = checks.build_pair(student, ref, "SkipGramNS", vocab, dim, rng=rng, dtype=F32)
    center, context, negatives = sgns_inputs(rng, vocab, 16, 3)
    center[:4] = context[:4]  # a word as its own context, repeated ids: gradients must add up
    checks.compare_module_call(s_mod, r_mod, center, context, negatives, grad=True, rng=rng)


@suite.test("SkipGramNS", points=1.0)
def sgns_one_negative_and_batch_of_one(student, ref, rng):
    vocab, dim = 7, 3
    s_mod, r_mod = checks.build_pair(student, ref, "SkipGramNS", vocab, dim, rng=rng, dtype=F64)
    for batch, k in ((1, 1), (1, 6), (5, 1)):
        center, context, negatives = sgns_inputs(rng, vocab, batch, k)
        checks.compare_module_call(s_mod, r_mod, center, context, negatives, grad=True, rng=rng,
                                   name=f"SkipGramNS with B={batch}, K={k}")


@suite.test("SkipGramNS", points=1.0)
def sgns_huge_dot_products_stay_finite(student, ref, rng):
    # dot products of several hundred: log(sigmoid(x)) gives -inf in float32, F.logsigmoid does not
    vocab, dim = 10, 4
    s_mod, r_mod = checks.build_pair(student, ref, "SkipGramNS", vocab, dim, rng=rng, dtype=F32, scale=12.0)
    center, context, negatives = sgns_inputs(rng, vocab, 6, 5)
    checks.compare_module_call(s_mod, r_mod, center, context, negatives, grad=True, rng=rng,
                               name="SkipGramNS with dot products of several hundred (float32)")


# -------------------------------------------------------------------------------------- skipgram_ns_grads
# Autograd in any form would answer the question without the derivation.
AUTOGRAD = ["autograd", "backward", "grad", "vjp", "jvp", "jacrev", "jacfwd", "jacobian", "func"]
AUTOGRAD_WHY = ("skipgram_ns_grads asks for the gradients by hand: torch.autograd, .backward() and torch.func "
                "are not allowed in the graded cells")


def sgns_grads_by_autograd(v_c, u_o, u_neg):
    """The three gradients of one example's loss, by autograd in float64 (independent of the reference)."""
    leaves = [t.detach().to(F64).requires_grad_() for t in (v_c, u_o, u_neg)]
    loss = -(torch.nn.functional.logsigmoid(leaves[1] @ leaves[0])
             + torch.nn.functional.logsigmoid(-(leaves[2] @ leaves[0])).sum())
    return tuple(g.to(v_c.dtype) for g in torch.autograd.grad(loss, leaves))


def check_grads(student, ref, v_c, u_o, u_neg, what: str):
    s, _ = checks.compare_call(student, ref, "skipgram_ns_grads", v_c, u_o, u_neg)
    names = ("grad_v_c", "grad_u_o", "grad_u_neg")
    output = s.output
    assert isinstance(output, (tuple, list)) and len(output) == 3, (
        f"skipgram_ns_grads should return the three gradients {names}, got {type(output).__name__}")
    for name, got, want in zip(names, output, sgns_grads_by_autograd(v_c, u_o, u_neg)):
        checks.assert_close(got, want, name=f"{name} {what}, compared with autograd")


@suite.test("skipgram_ns_grads", points=1.5)
def grads_float64_against_autograd(student, ref, rng):
    d, k = 5, 4
    check_grads(student, ref, randn(rng, d), randn(rng, d), randn(rng, k, d), "(float64, D=5, K=4)")
    forbidden_calls.assert_not_used(student, AUTOGRAD, why=AUTOGRAD_WHY)


@suite.test("skipgram_ns_grads", points=1.0)
def grads_float32_one_negative(student, ref, rng):
    d = randint(rng, 2, 6)
    check_grads(student, ref, randn(rng, d, dtype=F32), randn(rng, d, dtype=F32), randn(rng, 1, d, dtype=F32),
                f"(float32, D={d}, K=1)")


@suite.test("skipgram_ns_grads", points=1.0)
def grads_known_answer_one_dimension(student, ref, rng):
    # D = 1: every score is a product of two numbers, and the formulas give the answer directly
    v, u_o, u_k = (float(x) for x in randn(rng, 3, scale=1.5))
    s_o, s_k = u_o * v, u_k * v
    d_o, d_k = -1 / (1 + math.exp(s_o)), 1 / (1 + math.exp(-s_k))  # sigma(s_o) - 1, sigma(s_k)
    expected = (torch.tensor([d_o * u_o + d_k * u_k], dtype=F64), torch.tensor([d_o * v], dtype=F64),
                torch.tensor([[d_k * v]], dtype=F64))
    got = student.call("skipgram_ns_grads", torch.tensor([v], dtype=F64), torch.tensor([u_o], dtype=F64),
                       torch.tensor([[u_k]], dtype=F64)).output
    checks.compare_values(got, expected, name=f"skipgram_ns_grads(v_c=[{v:.3f}], u_o=[{u_o:.3f}], "
                                              f"u_neg=[[{u_k:.3f}]]), one dimension, against the answer by hand")


@suite.test("skipgram_ns_grads", points=0.5)
def grads_large_scores_of_both_signs(student, ref, rng):
    d, k = 4, 6
    check_grads(student, ref, randn(rng, d, scale=4.0), randn(rng, d, scale=4.0), randn(rng, k, d, scale=4.0),
                "(scores of several tens, both signs)")


# ------------------------------------------------------------------------------------------------- CBOWNS
def cbow_by_hand(state: dict, contexts, target, negatives) -> torch.Tensor:
    """The loss in float64 from the loaded weights, h the mean of the real (non-pad) context vectors."""
    v_in, u_out = state["in_embed.weight"].to(F64), state["out_embed.weight"].to(F64)
    real = (contexts != 0).to(F64)  # (B, C)
    h = (v_in[contexts] * real[..., None]).sum(1) / real.sum(1, keepdim=True)  # (B, D)
    pos = torch.nn.functional.logsigmoid((u_out[target] * h).sum(-1))
    neg = torch.nn.functional.logsigmoid(-(u_out[negatives] * h[:, None, :]).sum(-1)).sum(-1)
    return -(pos + neg).mean()


def cbow_inputs(rng, vocab: int, batch: int, width: int, k: int):
    contexts = padded_ids(rng, random_lengths(rng, batch, width), width, vocab)  # (B, C), one full, one of 1
    target = torch.randint(1, vocab, (batch,), generator=rng)
    negatives = torch.randint(1, vocab, (batch, k), generator=rng)
    return contexts, target, negatives


@suite.test("CBOWNS", points=2.0)
def cbow_float64_padded_loss_and_grads(student, ref, rng):
    vocab, dim = 14, 5
    s_mod, r_mod = checks.build_pair(student, ref, "CBOWNS", vocab, dim, rng=rng, dtype=F64, scale=0.7)
    contexts, target, negatives = cbow_inputs(rng, vocab, 6, 4, 3)
    s, _ = checks.compare_module_call(s_mod, r_mod, contexts, target, negatives, grad=True, rng=rng)
    expected = cbow_by_hand(r_mod.state_dict(), contexts, target, negatives)
    checks.assert_close(s.output.reshape(()), expected, name="the loss against the formula, h the mean of the "
                        "real context vectors (the pads, id 0, left out)")


@suite.test("CBOWNS", points=1.0)
def cbow_batch_equal_to_k(student, ref, rng):
    vocab, dim = 10, 4
    s_mod, r_mod = checks.build_pair(student, ref, "CBOWNS", vocab, dim, rng=rng, dtype=F64, scale=0.7)
    contexts, target, negatives = cbow_inputs(rng, vocab, 3, 6, 3)
    checks.compare_module_call(s_mod, r_mod, contexts, target, negatives, grad=True, rng=rng,
                               name="CBOWNS with a batch of 3 and 3 negatives each")


@suite.test("CBOWNS", points=1.0)
def cbow_float32_no_padding_and_batch_of_one(student, ref, rng):
    vocab, dim = 9, 6
    s_mod, r_mod = checks.build_pair(student, ref, "CBOWNS", vocab, dim, rng=rng, dtype=F32)
    contexts = torch.randint(1, vocab, (5, 4), generator=rng)
    target, negatives = torch.randint(1, vocab, (5,), generator=rng), torch.randint(1, vocab, (5, 2), generator=rng)
    checks.compare_module_call(s_mod, r_mod, contexts, target, negatives, grad=True, rng=rng)
    checks.compare_module_call(s_mod, r_mod, contexts[:1, :1], target[:1], negatives[:1], grad=True, rng=rng,
                               name="CBOWNS with one example of one context word")


@suite.test("CBOWNS", points=1.0)
def cbow_huge_dot_products_stay_finite(student, ref, rng):
    vocab, dim = 8, 4
    s_mod, r_mod = checks.build_pair(student, ref, "CBOWNS", vocab, dim, rng=rng, dtype=F32, scale=12.0)
    contexts, target, negatives = cbow_inputs(rng, vocab, 5, 3, 4)
    checks.compare_module_call(s_mod, r_mod, contexts, target, negatives, grad=True, rng=rng,
                               name="CBOWNS with dot products of several hundred (float32)")


# ------------------------------------------------------------------------------------------- most_similar
def with_ties(rng, vocab: int, dim: int, dtype=F64) -> torch.Tensor:
    """Small-integer rows with exact copies (ties), a zero row (a pad never trained) and axis rows.

    Row 3 is e_0, row 6 is 2 e_1, row 12 is e_1: against an axis direction every cosine is r_0 / |r| computed
    from exact integers, so equal scores are equal bit for bit in every correct implementation (random float
    rows could differ in the last bit between a matrix product and a loop).
    """
    emb = torch.randint(-2, 3, (vocab, dim), generator=rng).to(dtype)
    emb[[2, 5, 9, 11]] = emb[7].clone()  # four copies of row 7
    emb[0] = 0.0
    emb[3] = 0.0
    emb[3, 0] = 1.0
    emb[6] = 0.0
    emb[6, 1] = 2.0
    emb[12] = 0.0
    emb[12, 1] = 1.0
    emb[[1, 8]] = emb[3].clone()  # copies of the query direction e_0
    return emb


@suite.test("most_similar", points=1.5)
def similar_random_float64(student, ref, rng):
    emb = randn(rng, 25, 6)
    for query in (0, randint(rng, 1, 23), 24):
        checks.compare_call(student, ref, "most_similar", emb, query, 5)
    checks.compare_call(student, ref, "most_similar", emb, 3, 24)  # k = V - 1: every other word


@suite.test("most_similar", points=1.0)
def similar_ties_lower_id_first(student, ref, rng):
    emb = with_ties(rng, 14, 4)
    for query in (3, 6, 12):  # axis queries: rows 2, 5, 7, 9, 11 tie exactly, and so do many others
        checks.compare_call(student, ref, "most_similar", emb, query, 13)
    # the query has copies (rows 1 and 8 equal row 3): they come first, cosine 1, lower id first
    checks.compare_call(student, ref, "most_similar", emb, 8, 4)


@suite.test("most_similar", points=1.0)
def similar_query_excluded_float32(student, ref, rng):
    emb = randn(rng, 30, 8, dtype=F32)
    query = randint(rng, 0, 29)
    checks.compare_call(student, ref, "most_similar", emb, query, 10)
    ids = student.call("most_similar", emb, query, 29).output[0]
    assert query not in ids.tolist(), f"most_similar(emb, {query}, 29) returned the query itself: exclude it"


@suite.test("most_similar", points=0.5)
def similar_zero_row_cosine_zero(student, ref, rng):
    emb = randn(rng, 8, 3)
    emb[0] = 0.0  # the pad row: cosine 0 with everything, not nan
    checks.compare_call(student, ref, "most_similar", emb, 4, 7)
    checks.compare_call(student, ref, "most_similar", emb, 0, 3)


# ------------------------------------------------------------------------------------------------ analogy
def query_word_among_best(emb: torch.Tensor, a: int, b: int, c: int, k: int) -> bool:
    """Whether a or b is among the k best words for b^ - a^ + c^ when only c is excluded: a draw on which
    excluding all three query words shows."""
    unit = emb / emb.norm(dim=-1, keepdim=True)
    scores = unit @ (unit[b] - unit[a] + unit[c])  # the target's length does not change the order
    scores[c] = float("-inf")
    best = torch.sort(scores, descending=True, stable=True).indices[:k].tolist()
    return a in best or b in best


def compare_analogy(student, ref, emb: torch.Tensor, a: int, b: int, c: int, **kwargs) -> None:
    """``analogy`` against the reference; a failure names the call and any query word the answer holds."""
    shown = "".join(f", {key}={value}" for key, value in kwargs.items())
    try:
        checks.compare_call(student, ref, "analogy", emb, a, b, c, **kwargs)
    except AssertionError as exc:
        got = student.call("analogy", emb, a, b, c, **kwargs).output
        ids = got.tolist() if isinstance(got, torch.Tensor) and got.dim() == 1 else []
        held = [f"{name} = {word}" for name, word in (("a", a), ("b", b), ("c", c)) if word in ids]
        raise AssertionError(f"analogy(emb, {a}, {b}, {c}{shown}) against the reference: {exc}"
                             + (f"; your answer holds the query word(s) {', '.join(held)}: a, b and c are all excluded"
                                if held else "")) from None


@suite.test("analogy", points=1.5)
def analogy_random_float64(student, ref, rng):
    emb = randn(rng, 30, 5) * torch.rand(30, 1, generator=rng, dtype=F64).mul(3).add(0.2)  # various lengths
    for _ in range(3):
        a, b, c = torch.randperm(30, generator=rng)[:3].tolist()
        compare_analogy(student, ref, emb, a, b, c, k=5)
        compare_analogy(student, ref, emb, a, b, c)  # k=1 by default
    # and one draw where a or b would be among the 5 best if it were not excluded (most draws, not always the above)
    for _ in range(200):
        a, b, c = torch.randperm(30, generator=rng)[:3].tolist()
        if query_word_among_best(emb, a, b, c, 5):
            break
    compare_analogy(student, ref, emb, a, b, c, k=5)


@suite.test("analogy", points=1.0)
def analogy_excludes_a_b_c(student, ref, rng):
    # b - a + c lies on a, b or c here: without the exclusions one of them wins
    emb = randn(rng, 12, 4, dtype=F32)
    emb[4] = emb[2] * 5.0  # b = 4 is a long copy of c = 2 ...
    compare_analogy(student, ref, emb, 6, 4, 2, k=9)  # k = V - 3: every other word once
    other = randn(rng, 12, 4, dtype=F32)  # no parallel rows but c's: rows 2 and 4 above tie up to rounding
    c_row = other[8]
    other[0] = c_row * 0.01  # a short copy of c: the best cosine (1), a small dot product
    off_c = other[1] - (other[1] @ c_row) / (c_row @ c_row) * c_row  # (4,) orthogonal to c
    other[1] = c_row * 2.0 + off_c  # long, at an angle to c: a smaller cosine, a larger dot product
    compare_analogy(student, ref, other, 3, 3, 8, k=3)  # a == b: the target is c itself


@suite.test("analogy", points=0.5)
def analogy_ties_lower_id_first(student, ref, rng):
    emb = with_ties(rng, 15, 3)
    # unit vectors a = e_1 (row 12), b = e_0 (row 3), c = e_1 (row 6, 2 e_1): the target is exactly e_0
    compare_analogy(student, ref, emb, 12, 3, 6, k=12)


# -------------------------------------------------------------------------------------------- char_ngrams
def ngrams_by_hand(word: str, n_min: int, n_max: int) -> list[str]:
    w = "<" + word + ">"
    return [w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1)]


def check_ngrams(student, word: str, *args, **kwargs) -> None:
    n_min, n_max = (list(args) + [kwargs.get("n_min", 3), kwargs.get("n_max", 6)][len(args):])[:2]
    got = student.call("char_ngrams", word, *args, **kwargs).output
    expected = ngrams_by_hand(word, n_min, n_max)
    call = ", ".join([repr(word)] + [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    name = f"char_ngrams({call})"
    assert isinstance(got, list) and all(isinstance(g, str) for g in got), (
        f"{name} should return a list of str, got {type(got).__name__}")
    if got != expected:
        if sorted(got) == sorted(expected):
            raise AssertionError(f"{name} has the right n-grams in the wrong order: by n first, then by position; "
                                 f"expected {expected[:12]}{' ...' if len(expected) > 12 else ''}")
        first = next((i for i, (a, e) in enumerate(zip(got, expected)) if a != e), min(len(got), len(expected)))
        raise AssertionError(f"{name} gives {len(got)} n-grams, expected {len(expected)}; the first difference at "
                             f"index {first}: yours {got[first] if first < len(got) else 'nothing'!r}, expected "
                             f"{expected[first] if first < len(expected) else 'nothing'!r}")


@suite.test("char_ngrams", points=1.0)
def ngrams_defaults_and_order(student, ref, rng):
    letters = "abcdefghijklmnopqrstuvwxyz"
    word = "".join(letters[int(i)] for i in torch.randint(0, 26, (randint(rng, 5, 11),), generator=rng))
    for w in ("where", "skateboarders", word):
        check_ngrams(student, w)


@suite.test("char_ngrams", points=1.0)
def ngrams_other_ranges(student, ref, rng):
    check_ngrams(student, "running", 2, 4)
    check_ngrams(student, "running", n_min=1, n_max=2)
    check_ngrams(student, "dog", 3, 3)
    check_ngrams(student, "dog", n_max=10)  # n_max longer than "<dog>": n-grams stop at the whole word
    check_ngrams(student, "café", 4, 5)


@suite.test("char_ngrams", points=1.0)
def ngrams_repeats_and_short_words(student, ref, rng):
    check_ngrams(student, "aaaa", 3, 3)
    check_ngrams(student, "banana")
    check_ngrams(student, "a")
    check_ngrams(student, "")
    check_ngrams(student, "ab", 3, 6)


# --------------------------------------------------------------------------------------------- glove_loss
def glove_inputs(rng, n: int, d: int, dtype=F64, huge: bool = False):
    w_i, w_j = randn(rng, n, d, dtype=dtype), randn(rng, n, d, dtype=dtype)
    b_i, b_j = randn(rng, n, dtype=dtype), randn(rng, n, dtype=dtype)
    x = torch.exp(torch.rand(n, generator=rng, dtype=F64) * 7).to(dtype)  # counts from 1 to about 1100
    x[0] = 0.5  # a weighted count below 1 (GloVe weights pairs by 1 / distance)
    if n > 2:
        x[1] = 100.0  # exactly x_max
    return w_i, w_j, b_i, b_j, x


def compare_glove(student, ref, args, rng, name: str, **kwargs) -> None:
    """Values, and gradients with respect to the vectors and biases (not the counts: they are data)."""
    r = ref.call("glove_loss", *args, **kwargs)
    gos = checks.random_like_outputs(r.output, rng)
    r = ref.call("glove_loss", *args, grad=True, grad_outputs=gos, **kwargs)
    s = student.call("glove_loss", *args, grad=True, grad_outputs=gos, **kwargs)
    checks.compare_values(s.output, r.output, name=name)
    assert not s.modified, f"{name} modified its input argument(s) {s.modified} in place; work on new tensors"
    for key, what in ((0, "w_i"), (1, "w_j"), (2, "b_i"), (3, "b_j")):
        got = s.grads.get(key)
        assert got is not None, f"the gradient of {name} with respect to {what} is missing (no .detach() or .item())"
        checks.assert_close(got, r.grads[key], name=f"the gradient of {name} with respect to {what}")


@suite.test("glove_loss", points=1.5)
def glove_float64_value_and_grads(student, ref, rng):
    args = glove_inputs(rng, 9, 5)
    compare_glove(student, ref, args, rng, "glove_loss (float64, default x_max and alpha)")
    w_i, w_j, b_i, b_j, x = args
    f = torch.clamp((x / 100.0) ** 0.75, max=1.0)
    expected = (f * ((w_i * w_j).sum(-1) + b_i + b_j - torch.log(x)) ** 2).sum()
    got = student.call("glove_loss", *args).output
    checks.assert_close(got.reshape(()), expected, name="glove_loss against sum f(x)(w_i . w_j + b_i + b_j - log x)^2")


@suite.test("glove_loss", points=1.0)
def glove_other_x_max_alpha(student, ref, rng):
    args = glove_inputs(rng, 6, 3)
    compare_glove(student, ref, args, rng, "glove_loss(..., x_max=10.0, alpha=0.5)", x_max=10.0, alpha=0.5)
    compare_glove(student, ref, args + (500.0, 1.0), rng,
                  "glove_loss with x_max=500.0 and alpha=1.0 as positional arguments")


@suite.test("glove_loss", points=0.5)
def glove_float32_one_pair(student, ref, rng):
    w_i, w_j, b_i, b_j, x = glove_inputs(rng, 12, 4, dtype=F32)
    compare_glove(student, ref, (w_i, w_j, b_i, b_j, x), rng, "glove_loss (float32)")
    one = (w_i[:1], w_j[:1], b_i[:1], b_j[:1], x[3:4])
    compare_glove(student, ref, one, rng, "glove_loss of a single pair (float32)")
