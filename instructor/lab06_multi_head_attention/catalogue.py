"""Lab 06 catalogue: the mistakes students make (MUTANTS, each must lose points on its question) and
correct alternatives (VARIANTS, each must keep full marks everywhere).

Each ``source`` is run after the reference code, so a redefined ``split_heads`` is also what the reference
``MultiHeadAttention`` calls. The reference's ``scaled_dot_product_attention`` (given in the lab) stays
available to every entry.
"""

from attnlab.grading.core.mutants import MOST, PART, SLIP, Entry

# A correct MultiHeadAttention.__init__, shared by the entries that only change forward.
_INIT = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)
'''


def _mha(forward: str) -> str:
    """A MultiHeadAttention with the correct __init__ and the given forward (indented 4 spaces)."""
    return _INIT + "\n" + forward


_SPLIT_INLINE_HINT = ("your heads seem split with a reshape to (B, h, n, d_h) without the transpose, which mixes "
                      "positions into the heads: reshape to (B, n, h, d_h), then swap the n and h axes (split_heads)")

_INVERSE_RESHAPES = '''
def split_heads(x, num_heads):
    B, n, d = x.shape
    return x.reshape(B, num_heads, n, d // num_heads)  # no transpose


def merge_heads(x):
    B, h, n, d_h = x.shape
    return x.reshape(B, n, h * d_h)  # no transpose: undoes the split above, not the right one
'''
_INVERSE_HINT = ("your split_heads and merge_heads reshape without the transpose: each undoes the other, but heads get "
                 "whole positions; reshape to (B, n, h, d_h) and swap the n and h axes (and back in merge_heads)")

MUTANTS = [
    # ---------------------------------------------------------------------------------------- split_heads
    Entry("split_heads_view_without_transpose", "split_heads", '''
def split_heads(x, num_heads):
    B, n, d = x.shape
    return x.view(B, num_heads, n, d // num_heads)  # the right shape, heads and positions mixed
''', "reshapes straight to (B, h, n, d_h) without the transpose: 'head 0' gets whole positions",
      hint=("your split_heads has the right shape but mixes positions into the heads: each head must hold a block of "
            "features of every position; cut the features into heads first, then move the head axis next to the batch"),
            loses=MOST),
    Entry("split_heads_wrong_cut", "split_heads", '''
def split_heads(x, num_heads):
    B, n, d = x.shape
    return x.view(B, n, d // num_heads, num_heads).permute(0, 3, 1, 2)  # strided slices, not blocks
''', "cuts the features as (d_h, h): head j gets features j, j+h, j+2h, ... instead of a block",
      hint=("your split_heads cuts the features as (d_h, h), so head j gets features j, j+h, ...: view the last "
            "dimension as (h, d_h) so each head gets a block"), loses=MOST),
    Entry("split_heads_returns_b_n_h_d", "split_heads", '''
def split_heads(x, num_heads):
    B, n, d = x.shape
    return x.view(B, n, num_heads, d // num_heads)  # forgot to move the heads next to the batch
''', "forgets the transpose: returns (B, n, h, d_h)",
      hint=("your split_heads returns (B, n, h, d_h): the head axis must come right after the batch axis, (B, h, n, "
            "d_h)"), loses=MOST),
    # two plain reshapes, each the inverse of the other and both wrong: a round trip through them gives x back
    Entry("split_merge_inverse_reshapes", "split_heads", _INVERSE_RESHAPES,
          "split_heads and merge_heads are plain reshapes without the transpose: each undoes the other, both wrong",
          hint=_INVERSE_HINT, loses=MOST),
    Entry("merge_split_inverse_reshapes", "merge_heads", _INVERSE_RESHAPES,
          "the same two reshapes, graded on merge_heads: merge(split(x)) == x although both mix positions and heads",
          hint=_INVERSE_HINT, loses=MOST),
    # ---------------------------------------------------------------------------------------- merge_heads
    Entry("merge_heads_reshape_without_transpose", "merge_heads", '''
def merge_heads(x):
    B, h, n, d_h = x.shape
    return x.reshape(B, n, h * d_h)  # the right shape, heads and positions mixed
''', "flattens (B, h, n, d_h) straight to (B, n, h*d_h) without transposing back",
      hint=("your merge_heads has the right shape but mixes positions into the features: bring the positions back "
            "next to the batch before joining the heads"), loses=MOST),
    Entry("merge_heads_view_not_contiguous", "merge_heads", '''
def merge_heads(x):
    B, h, n, d_h = x.shape
    return x.transpose(1, 2).view(B, n, h * d_h)  # view of a transposed tensor: RuntimeError
''', ".view after .transpose without .contiguous(): raises",
      hint=".view after .transpose fails on a non-contiguous tensor: use .reshape, or .contiguous() before .view",
      loses=MOST),
    Entry("merge_heads_wrong_order", "merge_heads", '''
def merge_heads(x):
    B, h, n, d_h = x.shape
    return x.permute(0, 2, 3, 1).reshape(B, n, h * d_h)  # (B, n, d_h, h): features interleaved
''', "transposes back in the wrong order: the concatenation interleaves the heads' features",
      hint=("your merge_heads interleaves the heads' features: transpose back to (B, n, h, d_h) before "
            "flattening the last two dimensions"), loses=MOST),
    # --------------------------------------------------------------------------------- MultiHeadAttention
    Entry("mha_heads_averaged", "MultiHeadAttention", _INIT.replace(
        "self.out_proj = nn.Linear(d_model, d_model, bias=bias)",
        "self.out_proj = nn.Linear(d_model // num_heads, d_model, bias=bias)") + '''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(heads.mean(dim=1)), weights  # average of the heads, not their concatenation
''', "averages the heads instead of concatenating them (out_proj shrinks to (d, d_h))",
      hint="your heads seem averaged instead of concatenated: merge the heads to (B, n, h * d_h) before out_proj",
      loses=MOST),
    Entry("mha_heads_averaged_then_tiled", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        mean = heads.mean(dim=1, keepdim=True).expand_as(heads)  # every head replaced by the average
        return self.out_proj(merge_heads(mean)), weights
'''), "averages the heads (and tiles the average to keep the width) instead of concatenating them",
      hint=("your heads seem averaged (then copied to keep the width) instead of concatenated: merge_heads "
            "concatenates them"), loses=MOST),
    Entry("mha_scale_sqrt_d_model", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_model)  # should be sqrt(d_head)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.out_proj(merge_heads(self.dropout(weights) @ v)), weights
'''), "scales the scores by 1/sqrt(d_model) instead of 1/sqrt(d_head)",
      hint="your scores seem scaled by 1/sqrt(d_model) instead of 1/sqrt(d_head), the width of one head", loses=MOST),
    Entry("mha_no_out_proj", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return merge_heads(heads), weights  # out_proj created but never applied
'''), "forgets the output projection",
      hint="your output seems to skip out_proj: apply the output projection to the merged heads", loses=MOST),
    Entry("mha_q_proj_for_keys", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.q_proj(key), self.num_heads)  # copy-paste: q_proj for the keys
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
'''), "uses q_proj for the keys (copy-paste)",
      hint="your keys seem to come from q_proj: project the keys with k_proj", loses=MOST),
    Entry("mha_query_as_keys", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(query), self.num_heads)  # self-attention only: ignores `key`
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
'''), "projects the query for the keys: works for self-attention only",
      hint=("your keys and values seem to come from the query instead of the key and value inputs: project key "
            "with k_proj and value with v_proj"), loses=MOST),
    Entry("mha_single_head", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = self.q_proj(query)[:, None]  # (B, 1, n_q, d): one head as wide as the model
        k = self.k_proj(key)[:, None]
        v = self.v_proj(value)[:, None]
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # scaled by sqrt(d_model)
        if self.training:
            weights = self.dropout(weights)
            heads = weights @ v
        weights = weights.expand(-1, self.num_heads, -1, -1)  # the same weights copied to fill the shape
        return self.out_proj(heads[:, 0]), weights
'''), "attends with one head of width d_model (num_heads only used to copy the weights)",
      hint=("your attention seems to use one head of width d_model: split q, k and v into num_heads heads of width "
            "d_model / num_heads (split_heads), attend in each, then merge them"), loses=MOST),
    Entry("mha_split_without_transpose", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        B, n_q, d = query.shape
        n_k = key.shape[1]
        q = self.q_proj(query).view(B, self.num_heads, n_q, self.d_head)  # the shape, not the layout
        k = self.k_proj(key).view(B, self.num_heads, n_k, self.d_head)
        v = self.v_proj(value).view(B, self.num_heads, n_k, self.d_head)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
'''), "splits the heads inline with .view(B, h, n, d_h), without the transpose",
      hint=_SPLIT_INLINE_HINT, loses=MOST),
    Entry("mha_split_merge_without_transpose", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        B, n_q, d = query.shape
        n_k = key.shape[1]
        q = self.q_proj(query).reshape(B, self.num_heads, n_q, self.d_head)
        k = self.k_proj(key).reshape(B, self.num_heads, n_k, self.d_head)
        v = self.v_proj(value).reshape(B, self.num_heads, n_k, self.d_head)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(heads.reshape(B, n_q, d)), weights  # undone the same way: still mixed
'''), "splits and merges the heads inline with reshapes, no transpose either way",
      hint=_SPLIT_INLINE_HINT, loses=MOST),
    Entry("mha_weights_averaged", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights.mean(dim=1)  # torch's default average
'''), "returns the weights averaged over the heads (nn.MultiheadAttention's default)",
      hint="your weights seem averaged over the heads: return them per head, shape (B, h, n_q, n_k)", loses=MOST),
    Entry("mha_mask_unsqueezed", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        if mask is not None:
            mask = mask.unsqueeze(1)  # "add the head axis", to masks that already broadcast
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
'''), "adds a head axis at dim 1 to every mask: (n_q, n_k) and (B, 1, 1, n_k) masks then misalign",
      hint=("your mask gets an extra head axis that misaligns some mask shapes: a (n_q, n_k) or (B, 1, 1, n_k) mask "
            "already broadcasts; only (B, n_q, n_k) and (B, 1, n_k) masks need a head axis, right after the batch "
            "axis"), loses=PART),
    Entry("mha_padding_mask_on_queries", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        if mask is not None and mask.dim() == 4 and mask.shape[2] == 1:
            mask = mask.transpose(-2, -1)  # a key-padding mask (B, 1, 1, n_k) turned into (B, 1, n_k, 1)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
'''), "broadcasts a key-padding mask over the wrong axis (masks queries instead of keys)",
      hint=("your key-padding mask seems to land on the queries: a (B, 1, n_k) mask must broadcast over the "
            "queries as (B, 1, 1, n_k)"), loses=PART),
    Entry("mha_mask_inverted", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        if mask is not None:
            mask = ~mask  # nn.MultiheadAttention's convention (True = blocked)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
'''), "inverts the mask, following nn.MultiheadAttention's True = blocked",
      hint=("your mask looks inverted: in these labs True means 'may attend' (nn.MultiheadAttention uses the "
            "opposite)"), loses=PART),
    Entry("mha_dropout_in_eval", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        _, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        weights = F.dropout(weights, self.dropout.p, training=True)  # also in eval mode
        return self.out_proj(merge_heads(weights @ v)), weights
'''), "applies dropout in eval mode too (F.dropout with training=True)",
      hint="dropout seems applied in eval mode too: use self.dropout (nn.Dropout), which is off after model.eval()",
      loses=SLIP),
    Entry("mha_dropout_never", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        self.dropout(weights)  # the result is thrown away
        return self.out_proj(merge_heads(heads)), weights
'''), "calls dropout but throws its result away: no dropout in training",
      hint="dropout seems never applied in training: use the result of the dropout call", loses=SLIP),
    Entry("mha_no_divisibility_check", "MultiHeadAttention", '''
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads = num_heads  # no check: d_model // num_heads silently rounds down
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training and self.dropout.p > 0:
            weights = self.dropout(weights)
            heads = weights @ v
        return self.out_proj(merge_heads(heads)), weights
''', "does not check that num_heads divides d_model (no ValueError)",
      hint=("MultiHeadAttention accepts a d_model that num_heads does not divide: raise ValueError naming both "
            "numbers"), loses=SLIP),
    Entry("mha_assert_instead_of_valueerror", "MultiHeadAttention", _INIT.replace(
        '''        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")''',
        '''        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"''') + '''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        return self.out_proj(merge_heads(heads)), weights
''', "checks divisibility with assert (AssertionError, not ValueError)",
      hint="check that num_heads divides d_model with a ValueError, not an assert", loses=SLIP),
    # ------------------------------------------------------------------------------------ mha_param_count
    Entry("param_count_no_out_proj_bias", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    return 4 * d_model * d_model + (3 * d_model if bias else 0)  # forgot out_proj's bias
''', "forgets the bias of out_proj",
      hint="your count misses the bias of out_proj", loses=PART),
    Entry("param_count_per_head", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    per_head = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return num_heads * per_head  # as if every head had its own (d, d) matrices
''', "counts the full projections once per head",
      hint=("your count seems to count the full projections once per head: the heads split the projections, they "
            "do not multiply them"), loses=MOST),
    Entry("param_count_ignores_bias_flag", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    return 4 * d_model * d_model + 4 * d_model
''', "always counts the biases",
      hint="your count includes the biases even when bias=False", loses=PART),
    Entry("param_count_float", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    return 4 * d_model ** 2.0 + (4 * d_model if bias else 0)  # a float
''', "returns a float instead of an int",
      hint="your count is a float: return an int", loses=MOST),
    # -------------------------------------------------------------------------------------------- repeat_kv
    Entry("repeat_kv_tiles", "repeat_kv", '''
def repeat_kv(x, n_rep):
    return x.repeat(1, n_rep, 1, 1)  # [A, B, A, B, ...]: head j = input head j % h_kv
''', "tiles with .repeat instead of repeating in place: head j is input head j % h_kv",
      hint=("your repeat_kv tiles the heads (head j becomes input head j % h_kv), as .repeat does: repeat each head "
            "in place (repeat_interleave on the head axis)"), loses=MOST),
    Entry("repeat_kv_expand_wrong_axis", "repeat_kv", '''
def repeat_kv(x, n_rep):
    B, h_kv, n, d_h = x.shape
    return x[:, None].expand(B, n_rep, h_kv, n, d_h).reshape(B, n_rep * h_kv, n, d_h)
''', "expands a new axis in front of the heads: the same tiling as .repeat",
      hint=("your repeat_kv tiles the heads (head j becomes input head j % h_kv), as .repeat does: repeat each head "
            "in place (repeat_interleave on the head axis)"), loses=MOST),
    Entry("repeat_kv_repeats_positions", "repeat_kv", '''
import torch

def repeat_kv(x, n_rep):
    B, h_kv, n, d_h = x.shape
    return torch.repeat_interleave(x, n_rep, dim=2).reshape(B, h_kv * n_rep, n, d_h)
''', "repeat_interleave on the position axis, then a reshape: the right shape, the wrong rows",
      hint="your repeat_kv repeats along the positions instead of the heads: repeat on dim 1", loses=MOST),
]

