# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lab 06: Multi-head attention
#
# In Lab 05 every query took **one** weighted average of the values: one softmax, one set of weights,
# one mixture. A token that needs two different things from two different places (its subject *and* its
# object, the word before *and* the word after) must squeeze both into that single average.
# *Multi-head attention* ([Vaswani et al., 2017](https://arxiv.org/abs/1706.03762), section 3.2.2) runs
# several attentions side by side, each in its own narrow slice of the vector, and concatenates what they
# find. It is the attention of every Transformer since.
#
# You will build it one idea at a time:
#
# 1. `split_heads` and `merge_heads`: cut the feature axis into heads and glue them back, with reshapes.
# 2. `MultiHeadAttention`: projections, heads, attention, concatenation, output projection, masks and
#    dropout. It must equal PyTorch's `nn.MultiheadAttention` with the same weights.
# 3. `mha_param_count`: how many parameters, and why the answer does not depend on the number of heads.
# 4. Experiments: a task one head cannot solve and four heads can; what the cost of a head is.
# 5. `repeat_kv` and grouped-query attention: fewer key/value heads for a smaller KV cache, as in
#    Llama, Mistral and most recent language models.
#
# **Course rules.** The grader reads your graded cells: import only the course's modules (`torch`, `math`,
# `collections`, ... and what this lab names), use a module only through its attributes (`F.softmax`, never
# `g = F`), and compute no code or names at run time (`eval`, `getattr` with a built name, a string run as
# code). A breach costs the question it appears in, never the whole lab, and the feedback names its cell, line
# and rule; `setattr(self, ...)` with a built name costs nothing but is shown to your instructor (prefer
# `nn.ModuleList`).
# A graded name defined in more than one cell is graded on its last definition (what running every cell top to
# bottom leaves), on every route; the feedback names both cells. `docs/CURRICULUM.md` states the same rules.
# A lab's forbidden library calls are checked on the operations your code runs as well as on its text:
# reaching one another way (another name, `torch.ops`, a string a library evaluates, an unpickled object)
# costs the question the same, named by its cell and line.
#
# **Rules of this lab.**
#
# - `nn.MultiheadAttention` and `F.scaled_dot_product_attention` are **not allowed** in the graded cells:
#   the grader reads your code, and a use of either costs the whole question whose code holds it. This lab
#   gives you a working `scaled_dot_product_attention` (Lab 05's, in section 0): call **that** one, by its
#   bare name.
# - Name the sub-layers exactly as asked (`q_proj`, `k_proj`, `v_proj`, `out_proj`): the grader loads
#   weights by these names.
# - A boolean mask is **True where attention is allowed** (the opposite of `nn.MultiheadAttention`'s
#   `attn_mask` and `key_padding_mask`, where True means *blocked*).
# - Tensors are batch-first, and heads come right after the batch: `(B, h, n, d_h)`.
# - Your code must work in float32 and float64 (keep the input's dtype) on whatever device the inputs are
#   on, must not change its inputs in place, and must keep the autograd graph (no `.detach()`, `.item()`).
#
# **Shape legend** used throughout: `B` batch, `n` sequence length (`n_q` queries, `n_k` keys), `d` (or
# `d_model`) the model width, `h` the number of heads, `d_h = d / h` the width of one head, `h_kv` the
# number of key/value heads in grouped-query attention.
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The grade
# comes from hidden tests that call your functions and classes on random inputs and compare outputs *and
# gradients* with a reference and with `nn.MultiheadAttention`. Cells whose first line says *Experiment*
# or *Demo* are not run by the grader: do not define anything graded in them.
#
# **Sizes.** On a CPU the experiments use small sizes and the notebook runs in about a minute; on a GPU
# (Colab: *Runtime > Change runtime type*) they use larger ones. `sized(fast, full)` picks between the
# two; set the environment variable `ATTNLAB_FAST=1` or `0` to force either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 06.
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 (for your own code: F.softmax, F.dropout, ...)
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

from attnlab.kit.device import sized
from attnlab.kit.plotting import attention_grid, line_plot, plot_history
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import evaluate, fit

# %% [markdown]
# ## 0. Given: scaled dot-product attention (Lab 05)
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V$$
#
# This is a working version of what you wrote in Lab 05; run the cell and use it below. It accepts any
# number of leading dimensions, so a batch of heads `(B, h, n, d_h)` is just one more leading axis: the
# scores of every head of every sequence come out of one `@`. The mask (True = may attend) broadcasts
# against the scores `(..., n_q, n_k)`.

# %%
# GIVEN from lab05_self_attention: scaled_dot_product_attention


# %% [markdown]
# ## 1. Heads are slices of the feature axis
#
# Multi-head attention with $h$ heads on vectors of width $d$ computes, for $i = 1 \dots h$,
#
# $$\mathrm{head}_i = \mathrm{Attention}(Q W^Q_i,\; K W^K_i,\; V W^V_i), \qquad
#   W^Q_i, W^K_i, W^V_i \in \mathbb{R}^{d \times d_h}, \quad d_h = d / h,$$
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O,
#   \qquad W^O \in \mathbb{R}^{d \times d} .$$
#
# Each head has its own queries, keys and values, so each has its own softmax and can look somewhere
# else. Writing $h$ little matrices would be slow; instead we **stack** them side by side:
# $W^Q = [W^Q_1 \,|\, W^Q_2 \,|\, \dots \,|\, W^Q_h] \in \mathbb{R}^{d \times d}$ is one `nn.Linear(d, d)`,
# and columns $i \cdot d_h$ to $(i+1) \cdot d_h - 1$ of its output are the queries of head $i$. One matrix
# product computes every head's queries; all that is left is to *view* the result as heads:
#
# ```
#   projected:  (B, n, d)         features [ head 0: 0 .. d_h-1 | head 1: d_h .. 2d_h-1 | ... ]
#   reshape:    (B, n, h, d_h)    the last axis cut into h pieces of d_h (no data moves)
#   transpose:  (B, h, n, d_h)    heads next to the batch, so each head is a (n, d_h) matrix
# ```
#
# After the transpose, `scaled_dot_product_attention` treats `(B, h)` as leading dimensions and runs all
# heads at once. `merge_heads` undoes it: transpose back to `(B, n, h, d_h)`, then flatten the last two
# axes to `(B, n, h * d_h)`, the heads side by side, which is the concatenation.
#
# **Two traps.**
#
# - Reshaping `(B, n, d)` straight to `(B, h, n, d_h)` *without* the transpose gives the right shape and
#   the wrong numbers: it cuts the flat memory `[pos 0: all features][pos 1: all features]...` into h
#   blocks of n rows, so "head 0" gets whole positions, not a slice of every position.
# - `view` needs the tensor's memory to be laid out in order (*contiguous*). After a `transpose` it is
#   not, so `x.transpose(1, 2).view(...)` raises an error: use `.reshape(...)` (which copies when it must)
#   or `.contiguous().view(...)`.
#
# **A worked example.** One sequence of 2 positions with 6 features numbered 0 to 11,
# `x = torch.arange(12.0).reshape(1, 2, 6)`, cut into 2 heads of 3: head 0 gets features 0-2 of every
# position and head 1 features 3-5, so `split_heads(x, 2)` is
#
# ```
# [[[[0, 1, 2], [6, 7, 8]],       head 0: positions 0 and 1
#   [[3, 4, 5], [9, 10, 11]]]]    head 1: positions 0 and 1      shape (1, 2, 2, 3)
# ```
#
# A plain `reshape` to `(1, 2, 2, 3)` would give `[[0, 1, 2], [3, 4, 5]]` as head 0: both halves of
# position 0, which mixes heads and positions. The first check tests these numbers.
#
# Implement `split_heads(x, num_heads)`: `(B, n, h * d_h) -> (B, h, n, d_h)`. Head `j` of position `p` is
# `x[:, p, j*d_h:(j+1)*d_h]`. Read `B`, `n` and the width from `x.shape`; `d_h = width // num_heads`.

