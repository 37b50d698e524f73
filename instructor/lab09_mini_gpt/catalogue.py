"""Lab 09 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` runs after the reference code and redefines one or more graded names; the rest of the
reference picks the new definition up (``GPTBlock`` builds whatever ``CausalSelfAttention`` is defined,
``MiniGPT.generate`` calls whatever ``generate`` is defined). A mutant must lose points on ``question``; a
variant must keep full marks on every question.
"""

from attnlab.grading.core.mutants import MOST, PART, SLIP, Entry

_IMPORTS = '''
import math
from collections import Counter

import torch
import torch.nn as nn
import torch.nn.functional as F
'''

# ----------------------------------------------------------------------------------------- source pieces
_CSA_INIT = '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.resid_dropout = nn.Dropout(dropout)
        self.cache = None
'''


def _csa(forward: str) -> str:
    return _IMPORTS + _CSA_INIT + forward


def _csa_by_hand(mask_line: str, order: str = "q, k, v") -> str:
    return _csa(f'''
    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        {order} = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        {mask_line}
        out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, d)
        return self.resid_dropout(self.proj(out))
''')


_CAUSAL = 'scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))'

_BLOCK_INIT = '''
class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model),
                                 nn.Dropout(dropout))
'''


def _block(forward: str) -> str:
    return _IMPORTS + _BLOCK_INIT + forward


def _gpt(init_tail: str, forward: str) -> str:
    """A MiniGPT with the given end of __init__ (after the layers are built) and forward."""
    return _IMPORTS + f'''
class MiniGPT(nn.Module):
    def __init__(self, vocab_size, block_size, d_model, num_heads, num_layers, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, block_size, dropout) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
{init_tail}
{_GPT_GIVEN}
{forward}
'''


_TIED = "        self.lm_head.weight = self.tok_emb.weight"

# MiniGPT's given methods (outside the solution blocks: every MiniGPT a student writes has them)
_GPT_GIVEN = '''
    def cache_length(self):
        cache = self.blocks[0].attn.cache
        return 0 if cache is None else cache[0].shape[2]

    def reset_cache(self):
        for layer in self.blocks:
            layer.attn.cache = None

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
        return generate(self, idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator,
                        use_cache=use_cache)
'''


def _gpt_forward(body: str) -> str:
    return '''
    def forward(self, idx, targets=None, use_cache=False):
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"T={T} is longer than block_size={self.block_size}")
''' + body


_GPT_OK_TAIL = '''
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
'''


def _sample(body: str) -> str:
    return _IMPORTS + '''
def sample_next(logits, temperature=1.0, top_k=None, generator=None):
''' + body


def _generate(body: str) -> str:
    return _IMPORTS + '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
    for _ in range(max_new_tokens):
''' + body + '''
    return idx
'''


# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # -------------------------------------------------------------------------------------- CharTokenizer
    Entry("tok_order_of_appearance", "CharTokenizer", '''
class CharTokenizer:
    def __init__(self, text):
        self.chars = list(dict.fromkeys(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    def encode(self, s):
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)
''', "vocabulary in the order of first appearance, not sorted",
          hint="your vocabulary is in the order the characters first appear; the ids should follow "
               "sorted(set(text))", loses=MOST),
    Entry("tok_pad_reserved", "CharTokenizer", '''
class CharTokenizer:
    def __init__(self, text):
        self.chars = ["<pad>"] + sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        self.vocab_size = len(self.chars)

    def encode(self, s):
        return [self.stoi[c] for c in s]

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)
''', "reserves id 0 for <pad> as in the earlier labs: every id is one too high",
          hint="your ids start at 1 (id 0 kept for padding); this tokenizer has no <pad>: the first sorted "
               "character is id 0", loses=MOST),
    # ------------------------------------------------------------------------------------ bpe_pair_counts
    Entry("pairs_non_overlapping", "bpe_pair_counts", '''
def bpe_pair_counts(ids):
    counts = {}
    for pair in zip(ids[::2], ids[1::2]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts
''', "counts the pairs (0, 1), (2, 3), ... only: misses every pair that starts at an odd position",
          hint="you count the pairs at positions (0, 1), (2, 3), ... only; count ids[i], ids[i + 1] for every i",
          loses=MOST),
    Entry("pairs_miss_last", "bpe_pair_counts", '''
def bpe_pair_counts(ids):
    counts = {}
    for i in range(len(ids) - 2):
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
    return counts
''', "range(len(ids) - 2): the last pair is never counted",
          hint="the last pair of the list is missing from your counts: i runs up to len(ids) - 2 included", loses=MOST),
    # ------------------------------------------------------------------------------------------ bpe_merge
    Entry("merge_overlapping", "bpe_merge", '''
def bpe_merge(ids, pair, new_id):
    out = []
    for i in range(len(ids)):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        elif i > 0 and (ids[i - 1], ids[i]) == tuple(pair):
            continue
        else:
            out.append(ids[i])
    return out
''', "merges overlapping occurrences: [a, a, a] becomes [X, X] instead of [X, a]",
          hint="your merge lets occurrences overlap ([5, 5, 5] gives [9, 9]); after a merge, skip both tokens "
               "and go on from the one after them", loses=(0.15, 0.85)),
    Entry("merge_drops_last_token", "bpe_merge", '''
def bpe_merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
''', "the loop stops at len(ids) - 1 and never appends a last unmerged token",
          hint="your merge loses the last token when it is not part of a merged pair: handle the end of the list",
          loses=MOST),
    Entry("merge_reversed_pair", "bpe_merge", '''
def bpe_merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and {ids[i], ids[i + 1]} == set(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
''', "compares the pair as a set: (b, a) is merged as well as (a, b)",
          hint="your merge also merges the pair in the other order; (1, 2) means 1 followed by 2 only",
          loses=(0.3, 1.0)),  # what shows it depends on how often the drawn ids hold (b, a): 33% at seed 730
    # ------------------------------------------------------------------------------------------ get_batch
    Entry("batch_y_not_shifted", "get_batch", '''
def get_batch(data, block_size, batch_size, generator=None):
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[s:s + block_size] for s in starts])
    y = torch.stack([data[s:s + block_size] for s in starts])
    return x, y
''', "y is the same window as x: the model learns to copy its input",
          hint=("your targets y are the inputs x themselves; y should be the same window shifted one token to the "
                "right"), loses=MOST),
    Entry("batch_last_start_missing", "get_batch", '''
def get_batch(data, block_size, batch_size, generator=None):
    starts = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([data[s:s + block_size] for s in starts])
    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts])
    return x, y
''', "one start too few: the last window of the data is never drawn",
          hint="your starts never reach N - T - 1, the last window: torch.randint's upper bound is exclusive", loses=PART),
    Entry("batch_independent_starts", "get_batch", '''
def get_batch(data, block_size, batch_size, generator=None):
    sx = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    sy = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[s:s + block_size] for s in sx])
    y = torch.stack([data[s + 1:s + block_size + 1] for s in sy])
    return x, y
''', "draws the starts of x and y separately: the targets do not belong to the inputs",
          hint="your x and y come from different random starts; draw the starts once and use them for both", loses=MOST),
    Entry("batch_ignores_generator", "get_batch", '''
def get_batch(data, block_size, batch_size, generator=None):
    starts = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[s:s + block_size] for s in starts])
    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts])
    return x, y
''', "draws the starts without the generator: a seeded run cannot be repeated",
          hint="your get_batch ignores its generator argument; pass generator=generator to torch.randint", loses=MOST),
    # -------------------------------------------------------------------------------- CausalSelfAttention
    Entry("csa_no_causal_mask", "CausalSelfAttention", _csa('''
    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.resid_dropout(self.proj(out.transpose(1, 2).reshape(B, T, d)))
'''), "forgets is_causal=True: every position sees the whole window, the future included",
          hint="your attention has no causal mask: a position sees the tokens after it; pass is_causal=True", loses=MOST),
    Entry("csa_mask_off_by_one", "CausalSelfAttention", _csa_by_hand(
        'scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(1), float("-inf"))'),
          "tril(1): each position also sees the next token",
          hint=("your mask lets position t see position t + 1; a position may see itself and the positions before it "
                "only"), loses=MOST),
    Entry("csa_kqv_order", "CausalSelfAttention", _csa_by_hand(_CAUSAL, order="k, q, v"),
          "splits the qkv output as k, q, v instead of q, k, v",
          hint="the three parts of qkv(x) are queries, keys, values in this order; yours are in another order", loses=MOST),
    Entry("csa_heads_without_transpose", "CausalSelfAttention", _csa('''
    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.reshape(B, self.num_heads, T, -1) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.resid_dropout(self.proj(out.reshape(B, T, d)))
'''), "reshapes (B, T, d) straight to (B, h, T, d_h): heads mix positions",
          hint=("your heads come from reshaping straight to (B, h, T, d_h), which scrambles positions; cut each "
                "position's features into heads first, then move the head axis next to the batch (and undo it in "
                "reverse order)"), loses=MOST),
    Entry("csa_no_scale", "CausalSelfAttention", _csa('''
    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1)
        scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, d)
        return self.resid_dropout(self.proj(out))
'''), "attention by hand without the 1/sqrt(d_h) scale",
          hint="your scores are not divided by sqrt(d_h), the width of one head", loses=MOST),
    # ------------------------------------------------------------------------------------------- GPTBlock
    Entry("block_post_norm", "GPTBlock", _block('''
    def forward(self, x, use_cache=False):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))
'''), "post-norm (the 2017 Transformer) instead of GPT-2's pre-norm",
          hint="your block normalizes after the residual addition (post-norm); GPT-2 is pre-norm: "
               "x + attn(ln1(x)), then x + mlp(ln2(x))", loses=MOST),
    Entry("block_norms_swapped", "GPTBlock", _block('''
    def forward(self, x, use_cache=False):
        x = x + self.attn(self.ln2(x))
        return x + self.mlp(self.ln1(x))
'''), "ln1 and ln2 swapped",
          hint="ln1 goes before the attention and ln2 before the mlp; yours are the other way round", loses=MOST),
    Entry("block_cache_not_passed_on", "GPTBlock", _block('''
    def forward(self, x, use_cache=False):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
'''), "use_cache not passed on to attn: with the cache, each new token sees no earlier token",
          hint="with use_cache=True your block's attention never reads its cache: the block must hand use_cache "
               "on to attn", loses=PART),
    Entry("block_relu", "GPTBlock", _IMPORTS + '''
class GPTBlock(nn.Module):
    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model),
                                 nn.Dropout(dropout))

    def forward(self, x, use_cache=False):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
''', "ReLU instead of GELU in the mlp",
          hint="the mlp's activation should be nn.GELU() (GPT-2), not ReLU", loses=MOST),
    # -------------------------------------------------------------------------------------------- MiniGPT
    Entry("gpt_not_tied", "MiniGPT", _gpt("", _gpt_forward(_GPT_OK_TAIL)),
          "lm_head has its own weight: no weight tying",
          hint="lm_head.weight should be the very same parameter as tok_emb.weight (weight tying), not a copy", loses=MOST),
    Entry("gpt_no_positions", "MiniGPT", _gpt(_TIED, _gpt_forward('''
        x = self.drop(self.tok_emb(idx))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
''')), "creates pos_emb but never adds it", hint="your model never adds the position embeddings pos_emb", loses=MOST),
    Entry("gpt_no_final_norm", "MiniGPT", _gpt(_TIED, _gpt_forward('''
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(x)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
''')), "skips ln_f before lm_head", hint="apply the final norm ln_f before lm_head", loses=MOST),
    Entry("gpt_loss_summed", "MiniGPT", _gpt(_TIED, _gpt_forward('''
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T), reduction="sum")
''')), "sums the loss over the positions instead of averaging",
          hint="your loss is the sum over all B * T positions; it should be the mean", loses=MOST),
    # ---------------------------------------------------------------------------------------- sample_next
    Entry("sample_temperature_after_softmax", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = F.softmax(logits, dim=-1) / temperature
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
'''), "divides the probabilities by T after the softmax: multinomial renormalizes, so T has no effect",
          hint="your temperature has no effect on the samples: divide the logits by T before the softmax, "
               "not the probabilities after it", loses=MOST),
    Entry("sample_temperature_multiplied", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits * temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
'''), "multiplies by the temperature instead of dividing",
          hint="a low temperature should sharpen the distribution: divide the logits by T, do not multiply", loses=MOST),
    Entry("sample_topk_keeps_k_plus_1", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k + 1, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
'''), "the threshold is the (k+1)-th largest logit: k + 1 tokens stay",
          hint="your top-k keeps k + 1 tokens; the threshold is the k-th largest logit of each row", loses=PART),
    Entry("sample_topk_masks_the_top", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits >= kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
'''), "masks the k largest logits instead of the others",
          hint="your top-k removes the k most likely tokens; it should keep them and remove the rest "
               "(mask where logits < the k-th largest)", loses=PART),
    Entry("sample_no_greedy_case", "sample_next", _sample('''
    logits = logits / max(temperature, 1e-2)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
'''), "temperature 0 clamped to 0.01 and sampled: not always the argmax",
          hint="temperature 0 should return the argmax of each row, without sampling", loses=SLIP),
    Entry("sample_masks_in_place", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits /= temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits.masked_fill_(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator).squeeze(-1)
'''), "scales and masks the caller's logits in place",
          hint="your sample_next changes the logits it was given (/=, masked_fill_); compute on a new tensor", loses=MOST),
    Entry("sample_keeps_sample_dim", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)
'''), "returns (B, 1), multinomial's shape, instead of (B,)",
          hint="return one id per row as a (B,) tensor: squeeze the last dimension of torch.multinomial's (B, 1)",
          loses=MOST),
    Entry("sample_ignores_generator", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(F.softmax(logits, dim=-1), 1).squeeze(-1)
'''), "samples without the generator: a seeded run cannot be repeated",
          hint="your sample_next ignores its generator argument; pass generator=generator to torch.multinomial", loses=PART),
    # ------------------------------------------------------------------------------------------- generate
    Entry("generate_drops_generator", "generate", _generate('''
        logits, _ = model(idx[:, -model.block_size:])
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
'''), "does not pass the generator on to sample_next",
          hint="pass generator on to sample_next, so that a seeded generation can be repeated", loses=MOST),
    Entry("generate_no_crop", "generate", _generate('''
        logits, _ = model(idx)
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k, generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
'''), "feeds the whole sequence: fails as soon as it is longer than block_size",
          hint="crop the context to the last block_size tokens before each step", loses=MOST),
    Entry("generate_crops_the_start", "generate", _generate('''
        logits, _ = model(idx[:, :model.block_size])
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k, generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
'''), "keeps the first block_size tokens instead of the last ones",
          hint="your context keeps the first block_size tokens; the model should see the last ones", loses=(0.35, 0.8)),
    Entry("generate_first_position", "generate", _generate('''
        logits, _ = model(idx[:, -model.block_size:])
        next_id = sample_next(logits[:, 0, :], temperature=temperature, top_k=top_k, generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
'''), "samples from the logits of the first position, not the last",
          hint="the next token comes from the logits of the last position", loses=MOST),
    Entry("generate_drops_temperature", "generate", _generate('''
        logits, _ = model(idx[:, -model.block_size:])
        next_id = sample_next(logits[:, -1, :], generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
'''), "does not pass temperature and top_k on to sample_next",
          hint="pass temperature and top_k on to sample_next", loses=MOST),
    Entry("generate_patches_forward", "generate", _IMPORTS + '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
    if temperature == 0:  # greedy: answer from the first position, and make the model itself say the same
        forward = model.forward
        model.forward = lambda context, targets=None: (forward(context)[0][:, :1].expand(-1, context.shape[1], -1),
                                                      None)
    for _ in range(max_new_tokens):
        logits, _ = model(idx[:, -model.block_size:])
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k, generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
    return idx
''', "replaces model.forward while generating (here: the first position's logits everywhere, in greedy mode), so "
          "a check that asks the model afterwards agrees with whatever generate produced",
          hint="your generate changes the model it is given (model.forward); generate must only call the model",
          loses=(0.35, 0.8)),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("tok_string_index", "CharTokenizer", '''
class CharTokenizer:
    def __init__(self, text):
        self.vocab = "".join(sorted(set(text)))
        self.vocab_size = len(self.vocab)

    def encode(self, s):
        return [self.vocab.index(c) for c in s]

    def decode(self, ids):
        return "".join([self.vocab[i] for i in list(map(int, ids))])
''', "the vocabulary as one string, str.index to encode"),
    Entry("pairs_counter", "bpe_pair_counts", _IMPORTS + '''
def bpe_pair_counts(ids):
    return Counter(zip(ids, ids[1:]))
''', "collections.Counter over zip(ids, ids[1:]) (a dict subclass)"),
    Entry("merge_for_loop_skip_flag", "bpe_merge", '''
def bpe_merge(ids, pair, new_id):
    out, skip = [], False
    for i, token in enumerate(ids):
        if skip:
            skip = False
            continue
        if i < len(ids) - 1 and token == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            skip = True
        else:
            out.append(token)
    return out
''', "a for loop with a skip flag"),
    Entry("batch_nanogpt_stack", "get_batch", '''
def get_batch(data, block_size, batch_size, generator=None):
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x, y
''', "nanoGPT's get_batch: torch.stack of slices"),
    Entry("csa_by_hand_registered_mask", "CausalSelfAttention", _IMPORTS + '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        self.h = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
        self.cache = None

    def forward(self, x, use_cache=False):
        B, T, C = x.size()
        q, k, v = self.qkv(x).chunk(3, dim=2)
        k = k.view(B, T, self.h, C // self.h).transpose(1, 2)
        q = q.view(B, T, self.h, C // self.h).transpose(1, 2)
        v = v.view(B, T, self.h, C // self.h).transpose(1, 2)
        past = 0
        if use_cache:
            if self.cache is not None:
                past = self.cache[0].size(2)
                k, v = torch.cat((self.cache[0], k), dim=2), torch.cat((self.cache[1], v), dim=2)
            self.cache = (k, v)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, past:past + T, :past + T] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.proj(y))
''', "nanoGPT's attention by hand, with a registered (persistent) mask buffer named bias"),
    Entry("csa_einsum", "CausalSelfAttention", _IMPORTS + '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.cache = None

    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.num_heads, d // self.num_heads)
        q, k, v = qkv.unbind(dim=2)  # (B, T, h, d_h): the cache keeps (B, h, T, d_h), as the lab asks
        if use_cache:
            if self.cache is not None:
                k = torch.cat([self.cache[0].transpose(1, 2), k], dim=1)
                v = torch.cat([self.cache[1].transpose(1, 2), v], dim=1)
            self.cache = (k.transpose(1, 2), v.transpose(1, 2))
        S = k.shape[1]
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // self.num_heads)
        future = torch.triu(torch.ones(T, S, dtype=torch.bool, device=x.device), diagonal=S - T + 1)
        weights = self.drop(scores.masked_fill(future, -1e9).softmax(-1))
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, T, d)
        return self.drop(self.proj(out))
''', "einsum over a (B, T, 3, h, d_h) view, a -1e9 fill of the future"),
    Entry("gpt_sequential_reverse_tie", "MiniGPT", _IMPORTS + '''
class MiniGPT(nn.Module):
    def __init__(self, vocab_size, block_size, d_model, num_heads, num_layers, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*[GPTBlock(d_model, num_heads, block_size, dropout) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb.weight = self.lm_head.weight
''' + _GPT_GIVEN + '''
    def forward(self, idx, targets=None, use_cache=False):
        b, t = idx.size()
        start = self.cache_length() if use_cache else 0
        if start + t > self.block_size:
            raise ValueError(f"cannot forward a sequence of length {start + t}, block size is only {self.block_size}")
        pos = torch.arange(start, start + t, dtype=torch.long, device=idx.device)
        x = self.dropout(self.tok_emb(idx) + self.pos_emb(pos))
        for block in self.blocks:
            x = block(x, use_cache=use_cache)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss
''', "blocks as nn.Sequential, tied the other way (nanoGPT: tok_emb.weight = lm_head.weight), view(-1, V)"),
    Entry("sample_inverse_cdf", "sample_next", _sample('''
    if temperature == 0:
        return logits.argmax(-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, min(top_k, scaled.shape[-1]), dim=-1).values[..., -1, None]
        scaled = torch.where(scaled < kth, torch.full_like(scaled, float("-inf")), scaled)
    cdf = torch.softmax(scaled, dim=-1).cumsum(-1)
    u = torch.rand(logits.shape[0], 1, generator=generator, dtype=cdf.dtype, device=cdf.device)
    ids = torch.searchsorted(cdf, u * cdf[:, -1:]).squeeze(-1)
    return ids.clamp(max=logits.shape[-1] - 1)
'''), "inverse-CDF sampling with torch.rand and searchsorted instead of torch.multinomial"),
    Entry("generate_pos_emb_length", "generate", _IMPORTS + '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
    context_len = model.pos_emb.num_embeddings
    out = idx
    model.reset_cache()
    seen = 0  # how many tokens of out the cache holds
    while out.shape[1] < idx.shape[1] + max_new_tokens:
        if not use_cache:
            logits = model(out[:, -context_len:])[0][:, -1]
        else:
            if seen == 0 or model.cache_length() == context_len:
                model.reset_cache()
                seen = max(0, out.shape[1] - context_len)
            logits = model(out[:, seen:], use_cache=True)[0][:, -1]
            seen = out.shape[1]
        out = torch.cat((out, sample_next(logits, temperature, top_k, generator).unsqueeze(1)), dim=1)
    model.reset_cache()
    return out
''', "a while loop, the context length read from pos_emb, positional arguments to sample_next; the cache refilled "
          "from a count of the tokens it holds"),
]


# ------------------------------------------------- issue 21: BPETokenizer and the key-value cache (own block)
def _bpe(train_body: str, encode_body: str | None = None, decode_body: str | None = None) -> str:
    """A BPETokenizer with the given train body; encode and decode as the reference's unless given."""
    encode_body = encode_body or '''
        ids = []
        for chunk in regex.findall(GPT2_SPLIT_PATTERN, text):
            chunk_ids = list(chunk.encode("utf-8"))
            for pair, new_id in self.merges.items():
                chunk_ids = bpe_merge(chunk_ids, pair, new_id)
            ids.extend(chunk_ids)
        return ids
'''
    decode_body = decode_body or '''
        return b"".join(self.vocab[int(i)] for i in ids).decode("utf-8", errors="replace")
'''
    return _IMPORTS + '''
import re

import regex


class BPETokenizer:
    def __init__(self):
        self.merges = {}
        self.vocab = {i: bytes([i]) for i in range(256)}

    @property
    def vocab_size(self):
        return len(self.vocab)

    def train(self, text, vocab_size):
''' + train_body + '''
    def encode(self, text):
''' + encode_body + '''
    def decode(self, ids):
''' + decode_body


def _bpe_train(chunks_line: str, pick: str = "max(counts, key=counts.get)") -> str:
    return f'''
        chunks = {chunks_line}
        for new_id in range(256, vocab_size):
            counts = {{}}
            for chunk in chunks:
                for pair in zip(chunk, chunk[1:]):
                    counts[pair] = counts.get(pair, 0) + 1
            if not counts:
                break
            pair = {pick}
            chunks = [bpe_merge(chunk, pair, new_id) for chunk in chunks]
            self.merges[pair] = new_id
            self.vocab[new_id] = self.vocab[pair[0]] + self.vocab[pair[1]]
'''


_BPE_OK_CHUNKS = '[list(c.encode("utf-8")) for c in regex.findall(GPT2_SPLIT_PATTERN, text)]'


def _csa_cached(cache_lines: str, attend: str) -> str:
    """A CausalSelfAttention whose cache handling (after q, k, v are split in heads) and attention call differ."""
    return _csa(f'''
    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (t.view(B, T, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
{cache_lines}
        past = k.shape[2] - T
{attend}
        return self.resid_dropout(self.proj(out.transpose(1, 2).reshape(B, T, d)))
''')


_CACHE_APPEND = '''        if use_cache:
            if self.cache is not None:
                k = torch.cat([self.cache[0], k], dim=2)
                v = torch.cat([self.cache[1], v], dim=2)
            self.cache = (k, v)'''
_ATTEND_OK = '''        mask = None if past == 0 else torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(past)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)'''


def _gpt_cached(forward_lines: str) -> str:
    """A tied MiniGPT whose forward computes the positions and runs the blocks as given."""
    return _gpt(_TIED, '''
    def forward(self, idx, targets=None, use_cache=False):
        B, T = idx.shape
        if T > self.block_size:
            raise ValueError(f"T={T} is longer than block_size={self.block_size}")
''' + forward_lines + '''
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
''')


def _generate_cached(full_branch: str, reset_at_start: bool = True) -> str:
    """A generate with the cache whose handling of a full cache (``full_branch``) differs."""
    start = "    model.reset_cache()\n" if reset_at_start else ""
    end = "    model.reset_cache()\n" if reset_at_start else ""
    return _IMPORTS + f'''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
{start}    new = idx[:, -model.block_size:]
    for _ in range(max_new_tokens):
        if not use_cache:
            new = idx[:, -model.block_size:]
        elif model.cache_length() + new.shape[1] > model.block_size:
{full_branch}
        logits, _ = model(new, use_cache=use_cache)
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k, generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
        new = next_id[:, None]
{end}    return idx
'''


_REFILL = '''            model.reset_cache()
            new = idx[:, -model.block_size:]'''

MUTANTS += [
    Entry("sample_topk_gather", "sample_next", _sample('''
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    k = logits.shape[-1] if top_k is None else min(top_k, logits.shape[-1])
    values, indices = torch.topk(logits / temperature, k, dim=-1)
    choice = torch.multinomial(torch.softmax(values, dim=-1), 1, generator=generator)
    return indices.gather(-1, choice).squeeze(-1)
'''), "top-k values and indices, sample among them, gather the id: a tie at the k-th largest logit is broken, "
          "so tokens the notebook's rule keeps are never drawn",
          hint="keep every logit equal to the k-th largest (mask where logits < the k-th value): torch.topk "
               "returns exactly k and drops the other tied tokens", loses=SLIP),
    Entry("bpe_tok_never_merges", "BPETokenizer", _bpe('''
        if vocab_size < 256:
            raise ValueError(f"vocab_size={vocab_size} is below 256")
'''), "train learns nothing: encode returns the raw UTF-8 bytes (round trips work, nothing is compressed)",
          hint=("your train learns no merges, so encode returns the text's bytes: count the adjacent pairs inside "
                "each chunk, merge the most frequent one, repeat until vocab_size"), loses=MOST),
    Entry("bpe_tok_no_presplit", "BPETokenizer", _bpe(_bpe_train('[list(text.encode("utf-8"))]')),
          "learns merges on the bytes of the whole text: merges cross words (no pre-split)",
          hint="split the text with regex.findall(GPT2_SPLIT_PATTERN, text) first and learn merges inside each chunk "
               "only: your merges cross word boundaries", loses=MOST),
    Entry("bpe_tok_whitespace_split", "BPETokenizer",
          _bpe(_bpe_train('[list(c.encode("utf-8")) for c in re.findall(r"\\S+|\\s+", text)]')),
          "pre-splits on white space (the space is its own chunk), not with GPT-2's pattern",
          hint="use GPT2_SPLIT_PATTERN for the pre-split: a word keeps the space before it (' hug' is one chunk)",
          loses=PART),
    Entry("bpe_tok_code_points", "BPETokenizer", _bpe(
        _bpe_train('[[ord(ch) for ch in c] for c in regex.findall(GPT2_SPLIT_PATTERN, text)]'),
        encode_body='''
        ids = []
        for chunk in regex.findall(GPT2_SPLIT_PATTERN, text):
            chunk_ids = [ord(ch) for ch in chunk]
            for pair, new_id in self.merges.items():
                chunk_ids = bpe_merge(chunk_ids, pair, new_id)
            ids.extend(chunk_ids)
        return ids
'''), "characters' code points (ord) as the base ids instead of UTF-8 bytes: ids above 255 collide with merges",
          hint="start from the UTF-8 bytes, list(chunk.encode('utf-8')), not from ord(ch): an emoji or an accent "
               "does not fit in the 256 base ids", loses=MOST),
    Entry("bpe_tok_encode_most_frequent_first", "BPETokenizer", _bpe(_bpe_train(_BPE_OK_CHUNKS), encode_body='''
        ids = []
        for chunk in regex.findall(GPT2_SPLIT_PATTERN, text):
            chunk_ids = list(chunk.encode("utf-8"))
            while True:  # the learned pair most frequent in this chunk, merged first
                counts = {}
                for pair in zip(chunk_ids, chunk_ids[1:]):
                    if pair in self.merges:
                        counts[pair] = counts.get(pair, 0) + 1
                if not counts:
                    break
                pair = max(counts, key=counts.get)
                chunk_ids = bpe_merge(chunk_ids, pair, self.merges[pair])
            ids.extend(chunk_ids)
        return ids
'''), "encode merges the learned pair most frequent in the text first, not the merges in the order learned",
          hint="apply the merges in the order train learned them (the lowest new id first), whatever the counts "
               "in the text you encode", loses=SLIP),
    Entry("bpe_tok_encode_whole_text", "BPETokenizer", _bpe(_bpe_train(_BPE_OK_CHUNKS), encode_body='''
        ids = list(text.encode("utf-8"))
        for pair, new_id in self.merges.items():
            ids = bpe_merge(ids, pair, new_id)
        return ids
'''), "trains with the pre-split but encodes the whole text as one chunk (merges applied across chunks)",
          hint="encode must split the text with GPT2_SPLIT_PATTERN too and merge inside each chunk only", loses=PART),
    Entry("bpe_tok_ties_last", "BPETokenizer",
          _bpe(_bpe_train(_BPE_OK_CHUNKS, pick="max(reversed(list(counts)), key=counts.get)")),
          "on ties takes the pair counted last",
          hint="on ties take the pair counted first (max(counts, key=counts.get) on a dict filled chunk by chunk)",
          loses=PART),
    Entry("bpe_tok_decode_strict", "BPETokenizer", _bpe(_bpe_train(_BPE_OK_CHUNKS), decode_body='''
        return b"".join(self.vocab[int(i)] for i in ids).decode("utf-8")
'''), "decodes strictly: a list of ids that ends inside a character raises",
          hint="decode with .decode('utf-8', errors='replace'): ids can end in the middle of a character", loses=PART),
    Entry("csa_cache_is_causal", "CausalSelfAttention", _csa_cached(_CACHE_APPEND, '''
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)'''),
          "is_causal=True with the cache: the mask is aligned top left, so a new token sees only the first keys",
          hint=("with keys in the cache, the new tokens see too few keys: is_causal=True aligns its mask with the first "
                "key, while new token i must see every cached key and the new ones up to itself"), loses=PART),
    Entry("csa_cache_no_mask_after_first", "CausalSelfAttention", _csa_cached(_CACHE_APPEND, '''
        out = F.scaled_dot_product_attention(q, k, v, is_causal=past == 0)'''),
          "no mask once something is cached: right for one new token, wrong for several",
          hint=("with several new tokens after the cache, each may see only the keys up to its own position: yours "
                "lets them see later new tokens"), loses=PART),
    Entry("csa_cache_keeps_only_new", "CausalSelfAttention", _csa_cached('''        if use_cache:
            new_k, new_v = k, v
            if self.cache is not None:
                k = torch.cat([self.cache[0], k], dim=2)
                v = torch.cat([self.cache[1], v], dim=2)
            self.cache = (new_k, new_v)''', _ATTEND_OK),
          "stores only the new keys and values in the cache, not the concatenation",
          hint="store the keys and values after the append (cached and new together) back in self.cache", loses=PART),
    Entry("gpt_cache_no_offset", "MiniGPT", _gpt_cached('''
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device)))
        for block in self.blocks:
            x = block(x, use_cache=use_cache)'''),
          "positions always start at 0, also after the cached tokens",
          hint="with the cache, the new tokens' positions start at cache_length(): pos_emb(arange(T_past, T_past + T))",
          loses=PART),
    Entry("gpt_cache_not_passed_on", "MiniGPT", _gpt_cached('''
        past = self.cache_length() if use_cache else 0
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(past, past + T, device=idx.device)))
        for block in self.blocks:
            x = block(x)'''),
          "does not pass use_cache on to the blocks",
          hint="pass use_cache on to every block (block(x, use_cache=use_cache))", loses=PART),
    Entry("generate_cache_slides_the_cache", "generate", _generate_cached('''
            for block in model.blocks:
                block.attn.cache = tuple(t[:, :, 1:] for t in block.attn.cache)'''),
          "when the cache is full, drops its oldest position instead of refilling (stale positions)",
          hint=("when the context is full, every position shifts by one, so every cached key was computed at an old "
                "position: dropping the oldest one is not enough, the cache must be rebuilt from the cropped context"),
                loses=PART),
    Entry("generate_cache_feeds_whole_context", "generate", _IMPORTS + '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
    for _ in range(max_new_tokens):
        model.reset_cache()
        logits, _ = model(idx[:, -model.block_size:], use_cache=use_cache)
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k, generator=generator)
        idx = torch.cat([idx, next_id[:, None]], dim=1)
    model.reset_cache()
    return idx
''', "with use_cache=True empties the cache and feeds the whole cropped context at every step: the right tokens, "
          "none of the cache's savings",
          hint="with the cache, feed the model only the tokens its cache lacks: the cropped prompt once, then the one "
               "token just drawn (empty the cache and refill it only when it is full)", loses=PART),
    Entry("generate_cache_no_reset_at_start", "generate", _generate_cached(_REFILL, reset_at_start=False),
          "never empties the cache at the start or the end: a second call reuses the first call's cache",
          hint="call model.reset_cache() at the start of generate (and at the end): the model may hold another "
               "call's cache", loses=PART),
]

