"""Lab 02 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` is run after the reference code and redefines one graded name. A mutant must lose
points on ``question``; a variant must keep full marks on every question.
"""

from attnlab.grading.core.mutants import MOST, PART, SLIP, Entry

_SGNS_POS = "pos = F.logsigmoid((self.out_embed(context) * v).sum(-1))"
_SGNS_NEG = "neg = F.logsigmoid(-(self.out_embed(negatives) * v[:, None, :]).sum(-1)).sum(-1)"


def _sgns(v: str = "v = self.in_embed(center)", pos: str = _SGNS_POS, neg: str = _SGNS_NEG,
          returns: str = "return -(pos + neg).mean()") -> str:
    """A SkipGramNS with the reference's two tables whose forward differs from a correct one only in the lines
    given: ``v``, the centers' vectors (B, D); ``pos`` and ``neg``, each example's log-sigmoid terms (B,);
    ``returns``."""
    return f'''
class SkipGramNS(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, dim)
        self.out_embed = nn.Embedding(vocab_size, dim)

    def forward(self, center, context, negatives):
        {v}
        {pos}
        {neg}
        {returns}
'''


# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # skipgram_pairs
    Entry("pairs_keep_pads", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids)) if 0 < abs(i - j) <= window]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "pairs every position, pads included",
          hint="your pairs include the pad id 0: leave out every pair whose center or context is 0", loses=MOST),
    Entry("pairs_window_exclusive", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids))
           if 0 < abs(i - j) < window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "|i - j| < window: the words exactly `window` away are missing",
          hint="you leave out the context words exactly `window` positions away: the condition is |i - j| <= window",
          loses=MOST),
    Entry("pairs_right_context_only", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(i + 1, min(len(ids), i + window + 1))
           if ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "only the words after the center are contexts",
          hint="you only pair a center with the words after it: the words before it (j < i) are contexts too", loses=MOST),
    Entry("pairs_ordered_by_offset", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    parts = []
    for d in list(range(-window, 0)) + list(range(1, window + 1)):
        if abs(d) >= len(ids):
            continue
        center = ids[max(0, -d):len(ids) - max(0, d)]
        context = ids[max(0, d):len(ids) - max(0, -d)]
        parts.append(torch.stack([center, context], dim=1))
    pairs = torch.cat(parts) if parts else torch.zeros(0, 2, dtype=torch.long)
    return pairs[(pairs != 0).all(dim=1)]
''', "vectorised by offset: the right pairs, ordered by offset instead of by center position",
          hint="you have the right pairs in the wrong order: sort them by center position first, then by context position",
          loses=MOST),
    Entry("pairs_drop_pads_first", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    ids = ids[ids != 0]
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids)) if 0 < abs(i - j) <= window]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "removes the pads first, so the words on both sides of a pad in the middle become neighbours",
          hint="you remove the pads before pairing, which joins the words on both sides of a pad in the middle: "
               "positions count as they are in ids", loses=PART),
    Entry("pairs_positions_not_ids", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    out = [[i, j] for i in range(len(ids)) for j in range(len(ids))
           if 0 < abs(i - j) <= window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "returns the positions (i, j) instead of the token ids",
          hint="you return the positions (i, j); return the token ids (ids[i], ids[j])", loses=MOST),
    Entry("pairs_include_self", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids))
           if abs(i - j) <= window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "pairs each word with itself (0 <= |i - j|)",
          hint="you pair each word with itself: the context positions satisfy 0 < |i - j|, so j != i", loses=MOST),
    Entry("pairs_no_window_check", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids))
           if 0 < abs(i - j) <= window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "no ValueError for window < 1 (returns an empty tensor)",
          hint="window=0 or a negative window should raise a ValueError that names the value", loses=SLIP),
    Entry("pairs_assert_window", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    assert window >= 1, "window must be positive"
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids))
           if 0 < abs(i - j) <= window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long).view(-1, 2)
''', "an assert instead of a ValueError naming the value",
          hint="a bad window should raise ValueError (not an assert), and the message should name the value", loses=SLIP),
    Entry("pairs_empty_wrong_shape", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1")
    out = [[int(ids[i]), int(ids[j])] for i in range(len(ids)) for j in range(len(ids))
           if 0 < abs(i - j) <= window and ids[i] != 0 and ids[j] != 0]
    return torch.tensor(out, dtype=torch.long)
''', "torch.tensor([]) of no pairs has shape (0,), not (0, 2)",
          hint="with no pair your result has shape (0,): an empty result still has two columns, shape (0, 2)", loses=SLIP),

    # noise_distribution
    Entry("noise_no_power", "noise_distribution", '''
def noise_distribution(counts, power=0.75):
    c = counts.to(counts.dtype if counts.is_floating_point() else torch.float32)
    return c / c.sum()
''', "forgets the power: plain unigram frequencies",
          hint="your distribution is the plain frequency: raise the counts to `power` before normalising", loses=MOST),
    Entry("noise_power_after_normalising", "noise_distribution", '''
def noise_distribution(counts, power=0.75):
    c = counts.to(counts.dtype if counts.is_floating_point() else torch.float32)
    return (c / c.sum()) ** power
''', "normalises, then raises to the power: no longer sums to 1",
          hint="your values do not sum to 1: raise the counts to the power first, then divide by the sum", loses=MOST),
    Entry("noise_always_float32", "noise_distribution", '''
def noise_distribution(counts, power=0.75):
    w = counts.float() ** power
    return w / w.sum()
''', ".float() turns float64 counts into float32",
          hint="float64 counts should give a float64 distribution: convert integer counts only", loses=PART),
    Entry("noise_softmax", "noise_distribution", '''
def noise_distribution(counts, power=0.75):
    c = counts.to(counts.dtype if counts.is_floating_point() else torch.float32)
    return torch.softmax(c ** power, dim=0)
''', "normalises with a softmax instead of dividing by the sum",
          hint="you normalise with a softmax (exp of the weights): divide count^power by its sum instead", loses=MOST),

    # SkipGramNS
    Entry("sgns_sum_over_batch", "SkipGramNS", _sgns(returns="return -(pos + neg).sum()"),
          "sums the loss over the batch instead of averaging",
          hint="your loss is the sum over the batch: return the batch mean", loses=MOST),
    Entry("sgns_negatives_wrong_sign", "SkipGramNS", _sgns(
        neg="neg = F.logsigmoid((self.out_embed(negatives) * v[:, None, :]).sum(-1)).sum(-1)"),
          "log s(u_k . v) for the negatives: rewards them like real contexts",
          hint="the negatives enter as log s(-u_k . v_c), with a minus sign inside the sigmoid", loses=MOST),
    Entry("sgns_mean_over_negatives", "SkipGramNS", _sgns(
        neg="neg = F.logsigmoid(-(self.out_embed(negatives) * v[:, None, :]).sum(-1)).mean(-1)"),
          "averages over the K negatives instead of summing",
          hint="you average the K negative terms: the loss sums them (then averages over the batch)", loses=MOST),
    Entry("sgns_mean_of_everything", "SkipGramNS", _sgns(
        neg="neg = F.logsigmoid(-(self.out_embed(negatives) * v[:, None, :]).sum(-1))",
        returns="return -(pos.mean() + neg.mean())"),
          "means the (B, K) negative terms over everything: the negatives count K times too little",
          hint="sum the K negative terms of each row first, then take the mean over the batch", loses=MOST),
    Entry("sgns_one_table", "SkipGramNS", _sgns(
        pos="pos = F.logsigmoid((self.in_embed(context) * v).sum(-1))",
        neg="neg = F.logsigmoid(-(self.in_embed(negatives) * v[:, None, :]).sum(-1)).sum(-1)"),
          "uses in_embed for the contexts and negatives too (out_embed unused)",
          hint="contexts and negatives take their vectors from out_embed; only the center uses in_embed", loses=MOST),
    Entry("sgns_tables_swapped", "SkipGramNS", _sgns(
        v="v = self.out_embed(center)",
        pos="pos = F.logsigmoid((self.in_embed(context) * v).sum(-1))",
        neg="neg = F.logsigmoid(-(self.in_embed(negatives) * v[:, None, :]).sum(-1)).sum(-1)"),
          "the center from out_embed and the contexts from in_embed",
          hint="the roles of the tables are swapped: the center's vector comes from in_embed, the others from out_embed",
          loses=MOST),
    Entry("sgns_broadcast_without_unsqueeze", "SkipGramNS", _sgns(
        neg="neg = F.logsigmoid(-(self.out_embed(negatives) * v).sum(-1)).sum(-1)"),
          "u_neg (B, K, D) * v (B, D): fails unless B == K, and then pairs negative k with center k",
          hint=("your negatives meet the wrong centers: (B, K, D) times (B, D) broadcasts the centers along the K "
                "axis; give the centers a K axis of size 1 so each row's negatives meet their own center"), loses=MOST),
    Entry("sgns_log_of_sigmoid", "SkipGramNS", _sgns(
        pos="pos = torch.log(torch.sigmoid((self.out_embed(context) * v).sum(-1)))",
        neg="neg = torch.log(torch.sigmoid(-(self.out_embed(negatives) * v[:, None, :]).sum(-1))).sum(-1)"),
          "log(sigmoid(x)) underflows to log(0) = -inf for large negative x",
          hint="log(sigmoid(x)) becomes -inf for large dot products: use F.logsigmoid(x)", loses=SLIP),
    Entry("sgns_one_minus_sigmoid", "SkipGramNS", _sgns(
        neg="neg = torch.log(1 - torch.sigmoid((self.out_embed(negatives) * v[:, None, :]).sum(-1))).sum(-1)"),
          "log(1 - sigmoid(x)) for the negatives: right on paper, -inf as soon as sigmoid(x) rounds to 1",
          hint="log(1 - sigmoid(x)) is -inf once sigmoid(x) rounds to 1: write it as F.logsigmoid(-x)", loses=SLIP),
    Entry("sgns_negatives_detached", "SkipGramNS", _sgns(
        neg=("u_neg = self.out_embed(negatives).detach()\n"
             "        neg = F.logsigmoid(-(u_neg * v[:, None, :]).sum(-1)).sum(-1)")),
          "detaches the negatives' vectors: out_embed never learns from them",
          hint="the gradient with respect to out_embed is wrong: do not detach the negatives' vectors", loses=MOST),
    Entry("sgns_no_minus", "SkipGramNS", _sgns(returns="return (pos + neg).mean()"),
          "forgets the leading minus: the loss is the log-likelihood, and training would minimise it",
          hint="your loss is negative: it is minus the log-likelihood, -[log s(...) + sum log s(...)]", loses=MOST),

    # most_similar
    Entry("similar_topk_ties", "most_similar", '''
def most_similar(embeddings, query_id, k):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ unit[query_id]
    ranked = scores.clone()
    ranked[query_id] = float("-inf")
    ids = torch.topk(ranked, k).indices
    return ids, scores[ids]
''', "torch.topk orders equal scores arbitrarily",
          hint=("equal scores must come out lower id first; torch.topk does not promise that: use a sort that keeps "
                "equal scores in id order"), loses=PART),
    Entry("similar_query_included", "most_similar", '''
def most_similar(embeddings, query_id, k):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ unit[query_id]
    ids = torch.sort(scores, descending=True, stable=True).indices[:k]
    return ids, scores[ids]
''', "forgets to exclude the query",
          hint="your answer contains the query itself: exclude query_id (its cosine with itself is 1)", loses=MOST),
    Entry("similar_drop_first", "most_similar", '''
def most_similar(embeddings, query_id, k):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ unit[query_id]
    ids = torch.sort(scores, descending=True, stable=True).indices[1:k + 1]
    return ids, scores[ids]
''', "drops the best result assuming it is the query: wrong when another row ties with it at cosine 1",
          hint="you drop the first result assuming it is the query; a copy of the query can come first: "
               "exclude query_id by its id", loses=PART),
    Entry("similar_dot_product", "most_similar", '''
def most_similar(embeddings, query_id, k):
    scores = embeddings @ embeddings[query_id]
    ranked = scores.clone()
    ranked[query_id] = float("-inf")
    ids = torch.sort(ranked, descending=True, stable=True).indices[:k]
    return ids, scores[ids]
''', "dot products instead of cosines: long vectors win",
          hint="your scores are dot products: normalise the rows first so that the scores are cosines", loses=MOST),
    Entry("similar_divide_by_norm_nan", "most_similar", '''
def most_similar(embeddings, query_id, k):
    unit = embeddings / embeddings.norm(dim=-1, keepdim=True)
    scores = unit @ unit[query_id]
    ranked = scores.clone()
    ranked[query_id] = float("-inf")
    ids = torch.sort(ranked, descending=True, stable=True).indices[:k]
    return ids, scores[ids]
''', "divides by the norm: a zero row gives 0/0 = nan",
          hint="a zero row (the pad) gives nan: use F.normalize, which leaves a zero row at 0", loses=PART),
    Entry("similar_ascending_flip", "most_similar", '''
def most_similar(embeddings, query_id, k):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ unit[query_id]
    ranked = scores.clone()
    ranked[query_id] = float("-inf")
    ids = torch.argsort(ranked, stable=True).flip(0)[:k]
    return ids, scores[ids]
''', "ascending stable sort, then flipped: ties come out higher id first",
          hint="equal scores come out with the higher id first: sort descending with stable=True instead of flipping",
          loses=PART),

    # analogy
    Entry("analogy_raw_vectors", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    target = embeddings[b] - embeddings[a] + embeddings[c]
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ F.normalize(target, dim=0)
    scores[[a, b, c]] = float("-inf")
    return torch.sort(scores, descending=True, stable=True).indices[:k]
''', "adds the raw vectors: a long vector dominates the target",
          hint="normalise a, b and c to unit length before b - a + c, so that each word counts the same", loses=MOST),
    Entry("analogy_no_exclusion", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ F.normalize(unit[b] - unit[a] + unit[c], dim=0)
    return torch.sort(scores, descending=True, stable=True).indices[:k]
''', "forgets to exclude a, b, c",
          hint="the answer is often one of a, b, c themselves: exclude them", loses=MOST),
    Entry("analogy_only_c_excluded", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ F.normalize(unit[b] - unit[a] + unit[c], dim=0)
    scores[c] = float("-inf")
    return torch.sort(scores, descending=True, stable=True).indices[:k]
''', "excludes only c",
          hint="exclude all three query words a, b and c, not only c", loses=MOST),
    Entry("analogy_wrong_direction", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ F.normalize(unit[a] - unit[b] + unit[c], dim=0)
    scores[[a, b, c]] = float("-inf")
    return torch.sort(scores, descending=True, stable=True).indices[:k]
''', "a - b + c instead of b - a + c",
          hint="the target is b - a + c (king - man + woman with a = man, b = king, c = woman); you have a - b + c",
          loses=MOST),
    Entry("analogy_dot_with_target", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    unit = F.normalize(embeddings, dim=-1)
    scores = embeddings @ (unit[b] - unit[a] + unit[c])
    scores[[a, b, c]] = float("-inf")
    return torch.sort(scores, descending=True, stable=True).indices[:k]
''', "scores the candidates by dot product with the target: long candidate vectors win",
          hint="score each candidate by its cosine with the target: normalise the candidate rows too", loses=MOST),
    Entry("analogy_topk_ties", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    unit = F.normalize(embeddings, dim=-1)
    scores = unit @ F.normalize(unit[b] - unit[a] + unit[c], dim=0)
    scores[[a, b, c]] = float("-inf")
    return torch.topk(scores, k).indices
''', "torch.topk orders ties arbitrarily",
          hint="equal scores must come out lower id first: use a sort that keeps equal scores in id order", loses=SLIP),

    # char_ngrams
    Entry("ngrams_no_markers", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    return [word[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(word) - n + 1)]
''', "forgets the boundary markers < and >",
          hint="wrap the word as '<' + word + '>' before cutting it into n-grams", loses=MOST),
    Entry("ngrams_by_position_first", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    w = "<" + word + ">"
    return [w[i:i + n] for i in range(len(w)) for n in range(n_min, n_max + 1) if i + n <= len(w)]
''', "loops over positions outside and n inside",
          hint="your n-grams are ordered by position first: order them by n first (all 3-grams, then all 4-grams, ...)",
          loses=MOST),
    Entry("ngrams_n_max_excluded", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    w = "<" + word + ">"
    return [w[i:i + n] for n in range(n_min, n_max) for i in range(len(w) - n + 1)]
''', "range(n_min, n_max) leaves out n = n_max",
          hint="n_max is included: loop over range(n_min, n_max + 1)", loses=MOST),
    Entry("ngrams_unique", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    w = "<" + word + ">"
    return list(dict.fromkeys(w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1)))
