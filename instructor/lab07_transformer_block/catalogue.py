"""Lab 07 catalogue: the mistakes students make (MUTANTS, each must lose points on its question) and
correct alternatives (VARIANTS, each must keep full marks everywhere).

Each ``source`` is run after the reference code, so a redefined ``FeedForward`` is also what the reference
``TransformerEncoderBlock`` builds, and the given ``MultiHeadAttention`` stays available to every entry.
"""

from attnlab.grading.core.mutants import ALL, MOST, PART, SLIP, Entry

_IMPORTS = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
'''


def _pe(body: str) -> str:
    """A sinusoidal_positional_encoding with the odd-width check and the given body (indented 4 spaces)."""
    return _IMPORTS + '''

def sinusoidal_positional_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
''' + body


def _ln(body: str) -> str:
    return _IMPORTS + "\n\ndef layer_norm(x, weight, bias, eps=1e-5):\n" + body


def _ff(init_tail: str, forward: str) -> str:
    """A FeedForward with linear1/linear2/dropout, ``init_tail`` choosing the activation, and ``forward``."""
    return _IMPORTS + '''

class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation!r}")
        self.activation_name = activation
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
''' + init_tail + "\n" + forward


_BLOCK_INIT = _IMPORTS + '''

class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def sa(self, x, mask):
        return self.dropout1(self.self_attn(x, x, x, mask=mask)[0])

    def ffn(self, x):
        return self.dropout2(self.ff(x))
'''


def _block(forward: str) -> str:
    """A TransformerEncoderBlock with the correct __init__ (and helpers sa, ffn) and the given forward."""
    return _BLOCK_INIT + "\n" + forward


_CORRECT_PRE = '''
        if self.norm_first:
            x = x + self.sa(self.norm1(x), mask)
            x = x + self.ffn(self.norm2(x))
            return x
'''

_CORRECT_POST = '''
        if not self.norm_first:
            x = self.norm1(x + self.sa(x, mask))
            x = self.norm2(x + self.ffn(x))
            return x
'''

MUTANTS = [
    # ----------------------------------------------------------------------- sinusoidal_positional_encoding
    Entry("pe_sin_cos_swapped", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.cos(angles)
    pe[:, 1::2] = torch.sin(angles)
    return pe.float()
'''), "cos on the even columns and sin on the odd ones",
      hint=("your encoding looks like cos on the even columns and sin on the odd ones: sin goes on the even "
            "columns (0, 2, ...)"), loses=MOST),
    Entry("pe_concatenated_halves", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1).float()
'''), "all the sines first, then all the cosines (the tensor2tensor layout), not interleaved",
      hint=("your encoding puts all the sines first, then all the cosines: interleave them (sin on column 2i, "
            "cos on column 2i+1)"), loses=MOST),
    Entry("pe_exponent_pair_index", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angles = pos / 10000 ** (i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()
'''), "the exponent i/d with the pair index i instead of 2i/d: frequencies decay half as fast",
      hint="your frequencies decay half as fast as they should: the exponent is 2i/d_model with i the pair index",
      loses=MOST),
    Entry("pe_exponent_column_index", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    j = torch.arange(d_model, dtype=torch.float64)
    angles = pos / 10000 ** (j / d_model)
    pe = torch.where(j.long() % 2 == 0, torch.sin(angles), torch.cos(angles))
    return pe.float()
'''), "uses the column index j in the exponent for both columns: the cos of column 2i+1 gets 10000^((2i+1)/d)",
      hint=("your cos columns seem to use their own column index in the exponent: columns 2i and 2i+1 share the "
            "frequency 10000^(-2i/d_model)"), loses=MOST),
    Entry("pe_positions_from_one", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(1, max_len + 1, dtype=torch.float64)[:, None]
    angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.float()
'''), "positions 1 .. max_len instead of 0 .. max_len - 1",
      hint="your positions seem to start at 1: they run from 0 to max_len - 1", loses=MOST),
    Entry("pe_float64_returned", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe
'''), "returns the float64 table instead of float32",
      hint="your table is float64: return it as float32", loses=MOST),
    Entry("pe_odd_width_accepted", "sinusoidal_positional_encoding", _IMPORTS + '''

def sinusoidal_positional_encoding(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = pos / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pe = torch.zeros(max_len, 2 * angles.shape[1], dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe[:, :d_model].float()
''', "no check for an odd d_model (silently drops the last cos column)",
      hint="an odd d_model is accepted silently: raise ValueError naming d_model", loses=SLIP),
    # --------------------------------------------------------------------------- LearnedPositionalEmbedding
    Entry("learned_adds_whole_table", "LearnedPositionalEmbedding", _IMPORTS + '''

class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x):
        if x.shape[1] > self.max_len:
            raise ValueError("too long")
        return x + self.weight[: self.max_len]  # all max_len rows, not the first n
''', "adds weight[:max_len] (every position of the table) instead of weight[:n]",
      hint=("your embedding seems to add the whole table: a sequence of n tokens takes only the rows of positions 0 "
            "to n - 1"), loses=MOST),
    Entry("learned_wrong_rows", "LearnedPositionalEmbedding", _IMPORTS + '''

class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x):
        n = x.shape[1]
        if n > self.max_len:
            raise ValueError("too long")
        return x + self.weight[self.max_len - n:]  # the last n rows
''', "uses the last n rows of the table (right-aligned) instead of the first n",
      hint="your embedding seems to take the last n rows of the table: positions 0..n-1 are the first n rows", loses=MOST),
    Entry("learned_no_length_check", "LearnedPositionalEmbedding", _IMPORTS + '''

class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x):
        n = x.shape[1]
        return x + self.weight[:n]