# %% [raw]
# # BEGIN QUESTION
# name: split_heads
# points: 3

# %%
def split_heads(x, num_heads):
    """Cut the feature axis into num_heads heads and move the heads next to the batch axis.

    Shapes:
        x:         (B, n, h*d_h)
        num_heads: int h (it divides the width of x)
        returns:   (B, h, n, d_h), where out[b, j, p] = x[b, p, j*d_h:(j+1)*d_h]
    """
    # reshape to (B, n, h, d_h), then swap the n and h axes
    # BEGIN SOLUTION
    B, n, width = x.shape
    d_head = width // num_heads
    x = x.reshape(B, n, num_heads, d_head)  # (B, n, h, d_h): the last axis cut into h pieces
    return x.transpose(1, 2)  # (B, h, n, d_h): heads next to the batch axis
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: 12 numbered features cut into 2 heads
from attnlab.kit.expect import expect_equal

x = torch.arange(12.0).reshape(1, 2, 6)
expected = [[[[0.0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9, 10, 11]]]]
expect_equal(split_heads(x, 2), expected, "split_heads(arange(12).reshape(1, 2, 6), 2) (head j holds a block "
             "of features of every position)")

# %%
# shapes and dtype for 1, 2, 4 and 12 heads
g = torch.Generator().manual_seed(0)
x = torch.randn(3, 5, 12, dtype=torch.float64, generator=g)
for h in (1, 2, 4, 12):
    out = split_heads(x, h)
    assert out.shape == (3, h, 5, 12 // h), (
        f"split_heads(x (3, 5, 12), {h}) should have shape (3, {h}, 5, {12 // h}), got {tuple(out.shape)}")
    assert out.dtype == torch.float64, "keep the input's dtype"
    assert torch.equal(out[:, 0, :, :], x[:, :, : 12 // h]), (
        f"with {h} heads, head 0 should be the first {12 // h} features of every position")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# Implement `merge_heads(x)`: `(B, h, n, d_h) -> (B, n, h * d_h)`, the inverse of `split_heads`, so that
# `merge_heads(split_heads(x, h))` gives back `x` exactly. Read `h` and `d_h` from `x.shape`. On the worked
# example above, `merge_heads` of the `(1, 2, 2, 3)` heads gives back `torch.arange(12.0).reshape(1, 2, 6)`:
# at every position, head 0's features first.

# %% [raw]
# # BEGIN QUESTION
# name: merge_heads
# points: 4

# %%
def merge_heads(x):
    """Concatenate the heads: the inverse of split_heads.

    Shapes:
        x:       (B, h, n, d_h)
        returns: (B, n, h*d_h), where out[b, p, j*d_h:(j+1)*d_h] = x[b, j, p]
    """
    # swap the h and n axes back, then flatten the last two axes (mind contiguity)
    # BEGIN SOLUTION
    B, h, n, d_head = x.shape
    x = x.transpose(1, 2)  # (B, n, h, d_h): positions back next to the batch axis
    return x.reshape(B, n, h * d_head)  # (B, n, h*d_h): the heads side by side
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example, backwards
from attnlab.kit.expect import expect_equal

heads = torch.tensor([[[[0.0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9, 10, 11]]]])  # (1, 2, 2, 3)
expect_equal(merge_heads(heads), torch.arange(12.0).reshape(1, 2, 6), "merge_heads of the example's heads "
             "(head 0's features first at every position)")

# %%
# round trips both ways give the input back exactly
g = torch.Generator().manual_seed(1)
x = torch.randn(2, 7, 24, generator=g)
for h in (1, 3, 8, 24):
    back = merge_heads(split_heads(x, h))
    assert back.shape == x.shape and torch.equal(back, x), f"merge_heads(split_heads(x, {h})) should give x back exactly"
y = torch.randn(2, 4, 7, 6, generator=g)
assert torch.equal(split_heads(merge_heads(y), 4), y), "split_heads(merge_heads(y), h) should give y back exactly"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 2. `MultiHeadAttention`
#
# Putting it together, for queries from one sequence (`query`, `(B, n_q, d)`) and keys and values from
# another or the same one (`key`, `value`, `(B, n_k, d)`):
#
# ```
#   q = split_heads(q_proj(query))      (B, n_q, d) -> (B, h, n_q, d_h)
#   k = split_heads(k_proj(key))        (B, n_k, d) -> (B, h, n_k, d_h)
#   v = split_heads(v_proj(value))      (B, n_k, d) -> (B, h, n_k, d_h)
#   heads, weights = attention(q, k, v, mask)          (B, h, n_q, d_h), (B, h, n_q, n_k)
#   out = out_proj(merge_heads(heads))  (B, h, n_q, d_h) -> (B, n_q, d)
# ```
#
# and return `(out, weights)`, the weights of **every** head (not their average).
#
# - **Four linear layers**, each `nn.Linear(d_model, d_model, bias=bias)`, named `q_proj`, `k_proj`,
#   `v_proj`, `out_proj`. The scale inside the attention is $1/\sqrt{d_h}$, the width of *one head*'s
#   queries and keys; the given function reads it from `q.shape[-1]`, so call it on the split tensors.
# - **The output projection** $W^O$ is what lets the heads talk to each other: after the concatenation,
#   each head's result sits in its own slice of features, and `out_proj` mixes the slices.
# - **Masks** broadcast against the scores `(B, h, n_q, n_k)`: a causal `(n_q, n_k)` mask is the same for
#   every sequence and head, a key-padding mask `(B, 1, 1, n_k)` differs per sequence and is shared by
#   the heads and queries, `(B, 1, n_q, n_k)` is anything per sequence. Pass the mask on unchanged;
#   broadcasting does the rest.
# - **Divisibility.** If `d_model % num_heads != 0` there is no head width: raise
#   `ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")` in `__init__`.
# - **Dropout** (probability `dropout`) acts on the attention **weights**, and only in training mode:
#   a dropped weight cuts one query-key link for one step. Keep an `nn.Dropout(dropout)` as a
#   sub-module (it has no parameters, and it already knows about `model.train()` / `model.eval()`), apply
#   it to the weights, and recompute the heads as `weights @ v`. Return the weights that were applied.
#   In `eval()` mode the module must be deterministic and equal to the same module with dropout 0.
#
# With the same weights, your module must equal `nn.MultiheadAttention(d, h, batch_first=True)` called
# with `average_attn_weights=False`; the public checks below compare the two.
#
# **A worked example.** $d = 2$, $h = 2$ (so $d_h = 1$), every projection the identity without bias: head 0
# sees feature 0 only, head 1 feature 1 only. With $x = I_2$ (two positions), head 0's queries and keys are
# $[1, 0]$, so its scores are $\begin{pmatrix} 1 & 0 \\ 0 & 0 \end{pmatrix} / \sqrt{1}$ and its weights
# $\begin{pmatrix} a & b \\ 0.5 & 0.5 \end{pmatrix}$ with $a = e/(e+1) = 0.7311$, $b = 1/(e+1) = 0.2689$;
# its output is the weights times its values $[1, 0]$: $[a, 0.5]$. Head 1 is the mirror image, weights
# $\begin{pmatrix} 0.5 & 0.5 \\ b & a \end{pmatrix}$ and output $[0.5, a]$. Merged and projected by the
# identity, `out` is $\begin{pmatrix} a & 0.5 \\ 0.5 & a \end{pmatrix}$. One check below tests these numbers.

# %% [raw]
# # BEGIN QUESTION
# name: MultiHeadAttention
# points: 14

# %%
class MultiHeadAttention(nn.Module):
    """Multi-head (scaled dot-product) attention with h heads of width d_h = d_model / h.

    Args:
        d_model:   the width of queries, keys, values and of the output
        num_heads: h, must divide d_model (ValueError otherwise)
        dropout:   dropout probability on the attention weights (training mode only)
        bias:      whether the four projections have biases

    Attributes: q_proj, k_proj, v_proj, out_proj (each nn.Linear(d_model, d_model, bias=bias))
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        # 1. raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}") if needed
        # 2. keep num_heads; create q_proj, k_proj, v_proj, out_proj and an nn.Dropout(dropout)
        # BEGIN SOLUTION
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        self.d_model = d_model
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        # END SOLUTION

    def forward(self, query, key, value, mask=None):
        """Shapes:
            query:   (B, n_q, d)
            key:     (B, n_k, d)
            value:   (B, n_k, d)
            mask:    None, or a bool tensor that broadcasts to (B, h, n_q, n_k), True = may attend:
                     (n_q, n_k), (B, 1, 1, n_k), (B, 1, n_q, n_k), ...
            returns: (out (B, n_q, d), weights (B, h, n_q, n_k))
            inside:  q (B, h, n_q, d_h), k and v (B, h, n_k, d_h)
        """
        # project, split into heads, attend (the given scaled_dot_product_attention), dropout on the
        # weights in training mode, merge the heads, output projection
        # BEGIN SOLUTION
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, h, n_q, d_h)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, h, n_k, d_h)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, h, n_k, d_h)
        heads, weights = scaled_dot_product_attention(q, k, v, mask=mask)  # (B, h, n_q, d_h), (B, h, n_q, n_k)
        if self.training and self.attn_dropout.p > 0:
            weights = self.attn_dropout(weights)  # cut random query-key links (rescaled by 1 / (1 - p))
            heads = weights @ v  # (B, h, n_q, d_h), with the weights that were applied
        out = self.out_proj(merge_heads(heads))  # (B, h, n_q, d_h) -> (B, n_q, h*d_h) -> (B, n_q, d)
        return out, weights
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# sub-layers, parameter shapes, and the ValueError
mha = MultiHeadAttention(8, 2)
shapes = {name: tuple(p.shape) for name, p in mha.named_parameters()}
expected = {f"{layer}.{kind}": (8, 8) if kind == "weight" else (8,)
            for layer in ("q_proj", "k_proj", "v_proj", "out_proj") for kind in ("weight", "bias")}
assert shapes == expected, f"MultiHeadAttention(8, 2) should have the parameters {expected}, got {shapes}"
no_bias = {name for name, _ in MultiHeadAttention(8, 2, bias=False).named_parameters()}
assert no_bias == {"q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight"}, (
    f"bias=False: no biases, got {no_bias}")
try:
    MultiHeadAttention(10, 3)
except ValueError as exc:
    assert "not divisible" in str(exc), f"the message should say d_model is not divisible by num_heads, got {exc!r}"
else:
    raise AssertionError("MultiHeadAttention(10, 3) should raise ValueError: 10 is not divisible by 3")

# %%
# output shapes for self- and cross-attention; rows sum to 1
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(2)
mha = MultiHeadAttention(8, 2)
x = torch.randn(3, 5, 8, generator=g)
out, w = mha(x, x, x)
assert out.shape == (3, 5, 8), f"out should have shape (B, n_q, d) = (3, 5, 8), got {tuple(out.shape)}"
assert w.shape == (3, 2, 5, 5), f"weights should have shape (B, h, n_q, n_k) = (3, 2, 5, 5), got {tuple(w.shape)}"
expect_close(w.sum(-1), torch.ones(3, 2, 5), "the row sums of each head's weights", atol=1e-6)
memory = torch.randn(3, 7, 8, generator=g)
out, w = mha(x[:, :4], memory, memory)
assert out.shape == (3, 4, 8) and w.shape == (3, 2, 4, 7), (
    f"cross-attention: expected out (3, 4, 8) and weights (3, 2, 4, 7), got {tuple(out.shape)} and {tuple(w.shape)}")

# %%
# the worked example: two heads of width 1, identity weights
from attnlab.kit.expect import expect_close

mha = MultiHeadAttention(2, 2, bias=False)
with torch.no_grad():
    for layer in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
        layer.weight.copy_(torch.eye(2))
x = torch.eye(2)[None]  # (1, 2, 2)
out, w = mha(x, x, x)
a, b = math.e / (math.e + 1), 1 / (math.e + 1)  # 0.7311, 0.2689
expect_close(w, [[[[a, b], [0.5, 0.5]], [[0.5, 0.5], [b, a]]]], "the weights of the two heads (scaled by "
             "1/sqrt(d_h), the width of one head)", atol=1e-6)
expect_close(out, [[[a, 0.5], [0.5, a]]], "out (the heads concatenated, then out_proj)", atol=1e-6)

# %%
# every mask shape the contract allows; masked weights are 0
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(3)
mha = MultiHeadAttention(8, 4)
x = torch.randn(2, 5, 8, generator=g)
causal = torch.ones(5, 5, dtype=torch.bool).tril()  # (n_q, n_k)
padding = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]  # (B, 1, 1, n_k)
per_sequence = causal[None, None] & padding  # (B, 1, n_q, n_k)
for mask in (causal, padding, per_sequence):
    out, w = mha(x, x, x, mask=mask)
    assert out.shape == (2, 5, 8) and w.shape == (2, 4, 5, 5), (
        f"a mask of shape {tuple(mask.shape)}: wrong output shapes {tuple(out.shape)}, {tuple(w.shape)}")
    assert (w.masked_select(~mask.expand_as(w)) == 0).all(), (
        f"a mask of shape {tuple(mask.shape)}: masked weights must be exactly 0")
out, _ = mha(x, x, x, mask=padding)
out_short, _ = mha(x[1:, :3], x[1:, :3], x[1:, :3])
expect_close(out[1, :3], out_short[0], "out with padded keys masked (it should equal dropping them)", atol=1e-5)

# %%
# equals nn.MultiheadAttention with the same weights
# (allowed here, in a check; its packed in_proj_weight is [W_q; W_k; W_v] and its masks are True where
# attention is NOT allowed)
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(4)
mha = MultiHeadAttention(12, 3).double()
torch_mha = nn.MultiheadAttention(12, 3, batch_first=True, dtype=torch.float64)
with torch.no_grad():
    torch_mha.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
    torch_mha.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
    torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
    torch_mha.out_proj.bias.copy_(mha.out_proj.bias)
query = torch.randn(2, 4, 12, dtype=torch.float64, generator=g)
memory = torch.randn(2, 6, 12, dtype=torch.float64, generator=g)
causal = torch.ones(4, 6, dtype=torch.bool).tril()
with torch.no_grad():
    out, w = mha(query, memory, memory, mask=causal)
    out_t, w_t = torch_mha(query, memory, memory, attn_mask=~causal, average_attn_weights=False)
expect_close(w, w_t, "the weights (expected: nn.MultiheadAttention's)", atol=1e-8, rtol=1e-5)
expect_close(out, out_t, "out (expected: nn.MultiheadAttention's)", atol=1e-8, rtol=1e-5)

# %%
# dropout acts in training mode only
# (in eval mode a module with dropout=0.5 equals the same weights without dropout)
g = torch.Generator().manual_seed(5)
plain = MultiHeadAttention(8, 2)
dropping = MultiHeadAttention(8, 2, dropout=0.5)
dropping.load_state_dict(plain.state_dict())
x = torch.randn(2, 6, 8, generator=g)
plain.eval(), dropping.eval()
assert torch.allclose(dropping(x, x, x)[0], plain(x, x, x)[0], atol=1e-6), "in eval mode dropout must do nothing"
dropping.train()
assert not torch.allclose(dropping(x, x, x)[0], plain(x, x, x)[0]), "in training mode dropout=0.5 should change the output"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 3. How many parameters?
#
# Each of the four projections is a $d \times d$ matrix plus (with `bias=True`) a bias of $d$ numbers:
#
# $$\#\text{params} = 4d^2 + 4d .$$
#
# The number of heads appears nowhere: $h$ heads of width $d/h$ have $h \cdot d \cdot (d/h) = d^2$ query
# weights between them, the same as one head of width $d$. Heads do not add capacity, they *partition*
# it: each head gets a narrower slice. Whether that helps is the question of section 4.
#
# Implement `mha_param_count(d_model, num_heads, bias=True)`, returning a Python `int` (it must equal
# `sum(p.numel() for p in MultiHeadAttention(d_model, num_heads, bias=bias).parameters())`).

# %% [raw]
# # BEGIN QUESTION
# name: mha_param_count
# points: 3

# %%
def mha_param_count(d_model, num_heads, bias=True):
    """The number of parameters of MultiHeadAttention(d_model, num_heads, bias=bias), as an int."""
    # BEGIN SOLUTION
    weights = 4 * d_model * d_model  # q_proj, k_proj, v_proj, out_proj: (d, d) each, whatever h is
    biases = 4 * d_model if bias else 0  # one (d,) vector each
    return weights + biases
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# mha_param_count(512, 8), and the modules' own counts
assert mha_param_count(512, 8) == 4 * 512 * 512 + 4 * 512 == 1_050_624, (
    f"mha_param_count(512, 8) should be 1050624, got {mha_param_count(512, 8)}")
assert mha_param_count(512, 8, bias=False) == 1_048_576, (
    f"without biases: 4 * 512 * 512 = 1048576, got {mha_param_count(512, 8, bias=False)}")
assert mha_param_count(512, 1) == mha_param_count(512, 64), "the count does not depend on the number of heads"
assert isinstance(mha_param_count(6, 3), int), "return a Python int"
for d, h, bias in ((8, 2, True), (12, 4, False)):
    n = sum(p.numel() for p in MultiHeadAttention(d, h, bias=bias).parameters())
    assert mha_param_count(d, h, bias) == n, (
        f"MultiHeadAttention({d}, {h}, bias={bias}) has {n} parameters, mha_param_count says {mha_param_count(d, h, bias)}")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. Experiments: what heads are for, and what they cost
#
# ### 4.1 A task for two heads
#
# Sequences of $n = 12$ random symbols out of 16. At every position $i$ the model must output **two**
# symbols: the one $2$ positions back, $x_{i-2}$, and the one $3$ positions ahead, $x_{i+3}$ (positions
# wrap around, so every position has both). The model is as small as it gets: symbol embeddings plus
# learned position embeddings, **one** `MultiHeadAttention` layer, and a linear read-out that turns each
# output vector into two predictions of 16 classes. The total width is $d = 32$ for every model; only the
# number of heads changes: $h = 1$ ($d_h = 32$), $h = 2$ ($d_h = 16$), $h = 4$ ($d_h = 8$).
#
# Before you run it: what should one head manage? Its output at position $i$ is a single weighted average
# $\sum_j \alpha_{ij} v_j$. The written question after the attention maps asks you to predict its accuracy
# and to check the prediction against your run.
#
# Each batch is `(ids, target)` with `ids (B, n)` and `target (B, 2n)`: the two answers of position $i$
# are `target[:, 2i]` (back) and `target[:, 2i + 1]` (ahead). The model returns logits `(B, 2n, 16)`,
# so `fit`'s default loss (cross-entropy per token) and metric (token accuracy) apply; `pad_id=None`
# because symbol 0 is a real symbol here, not padding.

# %% tags=["otter_ignore"]
# Experiment (not graded): the "two lookups" data set
VOCAB, SEQ_LEN, BACK, AHEAD = 16, 12, 2, 3


def two_lookups(n_sequences, generator):
    """ids (N, SEQ_LEN) of random symbols; target (N, 2 * SEQ_LEN): [x[i - BACK], x[i + AHEAD]] per i."""
    ids = torch.randint(0, VOCAB, (n_sequences, SEQ_LEN), generator=generator)
    positions = torch.arange(SEQ_LEN)
    back = ids[:, (positions - BACK) % SEQ_LEN]  # (N, n)
    ahead = ids[:, (positions + AHEAD) % SEQ_LEN]  # (N, n)
    target = torch.stack([back, ahead], dim=-1).reshape(n_sequences, 2 * SEQ_LEN)  # (N, n, 2) -> (N, 2n)
    return ids, target


data_gen = seed_everything(0)
train_set = TensorDataset(*two_lookups(sized(2000, 20000), data_gen))
val_set = TensorDataset(*two_lookups(1000, data_gen))
ids, target = val_set[0]
print("ids:            ", ids.tolist())
print("back  (x[i-2]): ", target[0::2].tolist())
print("ahead (x[i+3]): ", target[1::2].tolist())

# %% tags=["otter_ignore"]
# Experiment (not graded): one attention layer, trained with 1, 2 and 4 heads of the same total width
class TwoLookupsModel(nn.Module):
    """Embeddings + positions -> one MultiHeadAttention layer -> two predictions per position."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d_model)
        self.position = nn.Embedding(SEQ_LEN, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, 2 * VOCAB)

    def forward(self, ids):
        B, n = ids.shape
        x = self.embed(ids) + self.position(torch.arange(n, device=ids.device))  # (B, n, d)
        y, self.last_weights = self.attention(x, x, x)  # (B, n, d), weights (B, h, n, n) kept for plots
        return self.readout(y).reshape(B, 2 * n, VOCAB)  # (B, n, 2 * V) -> (B, 2n, V)


D_MODEL = 32
EPOCHS = sized(8, 10)
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=seed_everything(0))
val_loader = DataLoader(val_set, batch_size=500)
models, histories = {}, {}
# Models this small train faster on one CPU thread: splitting a (64 x 32) matrix product between threads
# costs more in synchronisation than it saves, and far more on a busy machine. Restored afterwards.
threads = torch.get_num_threads()
if device.type == "cpu":
    torch.set_num_threads(1)
