"""Lab 12 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` runs after the reference code and redefines one graded name; the rest of the reference picks
the new definition up (``GroupedQueryAttention`` calls whatever ``apply_rope`` is defined, ``ModernDecoder`` builds
whatever ``ModernBlock`` is defined). A mutant must lose points on ``question``; a variant must keep full marks.
"""

from attnlab.grading.core.mutants import ALL, MOST, PART, Entry

_IMPORTS = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
'''


def _rope(body: str) -> str:
    return _IMPORTS + '''
def apply_rope(x, offset=0, base=10000.0):
    d_h = x.shape[-1]
    if d_h % 2 != 0:
        raise ValueError(f"apply_rope needs an even d_h, got d_h={d_h}")
    T = x.shape[-2]
''' + body


_ROPE_ANGLES = '''
    inv_freq = base ** (-torch.arange(0, d_h, 2, dtype=torch.float64, device=x.device) / d_h)
    positions = torch.arange(offset, offset + T, dtype=torch.float64, device=x.device)
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
'''


def _rms(forward: str, init: str = "self.eps = eps\n        self.weight = nn.Parameter(torch.ones(d_model))") -> str:
    return _IMPORTS + f'''
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        {init}

    def forward(self, x):
        {forward}
'''


def _glu(forward: str) -> str:
    return _IMPORTS + f'''
class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0):
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        {forward}
'''


_GQA_INIT = '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, dropout=0.0, rope_base=10000.0):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.d_head = d_model // num_heads
        self.rope_base = rope_base
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.resid_dropout = nn.Dropout(dropout)
        self.cache = None
'''

_GQA_PROJECT = '''
    def forward(self, x, use_cache=False):
        B, T, d = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.d_head).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.d_head).transpose(1, 2)
        past = self.cache[0].shape[2] if use_cache and self.cache is not None else 0
'''

_GQA_ROPE = "        q, k = apply_rope(q, past, self.rope_base), apply_rope(k, past, self.rope_base)\n"

_GQA_CACHE = '''        if use_cache:
            if self.cache is not None:
                k = torch.cat([self.cache[0], k], dim=2)
                v = torch.cat([self.cache[1], v], dim=2)
            self.cache = (k, v)
'''

_GQA_EXPAND = '''        group = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
'''

_GQA_ATTEND = '''        mask = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(past)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.resid_dropout(self.out_proj(out.transpose(1, 2).reshape(B, T, d)))
'''


def _gqa(rope=_GQA_ROPE, cache=_GQA_CACHE, expand=_GQA_EXPAND, attend=_GQA_ATTEND) -> str:
    return _IMPORTS + _GQA_INIT + _GQA_PROJECT + rope + cache + expand + attend


_MOE_INIT = '''
class MoEFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, num_experts, top_k=2, dropout=0.0):
        super().__init__()
        self.num_experts, self.top_k = num_experts, top_k
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d_model, d_ff, dropout) for _ in range(num_experts))
        self.aux_loss = None

    def forward(self, x):
        flat = x.reshape(-1, x.shape[-1])
        probs = F.softmax(self.router(flat), dim=-1)
'''

_MOE_ROUTE = '''        top_p, top_e = probs.topk(self.top_k, dim=-1)
        weights = top_p / top_p.sum(dim=-1, keepdim=True)
'''

_MOE_MIX = '''        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            rows, slots = (top_e == i).nonzero(as_tuple=True)
            if rows.numel() > 0:
                out = out.index_add(0, rows, weights[rows, slots, None] * expert(flat[rows]))
'''

_MOE_AUX = '''        assigned = F.one_hot(top_e, self.num_experts).sum(dim=(0, 1)).to(x.dtype)
        share = assigned / top_e.numel()
        self.aux_loss = self.num_experts * (share * probs.mean(dim=0)).sum()
'''


def _moe(route=_MOE_ROUTE, mix=_MOE_MIX, aux=_MOE_AUX) -> str:
    return _IMPORTS + _MOE_INIT + route + mix + aux + "        return out.reshape(x.shape)\n"


def _lin(body: str) -> str:
    return _IMPORTS + '''
def linear_attention(q, k, v, eps=1e-6):
''' + body