''', "no ValueError for a sequence longer than max_len (PyTorch's broadcast error does not say why)",
      hint="a sequence longer than max_len gives no clear error: raise ValueError naming n and max_len", loses=PART),
    Entry("learned_buffer_not_parameter", "LearnedPositionalEmbedding", _IMPORTS + '''

class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.register_buffer("weight", torch.randn(max_len, d_model) * 0.02)

    def forward(self, x):
        n = x.shape[1]
        if n > self.max_len:
            raise ValueError("too long")
        return x + self.weight[:n]
''', "registers the table as a buffer: it is never trained",
      hint="your table is a buffer, so it is never trained: make it an nn.Parameter (or an nn.Embedding)", loses=MOST),
    # -------------------------------------------------------------------------------------------- layer_norm
    Entry("ln_over_dim0", "layer_norm", _ln('''
    mean = x.mean(dim=0, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''), "normalizes over the first (batch) dimension, like batch norm",
      hint=("your layer_norm seems to normalize over the batch dimension, like batch norm: normalize over the "
            "last dimension (the features)"), loses=MOST),
    Entry("ln_over_dim_minus2", "layer_norm", _ln('''
    dim = -2 if x.dim() > 1 else -1
    mean = x.mean(dim=dim, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dim, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''), "normalizes over the positions (dim -2) instead of the features",
      hint="your layer_norm seems to normalize over the positions (dim -2) instead of the features (dim -1)", loses=MOST),
    Entry("ln_unbiased_variance", "layer_norm", _ln('''
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)  # unbiased: divides by d - 1
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''), "the unbiased variance (divide by d - 1), torch.var's default",
      hint="your variance looks unbiased (divided by d - 1): layer norm uses the biased variance, unbiased=False",
      loses=MOST),
    Entry("ln_eps_outside_sqrt", "layer_norm", _ln('''
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / (torch.sqrt(var) + eps) * weight + bias
'''), "adds eps to the standard deviation instead of the variance",
      hint="eps seems added to the standard deviation: add it to the variance, inside the square root", loses=PART),
    Entry("ln_naive_variance", "layer_norm", _ln('''
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean * mean  # E[x^2] - E[x]^2
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''), "E[x^2] - E[x]^2: exact on paper, catastrophic cancellation in float32 far from zero",
      hint=("your variance loses precision for inputs far from zero (E[x^2] - E[x]^2 cancels): compute the mean "
            "of (x - mean)^2"), loses=PART),
    Entry("ln_no_affine", "layer_norm", _ln('''
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps)
'''), "forgets weight and bias",
      hint="your layer_norm seems to forget weight and bias: return normalized * weight + bias", loses=MOST),
    Entry("ln_bias_before_scale", "layer_norm", _ln('''
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return ((x - mean) / torch.sqrt(var + eps) + bias) * weight
'''), "adds the bias before scaling",
      hint="your bias seems added before the scale: (normalized * weight) + bias", loses=MOST),
    Entry("ln_uses_F_layer_norm", "layer_norm", _ln('''
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)
'''), "calls the forbidden F.layer_norm",
      hint="your code calls F.layer_norm, which this lab forbids: compute the mean and variance yourself", loses=ALL),
    Entry("ln_uses_nn_LayerNorm", "layer_norm", _ln('''
    norm = nn.LayerNorm(x.shape[-1], eps=eps, elementwise_affine=False).to(x.device, x.dtype)
    return norm(x) * weight + bias
