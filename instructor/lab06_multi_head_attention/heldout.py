"""Lab 06 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

_HEAD = '''
import math
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError(f"num_heads={num_heads} must divide d_model={d_model}")
        self.h = num_heads
        self.dh = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.drop = nn.Dropout(dropout)
'''


def _mha(body: str) -> str:
    return _HEAD + body


HELDOUT = [
    HeldOut("split_reshape_no_transpose", "split_heads", '''
def split_heads(t, num_heads):
    b, length, width = t.shape
    return t.reshape(b, num_heads, length, width // num_heads)
''', None),  # since split_heads is checked against the reference's merge (issue 30), the catalogue's replay no
    # longer tells this reshape apart at every seed: no name is the honest answer (a name on MultiHeadAttention, which
    # calls it, is left out by diagnose._own_mistakes_only)
    HeldOut("split_unflatten_strided", "split_heads", '''
def split_heads(t, num_heads):
    return t.unflatten(2, (t.shape[2] // num_heads, num_heads)).movedim(3, 1)
''', "split_heads_wrong_cut"),
    HeldOut("split_forgot_transpose_negative_axes", "split_heads", '''
def split_heads(t, num_heads):
    return t.unflatten(-1, (num_heads, -1))
''', "split_heads_returns_b_n_h_d"),
    HeldOut("merge_contiguous_view_no_transpose", "merge_heads", '''
def merge_heads(t):
    b, heads, length, dh = t.shape
    return t.contiguous().view(b, length, heads * dh)
''', "merge_heads_reshape_without_transpose"),
    HeldOut("mha_single_head", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        att = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
        if mask is not None:
            m = mask if mask.dim() < 4 else mask[:, 0]
            att = att.masked_fill(m == 0, float("-inf"))
        att = att.softmax(-1)
        out = self.out_proj(self.drop(att) @ v)
        return out, att.unsqueeze(1).expand(-1, self.h, -1, -1)
'''), "mha_single_head", why="one head of width d_model (num_heads only copies the weights)"),
    HeldOut("mha_inline_split_no_transpose", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        b, nq, d = query.shape
        nk = key.shape[1]
        q = self.q_proj(query).view(b, self.h, nq, self.dh)
        k = self.k_proj(key).view(b, self.h, nk, self.dh)
        v = self.v_proj(value).view(b, self.h, nk, self.dh)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training:
            weights = self.drop(weights)
            heads = weights @ v
        return self.out_proj(heads.transpose(1, 2).reshape(b, nq, d)), weights
'''), "mha_split_without_transpose", why="splits the heads inline with .view and no transpose"),
    HeldOut("mha_scale_full_width", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.h)
        k = split_heads(self.k_proj(key), self.h)
        v = split_heads(self.v_proj(value), self.h)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * (self.h * self.dh) ** -0.5
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), -math.inf)
        weights = scores.softmax(dim=-1)
        if self.training:
            weights = self.drop(weights)
        return self.out_proj(merge_heads(weights @ v)), weights
'''), "mha_scale_sqrt_d_model", why="scales by sqrt(d_model)"),
    HeldOut("mha_merged_heads_returned", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.h)
        k = split_heads(self.k_proj(key), self.h)
        v = split_heads(self.v_proj(value), self.h)
        ctx, w = scaled_dot_product_attention(q, k, v, mask)
        if self.training and self.drop.p:
            w = self.drop(w)
            ctx = w @ v
        out = merge_heads(ctx)
        return out, w
'''), "mha_no_out_proj", why="forgets out_proj"),
    HeldOut("mha_mask_true_blocks", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.h)
        k = split_heads(self.k_proj(key), self.h)
        v = split_heads(self.v_proj(value), self.h)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        if mask is not None:
            s = s.masked_fill(mask, float("-inf"))
        w = torch.softmax(s, -1)
        if self.training:
            w = self.drop(w)
        return self.out_proj(merge_heads(w @ v)), w
'''), "mha_mask_inverted", why="True = blocked"),
    HeldOut("mha_head_mean_weights", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.h)
        k = split_heads(self.k_proj(key), self.h)
        v = split_heads(self.v_proj(value), self.h)
        ctx, w = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training:
            w = self.drop(w)
            ctx = w @ v
        return self.out_proj(merge_heads(ctx)), w.sum(1) / self.h
'''), "mha_weights_averaged", why="returns the weights averaged over the heads"),
    HeldOut("param_count_three_biases", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    n = 4 * d_model ** 2
    if bias:
        n += 3 * d_model
    return int(n)
''', "param_count_no_out_proj_bias", why="forgets out_proj's bias"),
    HeldOut("param_count_heads_times", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    one = 4 * (d_model * d_model + (d_model if bias else 0))
    return one * num_heads
''', "param_count_per_head", why="multiplies by the heads"),
    HeldOut("repeat_kv_cat_tiles", "repeat_kv", '''
import torch

def repeat_kv(x, n_rep):
    return torch.cat([x] * n_rep, dim=1)
''', "repeat_kv_tiles", why="tiles the heads"),
    HeldOut("mha_keys_values_swapped", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.h)
        k = split_heads(self.k_proj(value), self.h)
        v = split_heads(self.v_proj(key), self.h)
        ctx, w = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training:
            w = self.drop(w)
            ctx = w @ v
        return self.out_proj(merge_heads(ctx)), w
'''), None, why="key and value inputs swapped"),
]