''', "removes repeated n-grams",
          hint="keep a repeated n-gram once per position (char_ngrams('aaaa', 3, 3) has 'aaa' twice)", loses=MOST),
    Entry("ngrams_last_position_missing", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    w = "<" + word + ">"
    return [w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n)]
''', "range(len(w) - n) misses the n-gram that ends the word",
          hint="you miss the last n-gram of each size (the one ending with '>'): positions go up to len(w) - n included",
          loses=MOST),
    Entry("ngrams_sorted", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    w = "<" + word + ">"
    return sorted(w[i:i + n] for n in range(n_min, n_max + 1) for i in range(len(w) - n + 1))
''', "sorts the n-grams alphabetically",
          hint="do not sort the n-grams: order them by n, then by position in the word", loses=MOST),

    # glove_loss
    Entry("glove_mean", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.clamp((x_ij / x_max) ** alpha, max=1.0)
    diff = (w_i * w_j).sum(-1) + b_i + b_j - torch.log(x_ij)
    return (weight * diff ** 2).mean()
''', "averages over the pairs instead of summing",
          hint="GloVe's loss is the sum over the pairs, not the mean", loses=MOST),
    Entry("glove_weight_not_capped", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = (x_ij / x_max) ** alpha
    diff = (w_i * w_j).sum(-1) + b_i + b_j - torch.log(x_ij)
    return (weight * diff ** 2).sum()
''', "forgets the min(1, ...): frequent pairs weigh more than 1",
          hint="the weight stops at 1 for x >= x_max: f(x) = min(1, (x / x_max)^alpha)", loses=(0.35, 1)),
    Entry("glove_no_biases", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.clamp((x_ij / x_max) ** alpha, max=1.0)
    diff = (w_i * w_j).sum(-1) - torch.log(x_ij)
    return (weight * diff ** 2).sum()
''', "leaves out the biases",
          hint="add both biases b_i and b_j to the dot product before subtracting log x", loses=MOST),
    Entry("glove_counts_not_logged", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.clamp((x_ij / x_max) ** alpha, max=1.0)
    diff = (w_i * w_j).sum(-1) + b_i + b_j - x_ij
    return (weight * diff ** 2).sum()
''', "fits the counts instead of their logarithm",
          hint="the vectors fit log x, not x: subtract torch.log(x_ij)", loses=MOST),
    Entry("glove_alpha_on_x_only", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.clamp(x_ij ** alpha / x_max, max=1.0)
    diff = (w_i * w_j).sum(-1) + b_i + b_j - torch.log(x_ij)
    return (weight * diff ** 2).sum()
''', "x^alpha / x_max instead of (x / x_max)^alpha",
          hint="the power applies to the ratio: (x / x_max) ** alpha", loses=MOST),
    Entry("glove_weight_inside_square", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.clamp((x_ij / x_max) ** alpha, max=1.0)
    diff = (w_i * w_j).sum(-1) + b_i + b_j - torch.log(x_ij)
    return ((weight * diff) ** 2).sum()
''', "squares the weight together with the difference",
          hint="the weight multiplies the squared difference: f(x) * diff ** 2, not (f(x) * diff) ** 2", loses=MOST),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("pairs_double_loop", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window} must be at least 1, got {window}")
    values = ids.tolist()
    pairs = []
    for i, center in enumerate(values):
        if center == 0:
            continue
        for j in range(max(0, i - window), min(len(values), i + window + 1)):
            if j != i and values[j] != 0:
                pairs.append((center, values[j]))
    return torch.tensor(pairs, dtype=torch.long, device=ids.device).reshape(-1, 2)
''', "a plain double loop over Python lists"),
    Entry("pairs_offsets_sorted", "skipgram_pairs", '''
def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"bad window {window}: it must be >= 1")
    n = len(ids)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    keep = ((i - j).abs() <= window) & (i != j)
    i, j = i[keep], j[keep]
    keep = (ids[i] != 0) & (ids[j] != 0)
    return torch.stack([ids[i[keep]], ids[j[keep]]], dim=-1)
''', "all (i, j) by meshgrid, masked: row-major order is the required order"),
    Entry("noise_normalise_first", "noise_distribution", '''
def noise_distribution(counts, power=0.75):
    dtype = counts.dtype if torch.is_floating_point(counts) else torch.get_default_dtype()
    p = counts.to(dtype) / counts.sum()
    p = p.pow(power)
    return p / p.sum()
''', "frequencies first, then the power, then normalised again"),
    Entry("noise_float64_then_cast", "noise_distribution", '''
def noise_distribution(counts, power=0.75):
    out_dtype = counts.dtype if counts.is_floating_point() else torch.float32
    w = torch.pow(counts.double(), power)
    return (w / w.sum()).to(out_dtype)
''', "computed in float64, cast to the output dtype"),
    Entry("sgns_bmm", "SkipGramNS", '''
class SkipGramNS(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, dim)
        self.out_embed = nn.Embedding(vocab_size, dim)

    def forward(self, center, context, negatives):
        v = self.in_embed(center).unsqueeze(2)  # (B, D, 1)
        pos = torch.bmm(self.out_embed(context).unsqueeze(1), v).squeeze(2).squeeze(1)  # (B,)
        neg = torch.bmm(self.out_embed(negatives), v).squeeze(2)  # (B, K)
        return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(1)).mean()
''', "torch.bmm for the dot products"),
    Entry("sgns_softplus_einsum", "SkipGramNS", '''
class SkipGramNS(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, dim)
        self.out_embed = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.out_embed.weight, std=0.01)

    def forward(self, center, context, negatives):
        v = self.in_embed(center)
        pos = torch.einsum("bd,bd->b", self.out_embed(context), v)
        neg = torch.einsum("bkd,bd->bk", self.out_embed(negatives), v)
        return (F.softplus(-pos) + F.softplus(neg).sum(-1)).mean()
''', "-log s(x) = softplus(-x), with einsum"),
    Entry("sgns_bce_with_logits", "SkipGramNS", '''
class SkipGramNS(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, dim)
        self.out_embed = nn.Embedding(vocab_size, dim)

    def forward(self, center, context, negatives):
        words = torch.cat([context[:, None], negatives], dim=1)  # (B, 1 + K)
        logits = (self.out_embed(words) * self.in_embed(center)[:, None, :]).sum(-1)  # (B, 1 + K)
        labels = torch.zeros_like(logits)
        labels[:, 0] = 1.0
        return F.binary_cross_entropy_with_logits(logits, labels, reduction="none").sum(1).mean()
''', "one binary cross-entropy over the real context (label 1) and the negatives (label 0)"),
    Entry("similar_cosine_similarity_mask", "most_similar", '''
def most_similar(embeddings, query_id, k):
    scores = F.cosine_similarity(embeddings, embeddings[query_id][None, :], dim=-1)
    order = torch.argsort(-scores, stable=True)
    order = order[order != query_id][:k]
    return order, scores[order]
''', "F.cosine_similarity, argsort of the negated scores, the query removed from the order"),
    Entry("similar_python_sort", "most_similar", '''
def most_similar(embeddings, query_id, k):
    unit = F.normalize(embeddings, dim=1)
    scores = unit @ unit[query_id]
    values = scores.tolist()
    order = sorted((i for i in range(len(values)) if i != query_id), key=lambda i: (-values[i], i))[:k]
    ids = torch.tensor(order, dtype=torch.long, device=embeddings.device)
    return ids, scores[ids]
''', "Python's sorted with the key (-score, id)"),
    Entry("analogy_mean_of_units", "analogy", '''
def analogy(embeddings, a, b, c, k=1):
    unit = embeddings / embeddings.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    target = (unit[b] + unit[c] - unit[a]) / 3
    scores = unit @ target  # the target's length does not change the order
    mask = torch.zeros(len(scores), dtype=torch.bool, device=scores.device)
    mask[[a, b, c]] = True
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.sort(scores, descending=True, stable=True).indices[:k]
''', "gensim style: the mean of the unit vectors, target not normalised, masked_fill"),
    Entry("ngrams_loops", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    wrapped = "<" + word + ">"
    grams = []
    n = n_min
    while n <= n_max:
        start = 0
        while start + n <= len(wrapped):
            grams.append(wrapped[start:start + n])
            start += 1
        n += 1
    return grams
''', "while loops"),
    Entry("glove_where", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.where(x_ij < x_max, (x_ij / x_max) ** alpha, torch.ones_like(x_ij))
    pred = torch.einsum("nd,nd->n", w_i, w_j) + b_i + b_j
    return torch.sum(weight * (pred - x_ij.log()).pow(2))
''', "torch.where for the weight, einsum for the dot products"),
    Entry("glove_clamp_then_power", "glove_loss", '''
def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    weight = torch.clamp(x_ij / x_max, max=1.0) ** alpha  # min(1, r)^a = min(1, r^a) for r >= 0
    diff = (w_i * w_j).sum(dim=1) + b_i + b_j - torch.log(x_ij)
    return (weight * diff * diff).sum()
''', "the ratio capped at 1 first, then the power (the same for alpha > 0)"),
]

