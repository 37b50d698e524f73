"""Lab 05 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("simple_divides_by_sqrt", "simple_self_attention", '''
import torch

def simple_self_attention(x):
    s = torch.matmul(x, x.transpose(-1, -2)) / x.shape[-1] ** 0.5
    w = s.softmax(dim=-1)
    return torch.matmul(w, x), w
''', "simple_scaled", why="scaled although simple attention is unscaled"),
    HeldOut("sdpa_unscaled", "scaled_dot_product_attention", '''
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    s = torch.einsum("...qd,...kd->...qk", q, k)
    if mask is not None:
        s = s.masked_fill(mask.logical_not(), float("-inf"))
    w = s.softmax(-1)
    return w @ v, w
''', "sdpa_no_scale", why="no 1/sqrt(d_k)"),
    HeldOut("sdpa_softmax_queries", "scaled_dot_product_attention", '''
import math
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.mT * (1.0 / math.sqrt(q.size(-1)))
    if mask is not None:
        s = torch.where(mask, s, float("-inf"))
    w = torch.softmax(s, dim=-2)
    return w @ v, w
''', "sdpa_softmax_dim_minus2", why="softmax over the queries"),
    HeldOut("sdpa_mask_true_blocks", "scaled_dot_product_attention", '''
import math
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask, -math.inf)
    w = torch.softmax(s, dim=-1)
    return w @ v, w
''', "sdpa_inverted_mask", why="True = blocked"),
    HeldOut("sdpa_zero_after_softmax", "scaled_dot_product_attention", '''
import math
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w
''', "sdpa_mask_after_softmax", why="mask applied after the softmax"),
    HeldOut("causal_triu", "causal_mask", '''
import torch

def causal_mask(n, device=None):
    return torch.triu(torch.ones(n, n, device=device)).bool()
''', "causal_upper", why="upper triangle"),
    HeldOut("causal_no_diagonal", "causal_mask", '''
import torch

def causal_mask(n, device=None):
    i = torch.arange(n, device=device)
    return i[:, None] > i[None, :]
''', "causal_diagonal_excluded", why="the diagonal excluded"),
    HeldOut("padding_le", "padding_mask", '''
import torch

def padding_mask(lengths, max_len):
    return torch.arange(max_len, device=lengths.device).unsqueeze(0) <= lengths.unsqueeze(1)
''', "padding_off_by_one", why="<= instead of <"),
    HeldOut("selfattention_scaled_by_width", "SelfAttention", '''
import math
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, d_model, d_k=None, d_v=None, bias=True):
        super().__init__()
        self.d = d_model
        self.q_proj = nn.Linear(d_model, d_k or d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_k or d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_v or d_model, bias=bias)

    def forward(self, x, mask=None):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        s = q @ k.transpose(-2, -1) / math.sqrt(self.d)
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = s.softmax(-1)
        return w @ v, w
''', "selfattention_scale_by_d_model", why="scaled by d_model instead of d_k"),
    HeldOut("sdpa_scale_by_dk_squared", "scaled_dot_product_attention", '''
import torch

def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / (q.shape[-1] ** 2) ** 0.25
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w
''', None, why="divided by d_k ** 0.5 written wrongly as (d_k ** 2) ** 0.25 == sqrt(d_k): correct, no name"),
]
