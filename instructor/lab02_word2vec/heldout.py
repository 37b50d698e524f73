"""Lab 02 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("pairs_edge_excluded", "skipgram_pairs", '''
import torch

def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    rows = []
    toks = ids.tolist()
    for i, c in enumerate(toks):
        if c == 0:
            continue
        for j in range(max(0, i - window + 1), min(len(toks), i + window)):
            if j != i and toks[j] != 0:
                rows.append((c, toks[j]))
    return torch.tensor(rows, dtype=torch.long).reshape(-1, 2)
''', "pairs_window_exclusive", why="a window that excludes its edge"),
    HeldOut("pairs_right_only", "skipgram_pairs", '''
import torch

def skipgram_pairs(ids, window):
    if window < 1:
        raise ValueError(f"window={window}")
    toks = ids.tolist()
    rows = [(toks[i], toks[j]) for i in range(len(toks)) for j in range(i + 1, min(len(toks), i + window + 1))
            if toks[i] and toks[j]]
    return torch.tensor(rows, dtype=torch.long).view(-1, 2)
''', "pairs_right_context_only", why="only the words after the center"),
    HeldOut("noise_no_power_float", "noise_distribution", '''
import torch

def noise_distribution(counts, power=0.75):
    c = counts.double() if counts.is_floating_point() else counts.float()
    p = c / c.sum()
    return p.to(counts.dtype if counts.is_floating_point() else torch.float32)
''', "noise_no_power", why="a noise distribution without the power"),
    HeldOut("noise_unnormalised", "noise_distribution", '''
import torch

def noise_distribution(counts, power=0.75):
    dt = counts.dtype if counts.is_floating_point() else torch.float32
    return counts.to(dt).pow(power)
''', None, why="the power without the normalisation"),
    HeldOut("sgns_positive_sign_on_negatives", "SkipGramNS", '''
import torch
import torch.nn.functional as F
from torch import nn


class SkipGramNS(nn.Module):
    def __init__(self, vocab_size, dim):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, dim)
        self.out_embed = nn.Embedding(vocab_size, dim)
        nn.init.uniform_(self.in_embed.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.out_embed.weight)

    def forward(self, center, context, negatives):
        vc = self.in_embed(center)
        pos = torch.einsum("bd,bd->b", self.out_embed(context), vc)
        neg = torch.einsum("bkd,bd->bk", self.out_embed(negatives), vc)
        return -(F.logsigmoid(pos) + F.logsigmoid(neg).sum(1)).mean()
''', "sgns_negatives_wrong_sign", why="the negatives' scores without the minus"),
    HeldOut("similar_query_kept", "most_similar", '''
import torch

def most_similar(embeddings, query_id, k):
    norms = embeddings.norm(dim=1, keepdim=True).clamp_min(1e-12)
    unit = embeddings / norms
    sims = unit @ unit[query_id]
    order = torch.argsort(-sims, stable=True)[:k]
    return order, sims[order]
''', "similar_query_included", why="the query itself not excluded"),
    HeldOut("similar_raw_dot", "most_similar", '''
import torch

def most_similar(embeddings, query_id, k):
    s = embeddings @ embeddings[query_id]
    r = s.clone()
    r[query_id] = -float("inf")
    idx = torch.sort(r, descending=True, stable=True).indices[:k]
    return idx, s[idx]
''', "similar_dot_product", why="dot products instead of cosines"),
    HeldOut("analogy_reversed", "analogy", '''
import torch
import torch.nn.functional as F

def analogy(embeddings, a, b, c, k=1):
    u = F.normalize(embeddings, dim=1)
    t = F.normalize(u[a] - u[b] + u[c], dim=0)
    s = u @ t
    s[a] = s[b] = s[c] = -float("inf")
    return torch.sort(s, descending=True, stable=True).indices[:k]
''', "analogy_wrong_direction", why="an analogy reversed: a - b + c"),
    HeldOut("analogy_keeps_inputs", "analogy", '''
import torch
import torch.nn.functional as F

def analogy(embeddings, a, b, c, k=1):
    u = F.normalize(embeddings, dim=-1)
    s = u @ F.normalize(u[b] + u[c] - u[a], dim=0)
    return torch.sort(s, descending=True, stable=True).indices[:k]
''', "analogy_no_exclusion", why="a, b, c not excluded"),
    HeldOut("ngrams_without_brackets", "char_ngrams", '''
def char_ngrams(word, n_min=3, n_max=6):
    out = []
    for n in range(n_min, n_max + 1):
        out += [word[i:i + n] for i in range(len(word) - n + 1)]
    return out
''', "ngrams_no_markers", why="no < > markers"),
    HeldOut("glove_uncapped_weight", "glove_loss", '''
import torch

def glove_loss(w_i, w_j, b_i, b_j, x_ij, x_max=100.0, alpha=0.75):
    f = (x_ij / x_max).pow(alpha)
    err = torch.einsum("nd,nd->n", w_i, w_j) + b_i + b_j - x_ij.log()
    return torch.sum(f * err * err)
''', "glove_weight_not_capped", why="f not capped at 1"),
]
