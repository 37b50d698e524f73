"""Lab 07 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

_PE_HEAD = '''
import math
import torch


def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"odd d_model={d_model}: sin/cos come in pairs")
'''

_BLOCK_HEAD = '''
import torch
from torch import nn


class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop_a, self.drop_f = nn.Dropout(dropout), nn.Dropout(dropout)

    def _attend(self, y, mask):
        out, _ = self.self_attn(y, y, y, mask=mask)
        return self.drop_a(out)
'''

HELDOUT = [
    HeldOut("pe_cos_even_sin_odd", "sinusoidal_positional_encoding", _PE_HEAD + '''
    p = torch.arange(max_len).double().unsqueeze(1)
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2).double() / d_model)
    ang = p * inv
    return torch.stack([ang.cos(), ang.sin()], dim=-1).flatten(1).float()
''', "pe_sin_cos_swapped", why="cos on the even columns, sin on the odd ones"),
    HeldOut("pe_positions_one_based", "sinusoidal_positional_encoding", _PE_HEAD + '''
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = (pos + 1) / 10000 ** (i / d_model)
            table[pos, i] = math.sin(angle)
            table[pos, i + 1] = math.cos(angle)
    return table.to(torch.float32)
''', "pe_positions_from_one", why="positions counted from 1"),
    HeldOut("pe_exponent_i_over_d", "sinusoidal_positional_encoding", _PE_HEAD + '''
    half = torch.arange(d_model // 2, dtype=torch.float64)
    ang = torch.arange(max_len, dtype=torch.float64)[:, None] * torch.pow(10000.0, -half / d_model)
    out = torch.empty(max_len, d_model, dtype=torch.float64)
    out[:, ::2], out[:, 1::2] = ang.sin(), ang.cos()
    return out.float()
''', "pe_exponent_pair_index", why="exponent i/d with the pair index"),
    HeldOut("pe_sin_block_then_cos_block", "sinusoidal_positional_encoding", _PE_HEAD + '''
    ang = torch.outer(torch.arange(max_len, dtype=torch.float64),
                      10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model))
    return torch.cat((torch.sin(ang), torch.cos(ang)), dim=1).float()
''', "pe_concatenated_halves", why="sin half then cos half"),
    HeldOut("pe_base_1000", "sinusoidal_positional_encoding", _PE_HEAD + '''
    ang = torch.arange(max_len, dtype=torch.float64)[:, None] / 1000.0 ** (
        torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    out = torch.empty(max_len, d_model, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = ang.sin(), ang.cos()
    return out.float()
''', None, why="a typo in the base: 1000"),
    HeldOut("ln_torch_var_default", "layer_norm", '''
import torch

def layer_norm(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return weight * (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) + bias
''', "ln_unbiased_variance", why="torch's var is unbiased by default"),
    HeldOut("ln_eps_added_to_std", "layer_norm", '''
def layer_norm(x, weight, bias, eps=1e-5):
    c = x - x.mean(dim=-1, keepdim=True)
    sd = c.pow(2).mean(dim=-1, keepdim=True).sqrt()
    return c / (sd + eps) * weight + bias
''', "ln_eps_outside_sqrt", why="eps added to the standard deviation"),
    HeldOut("ln_no_gamma_beta", "layer_norm", '''
import torch

def layer_norm(x, weight, bias, eps=1e-5):
    c = x - x.mean(dim=-1, keepdim=True)
    return c * torch.rsqrt(c.square().mean(dim=-1, keepdim=True) + eps)
''', "ln_no_affine", why="forgets weight and bias"),
    HeldOut("ff_drop_then_act", "FeedForward", '''
from torch import nn


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"activation {activation!r} is neither relu nor gelu")
        self.act = acts[activation]()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.act(self.drop(self.linear1(x))))
''', "ff_dropout_before_activation", why="dropout before the activation"),
    HeldOut("block_ff_without_residual", "TransformerEncoderBlock", _BLOCK_HEAD + '''
    def forward(self, x, mask=None):
        if not self.norm_first:
            h = self.norm1(x + self._attend(x, mask))
            return self.norm2(self.drop_f(self.ff(h)))
        h = x + self._attend(self.norm1(x), mask)
        return self.drop_f(self.ff(self.norm2(h)))
''', "block_no_ff_residual", why="the feed-forward sub-layer without its residual"),
    HeldOut("block_always_post_norm", "TransformerEncoderBlock", _BLOCK_HEAD + '''
    def forward(self, x, mask=None):
        h = self.norm1(x + self._attend(x, mask))
        return self.norm2(h + self.drop_f(self.ff(h)))
''', "block_norm_first_ignored", why="norm_first ignored"),
    HeldOut("block_pre_norm_residual_from_normed", "TransformerEncoderBlock", _BLOCK_HEAD + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            y = self.norm1(x)
            x = y + self._attend(y, mask)
            y = self.norm2(x)
            return y + self.drop_f(self.ff(y))
        x = self.norm1(x + self._attend(x, mask))
        return self.norm2(x + self.drop_f(self.ff(x)))
''', "block_pre_norm_normalizes_sum", why="pre-norm residual from the normalized x"),
    HeldOut("block_one_norm_twice", "TransformerEncoderBlock", _BLOCK_HEAD + '''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self._attend(self.norm1(x), mask)
            return x + self.drop_f(self.ff(self.norm1(x)))
        x = self.norm1(x + self._attend(x, mask))
        return self.norm1(x + self.drop_f(self.ff(x)))
''', None, why="norm1 used for both sub-layers (norm2 never used)"),
]