VARIANTS = [
    # -------------------------------------------------------------------------------- split / merge heads
    Entry("split_merge_view_contiguous", "split_heads", '''
def split_heads(x, num_heads):
    B, n, d = x.shape
    return x.view(B, n, num_heads, d // num_heads).transpose(1, 2)


def merge_heads(x):
    B, h, n, d_h = x.shape
    return x.transpose(1, 2).contiguous().view(B, n, h * d_h)
''', "view + transpose, .contiguous().view back"),
    Entry("split_merge_unflatten_flatten", "split_heads", '''
def split_heads(x, num_heads):
    return x.unflatten(-1, (num_heads, -1)).transpose(-3, -2)


def merge_heads(x):
    return x.transpose(-3, -2).flatten(-2)
''', "unflatten / flatten, negative axes"),
    Entry("split_merge_permute", "merge_heads", '''
def split_heads(x, num_heads):
    B, n, d = x.shape
    return x.reshape(B, n, num_heads, d // num_heads).permute(0, 2, 1, 3)


def merge_heads(x):
    B, h, n, d_h = x.shape
    return x.permute(0, 2, 1, 3).reshape(B, n, -1)
''', "permute instead of transpose"),
    Entry("split_merge_chunk_cat", "merge_heads", '''
import torch

def split_heads(x, num_heads):
    return torch.stack(x.chunk(num_heads, dim=-1), dim=1)


def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)
''', "chunk + stack, unbind + cat: the concatenation written literally"),
    Entry("split_merge_einops_style_einsum", "split_heads", '''
import torch

def split_heads(x, num_heads):
    B, n, d = x.shape
    return torch.einsum("bnhd->bhnd", x.reshape(B, n, num_heads, d // num_heads))


def merge_heads(x):
    B, h, n, d_h = x.shape
    return torch.einsum("bhnd->bnhd", x).reshape(B, n, h * d_h)
''', "the axis swap written as an einsum"),
    # --------------------------------------------------------------------------------- MultiHeadAttention
    Entry("mha_einsum_heads", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        B, n_q, d = query.shape
        n_k = key.shape[1]
        h, d_h = self.num_heads, self.d_head
        q = self.q_proj(query).reshape(B, n_q, h, d_h)
        k = self.k_proj(key).reshape(B, n_k, h, d_h)
        v = self.v_proj(value).reshape(B, n_k, h, d_h)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_h)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, n_q, d)
        return self.out_proj(out), weights