try:
    for h in (1, 2, 4):
        seed_everything(0)
        models[h] = TwoLookupsModel(D_MODEL, h)
        histories[f"h={h}"] = fit(models[h], train_loader, epochs=EPOCHS, lr=3e-3, val_loader=val_loader,
                                  device=device, pad_id=None, desc=f"{h} head(s)")
finally:
    torch.set_num_threads(threads)
plot_history(histories, title=f"two lookups, d_model = {D_MODEL}")
plt.show()

# %% tags=["otter_ignore"]
# Experiment (not graded): validation accuracy, overall and per answer
def slot_accuracy(model):
    """(accuracy of the 'back' answers, accuracy of the 'ahead' answers) on the validation set."""
    ids, target = (t.to(device) for t in val_set.tensors)
    model.eval()
    with torch.no_grad():
        correct = model(ids).argmax(-1) == target  # (N, 2n)
    return correct[:, 0::2].float().mean().item(), correct[:, 1::2].float().mean().item()


print(f"{'heads':>5} {'d_h':>4} | {'accuracy':>8} | {'back x[i-2]':>11} | {'ahead x[i+3]':>12} | {'params':>6}")
for h, model in models.items():
    _, accuracy = evaluate(model, val_loader, pad_id=None)
    back_acc, ahead_acc = slot_accuracy(model)
    n_params = sum(p.numel() for p in model.attention.parameters())
    print(f"{h:>5} {D_MODEL // h:>4} | {accuracy:>8.3f} | {back_acc:>11.3f} | {ahead_acc:>12.3f} | {n_params:>6}")