_REC_HEAD = '''
def linear_attention_recurrent(q, k, v, state=None, eps=1e-6):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    if state is None:
        S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
        z = q.new_zeros(*q.shape[:-2], q.shape[-1])
    else:
        S, z = state
    outputs = []
    for t in range(q.shape[-2]):
'''


def _rec(loop: str, head: str = _REC_HEAD) -> str:
    return _IMPORTS + head + loop + "    return torch.stack(outputs, dim=-2), (S, z)\n"


_REC_UPDATE = '''        S = S + phi_k[..., t, :, None] * v[..., t, None, :]
        z = z + phi_k[..., t, :]
'''
_REC_READ = '''        numerator = (phi_q[..., t, None, :] @ S).squeeze(-2)
        outputs.append(numerator / ((phi_q[..., t, :] * z).sum(dim=-1, keepdim=True) + eps))
'''

_BLOCK_INIT = '''
class ModernBlock(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, d_ff, num_experts=0, top_k=2, dropout=0.0,
                 rope_base=10000.0):
        super().__init__()
        self.norm1 = RMSNorm(d_model)
        self.attn = GroupedQueryAttention(d_model, num_heads, num_kv_heads, dropout, rope_base)
        self.norm2 = RMSNorm(d_model)
        if num_experts > 0:
            self.ffn = MoEFeedForward(d_model, d_ff, num_experts, top_k, dropout)
        else:
            self.ffn = SwiGLU(d_model, d_ff, dropout)
'''


def _block(forward: str) -> str:
    return _IMPORTS + _BLOCK_INIT + forward


def _decoder_forward(body: str) -> str:
    """A ModernDecoder whose forward is redefined (the class's other methods kept)."""
    return _IMPORTS + '''
_ReferenceDecoder = ModernDecoder


class ModernDecoder(_ReferenceDecoder):
    def forward(self, idx, targets=None, use_cache=False):
        B, T = idx.shape
''' + body + '''
        logits = self.lm_head(x)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
'''