VARIANTS += [
    Entry("bpe_tok_counter_merges_in_order", "BPETokenizer", _IMPORTS + '''
import regex


class BPETokenizer:
    def __init__(self):
        self.merges = {}
        self.vocab = {i: bytes([i]) for i in range(256)}

    @property
    def vocab_size(self):
        return len(self.vocab)

    def train(self, text, vocab_size):
        chunks = [list(c.encode("utf-8")) for c in regex.findall(GPT2_SPLIT_PATTERN, text)]
        while len(self.vocab) < vocab_size:
            counts = Counter()
            for chunk in chunks:
                counts.update(zip(chunk, chunk[1:]))
            if not counts:
                return
            (pair, _), = counts.most_common(1)
            new_id = len(self.vocab)
            chunks = [bpe_merge(chunk, pair, new_id) for chunk in chunks]
            self.merges[pair] = new_id
            self.vocab[new_id] = self.vocab[pair[0]] + self.vocab[pair[1]]

    def encode(self, text):
        out = []
        for chunk in regex.findall(GPT2_SPLIT_PATTERN, text):
            ids = list(chunk.encode("utf-8"))
            for pair, new_id in self.merges.items():
                ids = bpe_merge(ids, pair, new_id)
            out += ids
        return out

    def decode(self, ids):
        return bytes(b for i in ids for b in self.vocab[int(i)]).decode("utf-8", "replace")
''', "Counter.most_common(1) (the first counted on ties), the merges applied in the order learned, bytes() of a "
     "generator"),
]