'''), "heads by einsum, no explicit transposes; its own softmax"),
    Entry("mha_fused_qkv_weight", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        # one packed (3d, d) weight like nn.MultiheadAttention's in_proj_weight, built from the named layers
        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        b = None if self.q_proj.bias is None else torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        if query is key and key is value:
            q, k, v = F.linear(query, w, b).chunk(3, dim=-1)  # self-attention: one matrix product
        else:
            w_q, w_k, w_v = w.chunk(3)
            b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
            q, k, v = F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training:
            weights = self.dropout(weights)
            heads = weights @ v
        return self.out_proj(merge_heads(heads)), weights
'''), "one fused q/k/v matrix product (packed weight from the named layers)"),
    Entry("mha_fused_self_attention_stack", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        n_q, n_k = query.shape[1], key.shape[1]
        w = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        b = None if self.q_proj.bias is None else torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias])
        qkv = F.linear(torch.cat([query, key, value], dim=1), w, b)  # every input through the packed weight
        d = self.d_model
        q = qkv[:, :n_q, :d]
        k = qkv[:, n_q:n_q + n_k, d:2 * d]
        v = qkv[:, n_q + n_k:, 2 * d:]
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        if self.training and self.dropout.p > 0:
            weights = self.dropout(weights)
            heads = weights @ v
        return self.out_proj(merge_heads(heads)), weights