'''), "wraps nn.LayerNorm inside layer_norm",
      hint=("your code uses nn.LayerNorm, which this lab forbids inside layer_norm: compute the mean and "
            "variance yourself"), loses=ALL),
    # ------------------------------------------------------------------------------------------- FeedForward
    Entry("ff_gelu_tanh_approximation", "FeedForward", _ff('''
        self.act = nn.ReLU() if activation == "relu" else nn.GELU(approximate="tanh")
''', '''
    def forward(self, x):
        return self.linear2(self.dropout(self.act(self.linear1(x))))
'''), 'uses the tanh approximation of GELU for "gelu"',
      hint="your GELU seems to be the tanh approximation: use the exact GELU (F.gelu without approximate)", loses=PART),
    Entry("ff_dropout_before_activation", "FeedForward", _ff('''
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
''', '''
    def forward(self, x):
        return self.linear2(self.act(self.dropout(self.linear1(x))))
'''), "applies dropout before the activation (the same for ReLU, not for GELU: gelu(z/(1-p)) != gelu(z)/(1-p))",
      hint="your dropout seems applied before the activation: linear1, activation, dropout, linear2", loses=PART),
    Entry("ff_gelu_ignored", "FeedForward", _ff('''
        self.act = nn.ReLU()
''', '''
    def forward(self, x):
        return self.linear2(self.dropout(self.act(self.linear1(x))))
'''), "always ReLU, whatever activation says",
      hint="your FeedForward seems to use ReLU even when activation='gelu'", loses=PART),
    Entry("ff_no_dropout", "FeedForward", _ff('''
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
''', '''
    def forward(self, x):
        return self.linear2(self.act(self.linear1(x)))
'''), "creates the dropout but never applies it",
      hint="your dropout seems never applied in training: call self.dropout after the activation", loses=PART),
    Entry("ff_activation_after_linear2", "FeedForward", _ff('''
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
''', '''
    def forward(self, x):
        return self.act(self.linear2(self.dropout(self.act(self.linear1(x)))))
'''), "one activation too many, after linear2",
      hint="you seem to apply the activation after linear2 too: only the hidden layer has an activation", loses=MOST),
    Entry("ff_accepts_any_activation", "FeedForward", _IMPORTS + '''

class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.act = nn.GELU() if activation == "gelu" else nn.ReLU()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(self.act(self.linear1(x))))
''', "silently falls back to ReLU for an unknown activation instead of raising ValueError",
      hint="an unknown activation is accepted silently: raise ValueError naming it and the allowed ones", loses=PART),
    # ------------------------------------------------------------------------------- TransformerEncoderBlock
    Entry("block_post_norm_before_residual", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
''' + _CORRECT_PRE + '''
        x = x + self.norm1(self.sa(x, mask))
        x = x + self.norm2(self.ffn(x))
        return x
'''), "post-norm written as x + norm(SA(x)): the norm on the sub-layer, not on the sum",
      hint=("your post-norm block seems to normalize the sub-layer's output before adding it: post-norm is "
            "norm(x + sublayer(x))"), loses=MOST),
    Entry("block_norm_first_ignored", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        x = self.norm1(x + self.sa(x, mask))
        x = self.norm2(x + self.ffn(x))
        return x
'''), "always post-norm: norm_first is ignored",
      hint="your block seems to ignore norm_first: with norm_first=True it is x + sublayer(norm(x))", loses=MOST),
    Entry("block_pre_norm_normalizes_sum", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
''' + _CORRECT_POST + '''
        x = self.norm1(x) + self.sa(self.norm1(x), mask)
        x = self.norm2(x) + self.ffn(self.norm2(x))
        return x
'''), "pre-norm adding the sub-layer to the normalized x instead of the raw residual stream",
      hint=("your pre-norm block seems to add the sub-layer to the normalized x: the residual adds to the raw x, "
            "x + sublayer(norm(x))"), loses=MOST),
    Entry("block_no_ff_residual", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x), mask)
            return self.ffn(self.norm2(x))
        x = self.norm1(x + self.sa(x, mask))
        return self.norm2(self.ffn(x))
'''), "forgets the residual connection around the feed-forward sub-layer",
      hint="your block seems to have no residual connection around the feed-forward sub-layer", loses=MOST),
    Entry("block_no_attention_residual", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = self.sa(self.norm1(x), mask)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(self.sa(x, mask))
        return self.norm2(x + self.ffn(x))
'''), "forgets the residual connection around self-attention",
      hint="your block seems to have no residual connection around self-attention", loses=MOST),
    Entry("block_norms_swapped", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm2(x), mask)
            return x + self.ffn(self.norm1(x))
        x = self.norm2(x + self.sa(x, mask))
        return self.norm1(x + self.ffn(x))
