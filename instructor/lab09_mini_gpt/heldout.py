"""Lab 09 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("tok_first_seen_order", "CharTokenizer", '''
class CharTokenizer:
    def __init__(self, text):
        self.chars = list(dict.fromkeys(text))
        self.vocab_size = len(self.chars)
        self.to_id = {c: i for i, c in enumerate(self.chars)}

    def encode(self, s):
        return [self.to_id[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)
''', "tok_order_of_appearance", why="ids in order of first appearance, not sorted"),
    HeldOut("pairs_step_two", "bpe_pair_counts", '''
from collections import Counter

def bpe_pair_counts(ids):
    return dict(Counter((ids[i], ids[i + 1]) for i in range(0, len(ids) - 1, 2)))
''', "pairs_non_overlapping", why="steps by two: overlapping pairs missed"),
    HeldOut("merge_no_skip", "bpe_merge", '''
def bpe_merge(ids, pair, new_id):
    out = []
    for i, t in enumerate(ids):
        if i + 1 < len(ids) and (t, ids[i + 1]) == tuple(pair):
            out.append(new_id)
        elif i > 0 and (ids[i - 1], t) == tuple(pair) and out and out[-1] == new_id:
            continue
        else:
            out.append(t)
    return out
''', "merge_overlapping", why="looks back at the output instead of skipping: overlapping merges"),
    HeldOut("batch_targets_same_window", "get_batch", '''
import torch

def get_batch(data, block_size, batch_size, generator=None):
    s = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in s.tolist()])
    return x, x.clone()
''', "batch_y_not_shifted", why="y not shifted"),
    HeldOut("sample_divides_probs", "sample_next", '''
import torch

def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    if temperature == 0:
        return torch.argmax(logits, dim=1)
    z = logits.clone()
    if top_k is not None and top_k < z.shape[1]:
        v, _ = torch.topk(z, top_k)
        z[z < v[:, [-1]]] = -float("inf")
    p = torch.softmax(z, dim=1) / temperature
    p = p / p.sum(dim=1, keepdim=True)
    return torch.multinomial(p, 1, generator=generator)[:, 0]
''', "sample_temperature_after_softmax", why="temperature applied to the probabilities"),
    HeldOut("sample_k_plus_one", "sample_next", '''
import torch

def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    if temperature == 0:
        return logits.argmax(-1)
    z = logits / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = z.sort(dim=-1, descending=True).values[:, top_k:top_k + 1]
        z = z.masked_fill(z < kth, float("-inf"))
    return torch.multinomial(z.softmax(-1), 1, generator=generator).view(-1)
''', "sample_topk_keeps_k_plus_1", why="keeps k + 1 tokens"),
    HeldOut("generate_whole_context", "generate", '''
import torch

@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    out = idx
    for _ in range(max_new_tokens):
        logits, _ = model(out)
        nxt = sample_next(logits[:, -1], temperature=temperature, top_k=top_k, generator=generator)
        out = torch.cat((out, nxt.unsqueeze(1)), dim=1)
    return out
''', "generate_no_crop", why="context not cropped to block_size"),
    HeldOut("generate_first_logits", "generate", '''
import torch

@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -model.block_size:])
        nxt = sample_next(logits[:, 0, :], temperature, top_k, generator)
        idx = torch.cat([idx, nxt[:, None]], 1)
    return idx
''', "generate_first_position", why="samples from the first position's logits"),
    HeldOut("tok_decode_with_spaces", "CharTokenizer", '''
class CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.vocab_size = len(self.chars)
        self.index = {c: i for i, c in enumerate(self.chars)}

    def encode(self, s):
        return [self.index[c] for c in s]

    def decode(self, ids):
        return " ".join(self.chars[int(i)] for i in ids)
''', None, why="decode joins the characters with spaces"),
]