MUTANTS = [
    # ---------------------------------------------------------------------------------------------- apply_rope
    Entry("rope_rotate_half", "apply_rope", _rope(_ROPE_ANGLES + '''
    half = d_h // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)
'''), "pairs (i, i + d_h/2) rotated (the rotate-half layout of GPT-NeoX), not the interleaved pairs (2i, 2i+1)",
          hint="rotate the interleaved pairs (x[2i], x[2i+1]), the lab's layout: yours pairs x[i] with x[i + d_h/2]",
          loses=MOST),
    Entry("rope_ignores_offset", "apply_rope", _rope('''
    inv_freq = base ** (-torch.arange(0, d_h, 2, dtype=torch.float64, device=x.device) / d_h)
    positions = torch.arange(T, dtype=torch.float64, device=x.device)
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
'''), "positions always start at 0: the offset is ignored",
          hint="row t of x is at position offset + t: start the positions at offset", loses=MOST),
    Entry("rope_frequency_exponent", "apply_rope", _rope('''
    inv_freq = base ** (-torch.arange(0, d_h // 2, dtype=torch.float64, device=x.device) / d_h)
    positions = torch.arange(offset, offset + T, dtype=torch.float64, device=x.device)
    angles = positions[:, None] * inv_freq[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)
'''), "theta_i = base^(-i/d_h) instead of base^(-2i/d_h)",
          hint="plane i turns by base ** (-2i / d_h) per position (i = 0 .. d_h/2 - 1): your exponent lacks the 2",
          loses=MOST),
    Entry("rope_sign_flipped", "apply_rope", _rope(_ROPE_ANGLES + '''
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos + odd * sin, -even * sin + odd * cos], dim=-1).flatten(-2)
'''), "rotates clockwise (the transpose of the rotation): scores still relative, values wrong",
          hint="the rotation is [cos, -sin; sin, cos]: y[2i] = x[2i] cos - x[2i+1] sin, y[2i+1] = x[2i] sin + "
               "x[2i+1] cos; yours turns the other way", loses=MOST),
    # ------------------------------------------------------------------------------------------------- RMSNorm
    Entry("rms_subtracts_mean", "RMSNorm", _rms(
        "x = x - x.mean(dim=-1, keepdim=True)\n"
        "        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight"),
          "subtracts the mean first (LayerNorm without a bias)",
          hint="RMSNorm does not subtract the mean: divide x itself by sqrt(mean(x^2) + eps)", loses=MOST),
    Entry("rms_eps_outside_sqrt", "RMSNorm", _rms(
        "return x / (x.pow(2).mean(dim=-1, keepdim=True).sqrt() + self.eps) * self.weight"),
          "eps added after the square root",
          hint="eps goes inside the square root: x / sqrt(mean(x^2) + eps); it matters for small inputs", loses=PART),
    Entry("rms_no_weight", "RMSNorm", _rms(
        "return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)"),
          "never multiplies by weight", hint="multiply the normalised x by the gain self.weight", loses=MOST),
    Entry("rms_torch_module", "RMSNorm", _rms(
        "return self.norm(x)",
        init="self.norm = nn.RMSNorm(d_model, eps=eps)\n        self.weight = self.norm.weight"),
          "wraps nn.RMSNorm (forbidden in this lab)",
          hint="write RMSNorm from its formula: nn.RMSNorm and F.rms_norm are not allowed here", loses=ALL),
    # -------------------------------------------------------------------------------------------------- SwiGLU
    Entry("swiglu_gate_on_up", "SwiGLU", _glu("return self.drop(self.w2(self.w1(x) * F.silu(self.w3(x))))"),
          "silu on w3(x) instead of w1(x)",
          hint="the gate is w1: w2(silu(w1(x)) * w3(x)); yours applies silu to w3", loses=MOST),
    Entry("swiglu_gelu", "SwiGLU", _glu("return self.drop(self.w2(F.gelu(self.w1(x)) * self.w3(x)))"),
          "GELU instead of SiLU", hint="SwiGLU's activation is silu(z) = z * sigmoid(z) (F.silu), not GELU",
          loses=MOST),
    Entry("swiglu_no_gate", "SwiGLU", _glu("return self.drop(self.w2(F.silu(self.w1(x))))"),
          "never multiplies by w3(x): a plain SiLU MLP", hint="multiply silu(w1(x)) by w3(x) before w2", loses=MOST),
    # ----------------------------------------------------------------------------------- GroupedQueryAttention
    Entry("gqa_heads_tiled", "GroupedQueryAttention", _gqa(expand='''        group = self.num_heads // self.num_kv_heads
        k, v = k.repeat(1, group, 1, 1), v.repeat(1, group, 1, 1)
'''), "query head j reads key-value head j % h_kv (repeat), not j // (h / h_kv) (repeat_interleave)",
          hint="query head j uses key-value head j // (num_heads / num_kv_heads): consecutive query heads share one "
               "(torch.repeat_interleave along dim 1, not .repeat)", loses=MOST),
    Entry("gqa_rope_on_values", "GroupedQueryAttention", _gqa(
        rope=_GQA_ROPE + "        v = apply_rope(v, past, self.rope_base)\n"),
          "rotates the values too", hint="RoPE rotates the queries and keys only, never the values", loses=MOST),
    Entry("gqa_no_rope", "GroupedQueryAttention", _gqa(rope=""),
          "never applies RoPE", hint="rotate q and k with apply_rope(q, T_past), apply_rope(k, T_past)", loses=MOST),
    Entry("gqa_cache_rope_from_zero", "GroupedQueryAttention", _gqa(
        rope="        q, k = apply_rope(q, 0, self.rope_base), apply_rope(k, 0, self.rope_base)\n"),
          "with the cache, the new tokens are rotated from position 0",
          hint="with the cache, the new tokens are at positions T_past, T_past + 1, ...: pass offset=T_past "
               "(the cached length) to apply_rope", loses=PART),
    Entry("gqa_cache_stores_all_heads", "GroupedQueryAttention", _gqa(cache="", expand=_GQA_EXPAND + '''        if use_cache:
            if self.cache is not None:
                k = torch.cat([self.cache[0], k], dim=2)
                v = torch.cat([self.cache[1], v], dim=2)
            self.cache = (k, v)
''', attend='''
        past = k.shape[2] - T
''' + _GQA_ATTEND), "caches the keys and values after repeating them to num_heads heads",
          hint="cache the keys and values before repeating them: the cache holds num_kv_heads heads "
               "(that is where grouped-query attention saves memory)", loses=PART),
    Entry("gqa_is_causal_with_cache", "GroupedQueryAttention", _gqa(attend='''
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.resid_dropout(self.out_proj(out.transpose(1, 2).reshape(B, T, d)))
'''), "is_causal=True also after the cache: the mask is aligned top left",
          hint=("with keys in the cache, is_causal=True aligns its mask with the first key, not with the new tokens: "
                "new token i must see every cached key and the new ones up to itself"), loses=PART),
    Entry("gqa_no_causal_mask", "GroupedQueryAttention", _gqa(attend='''
        out = F.scaled_dot_product_attention(q, k, v)
        return self.resid_dropout(self.out_proj(out.transpose(1, 2).reshape(B, T, d)))
'''), "no causal mask", hint="your attention has no causal mask: a position sees the tokens after it", loses=MOST),
    # ---------------------------------------------------------------------------------------- MoEFeedForward
    Entry("moe_not_renormalised", "MoEFeedForward", _moe(route='''        top_p, top_e = probs.topk(self.top_k, dim=-1)
        weights = top_p
'''), "the top-k probabilities used as they are, not renormalised to sum to 1",
          hint=("the k probabilities a token keeps are used as they are: divide them by their sum, so that each "
                "token's expert weights add up to 1"), loses=MOST),
    Entry("moe_dense_mixture", "MoEFeedForward", _moe(route='''        top_p, top_e = probs.topk(self.top_k, dim=-1)
''', mix='''
        out = sum(probs[:, i:i + 1] * expert(flat) for i, expert in enumerate(self.experts))
'''), "every expert on every token, weighted by the full softmax (no top-k)",
          hint="send each token only to its top_k experts, with the top_k probabilities renormalised", loses=MOST),
    Entry("moe_aux_share_not_divided_by_k", "MoEFeedForward", _moe(aux='''
        assigned = F.one_hot(top_e, self.num_experts).sum(dim=(0, 1)).to(x.dtype)
        share = assigned / flat.shape[0]
        self.aux_loss = self.num_experts * (share * probs.mean(dim=0)).sum()
'''), "f_i counts per token, not per assignment: the loss is k times too large for top_k > 1",
          hint="f_i is the share of the N * k assignments (divide the counts by N * k, so the f_i sum to 1)",
          loses=PART),
    Entry("moe_aux_share_squared", "MoEFeedForward", _moe(aux='''
        assigned = F.one_hot(top_e, self.num_experts).sum(dim=(0, 1)).to(x.dtype)
        share = assigned / top_e.numel()
        self.aux_loss = self.num_experts * (share * share).sum()
'''), "E * sum f_i^2: no router probability (and no gradient)",
          hint="the balancing loss multiplies f_i (the share of assignments) by P_i, the mean router probability of "
               "expert i: that product is where its gradient comes from", loses=PART),
    # ------------------------------------------------------------------------------------ linear attention
    Entry("linear_not_causal", "linear_attention", _lin('''
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = phi_k.transpose(-2, -1) @ v
    z = phi_k.sum(dim=-2, keepdim=True)
    return (phi_q @ S) / ((phi_q * z).sum(dim=-1, keepdim=True) + eps)
'''), "sums over every key: not causal", hint="each position sums over the keys j <= t only (torch.cumsum)",
          loses=MOST),
    Entry("linear_relu_features", "linear_attention", _lin('''
    phi_q, phi_k = F.relu(q), F.relu(k)
    a = (phi_q @ phi_k.transpose(-2, -1)) * torch.ones(q.shape[-2], q.shape[-2], dtype=q.dtype, device=q.device).tril()
    return (a @ v) / (a.sum(dim=-1, keepdim=True) + eps)
'''), "ReLU as the feature map instead of elu + 1", hint="the feature map is phi(x) = elu(x) + 1 (F.elu(x) + 1)",
          loses=MOST),
    Entry("linear_no_normaliser", "linear_attention", _lin('''
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    a = (phi_q @ phi_k.transpose(-2, -1)) * torch.ones(q.shape[-2], q.shape[-2], dtype=q.dtype, device=q.device).tril()
    return a @ v
'''), "never divides by sum_j phi(q_t).phi(k_j)",
          hint="divide by the sum of the weights, phi(q_t) . z_t + eps, so that they sum to 1", loses=MOST),
    Entry("recurrent_reads_before_update", "linear_attention_recurrent", _rec(_REC_READ + _REC_UPDATE),
          "reads the state before adding token t: a token never sees itself",
          hint="add phi(k_t) v_t^T to S (and phi(k_t) to z) before reading them for token t", loses=MOST),
    Entry("recurrent_state_ignored", "linear_attention_recurrent", _rec(_REC_UPDATE + _REC_READ, head='''
def linear_attention_recurrent(q, k, v, state=None, eps=1e-6):
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    S = q.new_zeros(*q.shape[:-2], q.shape[-1], v.shape[-1])
    z = q.new_zeros(*q.shape[:-2], q.shape[-1])
    outputs = []
    for t in range(q.shape[-2]):
'''), "always starts from zeros: the state argument is ignored",
          hint="start the sums from state = (S, z) when one is given", loses=PART),
    Entry("recurrent_in_place", "linear_attention_recurrent", _rec('''
        S += phi_k[..., t, :, None] * v[..., t, None, :]
        z += phi_k[..., t, :]
''' + _REC_READ),
          "adds to the state in place (S += ...): the caller's state changes",
          hint="do not change the state you were given in place: S = S + ..., not S += ...", loses=PART),
    # ------------------------------------------------------------------------------------------ ModernDecoder
    Entry("decoder_post_norm", "ModernDecoder", _block('''
    def forward(self, x, use_cache=False):
        x = self.norm1(x + self.attn(x, use_cache=use_cache))
        return self.norm2(x + self.ffn(x))
'''), "post-norm blocks", hint="the block is pre-norm: x + attn(norm1(x)), then x + ffn(norm2(x))", loses=MOST),
    Entry("decoder_no_ffn_residual", "ModernDecoder", _block('''
    def forward(self, x, use_cache=False):
        x = x + self.attn(self.norm1(x), use_cache=use_cache)
        return self.ffn(self.norm2(x))
'''), "no residual around the feed-forward", hint="add the feed-forward's output to x: x + ffn(norm2(x))",
          loses=MOST),
    Entry("decoder_cache_not_passed_on", "ModernDecoder", _block('''
    def forward(self, x, use_cache=False):
        x = x + self.attn(self.norm1(x))
        return x + self.ffn(self.norm2(x))
'''), "the block does not pass use_cache on to attn",
          hint="pass use_cache on to the attention (self.attn(..., use_cache=use_cache)) in every block", loses=PART),
    Entry("decoder_no_final_norm", "ModernDecoder", _decoder_forward('''
        x = self.drop(self.tok_emb(idx))
        for block in self.blocks:
            x = block(x, use_cache=use_cache)
'''), "skips the final norm before lm_head", hint="apply the final RMSNorm norm before lm_head", loses=MOST),
    Entry("decoder_embeddings_scaled", "ModernDecoder", _decoder_forward('''
        x = self.drop(self.tok_emb(idx) * math.sqrt(self.tok_emb.weight.shape[1]))
        for block in self.blocks:
            x = block(x, use_cache=use_cache)
        x = self.norm(x)
'''), "multiplies the embeddings by sqrt(d) (the translation Transformer's habit)",
          hint="the decoder's input is tok_emb(idx) itself (then dropout), not scaled by sqrt(d_model)", loses=MOST),
]