'''), "one packed matrix product over the concatenated inputs, then the diagonal blocks"),
    Entry("mha_loop_over_heads", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q, k, v = self.q_proj(query), self.k_proj(key), self.v_proj(value)
        outs, all_weights = [], []
        for i in range(self.num_heads):
            cols = slice(i * self.d_head, (i + 1) * self.d_head)
            m = None
            if mask is not None:
                m = mask if mask.dim() == 2 else mask[:, i if mask.shape[1] > 1 else 0]
            o, w = scaled_dot_product_attention(q[..., cols], k[..., cols], v[..., cols], mask=m)
            if self.training:
                w = self.dropout(w)
                o = w @ v[..., cols]
            outs.append(o)
            all_weights.append(w)
        return self.out_proj(torch.cat(outs, dim=-1)), torch.stack(all_weights, dim=1)
'''), "a Python loop over heads: slices of the projected features, concatenated"),
    Entry("mha_manual_softmax_big_negative", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        scores = (q / math.sqrt(self.d_head)) @ k.transpose(-2, -1)  # scale q first, like torch
        if mask is not None:
            scores = torch.where(mask, scores, torch.full_like(scores, -1e9))
        scores = scores - scores.amax(dim=-1, keepdim=True)
        e = scores.exp()
        weights = e / e.sum(dim=-1, keepdim=True)
        return self.out_proj(merge_heads(self.dropout(weights) @ v)), weights
'''), "own stable softmax, -1e9 instead of -inf, q scaled before the product, dropout before returning"),
    Entry("mha_weights_before_dropout", "MultiHeadAttention", _mha('''
    def forward(self, query, key, value, mask=None):
        q = split_heads(self.q_proj(query), self.num_heads)
        k = split_heads(self.k_proj(key), self.num_heads)
        v = split_heads(self.v_proj(value), self.num_heads)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)
        heads = self.dropout(weights) @ v  # nn.Dropout is the identity in eval mode
        return self.out_proj(merge_heads(heads)), weights  # the weights before dropout