# %% [markdown]
# Compare the rows of the table: the overall accuracy, the accuracy of each of the two answers (chance is
# 1 in 16) and the number of parameters, for 1, 2 and 4 heads. Then look at what the heads learned: each
# panel below is one head's weights on one validation sequence (rows: queries $i$, columns: keys $j$).

# %% tags=["otter_ignore"]
# Experiment (not graded): each head's attention map on one validation sequence
ids = val_set.tensors[0][:1].to(device)
labels = [str(p) for p in range(SEQ_LEN)]
for h in (1, 4):
    models[h].eval()
    with torch.no_grad():
        models[h](ids)
    attention_grid(models[h].last_weights[0].cpu(), labels, labels,
                   suptitle=f"{h} head(s): query position i (rows) attends to key position j (columns)")
    plt.show()

# %% [markdown]
# Look for diagonals: a head that always attends from position $i$ to position $i + c$ draws a shifted
# diagonal (wrapping around at the edges). How many diagonals does the single head draw, and how sharp are
# they? What does each of the four heads draw?

# %% [raw]
# # BEGIN QUESTION
# name: one_head_two_lookups
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own table: one head far below two or four (0.538 against 1.000 in the reference run),
#       with the back and ahead accuracies of the single head"
#     points: 0.5
#   - criterion: "Predicts the single head's accuracy when it attends sharply to one of the two positions: one answer
#       right, the other right 1 time in 16, about (1 + 1/16) / 2 = 53%"
#     points: 1
#   - criterion: "Explains that one softmax gives one weighted average per position: spread over both positions, the
#       two symbols arrive as one sum alpha v_a + (1 - alpha) v_b that a linear read-out cannot take apart"
#     points: 1
#   - criterion: "Describes the maps: the single head's two faint diagonals in one map against one sharp shifted
#       diagonal per head in the 4-head model (i - 2 and i + 3), and says that the heads add no parameters"
#     points: 0.5
#   - criterion: "Explains the gain by more parameters or more capacity (the parameter count is the same for every h)"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Predict the accuracy a single head can reach on this task if it attends
# sharply to one of the two positions it needs, and compare with your run (quote the accuracy and the
# back/ahead accuracies of 1, 2 and 4 heads). Why can one head not do better by spreading its weight over
# both positions, and what do the maps of the single head and of the four heads show? The models have the
# same number of parameters: what, then, do the extra heads provide?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0) one head scored 0.538 (back 0.894, ahead 0.183); two and four
# heads scored 1.000 on both answers, all three with 4,224 attention parameters.
#
# **Prediction.** A head's output at position $i$ is one weighted average $\sum_j \alpha_{ij} v_j$. If it looks
# sharply at $j = i - 2$, the "back" answer is right and the "ahead" answer is a guess among 16 symbols:
# accuracy $(1 + 1/16)/2 \approx 0.53$, close to the measured 0.54.
#
# **Why spreading does not help.** With weight on both positions the two symbols arrive as one vector
# $\alpha v_a + (1 - \alpha) v_b$; the read-out sees only this sum, in which the two symbols play symmetric
# roles, and cannot tell reliably which came from where (for $\alpha = 1/2$, $(a, b)$ and $(b, a)$ give the
# same vector). One softmax is one mixture. In the reference run the single head drew two diagonals in one map,
# with on average 0.49 of its weight at $j = i - 2$ and 0.38 at $j = i + 3$: the read-out recovered the symbol
# with the larger share (back 0.89) and rarely the other (ahead 0.18, chance 0.06), which again is about one
# answer in two. In the 4-head model one head put 0.99 of its weight at $j = i + 3$, another 0.93 at
# $j = i - 2$; the two remaining heads split theirs or duplicated one of these: one sharp shifted diagonal per
# useful head.
#
# **What heads provide.** Not parameters: $4d^2 + 4d$ whatever $h$ is. Heads partition the width into
# independent softmaxes; each can attend to its own position, and `out_proj` puts the separate slices back
# together. Multi-head attention buys several lookups per layer at no cost in parameters.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 4.2 What does a head cost?
#
# Parameters: $4d^2 + 4d$ whatever $h$ is (section 3). The cell below counts the floating-point operations
# of one forward pass with `torch.utils.flop_counter` (it counts the matrix products: `addmm` for the four
# projections, `bmm` for the scores and the weighted sums) for $h = 1 \dots 64$ heads at $d = 256$, and the
# size of the attention-weight tensor each forward pass returns.