# ----------------------------------------------------------- skipgram_ns_grads and CBOWNS (issue 21)
# Kept in one block (MUTANTS += / VARIANTS +=) so that other additions merge cleanly.
_CBOW_MEAN = ("real = (contexts != 0).unsqueeze(-1).to(self.in_embed.weight.dtype)\n"
              "        h = (self.in_embed(contexts) * real).sum(1) / real.sum(1)")
_CBOW_POS = "pos = F.logsigmoid((self.out_embed(target) * h).sum(-1))"
_CBOW_NEG = "neg = F.logsigmoid(-(self.out_embed(negatives) * h[:, None, :]).sum(-1)).sum(-1)"


def _cbow(h: str = _CBOW_MEAN, pos: str = _CBOW_POS, neg: str = _CBOW_NEG) -> str:
    """A CBOWNS (the reference's tables) whose forward differs from a correct one only in the lines given: ``h``,
    the context vector (B, D); ``pos`` and ``neg``, each example's log-sigmoid terms (B,)."""
    return f'''
class CBOWNS(CBOWNS):
    def forward(self, contexts, target, negatives):
        {h}
        {pos}
        {neg}
        return -(pos + neg).mean()
'''


MUTANTS += [
    Entry("grads_u_o_sign", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    s_o, s_neg = u_o @ v_c, u_neg @ v_c
    d_o, d_neg = torch.sigmoid(-s_o), torch.sigmoid(s_neg)
    return d_o * u_o + d_neg @ u_neg, d_o * v_c, d_neg[:, None] * v_c
''', "dl/ds_o written as 1 - sigma(s_o): the derivative of log sigma without the loss's minus sign",
          hint="the loss is minus log sigma(s_o): dl/ds_o = sigma(s_o) - 1, which is negative", loses=MOST),
    Entry("grads_negatives_sign", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    s_o, s_neg = u_o @ v_c, u_neg @ v_c
    d_o, d_neg = -torch.sigmoid(-s_o), -torch.sigmoid(s_neg)
    return d_o * u_o + d_neg @ u_neg, d_o * v_c, d_neg[:, None] * v_c
''', "the inner derivative of sigma(-s_k) forgotten: dl/ds_k = -sigma(s_k)",
          hint="log sigma(-s_k) has an inner derivative of -1: dl/ds_k = +sigma(s_k), the negatives are pushed away",
          loses=MOST),
    Entry("grads_negatives_like_positive", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    s_o, s_neg = u_o @ v_c, u_neg @ v_c
    d_o, d_neg = -torch.sigmoid(-s_o), -torch.sigmoid(-s_neg)
    return d_o * u_o + d_neg @ u_neg, d_o * v_c, d_neg[:, None] * v_c
''', "the negatives differentiated like the real pair, sigma(s_k) - 1, without the sigma(-x) of their term",
          hint="a negative's term is log sigma(-s_k), not log sigma(s_k): dl/ds_k = sigma(s_k)", loses=MOST),
    Entry("grads_sigmoid_derivative", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    s_o, s_neg = u_o @ v_c, u_neg @ v_c
    sig_o, sig_neg = torch.sigmoid(s_o), torch.sigmoid(s_neg)
    d_o, d_neg = -sig_o * (1 - sig_o), sig_neg * (1 - sig_neg)
    return d_o * u_o + d_neg @ u_neg, d_o * v_c, d_neg[:, None] * v_c
''', "the derivative of sigma instead of the derivative of log sigma",
          hint="d/dx log sigma(x) = 1 - sigma(x): the sigma(x) of sigma'(x) = sigma(x)(1 - sigma(x)) cancels", loses=MOST),
    Entry("grads_v_c_without_negatives", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    s_o, s_neg = u_o @ v_c, u_neg @ v_c
    d_o, d_neg = -torch.sigmoid(-s_o), torch.sigmoid(s_neg)
    return d_o * u_o, d_o * v_c, d_neg[:, None] * v_c
''', "grad_v_c from the real pair only",
          hint="v_c is in every score: grad_v_c = (sigma(s_o) - 1) u_o + sum_k sigma(s_k) u_k", loses=MOST),
    Entry("grads_by_autograd", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    leaves = [t.detach().clone().requires_grad_() for t in (v_c, u_o, u_neg)]
    loss = -(F.logsigmoid(leaves[1] @ leaves[0]) + F.logsigmoid(-(leaves[2] @ leaves[0])).sum())
    return torch.autograd.grad(loss, leaves)
''', "asks autograd instead of deriving the gradients",
          hint="the question asks for the gradients by hand: torch.autograd is not allowed in skipgram_ns_grads",
          loses=MOST),

    Entry("cbow_mean_counts_pads", "CBOWNS", _cbow(h="h = self.in_embed(contexts).mean(1)  # the pads counted as words"),
          "averages over all C positions, pads included",
          hint="the average runs over the real context words only: sum where contexts != 0, divide by their number",
          loses=MOST),
    Entry("cbow_sum_of_contexts", "CBOWNS", _cbow(
        h="h = (self.in_embed(contexts) * (contexts != 0).unsqueeze(-1)).sum(1)  # a sum, not a mean"),
          "sums the real context vectors instead of averaging them",
          hint="h is the mean of the real context vectors: divide the sum by the number of real words", loses=MOST),
    Entry("cbow_negatives_broadcast", "CBOWNS", _cbow(
        neg="neg = F.logsigmoid(-(self.out_embed(negatives) * h).sum(-1)).sum(-1)  # (B, K, D) * (B, D)"),
          "u_neg * h without h[:, None]: runs only when B == K, and pairs negative k with example k",
          hint=("each example's K negatives must be scored against that example's own context vector: yours pair "
               "negative k with example k (it only runs when B equals K)"), loses=MOST),
    Entry("cbow_target_from_in_embed", "CBOWNS", _cbow(pos="pos = F.logsigmoid((self.in_embed(target) * h).sum(-1))"),
          "the center word's vector taken from in_embed",
          hint="the contexts use in_embed; the center (target) and the negatives use out_embed", loses=MOST),
    Entry("cbow_log_of_sigmoid", "CBOWNS", _cbow(
        pos="pos = torch.log(torch.sigmoid((self.out_embed(target) * h).sum(-1)))",
        neg="neg = torch.log(torch.sigmoid(-(self.out_embed(negatives) * h[:, None, :]).sum(-1))).sum(-1)"),
          "log(sigmoid(x)): -inf for large negative scores in float32",
          hint="use F.logsigmoid(x): log(sigmoid(x)) overflows to -inf when the score is a large negative", loses=SLIP),
]
VARIANTS += [
    Entry("grads_with_sigmoid_minus_one_and_outer", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    s_o = (u_o * v_c).sum()
    s_neg = (u_neg * v_c).sum(-1)  # (K,)
    g_o = torch.sigmoid(s_o) - 1
    g_neg = torch.sigmoid(s_neg)
    grad_v_c = g_o * u_o + (g_neg[:, None] * u_neg).sum(0)
    return grad_v_c, g_o * v_c, torch.outer(g_neg, v_c)
''', "sigma(s_o) - 1 by subtraction, broadcast sums, torch.outer"),
    Entry("grads_stacked_scores", "skipgram_ns_grads", '''
def skipgram_ns_grads(v_c, u_o, u_neg):
    u = torch.cat([u_o[None], u_neg])  # (1 + K, D): row 0 is the real context
    labels = torch.zeros(len(u), dtype=v_c.dtype, device=v_c.device)
    labels[0] = 1
    d = torch.sigmoid(u @ v_c) - labels  # (1 + K,): sigma(s) - label, the logistic loss's derivative
    return d @ u, d[0] * v_c, d[1:, None] * v_c
''', "one logistic loss over the stacked scores: dl/ds = sigma(s) - label"),

    Entry("cbow_masked_mean_einsum", "CBOWNS", '''
class CBOWNS(CBOWNS):
    def forward(self, contexts, target, negatives):
        mask = contexts.ne(0).to(self.in_embed.weight.dtype)  # (B, C)
        h = torch.einsum("bc,bcd->bd", mask, self.in_embed(contexts)) / mask.sum(1, keepdim=True)
        u = self.out_embed(torch.cat([target[:, None], negatives], dim=1))  # (B, 1 + K, D)
        scores = torch.einsum("bkd,bd->bk", u, h)
        sign = torch.ones_like(scores)
        sign[:, 1:] = -1
        return -F.logsigmoid(sign * scores).sum(1).mean()
''', "einsum for the masked mean and the scores, the target and negatives stacked with signs"),
    Entry("cbow_embedding_bag", "CBOWNS", '''
class CBOWNS(CBOWNS):
    def forward(self, contexts, target, negatives):
        h = F.embedding_bag(contexts, self.in_embed.weight, mode="mean", padding_idx=0)  # pads left out
        pos = F.logsigmoid(torch.bmm(self.out_embed(target)[:, None, :], h[:, :, None]).view(-1))
        neg = F.logsigmoid(-torch.bmm(self.out_embed(negatives), h[:, :, None]).squeeze(-1)).sum(-1)
        return -(pos + neg).mean()
''', "F.embedding_bag(mode='mean', padding_idx=0) for the masked mean, bmm for the scores"),
]