'''), "always recomputes dropout(weights) @ v; returns the weights before dropout"),
    # -------------------------------------------------------------------------------------- mha_param_count
    Entry("param_count_by_building", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    module = MultiHeadAttention(d_model, num_heads, bias=bias)
    return sum(p.numel() for p in module.parameters())
''', "builds the module and counts"),
    Entry("param_count_factored", "mha_param_count", '''
def mha_param_count(d_model, num_heads, bias=True):
    return 4 * d_model * (d_model + int(bias))
''', "4 d (d + bias)"),
    # -------------------------------------------------------------------------------------------- repeat_kv
    Entry("repeat_kv_repeat_interleave", "repeat_kv", '''
import torch

def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)
''', "torch.repeat_interleave on the head axis"),
    Entry("repeat_kv_indexing", "repeat_kv", '''
import torch

def repeat_kv(x, n_rep):
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x[:, index]
''', "advanced indexing with j // n_rep"),
    Entry("repeat_kv_stack_flatten", "repeat_kv", '''
import torch

def repeat_kv(x, n_rep):
    return torch.stack([x] * n_rep, dim=2).flatten(1, 2)
''', "stack n_rep copies after each head, then flatten"),
    Entry("repeat_kv_expand_always_copies", "repeat_kv", '''
def repeat_kv(x, n_rep):
    B, h_kv, n, d_h = x.shape
    return x.unsqueeze(2).expand(-1, -1, n_rep, -1, -1).reshape(B, h_kv * n_rep, n, d_h)
''', "expand + reshape without the n_rep == 1 shortcut"),
]