# %% tags=["otter_ignore"]
# Experiment (not graded): parameters and FLOPs against the number of heads
d, n_tokens = 256, sized(128, 512)
head_counts = [1, 2, 4, 8, 16, 32, 64]
costs = {"parameters": [], "projection FLOPs": [], "attention FLOPs": [], "weights stored": []}
x = torch.randn(1, n_tokens, d)
for h in head_counts:
    mha = MultiHeadAttention(d, h)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        _, w = mha(x, x, x)
    by_op = {str(op): count for op, count in counter.get_flop_counts()["Global"].items()}
    costs["parameters"].append(mha_param_count(d, h))
    costs["projection FLOPs"].append(by_op.get("aten.addmm", 0) + by_op.get("aten.mm", 0))  # q, k, v, out
    costs["attention FLOPs"].append(by_op.get("aten.bmm", 0))  # scores q k^T and weights @ v
    costs["weights stored"].append(w.numel())  # the (B, h, n_q, n_k) attention weights

print(f"d = {d}, n = {n_tokens}, one sequence")
print(f"{'h':>3} {'d_h':>4} | " + " | ".join(f"{name:>16}" for name in costs))
for i, h in enumerate(head_counts):
    print(f"{h:>3} {d // h:>4} | " + " | ".join(f"{costs[name][i]:>16,}" for name in costs))