VARIANTS = [
    Entry("rope_complex", "apply_rope", _IMPORTS + '''
def apply_rope(x, offset=0, base=10000.0):
    d_h = x.shape[-1]
    if d_h % 2 != 0:
        raise ValueError(f"apply_rope needs an even d_h, got d_h={d_h}")
    T = x.shape[-2]
    theta = 1.0 / base ** (torch.arange(0, d_h, 2, device=x.device, dtype=torch.float64) / d_h)
    angle = torch.outer(torch.arange(offset, offset + T, device=x.device, dtype=torch.float64), theta)
    turn = torch.polar(torch.ones_like(angle), angle)
    z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], d_h // 2, 2).contiguous())
    return torch.view_as_real(z * turn).flatten(-2).to(x.dtype)
''', "complex numbers in float64 (Meta's Llama code), cast back"),
    Entry("rms_power", "RMSNorm", _rms(
        "return self.weight * x * (x.square().mean(-1, keepdim=True) + self.eps) ** -0.5"),
          "(mean + eps) ** -0.5, the weight first"),
    Entry("glu_chunked", "SwiGLU", _glu(
        "gate, up = self.w1(x), self.w3(x)\n        return self.drop(self.w2(gate * torch.sigmoid(gate) * up))"),
          "silu written out as z * sigmoid(z)"),
    Entry("gqa_by_hand_expand", "GroupedQueryAttention", _gqa(expand='''        group = self.num_heads // self.num_kv_heads
        Tk = k.shape[2]
        k = k[:, :, None].expand(B, self.num_kv_heads, group, Tk, self.d_head).reshape(B, self.num_heads, Tk, -1)
        v = v[:, :, None].expand(B, self.num_kv_heads, group, Tk, self.d_head).reshape(B, self.num_heads, Tk, -1)
''', attend='''
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        allowed = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(past)
        out = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1) @ v
        return self.resid_dropout(self.out_proj(out.transpose(1, 2).reshape(B, T, d)))
'''), "attention by hand, the key-value heads expanded with expand + reshape"),
    Entry("moe_softmax_over_top_logits", "MoEFeedForward", _moe(route='''        logits = self.router(flat)
        top_logits, top_e = logits.topk(self.top_k, dim=-1)
        weights = F.softmax(top_logits, dim=-1)
'''), "the softmax of the top-k logits (Mixtral's order): equal to renormalising the top-k probabilities"),
    Entry("moe_dense_weights_masked", "MoEFeedForward", _moe(mix='''
        gates = torch.zeros_like(probs).scatter(1, top_e, weights)
        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            chosen = gates[:, i] > 0
            if chosen.any():
                out = out.index_put((chosen.nonzero()[:, 0],), gates[chosen, i, None] * expert(flat[chosen]),
                                    accumulate=True)
''', aux='''
        counts = torch.bincount(top_e.flatten(), minlength=self.num_experts).to(x.dtype)
        self.aux_loss = self.num_experts * torch.dot(counts / counts.sum(), probs.mean(dim=0))
'''), "a dense gate matrix by scatter, index_put with accumulate, the loss with bincount"),
    Entry("linear_quadratic_form", "linear_attention", _lin('''
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    T = q.shape[-2]
    a = (phi_q @ phi_k.transpose(-2, -1)).masked_fill(
        ~torch.ones(T, T, dtype=torch.bool, device=q.device).tril(), 0.0)
    return (a @ v) / (a.sum(dim=-1, keepdim=True) + eps)
'''), "the masked T x T form"),
    Entry("recurrent_einsum", "linear_attention_recurrent", _rec('''
        S = S + torch.einsum("...k,...v->...kv", phi_k[..., t, :], v[..., t, :])
        z = z + phi_k[..., t, :]
        outputs.append(torch.einsum("...k,...kv->...v", phi_q[..., t, :], S)
                       / (torch.einsum("...k,...k->...", phi_q[..., t, :], z)[..., None] + eps))
'''), "einsum for the outer product and the reads"),
    Entry("decoder_sequential_tie_other_way", "ModernDecoder", _IMPORTS + '''
_ReferenceDecoder = ModernDecoder


class ModernDecoder(_ReferenceDecoder):
    def __init__(self, vocab_size, block_size, d_model, num_heads, num_kv_heads, num_layers, d_ff, num_experts=0,
                 top_k=2, dropout=0.0, rope_base=10000.0):
        nn.Module.__init__(self)
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb.weight = self.lm_head.weight
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([ModernBlock(d_model, num_heads, num_kv_heads, d_ff, num_experts, top_k,
                                                 dropout, rope_base) for _ in range(num_layers)])
        self.norm = RMSNorm(d_model)
        self.init_weights(num_layers)

    def forward(self, idx, targets=None, use_cache=False):
        h = self.drop(self.tok_emb(idx))
        for layer in self.blocks:
            h = layer(h, use_cache)
        logits = self.lm_head(self.norm(h))
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss
''', "the tie the other way (tok_emb.weight = lm_head.weight), use_cache passed by position, flatten"),
]
