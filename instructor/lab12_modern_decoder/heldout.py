"""Lab 12 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("rope_halves_by_chunk", "apply_rope", '''
import torch

def apply_rope(x, offset=0, base=10000.0):
    n = x.shape[-1]
    if n % 2:
        raise ValueError(f"odd d_h={n}")
    pos = torch.arange(offset, offset + x.shape[-2], device=x.device, dtype=torch.float64)
    freqs = torch.outer(pos, base ** (-torch.arange(0, n, 2, device=x.device, dtype=torch.float64) / n))
    c, s = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    a, b = x.chunk(2, dim=-1)
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)
''', "rope_rotate_half", why="rotate-half pairing by chunk"),
    HeldOut("rms_layer_norm_like", "RMSNorm", '''
import torch
import torch.nn as nn

class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x):
        centred = x - x.mean(-1, keepdim=True)
        return self.weight * centred / torch.sqrt(centred.square().mean(-1, keepdim=True) + self.eps)
''', "rms_subtracts_mean", why="centres x first"),
    HeldOut("glu_silu_on_up", "SwiGLU", '''
import torch.nn as nn
import torch.nn.functional as F

class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.w1, self.w3 = nn.Linear(d_model, d_ff, bias=False), nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.w2(F.silu(self.w3(x)) * self.w1(x)))
''', "swiglu_gate_on_up", why="the gate on w3"),
    HeldOut("linear_global_sums", "linear_attention", '''
import torch
import torch.nn.functional as F

def linear_attention(q, k, v, eps=1e-6):
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    kv = torch.einsum("...tk,...tv->...kv", fk, v)
    norm = torch.einsum("...tk,...k->...t", fq, fk.sum(-2))
    return torch.einsum("...tk,...kv->...tv", fq, kv) / (norm[..., None] + eps)
''', "linear_not_causal", why="sums over all keys"),
]