print(f"analytic: projections 4 * 2nd² = {4 * 2 * n_tokens * d * d:,}, "
      f"attention 2 * 2n²d = {2 * 2 * n_tokens ** 2 * d:,}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained")
line_plot(head_counts, {k: costs[k] for k in ("parameters", "projection FLOPs", "attention FLOPs")},
          xlabel="number of heads h (d fixed)", ylabel="count", title="parameters and FLOPs: flat in h",
          logx=True, logy=True, ax=ax1)
line_plot(head_counts, {"attention weights stored (B·h·n²)": costs["weights stored"]},
          xlabel="number of heads h (d fixed)", ylabel="numbers stored", title="what grows with h",
          logx=True, logy=True, ax=ax2)
plt.show()

# %% [markdown]
# Read each column of the table from $h = 1$ to $h = 64$: which counts change, and by how much?

# %% [raw]
# # BEGIN QUESTION
# name: head_cost
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes the own table: parameters and both FLOP counts the same for every h (263,168; 67,108,864;
#       16,777,216 in the reference run), the stored weights growing linearly with h (16,384 to 1,048,576)"
#     points: 0.5
#   - criterion: "Derives the attention FLOPs: one head's scores cost n_q n_k d_h multiply-adds, h heads n_q n_k h d_h
#       = n_q n_k d, the same for the weighted sum of the values, so independent of h"
#     points: 1
#   - criterion: "Names what grows with h (h softmaxes over n_q n_k scores, the (B, h, n_q, n_k) weights kept for the
#       backward pass) and why narrow heads are avoided (d_h of a few dimensions leaves a poor query-key dot product;
#       real models keep d_h about 64 to 128)"
#     points: 0.5

# %% [markdown]
# **Written question (2 points).** Quote from your table the parameters, the two FLOP counts and the
# numbers of attention weights stored at $h = 1$ and $h = 64$. Derive the attention FLOPs (the scores
# $QK^\top$ and the weighted sum of the values) of $h$ heads of width $d_h = d/h$ on $n_q$ queries and $n_k$
# keys, and explain why they do not depend on $h$. What does grow with $h$, and why do real models not use
# as many heads as possible?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run ($d = 256$, $n = 128$) every row had 263,168 parameters, 67,108,864 projection FLOPs and
# 16,777,216 attention FLOPs (0.2 of the 83.9 million in all), from $h = 1$ to $h = 64$; the stored weights grew
# from 16,384 to 1,048,576, 64 times.
#
# The scores of one head, $Q_i K_i^\top$ with $Q_i \in \mathbb{R}^{n_q \times d_h}$, cost $n_q n_k d_h$
# multiply-adds (2 FLOPs each); $h$ heads cost $n_q n_k h d_h = n_q n_k d$. The weighted sum $A_i V_i$ costs
# the same. Neither depends on $h$: the heads split the same dot products into $h$ shorter pieces. With
# $n_q = n_k = n$ that is $2 \cdot 2 n^2 d = 16{,}777{,}216$, and the four projections $4 \cdot 2 n d^2 =
# 67{,}108{,}864$, as measured. The parameters are $4d^2 + 4d$ for every $h$.
#
# What grows is the attention-weight tensor $(B, h, n_q, n_k)$: $h$ softmaxes of $n_q n_k$ entries each, and
# the memory to keep them for the backward pass, linear in $h$ (one reason for fused kernels such as
# FlashAttention, which never store it). And narrow heads are weak: at $h = 64$, $d_h = 4$, each head compares
# queries and keys in 4 dimensions, too few to express much of a relation. Real models keep $d_h$ between 64
# and 128 (BERT-base: $d = 768$, $h = 12$, $d_h = 64$).

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 5. Grouped-query attention and `repeat_kv`
#
# A language model generates one token at a time. At every step the new token's query attends to the
# keys and values of **all** earlier tokens, which do not change: a model keeps them in a **KV cache**
# instead of recomputing them. For every layer and every earlier token it stores $K$ and $V$ for every
# head:
#
# $$\text{KV-cache bytes} = 2 \times \text{layers} \times h_{kv} \times d_h \times \text{tokens} \times
#   \text{batch} \times \text{bytes per number}.$$
#
# With $h_{kv} = h$ (ordinary multi-head attention) this is often larger than the model itself at long
# contexts. Two fixes share key/value heads between query heads:
#
# - **multi-query attention** (MQA, [Shazeer, 2019](https://arxiv.org/abs/1911.02150)): $h$ query heads,
#   **one** key/value head shared by all;
# - **grouped-query attention** (GQA, [Ainslie et al., 2023](https://arxiv.org/abs/2305.13245)): $h$
#   query heads in $h_{kv}$ groups; the $n_{rep} = h / h_{kv}$ query heads of a group share one
#   key/value head. $h_{kv} = h$ is MHA, $h_{kv} = 1$ is MQA. Llama 2 70B, Llama 3 and Mistral use it.
#
# The projections `k_proj` and `v_proj` then produce only $h_{kv} \cdot d_h$ features, and the cache holds
# `(B, h_kv, n, d_h)`. To reuse ordinary attention, each key/value head is repeated $n_{rep}$ times
# **in place**, so that query head $j$ meets key/value head $j // n_{rep}$:
#
# ```
#   kv heads:   [A, B]                      h_kv = 2
#   repeat_kv:  [A, A, A, B, B, B]          n_rep = 3: query heads 0-2 use A, 3-5 use B
#   not this:   [A, B, A, B, A, B]          (x.repeat(1, 3, 1, 1): tiling mixes the groups)
# ```
#
# Implement `repeat_kv(x, n_rep)`: `(B, h_kv, n, d_h) -> (B, h_kv * n_rep, n, d_h)`, head $j$ of the
# output equal to input head $j // n_{rep}$. A memory-friendly way: add an axis, `expand` it (a view, no
# copy), then `reshape` the two head axes into one. `torch.repeat_interleave(x, n_rep, dim=1)` is also
# fine. With `n_rep = 1` it returns `x` unchanged.
#
# **A worked example.** Two kv heads whose entries are all 0 (head 0) and all 1 (head 1), repeated 3 times,
# give six heads coming from input heads `[0, 0, 0, 1, 1, 1]`; tiling (`.repeat`) would give
# `[0, 1, 0, 1, 0, 1]`, which is wrong. The first check tests this.

# %% [raw]
# # BEGIN QUESTION
# name: repeat_kv
# points: 6

# %%
def repeat_kv(x, n_rep):
    """Repeat each key/value head n_rep times in place: output head j is input head j // n_rep.

    Shapes:
        x:       (B, h_kv, n, d_h)
        n_rep:   int >= 1
        returns: (B, h_kv*n_rep, n, d_h)
    """
    # BEGIN SOLUTION
    if n_rep == 1:
        return x
    B, h_kv, n, d_head = x.shape
    x = x[:, :, None, :, :].expand(B, h_kv, n_rep, n, d_head)  # (B, h_kv, n_rep, n, d_h): a view, no copy
    return x.reshape(B, h_kv * n_rep, n, d_head)  # (B, h_kv*n_rep, n, d_h): copies each head n_rep times
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: heads [0, 1] repeated 3 times in place
x = torch.stack([torch.zeros(4, 2), torch.ones(4, 2)])[None]  # (1, 2, 4, 2)
out = repeat_kv(x, 3)
assert isinstance(out, torch.Tensor) and out.shape == (1, 6, 4, 2), (
    f"repeat_kv(x (1, 2, 4, 2), 3) should have shape (1, 6, 4, 2), got {getattr(out, 'shape', out)}")
heads = [int(out[0, j, 0, 0]) for j in range(6)]
assert heads == [0, 0, 0, 1, 1, 1], (
    f"output heads should come from input heads [0, 0, 0, 1, 1, 1], got {heads} (repeat in place, do not tile)")

# %%
# output head j is input head j // n_rep; n_rep = 1: unchanged
g = torch.Generator().manual_seed(6)
x = torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=g)
out = repeat_kv(x, 4)
assert out.shape == (2, 12, 5, 4) and out.dtype == torch.float64, (
    f"expected shape (2, 12, 5, 4) in float64, got {tuple(out.shape)}, {out.dtype}")