'''), "norm2 around self-attention and norm1 around the feed-forward network",
      hint="your norms seem swapped: norm1 goes with self-attention, norm2 with the feed-forward sub-layer", loses=MOST),
    Entry("block_mask_ignored", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x), None)
            return x + self.ffn(self.norm2(x))
        x = self.norm1(x + self.sa(x, None))
        return self.norm2(x + self.ffn(x))
'''), "never passes the mask on to self-attention",
      hint="your block seems to ignore its mask: pass it on to self-attention", loses=PART),
    Entry("block_mask_inverted", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if mask is not None:
            mask = ~mask | torch.eye(x.shape[1], dtype=torch.bool, device=x.device)  # torch's convention
''' + _CORRECT_PRE + _CORRECT_POST), "passes the mask in PyTorch's True = blocked convention",
      hint="your mask looks inverted: in these labs True means 'may attend' (PyTorch's layers use the opposite)",
      loses=PART),
    Entry("block_ff_sees_attention_input", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if self.norm_first:
            a = self.sa(self.norm1(x), mask)
            return x + a + self.ffn(self.norm2(x))
        a = self.norm1(x + self.sa(x, mask))
        return self.norm2(a + self.ffn(x))
'''), "the feed-forward sub-layer reads the block's input instead of the attention sub-layer's output",
      hint=("your feed-forward sub-layer seems to read the block's input instead of the output of the attention "
            "sub-layer"), loses=MOST),
    Entry("block_no_sublayer_dropout", "TransformerEncoderBlock", _IMPORTS + '''

class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.ff = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, x, mask=None):
        sa = lambda y: self.self_attn(y, y, y, mask=mask)[0]
        if self.norm_first:
            x = x + sa(self.norm1(x))
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + sa(x))
        return self.norm2(x + self.ff(x))
''', "ignores dropout altogether (no dropout anywhere in training mode)",
      hint=("your block seems to apply no dropout in training: dropout goes on each sub-layer's output before "
            "the residual"), loses=SLIP),
    Entry("block_uses_torch_layer", "TransformerEncoderBlock", _IMPORTS + '''

class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self._kind = nn.TransformerEncoderLayer  # the forbidden layer, referenced

    def forward(self, x, mask=None):
        sa = lambda y: self.dropout1(self.self_attn(y, y, y, mask=mask)[0])
        if self.norm_first:
            x = x + sa(self.norm1(x))
            return x + self.dropout2(self.ff(self.norm2(x)))
        x = self.norm1(x + sa(x))
        return self.norm2(x + self.dropout2(self.ff(x)))
''', "uses nn.TransformerEncoderLayer in the graded cells (values right, rule broken)",
      hint="your code uses nn.TransformerEncoderLayer, which this lab forbids: build the block from your own parts",
      loses=ALL),
]