for j in range(12):
    assert torch.equal(out[:, j], x[:, j // 4]), f"output head {j} should equal input head {j // 4}"
assert torch.equal(repeat_kv(x, 1), x), "repeat_kv(x, 1) should return x unchanged"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 5.1 What grouped-query attention saves
#
# A model the size of Llama 3 8B: 32 layers, $h = 32$ query heads of $d_h = 128$ ($d = 4096$), numbers
# stored in bfloat16 (2 bytes), a context of 8192 tokens, one sequence. Llama 3 8B itself uses GQA with
# $h_{kv} = 8$.

# %% tags=["otter_ignore"]
# Experiment (not graded): KV-cache bytes of MHA, GQA and MQA for a Llama-3-8B-sized model
LAYERS, HEADS, D_HEAD, BYTES_PER_NUMBER = 32, 32, 128, 2


def kv_cache_bytes(num_kv_heads, tokens, batch=1):
    """Bytes of the K and V caches of all layers: 2 * layers * h_kv * d_h * tokens * batch * bytes."""
    return 2 * LAYERS * num_kv_heads * D_HEAD * tokens * batch * BYTES_PER_NUMBER


CONTEXT = 8192
kv_heads = [32, 16, 8, 4, 2, 1]
names = {32: "MHA", 8: "GQA (Llama 3 8B)", 1: "MQA"}
print(f"context {CONTEXT} tokens, batch 1, {LAYERS} layers, {HEADS} query heads of d_h = {D_HEAD}, bf16")
print(f"{'h_kv':>5} {'':<17} | {'KV cache':>10} | {'vs MHA':>7} | {'per token':>10}")
for h_kv in kv_heads:
    total = kv_cache_bytes(h_kv, CONTEXT)
    print(f"{h_kv:>5} {names.get(h_kv, 'GQA'):<17} | {total / 2**30:>6.3f} GiB | "
          f"{total / kv_cache_bytes(HEADS, CONTEXT):>7.3f} | {kv_cache_bytes(h_kv, 1) / 2**10:>6.0f} KiB")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8), layout="constrained")
ax1.bar([f"{h_kv}\n{names.get(h_kv, '')}" for h_kv in kv_heads],
        [kv_cache_bytes(h_kv, CONTEXT) / 2**30 for h_kv in kv_heads], color="C0")
ax1.set_xlabel("number of key/value heads h_kv")
ax1.set_ylabel("KV cache (GiB)")
ax1.set_title(f"KV cache at {CONTEXT} tokens")
contexts = [512, 1024, 2048, 4096, 8192, 16384, 32768, 131072]
line_plot(contexts, {f"{names[h_kv]} (h_kv = {h_kv})": [kv_cache_bytes(h_kv, t) / 2**30 for t in contexts]
                     for h_kv in (32, 8, 1)},
          xlabel="context length (tokens)", ylabel="KV cache (GiB)", title="KV cache against context",
          logx=True, logy=True, ax=ax2)
weights_gib = 8e9 * BYTES_PER_NUMBER / 2**30  # 8 billion parameters in bf16
ax2.axhline(weights_gib, color="grey", linestyle=":")
ax2.text(contexts[0], 1.1 * weights_gib, f"the weights of an 8B model in bf16 ({weights_gib:.1f} GiB)", fontsize=8)
plt.show()

# %% [markdown]
# At 8192 tokens ordinary MHA needs 4 GiB of cache per sequence, GQA with 8 key/value heads 1 GiB, MQA
# 128 MiB. At 128k tokens MHA's cache (64 GiB) is more than four times the model itself (15 GiB). GQA
# costs a little quality against MHA (less than MQA does) and is the usual compromise.
#
# ### 5.2 Grouped-query attention, built from your pieces
#
# The module below uses your `split_heads`, `repeat_kv` and `merge_heads` and the given attention. Its
# key and value projections are narrower, `d -> h_kv * d_h`. Two checks: with $h_{kv} = h$ it is exactly
# your `MultiHeadAttention` (load the same weights, get the same outputs), and the K/V tensors it would
# cache shrink by $h / h_{kv}$.

# %% tags=["otter_ignore"]
# Experiment (not graded): grouped-query attention, and a check that h_kv = h is MHA
class GroupedQueryAttention(nn.Module):
    """h query heads sharing h_kv key/value heads (h_kv divides h); h_kv = h is multi-head attention."""

    def __init__(self, d_model, num_heads, num_kv_heads, bias=True):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        d_head = d_model // num_heads
        self.q_proj = nn.Linear(d_model, num_heads * d_head, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * d_head, bias=bias)
        self.out_proj = nn.Linear(num_heads * d_head, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        queries = split_heads(self.q_proj(query), self.num_heads)  # (B, h, n_q, d_h): h query heads
        k_cache = split_heads(self.k_proj(key), self.num_kv_heads)  # (B, h_kv, n_k, d_h): what is cached
        v_cache = split_heads(self.v_proj(value), self.num_kv_heads)  # (B, h_kv, n_k, d_h)
        n_rep = self.num_heads // self.num_kv_heads
        heads, weights = scaled_dot_product_attention(
            queries, repeat_kv(k_cache, n_rep), repeat_kv(v_cache, n_rep), mask=mask
        )  # (B, h, n_q, d_h), (B, h, n_q, n_k)
        self.cache_bytes = sum(t.numel() * t.element_size() for t in (k_cache, v_cache))
        return self.out_proj(merge_heads(heads)), weights  # (B, h, n_q, d_h) -> (B, n_q, d)


seed_everything(0)
d_demo, h_demo = 64, 8
x = torch.randn(2, 10, d_demo, device=device)
causal = torch.ones(10, 10, dtype=torch.bool, device=device).tril()
mha = MultiHeadAttention(d_demo, h_demo).to(device).eval()
gqa = GroupedQueryAttention(d_demo, h_demo, num_kv_heads=h_demo).to(device)
gqa.load_state_dict(mha.state_dict())
with torch.no_grad():
    out_mha, w_mha = mha(x, x, x, mask=causal)
    out_gqa, w_gqa = gqa(x, x, x, mask=causal)
print("GQA with h_kv = h equals MHA:", torch.allclose(out_gqa, out_mha, atol=1e-6),
      f"(largest difference {(out_gqa - out_mha).abs().max().item():.2e})")
print(f"{'h_kv':>5} | {'parameters':>10} | {'K/V bytes for this batch':>24}")
for h_kv in (8, 4, 2, 1):
    layer = GroupedQueryAttention(d_demo, h_demo, num_kv_heads=h_kv).to(device)
    with torch.no_grad():
        layer(x, x, x, mask=causal)
    params = sum(p.numel() for p in layer.parameters())
    print(f"{h_kv:>5} | {params:>10,} | {layer.cache_bytes:>24,}")

# %% [markdown]
# ## Summary
#
# - Heads are slices of the feature axis: one `nn.Linear(d, d)` computes every head's queries, and
#   `split_heads` / `merge_heads` are a reshape plus a transpose each way.
# - Multi-head attention costs the same parameters and the same matrix-product FLOPs as one head of the
#   full width; it buys several independent softmaxes, which solve tasks one softmax cannot (4.1).
# - Grouped-query attention shares key/value heads between groups of query heads: the KV cache shrinks by
#   $h / h_{kv}$ while the queries keep their heads. `repeat_kv` is its one new operation.
#
# Lab 07 gives you a working `MultiHeadAttention` and builds the Transformer block around it.
#
# ### Going further (not graded)
#
# - Train the two-lookups model with $h = 8$ and $h = 32$ ($d_h = 1$): when do heads become too narrow?
# - Make the task need three lookups ($x_{i-2}$, $x_{i+3}$, $x_{i+5}$): how many heads does it take now?
# - Train `GroupedQueryAttention` with $h = 4$, $h_{kv} = 2$ and $h_{kv} = 1$ on the two-lookups task:
#   since both lookups need the same values (the symbols) and only different queries, does MQA suffice?