VARIANTS = [
    # ----------------------------------------------------------------------- sinusoidal_positional_encoding
    Entry("pe_outer_exp_log_float32", "sinusoidal_positional_encoding", _pe('''
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    angles = torch.outer(torch.arange(max_len).float(), div)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe
'''), "the exp/log form of the frequencies with torch.outer, all in float32 (the PyTorch tutorial's code)"),
    Entry("pe_pow_float32", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angles = pos / torch.pow(10000.0, two_i / d_model)
    pe = torch.empty(max_len, d_model)
    pe[:, ::2] = angles.sin()
    pe[:, 1::2] = angles.cos()
    return pe
'''), "the pow form in float32"),
    Entry("pe_stack_then_reshape", "sinusoidal_positional_encoding", _pe('''
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = pos * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    pairs = torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1)  # (max_len, d/2, 2)
    return pairs.reshape(max_len, d_model).to(torch.float32)  # interleaved: sin, cos, sin, cos
'''), "stacks (sin, cos) on a new last axis and flattens it: interleaved by construction"),
    Entry("pe_python_loops", "sinusoidal_positional_encoding", _pe('''
    pe = torch.zeros(max_len, d_model)
    for i in range(d_model // 2):
        angle = torch.arange(max_len, dtype=torch.float64) / 10000 ** (2 * i / d_model)
        pe[:, 2 * i] = torch.sin(angle).float()
        pe[:, 2 * i + 1] = torch.cos(angle).float()
    return pe
'''), "one column pair at a time"),
    # --------------------------------------------------------------------------- LearnedPositionalEmbedding
    Entry("learned_embedding_style", "LearnedPositionalEmbedding", _IMPORTS + '''

class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        n = x.size(1)
        if n > self.weight.shape[0]:
            raise ValueError(f"sequence length {n} > max_len {self.weight.shape[0]}")
        positions = torch.arange(n, device=x.device)
        return x + F.embedding(positions, self.weight).unsqueeze(0)
''', "looks the rows up with F.embedding(arange(n)) like nn.Embedding, max_len read from the table"),
    # -------------------------------------------------------------------------------------------- layer_norm
    Entry("ln_var_unbiased_false", "layer_norm", _ln('''
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
'''), "torch.var with unbiased=False"),
    Entry("ln_centred_mean_of_squares_rsqrt", "layer_norm", _ln('''
    centred = x - x.mean(-1, keepdim=True)
    var = centred.pow(2).mean(-1, keepdim=True)
    return centred * torch.rsqrt(var + eps) * weight + bias
'''), "the mean of the squared centred x, multiplied by rsqrt"),
    Entry("ln_var_mean", "layer_norm", _ln('''
    var, mean = torch.var_mean(x, dim=-1, correction=0, keepdim=True)
    return weight * (x - mean) / (var + eps).sqrt() + bias
'''), "torch.var_mean with correction=0"),
    Entry("ln_sum_over_d", "layer_norm", _ln('''
    d = x.shape[-1]
    mean = x.sum(-1, keepdim=True) / d
    centred = x - mean
    std = torch.sqrt((centred ** 2).sum(-1, keepdim=True) / d + eps)
    return torch.addcmul(bias, centred / std, weight)
'''), "sums divided by d, and addcmul for the affine part"),
    # ------------------------------------------------------------------------------------------- FeedForward
    Entry("ff_functional_activations", "FeedForward", _ff('''
        self.activation = activation
''', '''
    def forward(self, x):
        h = self.linear1(x)
        h = F.relu(h) if self.activation == "relu" else nn.functional.gelu(h, approximate="none")
        return self.linear2(self.dropout(h))
'''), "F.relu / nn.functional.gelu(approximate='none') chosen in forward"),
    Entry("ff_sequential_inside", "FeedForward", _IMPORTS + '''

class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        acts = {"relu": nn.ReLU, "gelu": nn.GELU}
        if activation not in acts:
            raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.act = acts[activation]()
        self.drop = nn.Dropout(p=dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        for layer in (self.linear1, self.act, self.drop, self.linear2):
            x = layer(x)
        return x
''', "a dict of activation classes and a loop over the layers"),
    # ------------------------------------------------------------------------------- TransformerEncoderBlock
    Entry("block_separate_methods", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        if self.norm_first:
            x = x + self.sa(self.norm1(x), mask)
            x = x + self.ffn(self.norm2(x))
        else:
            x = self.norm1(x + self.sa(x, mask))
            x = self.norm2(x + self.ffn(x))
        return x
'''), "the sub-layers in helper methods, as nn.TransformerEncoderLayer writes it"),
    Entry("block_functional_layer_norm_own", "TransformerEncoderBlock", _block('''
    def forward(self, x, mask=None):
        n1 = lambda y: layer_norm(y, self.norm1.weight, self.norm1.bias, self.norm1.eps)
        n2 = lambda y: layer_norm(y, self.norm2.weight, self.norm2.bias, self.norm2.eps)
        if self.norm_first:
            x = x + self.sa(n1(x), mask)
            return x + self.ffn(n2(x))
        x = n1(x + self.sa(x, mask))
        return n2(x + self.ffn(x))
'''), "calls the student's own layer_norm with the parameters of norm1 and norm2"),
    Entry("block_causal_mask_registered", "TransformerEncoderBlock", _IMPORTS + '''

class TransformerEncoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout, activation="relu")
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.drop1 = nn.Dropout(dropout)
        self.drop2 = nn.Dropout(dropout)
        self.register_buffer("unused_table", torch.zeros(4, 4), persistent=False)

    def forward(self, x, mask=None):
        residual = x
        if self.norm_first:
            y = self.norm1(x)
            x = residual + self.drop1(self.self_attn(y, y, y, mask)[0])
            x = x + self.drop2(self.ff(self.norm2(x)))
            return x
        x = self.norm1(residual + self.drop1(self.self_attn(x, x, x, mask)[0]))
        return self.norm2(x + self.drop2(self.ff(x)))
''', "other dropout names, a positional mask argument and an extra (non-parameter) buffer"),
]
