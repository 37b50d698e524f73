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
# # Lab 07: Positional encoding and the Transformer block
#
# Lab 06 gave us multi-head attention. Two things stand between it and a Transformer
# ([Vaswani et al., 2017, *Attention Is All You Need*](https://arxiv.org/abs/1706.03762)):
#
# - **Attention has no idea of order.** Shuffle the tokens of a sentence and self-attention returns the
#   same vectors, shuffled the same way. *dog bites man* and *man bites dog* look alike. Positional
#   encodings fix this by adding to each token a vector that says *where* it is.
# - **One attention layer is not a network.** The Transformer *block* wraps attention with a position-wise
#   feed-forward network, residual connections and layer normalization, so that blocks can be stacked
#   dozens deep and still train.
#
# You will build it one idea at a time:
#
# 1. A demo: self-attention is blind to order.
# 2. `sinusoidal_positional_encoding`: the fixed sine/cosine encoding of the original paper, and what its
#    geometry looks like.
# 3. `LearnedPositionalEmbedding`: one trained vector per position (BERT, GPT-2).
# 4. `layer_norm`: layer normalization by hand, in a numerically sound way.
# 5. `FeedForward`: the position-wise two-layer network.
# 6. `TransformerEncoderBlock`: attention + feed-forward, with residuals and norms, post-norm and pre-norm.
#    It must equal PyTorch's `nn.TransformerEncoderLayer` with the same weights.
# 7. Experiment: an order-sensitive task that a Transformer without positions cannot learn.
# 8. Experiment: post-norm against pre-norm as the network gets deeper.
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
# - `F.layer_norm` (and `torch.layer_norm`) is **not allowed** in your `layer_norm`, and the ready-made
#   `nn.TransformerEncoderLayer`, `nn.TransformerEncoder` and `nn.Transformer` are **not allowed**
#   anywhere in the graded cells: the grader reads your code, and a use costs the points of the question.
#   Everything else in `torch` and `torch.nn` is fine: `nn.Linear`, `nn.Dropout`, `nn.GELU`, and in the
#   block `nn.LayerNorm`, once you have written `layer_norm` yourself.
# - This lab **gives** you a working `MultiHeadAttention` (Lab 06's, in section 0). Use it as it is.
# - Name the sub-layers exactly as asked (`weight`, `linear1`, `linear2`, `self_attn`, `ff`, `norm1`,
#   `norm2`): the grader loads weights by these names.
# - A boolean mask is **True where attention is allowed** (the opposite of the `src_mask` and
#   `src_key_padding_mask` of `nn.TransformerEncoderLayer`, where True means *blocked*).
# - Tensors are batch-first: `(B, n, d)`.
# - Your code must work in float32 and float64 on whatever device the inputs are on (CPU or GPU), must
#   not change its inputs in place, and must keep the autograd graph (no `.detach()`, `.item()`).
#
# **Shape legend** used throughout: `B` batch, `n` sequence length, `d` (or `d_model`) the model width,
# `h` the number of heads, `d_ff` the hidden width of the feed-forward network, `max_len` the longest
# sequence a positional table covers.
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The grade
# comes from hidden tests that call your functions and classes on random inputs (float32 and float64, long
# sequences, wide models, masks, inputs far from zero) and compare the outputs *and the gradients* with a
# reference and with PyTorch's own layers. Cells whose first line says *Experiment* or *Demo* are not run
# by the grader: do not define anything graded in them.
#
# **Sizes.** On a CPU the experiments use small sizes and the whole notebook runs in about two minutes;
# on a GPU (Colab: *Runtime > Change runtime type*) they use larger ones. `sized(fast, full)` picks between
# the two; set the environment variable `ATTNLAB_FAST=1` or `0` to force either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 07.
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 - for your code (F.relu, F.gelu, ...)
from torch.utils.data import DataLoader, TensorDataset

from attnlab.kit.device import sized
from attnlab.kit.plotting import line_plot, plot_history
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import evaluate, fit

# %% [markdown]
# ## 0. Given: multi-head attention (Lab 06)
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O, \qquad
#   \mathrm{head}_i = \mathrm{softmax}\!\left(\frac{Q W^Q_i (K W^K_i)^\top}{\sqrt{d_h}} + M\right) V W^V_i .$$
#
# This is a working version of what you wrote in Lab 06; run the cell and use it below, as it is.
# `forward(query, key, value, mask=None)` returns `(out (B, n_q, d), weights (B, h, n_q, n_k))`; the mask
# (True = may attend) broadcasts against `(B, h, n_q, n_k)`, so `(n, n)` (a causal mask) and
# `(B, 1, 1, n)` (a padding mask over the keys) both work. With dropout 0 it equals
# `nn.MultiheadAttention(d_model, num_heads, batch_first=True)` with the same weights.

# %%
# GIVEN from lab06_multi_head_attention: scaled_dot_product_attention, split_heads, merge_heads, MultiHeadAttention


# %% tags=["otter_ignore"]
# Demo (not graded): the given MultiHeadAttention equals nn.MultiheadAttention with the same weights
seed_everything(0)
mha = MultiHeadAttention(16, 4)
torch_mha = nn.MultiheadAttention(16, 4, batch_first=True)
with torch.no_grad():
    torch_mha.in_proj_weight.copy_(torch.cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight]))
    torch_mha.in_proj_bias.copy_(torch.cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias]))
    torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
    torch_mha.out_proj.bias.copy_(mha.out_proj.bias)
x = torch.randn(2, 5, 16)
causal = torch.ones(5, 5, dtype=torch.bool).tril()
ours, _ = mha(x, x, x, mask=causal)
theirs, _ = torch_mha(x, x, x, attn_mask=~causal)  # PyTorch: True = blocked
print("largest difference to nn.MultiheadAttention:", (ours - theirs).abs().max().item())

# %% [markdown]
# ## 1. Self-attention does not know the order of its inputs
#
# Let $P$ be a permutation matrix that reorders the $n$ tokens. The scores of the permuted sequence are
# $(PQ)(PK)^\top = P\,(QK^\top)\,P^\top$, the same scores with rows and columns reordered; the softmax
# works row by row, and $(P A P^\top)(P V) = P\,(AV)$. So
#
# $$\mathrm{SelfAttention}(PX) = P\,\mathrm{SelfAttention}(X):$$
#
# self-attention is *permutation-equivariant*. Every other part of a Transformer block (the feed-forward
# network, the layer norms) acts on each position separately, so the whole block is equivariant too, and
# a model that averages over positions at the end is *invariant*: it gives *dog bites man* and *man bites
# dog* the same answer. Let us check it numerically.

# %% tags=["otter_ignore"]
# Demo (not graded): permuting the tokens permutes the outputs of self-attention, nothing else changes
seed_everything(1)
mha = MultiHeadAttention(8, 2).eval()
x = torch.randn(1, 6, 8)  # (B, n, d): one "sentence" of 6 token vectors
perm = torch.tensor([5, 3, 0, 1, 4, 2])  # a new order of the 6 tokens
out, _ = mha(x, x, x)
out_perm, _ = mha(x[:, perm], x[:, perm], x[:, perm])
print("SA(P x) == P SA(x):", torch.allclose(out_perm, out[:, perm], atol=1e-6))
print("mean over positions unchanged:", torch.allclose(out_perm.mean(1), out.mean(1), atol=1e-6))

# %% [markdown]
# The fix is to make the *input* depend on the position: add to the embedding $e_p$ of the token at
# position $p$ a vector $\mathrm{PE}[p]$ that is different for every position,
#
# $$x_p = e_p + \mathrm{PE}[p] .$$
#
# Two vectors at different positions now differ even when they hold the same token, and attention can
# learn to use the difference. Sections 2 and 3 build the two classic choices of $\mathrm{PE}$.
#
# ## 2. Sinusoidal positional encoding
#
# The original Transformer uses a fixed table: for position $p$ and pair index $i = 0, \dots, d/2 - 1$,
#
# $$\mathrm{PE}[p, 2i] = \sin\!\left(\frac{p}{10000^{2i/d}}\right), \qquad
#   \mathrm{PE}[p, 2i+1] = \cos\!\left(\frac{p}{10000^{2i/d}}\right).$$
#
# Column pair $(2i, 2i+1)$ is a point going round a circle as $p$ grows, with angular frequency
# $\omega_i = 10000^{-2i/d}$: the first pair turns by one radian per position (period $2\pi \approx 6.3$
# positions), the last by about $10^{-4}$ radians (period about $63\,000$ positions). Like the hands of a
# clock, fast pairs tell neighbouring positions apart and slow pairs tell far-apart ones apart.
#
# ```
#   columns:   0          1          2          3         ...   d-2              d-1
#   PE[p]:   sin(p w0)  cos(p w0)  sin(p w1)  cos(p w1)   ...  sin(p w_{d/2-1})  cos(p w_{d/2-1})
#   w_i = 10000 ** (-2i / d)          sin on the even columns, cos on the odd ones (interleaved)
# ```
#
# Implement `sinusoidal_positional_encoding(max_len, d_model)`, returning a float32 tensor
# `(max_len, d_model)`. Positions start at **0**, so row 0 is `[0, 1, 0, 1, ...]`. Raise a `ValueError`
# that names the value when `d_model` is odd (the pairs do not fit).
#
# *Hints.* `torch.arange(max_len)` gives the positions and `torch.arange(0, d_model, 2)` the even column
# indices $2i$; an outer product (`pos[:, None] * freq[None, :]`) gives every angle `(max_len, d_model/2)`.
# Fill the even columns with `pe[:, 0::2] = ...` and the odd ones with `pe[:, 1::2] = ...`.
# **Precision:** for long tables the angles get large ($p$ up to thousands), and float32 keeps only about
# seven digits; computing the angles in float64 and converting the result to float32 at the end is the
# safe choice.
#
# **A worked example.** For $d = 4$ there are two frequencies, $1/10000^{0/4} = 1$ and $1/10000^{2/4} = 1/100$.
# Position 0 is $[\sin 0, \cos 0, \sin 0, \cos 0] = [0, 1, 0, 1]$ (every row 0 is), and position 1 is
# $[\sin 1, \cos 1, \sin 0.01, \cos 0.01] = [0.8415, 0.5403, 0.0100, 0.99995]$. The first check tests these
# numbers.

# %% [raw]
# # BEGIN QUESTION
# name: sinusoidal_positional_encoding
# points: 5

# %%
def sinusoidal_positional_encoding(max_len, d_model):
    """The sinusoidal position table of "Attention Is All You Need".

    Shapes:
        returns: (max_len, d_model) float32, PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)
    Raises ValueError (naming d_model) when d_model is odd.
    """
    # 1. check that d_model is even
    # 2. angles (max_len, d_model/2): position p times frequency 10000^(-2i/d)
    # 3. sin on the even columns, cos on the odd columns; return float32
    # BEGIN SOLUTION
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even to hold sin/cos pairs, got d_model={d_model}")
    positions = torch.arange(max_len, dtype=torch.float64)  # (max_len,)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,): 0, 2, 4, ...
    frequencies = 10000.0 ** (-two_i / d_model)  # (d/2,)
    angles = positions[:, None] * frequencies[None, :]  # (max_len, d/2)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(torch.float32)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: positions 0 and 1 for d = 4
from attnlab.kit.expect import expect_close

pe = sinusoidal_positional_encoding(3, 4)
assert isinstance(pe, torch.Tensor) and pe.shape == (3, 4), f"expected a (3, 4) tensor, got {getattr(pe, 'shape', pe)}"
assert pe.dtype == torch.float32, f"the table should be float32, got {pe.dtype}"
expect_close(pe[0], [0.0, 1.0, 0.0, 1.0], "position 0 (sin 0, cos 0, ...)", atol=1e-6)
expect_close(pe[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], "position 1 "
             "(sin 1, cos 1, sin 0.01, cos 0.01)", atol=1e-6)

# %%
# interleaved sin/cos pairs; a wide table; odd widths rejected
from attnlab.kit.expect import expect_close

pe = sinusoidal_positional_encoding(50, 16)
assert pe.shape == (50, 16), f"expected shape (50, 16), got {tuple(pe.shape)}"
expect_close(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(50, 8), "sin^2 + cos^2 of columns 2i and 2i+1 "
             "(sin and cos of the same angle)", atol=1e-5)
expect_close(pe[:, 0], torch.sin(torch.arange(50.0)), "column 0 (sin p)", atol=1e-5)
expect_close(pe[10, 14], math.sin(10 / 10000 ** (14 / 16)), "pe[10, 14] (sin(p / 10000^(14/16)))", atol=1e-6)
try:
    sinusoidal_positional_encoding(10, 7)
except ValueError as exc:
    assert "7" in str(exc), f"the message should name the odd d_model (7), got {exc!r}"
else:
    raise AssertionError("sinusoidal_positional_encoding(10, 7) should raise ValueError: d_model must be even")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 2.1 What the encoding looks like
#
# Each row of the heatmap below is one position, each column one dimension. The left columns (fast pairs)
# flicker from one position to the next; the right ones (slow pairs) barely change over 100 positions.

# %% tags=["otter_ignore"]
# Demo (not graded): the sinusoidal table as a heatmap
pe = sinusoidal_positional_encoding(100, 64)
fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
image = ax.imshow(pe, aspect="auto", cmap="RdBu", vmin=-1, vmax=1, interpolation="nearest")
ax.set_xlabel("dimension (sin on even, cos on odd columns)")
ax.set_ylabel("position p")
ax.set_title("sinusoidal positional encoding, d = 64")
fig.colorbar(image, ax=ax)
plt.show()

# %% [markdown]
# **Similarity depends only on the distance.** With $\sin a \sin b + \cos a \cos b = \cos(a - b)$, the
# dot product of two rows is
#
# $$\mathrm{PE}[p] \cdot \mathrm{PE}[q] = \sum_{i=0}^{d/2-1} \cos\big((p - q)\,\omega_i\big),$$
#
# a function of the offset $p - q$ alone: $d/2$ at offset 0, and smaller (on the whole) as the
# positions move apart. The plot shows it for three anchor positions $p$: the three curves lie on top of
# each other.

# %% tags=["otter_ignore"]
# Demo (not graded): the dot product PE[p] . PE[p + k] against the offset k, for three anchors p
pe = sinusoidal_positional_encoding(200, 64)
offsets = torch.arange(-40, 41)  # k
curves = {f"p = {p}": pe[p + offsets] @ pe[p] for p in (50, 100, 150)}  # (81,) each
line_plot(offsets, curves, xlabel="offset k = q - p", ylabel="PE[p] . PE[p + k]",
          title="dot product of two positions, d = 64 (maximum d/2 = 32 at k = 0)")
plt.show()

# %% [markdown]
# **Offsets are rotations.** A second consequence of the sum formulas: for every pair $i$,
#
# $$\begin{pmatrix} \sin((p+k)\omega_i) \\ \cos((p+k)\omega_i) \end{pmatrix} =
#   \begin{pmatrix} \cos k\omega_i & \sin k\omega_i \\ -\sin k\omega_i & \cos k\omega_i \end{pmatrix}
#   \begin{pmatrix} \sin p\omega_i \\ \cos p\omega_i \end{pmatrix},$$
#
# so $\mathrm{PE}[p + k] = R_k\, \mathrm{PE}[p]$ with one fixed matrix $R_k$ for every $p$. "Three
# positions to the left" is a *linear* function of the encoding, which a query or key projection can learn.
# (Rotary embeddings, RoPE, used in most recent language models, apply exactly these rotations to the
# queries and keys instead of adding a table.) The cell checks it for $k = 3$.

# %% tags=["otter_ignore"]
# Demo (not graded): PE[p + k] = R_k PE[p] with one block-diagonal rotation R_k for every position
d, k = 16, 3
pe = sinusoidal_positional_encoding(60, d).double()
freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
c, s = torch.cos(k * freq), torch.sin(k * freq)
blocks = [torch.stack([torch.stack([ci, si]), torch.stack([-si, ci])]) for ci, si in zip(c, s)]  # d/2 x (2, 2)
rotation = torch.block_diag(*blocks)  # (d, d)
print("PE[p + 3] == R_3 PE[p] for every p:",
      torch.allclose(pe[k:], pe[:-k] @ rotation.T, atol=1e-5))

# %% [markdown]
# ## 3. Learned positional embeddings
#
# The simpler alternative, used by BERT and GPT-2: one *trainable* vector per position, a table
# $W \in \mathbb{R}^{\text{max\_len} \times d}$, and $x_p = e_p + W[p]$. It can learn whatever the task
# needs, but it knows nothing about positions it never saw in training, and it cannot handle a sequence
# longer than `max_len` at all.
#
# Implement `LearnedPositionalEmbedding(max_len, d_model)`:
#
# - the table is an attribute named **`weight`**, an `nn.Parameter` of shape `(max_len, d_model)`,
#   initialised with small random numbers (`torch.randn(...) * 0.02` is the GPT-2 choice);
# - `forward(x)` with `x` of shape `(B, n, d)` returns `x + weight[:n]`, the first `n` rows broadcast over
#   the batch;
# - it raises a `ValueError` when `n > max_len` (slicing would silently return fewer rows, and the error
#   PyTorch raises on the broadcast would not say why).

# %% [raw]
# # BEGIN QUESTION
# name: LearnedPositionalEmbedding
# points: 4

# %%
class LearnedPositionalEmbedding(nn.Module):
    """x + weight[:n]: one trained vector per position.

    Attributes: weight, an nn.Parameter (max_len, d_model)
    """

    def __init__(self, max_len, d_model):
        super().__init__()
        # keep max_len; create self.weight, an nn.Parameter of shape (max_len, d_model), small random values
        # BEGIN SOLUTION
        self.max_len = max_len
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        # END SOLUTION

    def forward(self, x):
        """x: (B, n, d) -> (B, n, d); ValueError when n > max_len."""
        # n is x.shape[1]; weight[:n] (n, d) broadcasts against x (B, n, d)
        # BEGIN SOLUTION
        n = x.shape[-2]
        if n > self.max_len:
            raise ValueError(f"the sequence has {n} positions, more than max_len={self.max_len}")
        return x + self.weight[:n]  # (B, n, d) + (n, d) broadcasts over the batch
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# a trainable table named weight; forward adds rows 0..n-1
from attnlab.kit.expect import expect_close

pos = LearnedPositionalEmbedding(10, 4)
assert isinstance(pos.weight, nn.Parameter), "weight should be an nn.Parameter (so the optimizer trains it)"
assert pos.weight.shape == (10, 4), f"weight should have shape (max_len, d_model) = (10, 4), got {tuple(pos.weight.shape)}"
names = [name for name, _ in pos.named_parameters()]
assert names == ["weight"], f"the only parameter should be `weight`, got {names}"
x = torch.randn(2, 6, 4)
out = pos(x)
assert out.shape == (2, 6, 4), f"the output should have the shape of x, (2, 6, 4), got {tuple(out.shape)}"
expect_close(out, x + pos.weight[:6],
             "forward(x) (x plus the rows of positions 0 to n - 1, the same rows for every example)")

# %%
# a sequence longer than the table is a ValueError
pos = LearnedPositionalEmbedding(10, 4)
try:
    pos(torch.randn(1, 11, 4))
except ValueError:
    pass
else:
    raise AssertionError("a sequence of 11 positions with max_len=10 should raise ValueError")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. Layer normalization
#
# Deep networks train badly when the scale of their activations drifts from layer to layer. *Layer
# normalization* ([Ba et al., 2016](https://arxiv.org/abs/1607.06450)) rescales **each token's vector on
# its own**: over the $d$ features of one position,
#
# $$\mu = \frac{1}{d}\sum_{j=1}^{d} x_j, \qquad \sigma^2 = \frac{1}{d}\sum_{j=1}^{d} (x_j - \mu)^2, \qquad
#   y_j = \frac{x_j - \mu}{\sqrt{\sigma^2 + \varepsilon}}\, \gamma_j + \beta_j .$$
#
# After the division the features have mean 0 and variance (almost) 1; the learned `weight` $\gamma$ and
# `bias` $\beta$ (shape `(d,)`) give the layer back the freedom to choose another scale and offset.
#
# ```
#   x:       (..., d)     any leading dimensions: (B, n, d) in a Transformer
#   mean:    (..., 1)     over the LAST dimension only, keepdim=True so it broadcasts back
#   var:     (..., 1)     the *biased* variance: divide by d, not d - 1
#   weight, bias: (d,)    broadcast over the leading dimensions
# ```
#
# Unlike batch normalization, nothing is averaged over the batch: a token's output does not depend on the
# other tokens or on the other sentences, and training and evaluation compute the same thing.
#
# **Numerics: subtract the mean first.** The textbook shortcut $\sigma^2 = \mathbb{E}[x^2] - \mu^2$ is
# exact on paper and a disaster in float32 when the values are far from zero. With $x \approx 10^4$ and
# spread 1, $\mathbb{E}[x^2] \approx 10^8$, where neighbouring float32 numbers are 8 apart: the variance
# (about 1) is lost in rounding, and the difference can even come out negative (then the square root is
# NaN). Compute $x - \mu$ first (numbers of size 1, accurate) and average *their* squares. (`x.var(dim=-1,
# unbiased=False)` does this too.) The demo after the question shows the difference.
#
# **A worked example.** The row $[1, 2, 3]$ has mean 2 and (biased) variance $(1 + 0 + 1)/3 = 2/3$, so with
# weight 1 and bias 0 it becomes $[-1, 0, 1] / \sqrt{2/3 + 10^{-5}} = [-1.2247, 0, 1.2247]$; with weight 2 and
# bias $[1, 0, -1]$ it becomes $[-1.4495, 0, 1.4495]$. The first check tests these numbers.
#
# Implement `layer_norm(x, weight, bias, eps=1e-5)` without `F.layer_norm`.

# %% [raw]
# # BEGIN QUESTION
# name: layer_norm
# points: 7

# %%
def layer_norm(x, weight, bias, eps=1e-5):
    """Layer normalization over the last dimension, with the biased variance.

    Shapes:
        x:       (..., d)
        weight:  (d,)     gamma, the scale
        bias:    (d,)     beta, the offset
        returns: (..., d) (x - mean) / sqrt(var + eps) * weight + bias, the input's dtype
    """
    # 1. the mean over the last dimension (keepdim=True), 2. the centred x, 3. the biased variance of the
    # centred x, 4. normalize, scale by weight, shift by bias
    # BEGIN SOLUTION
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    centred = x - mean  # (..., d), subtracted before squaring: sound far from zero
    var = (centred * centred).mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by d
    return centred / torch.sqrt(var + eps) * weight + bias
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: the row [1, 2, 3]
from attnlab.kit.expect import expect_close

x = torch.tensor([[1.0, 2.0, 3.0]])
s = 1 / math.sqrt(2 / 3 + 1e-5)  # 1.2247
expect_close(layer_norm(x, torch.ones(3), torch.zeros(3)), [[-s, 0.0, s]], "layer_norm([1, 2, 3]) (biased "
             "variance: divide by d)", atol=1e-6)
expect_close(layer_norm(x, torch.tensor([2.0, 2.0, 2.0]), torch.tensor([1.0, 0.0, -1.0])), [[1 - 2 * s, 0.0, 2 * s - 1]],
             "layer_norm([1, 2, 3]) with weight 2 and bias [1, 0, -1] (normalized * weight + bias)", atol=1e-6)

# %%
# every row has mean 0 and variance 1 (last dimension only)
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(0)
x = 3 * torch.randn(2, 5, 32, generator=g, dtype=torch.float64) + 7
out = layer_norm(x, torch.ones(32, dtype=torch.float64), torch.zeros(32, dtype=torch.float64))
assert out.shape == (2, 5, 32) and out.dtype == torch.float64, (
    f"keep the shape and dtype of x, got {tuple(out.shape)} {out.dtype}")
zeros, ones = torch.zeros(2, 5, dtype=torch.float64), torch.ones(2, 5, dtype=torch.float64)
expect_close(out.mean(-1), zeros, "the mean of each row (over the last dimension)", atol=1e-6)
expect_close(out.var(-1, unbiased=False), ones, "the variance of each row", atol=1e-4)

# %%
# shifting x by 10 000 in float32 changes nothing
# (far from zero, E[x^2] - mean^2 cancels: subtract the mean first)
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(1)
x = torch.randn(4, 64, generator=g)
out_near = layer_norm(x, torch.ones(64), torch.zeros(64))
out_far = layer_norm(x + 1e4, torch.ones(64), torch.zeros(64))
assert torch.isfinite(out_far).all(), (
    "layer_norm(x + 1e4) has nan or inf: the variance came out negative; compute (x - mean) first")
expect_close(out_far, out_near, "layer_norm(x + 1e4) (expected: layer_norm(x); E[x^2] - mean^2 loses the variance "
             "in float32)", atol=2e-2)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% tags=["otter_ignore"]
# Demo (not graded): the variance of the same numbers, shifted further and further from zero, in float32
g = torch.Generator().manual_seed(0)
x = torch.randn(1000, 64, generator=g)  # 1000 rows of 64 numbers, true variance of each row about 1
print("shift      E[x^2] - mean^2 over the rows        E[(x - mean)^2] over the rows")
for shift in [0, 10, 100, 1e3, 1e4, 1e5]:
    xs = (x.double() + shift).float()  # the shifted numbers, stored in float32
    mean = xs.mean(-1, keepdim=True)  # (1000, 1)
    naive = (xs * xs).mean(-1) - mean.squeeze(-1) ** 2  # (1000,)
    centred = ((xs - mean) ** 2).mean(-1)  # (1000,)
    print(f"{shift:>7g}    min {naive.min().item():>9.3f}  max {naive.max().item():>9.3f}"
          f"            min {centred.min().item():.3f}  max {centred.max().item():.3f}")
ones, zeros = torch.ones(64), torch.zeros(64)
print("largest |layer_norm(x + 1e4) - layer_norm(x)|:",
      (layer_norm(x + 1e4, ones, zeros) - layer_norm(x, ones, zeros)).abs().max().item())

# %% [markdown]
# (The remaining error of your `layer_norm(x + 1e4)` comes from storing $x + 10^4$ in float32 at all, with
# a spacing of about $10^{-3}$ there; it is not the formula.) In the block below you use `nn.LayerNorm`,
# which computes exactly your function with its own `weight` and `bias` parameters.
#
# ## 5. The position-wise feed-forward network
#
# Attention *moves* information between positions, but each output is a weighted average of value
# vectors: a rather linear operation. The second half of a block is a small two-layer network applied to
# **every position separately, with the same weights**:
#
# $$\mathrm{FF}(x) = W_2\, \mathrm{dropout}\big(\phi(W_1 x + b_1)\big) + b_2, \qquad
#   W_1 \in \mathbb{R}^{d_{ff} \times d},\ W_2 \in \mathbb{R}^{d \times d_{ff}} .$$
#
# The hidden layer is wider than the model, usually $d_{ff} = 4d$; this is where most of a Transformer's
# parameters (and, it seems, much of its memorised knowledge) live. The activation $\phi$ is the ReLU of
# the original paper, or the GELU of BERT and GPT, $\mathrm{GELU}(z) = z\,\Phi(z)$ with $\Phi$ the standard
# normal CDF (a smooth ReLU). PyTorch's `nn.GELU()` computes it exactly with the error function; its
# `approximate="tanh"` variant is a slightly different function, not the one asked for here.
#
# ```
#   x:               (B, n, d)     nn.Linear acts on the last dimension, every position at once
#   linear1(x):      (B, n, d_ff)
#   linear2(...):    (B, n, d)
# ```
#
# Implement `FeedForward(d_model, d_ff, dropout=0.0, activation="relu")` with the attributes `linear1`
# (`nn.Linear(d_model, d_ff)`) and `linear2` (`nn.Linear(d_ff, d_model)`), and
# `forward(x) = linear2(dropout(act(linear1(x))))`, dropout after the activation, as in
# `nn.TransformerEncoderLayer`. `activation` is `"relu"` or `"gelu"` (exact); anything else raises a
# `ValueError` in `__init__`.
#
# **A worked example.** The exact GELU is $z\,\Phi(z)$ with $\Phi$ the normal CDF, $\Phi(z) = \frac12(1 +
# \mathrm{erf}(z/\sqrt2))$: $\mathrm{GELU}(1) = 0.8413$, $\mathrm{GELU}(-1) = -0.1587$. The tanh approximation gives
# $0.8412$ and $-0.1588$, close but not the same. A check below feeds known pre-activations through `linear1`
# and compares with the exact values.

# %% [raw]
# # BEGIN QUESTION
# name: FeedForward
# points: 4

# %%
class FeedForward(nn.Module):
    """The position-wise feed-forward network: linear2(dropout(act(linear1(x)))).

    Args:
        d_model, d_ff: model width and hidden width
        dropout:       dropout probability on the hidden activations (training mode only)
        activation:    "relu" or "gelu" (the exact erf form of nn.GELU()); ValueError otherwise

    Attributes: linear1 (nn.Linear(d_model, d_ff)), linear2 (nn.Linear(d_ff, d_model))
    """

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        # choose the activation (nn.ReLU() or nn.GELU(), ValueError otherwise); create linear1, linear2
        # and an nn.Dropout(dropout)
        # BEGIN SOLUTION
        if activation == "relu":
            self.activation = nn.ReLU()
        elif activation == "gelu":
            self.activation = nn.GELU()  # exact: x * Phi(x), via the error function
        else:
            raise ValueError(f'activation must be "relu" or "gelu", got {activation!r}')
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        # END SOLUTION

    def forward(self, x):
        """x: (B, n, d_model) -> (B, n, d_model)."""
        # BEGIN SOLUTION
        hidden = self.dropout(self.activation(self.linear1(x)))  # (B, n, d_ff)
        return self.linear2(hidden)  # (B, n, d_model)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# sub-layers, ReLU by default, each position on its own
from attnlab.kit.expect import expect_close

ff = FeedForward(8, 32)
shapes = {name: tuple(p.shape) for name, p in ff.named_parameters()}
expected = {"linear1.weight": (32, 8), "linear1.bias": (32,), "linear2.weight": (8, 32), "linear2.bias": (8,)}
assert shapes == expected, f"FeedForward(8, 32) should have the parameters {expected}, got {shapes}"
x = torch.randn(3, 5, 8)
out = ff(x)
assert out.shape == (3, 5, 8), f"the output should have shape (3, 5, 8), got {tuple(out.shape)}"
manual = ff.linear2(torch.relu(ff.linear1(x)))
expect_close(out, manual, "the output (expected: linear2(relu(linear1(x))))", atol=1e-6)
expect_close(ff(x[:, 2:3]), out[:, 2:3], "position 2 alone (each position is transformed on its own)", atol=1e-6)

# %%
# GELU is exact (erf); other activations are a ValueError
from attnlab.kit.expect import expect_close

ff = FeedForward(4, 8, activation="gelu")
z = torch.linspace(-3, 3, 8)
with torch.no_grad():
    ff.linear1.weight.zero_()
    ff.linear1.bias.copy_(z)  # the hidden pre-activations are exactly z
    ff.linear2.weight.copy_(torch.ones(4, 8) / 8)
    ff.linear2.bias.zero_()
exact = (z * 0.5 * (1 + torch.erf(z / math.sqrt(2)))).mean()
expect_close(ff(torch.zeros(1, 1, 4)), exact.expand(1, 1, 4), "the mean of gelu(z) over 8 known pre-activations "
             "(exact: z * Phi(z))", atol=1e-6)
try:
    FeedForward(4, 8, activation="tanh")
except ValueError:
    pass
else:
    raise AssertionError('FeedForward(4, 8, activation="tanh") should raise ValueError')

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 6. The Transformer encoder block
#
# A block has two *sub-layers*, self-attention (SA) and the feed-forward network (FF). Each is wrapped in
# a **residual connection** (the sub-layer computes a *change* that is added to its input, so a block can
# start out close to the identity and gradients have a direct path back) and a **layer norm**. Where the
# norm goes is the one design choice:
#
# ```
#   post-norm (the 2017 paper, BERT)           pre-norm (GPT-2 and most models since)
#
#   x = norm1(x + SA(x))                       x = x + SA(norm1(x))
#   x = norm2(x + FF(x))                       x = x + FF(norm2(x))
# ```
#
# In post-norm every block's output goes through a norm, so the signal is rescaled after every sub-layer.
# In pre-norm the norm only sees the *input* of each sub-layer; the sum $x + \dots$ (the *residual
# stream*) is never normalized, and an untouched path runs from the last block back to the first.
# Section 8 shows what that does to training.
#
# `SA(x)` is self-attention: query, key and value are all `x`, the mask is passed on, and only the
# output (not the weights) is used. **Dropout** (probability `dropout`) sits where `nn.TransformerEncoderLayer`
# puts it: on the attention weights (the given `MultiHeadAttention(d_model, num_heads, dropout=dropout)`
# does it), inside the feed-forward network (`FeedForward(..., dropout=dropout)`), and on the output of
# each sub-layer before the residual addition, `x + dropout(SA(x))` and `x + dropout(FF(x))`.
#
# ```
#   x:     (B, n, d)
#   mask:  None or bool (True = may attend), broadcasting to (B, h, n, n): (n, n) causal, (B, 1, 1, n) padding
#   out:   (B, n, d)       every sub-layer keeps the shape, so blocks stack
# ```
#
# Implement `TransformerEncoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False)` with the
# attributes `self_attn` (the given `MultiHeadAttention`), `ff` (your `FeedForward`, ReLU), `norm1` and
# `norm2` (`nn.LayerNorm(d_model)`). With dropout 0 and the same weights it must equal
# `nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=...)`.

# %% [raw]
# # BEGIN QUESTION
# name: TransformerEncoderBlock
# points: 10

# %%
class TransformerEncoderBlock(nn.Module):
    """Self-attention and feed-forward sub-layers with residual connections and layer norms.

    Args:
        d_model, num_heads, d_ff: model width, number of heads, feed-forward hidden width
        dropout:    dropout probability (attention weights, feed-forward hidden layer, sub-layer outputs)
        norm_first: False: post-norm, x = norm1(x + SA(x)); x = norm2(x + FF(x))
                    True:  pre-norm,  x = x + SA(norm1(x)); x = x + FF(norm2(x))

    Attributes: self_attn (MultiHeadAttention), ff (FeedForward), norm1, norm2 (nn.LayerNorm(d_model))
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        # keep norm_first; create self_attn, ff, norm1, norm2 (pass dropout on to self_attn and ff),
        # and two nn.Dropout(dropout) for the outputs of the two sub-layers
        # BEGIN SOLUTION
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)  # on the self-attention output
        self.dropout2 = nn.Dropout(dropout)  # on the feed-forward output
        # END SOLUTION

    def forward(self, x, mask=None):
        """x: (B, n, d), mask: None or bool broadcasting to (B, h, n, n), True = may attend -> (B, n, d)."""
        # SA(y) is self.self_attn(y, y, y, mask=mask)[0]: query, key and value all y, the weights dropped
        # BEGIN SOLUTION
        if self.norm_first:
            normed = self.norm1(x)  # (B, n, d)
            x = x + self.dropout1(self.self_attn(normed, normed, normed, mask=mask)[0])  # (B, n, d)
            x = x + self.dropout2(self.ff(self.norm2(x)))  # (B, n, d)
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, mask=mask)[0]))  # (B, n, d)
            x = self.norm2(x + self.dropout2(self.ff(x)))  # (B, n, d)
        return x
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# sub-layers, shapes, and masks of every broadcastable shape
from attnlab.kit.expect import expect_close

block = TransformerEncoderBlock(16, 4, 32)
assert isinstance(block.self_attn, MultiHeadAttention), "self_attn should be the given MultiHeadAttention"
assert isinstance(block.ff, FeedForward), "ff should be your FeedForward"
assert isinstance(block.norm1, nn.LayerNorm) and isinstance(block.norm2, nn.LayerNorm), (
    "norm1 and norm2 should be nn.LayerNorm(d_model)")
assert block.ff.linear1.out_features == 32, f"ff should have hidden width d_ff = 32, got {block.ff.linear1.out_features}"
x = torch.randn(2, 5, 16)
out = block(x)
assert isinstance(out, torch.Tensor) and out.shape == (2, 5, 16), (
    f"the block should return one (B, n, d) = (2, 5, 16) tensor, got {getattr(out, 'shape', type(out))}")
causal = torch.ones(5, 5, dtype=torch.bool).tril()
padding = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]  # (B, 1, 1, n)
assert block(x, mask=causal).shape == (2, 5, 16), "a causal mask (n, n) should work"
assert block(x, mask=padding).shape == (2, 5, 16), "a padding mask (B, 1, 1, n) should work"
assert not torch.allclose(block(x, mask=causal), out), "the mask should change the output: pass it to self_attn"
first_alone = block(x[:, :1], mask=causal[:1, :1])  # (B, 1, d): position 0 without the others
expect_close(block(x, mask=causal)[:, 0], first_alone[:, 0], "position 0 with a causal mask (it sees only itself)",
             atol=1e-5)

# %%
# with the sub-layers switched off: the residual structure
# (zero output weights and biases: post-norm gives norm2(norm1(x)), pre-norm the identity)
from attnlab.kit.expect import expect_close

for norm_first in (False, True):
    block = TransformerEncoderBlock(16, 4, 32, norm_first=norm_first)
    with torch.no_grad():
        for linear in (block.self_attn.out_proj, block.ff.linear2):
            linear.weight.zero_()
            linear.bias.zero_()
    x = 5 * torch.randn(2, 5, 16) + 3
    expected = x if norm_first else block.norm2(block.norm1(x))
    if norm_first:
        rule = "x, since pre-norm is x + SA(norm1(x)), then x + FF(norm2(x))"
    else:
        rule = "norm2(norm1(x)), since post-norm is norm1(x + SA(x)), then norm2(x + FF(x))"
    expect_close(block(x), expected, f"norm_first={norm_first}: the block with zero sub-layers (expected: {rule})",
                 atol=1e-5)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# Your block against PyTorch's: `nn.TransformerEncoderLayer` stores the three input projections as one
# matrix `in_proj_weight` (queries, keys, values stacked), names the feed-forward layers `linear1` and
# `linear2` directly, and takes masks with **True = blocked**. The demo copies your block's weights over
# and compares, post-norm and pre-norm, with a causal mask and with a padding mask.

# %% tags=["otter_ignore"]
# Demo (not graded): your block equals nn.TransformerEncoderLayer with the same weights
def to_torch_layer(block, d_model, num_heads, d_ff, norm_first):
    """An nn.TransformerEncoderLayer holding the weights of `block` (dropout 0)."""
    layer = nn.TransformerEncoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True,
                                       norm_first=norm_first)
    sa = block.self_attn
    state = {
        "self_attn.in_proj_weight": torch.cat([sa.q_proj.weight, sa.k_proj.weight, sa.v_proj.weight]),  # (3d, d)
        "self_attn.in_proj_bias": torch.cat([sa.q_proj.bias, sa.k_proj.bias, sa.v_proj.bias]),  # (3d,)
        "self_attn.out_proj.weight": sa.out_proj.weight, "self_attn.out_proj.bias": sa.out_proj.bias,
        "linear1.weight": block.ff.linear1.weight, "linear1.bias": block.ff.linear1.bias,
        "linear2.weight": block.ff.linear2.weight, "linear2.bias": block.ff.linear2.bias,
        "norm1.weight": block.norm1.weight, "norm1.bias": block.norm1.bias,
        "norm2.weight": block.norm2.weight, "norm2.bias": block.norm2.bias,
    }
    layer.load_state_dict({k: v.detach() for k, v in state.items()})
    return layer.eval()


seed_everything(0)
x = torch.randn(2, 6, 16)
causal = torch.ones(6, 6, dtype=torch.bool).tril()
real = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])  # (B, n): True at real tokens
for norm_first in (False, True):
    block = TransformerEncoderBlock(16, 4, 64, norm_first=norm_first).eval()
    with torch.no_grad():
        for norm in (block.norm1, block.norm2):  # non-trivial norm weights, so a swap would show
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    layer = to_torch_layer(block, 16, 4, 64, norm_first)
    with torch.no_grad():
        d_plain = (block(x) - layer(x)).abs().max().item()
        d_causal = (block(x, mask=causal) - layer(x, src_mask=~causal)).abs().max().item()
        d_pad = (block(x, mask=real[:, None, None, :]) - layer(x, src_key_padding_mask=~real)).abs().max().item()
    print(f"norm_first={norm_first!s:5}: largest difference  no mask {d_plain:.1e}  causal {d_causal:.1e}  "
          f"padding {d_pad:.1e}")

# %% [markdown]
# ## 7. Experiment: order matters
#
# A task that only order decides: a sequence of `SEQ_LEN` tokens holds random filler tokens and two
# marked tokens, `A` and `B`, somewhere. **Did `A` come before `B`?** Every sequence and its mirror image
# contain exactly the same tokens with opposite labels.
#
# The model: token embedding, plus (or not) a positional encoding, two `TransformerEncoderBlock`s, the mean
# over positions, and a linear layer giving one logit. Three versions differ only in the positions:
# none, sinusoidal, learned.

# %% tags=["otter_ignore"]
# Experiment (not graded): the "which came first?" data set
if device.type == "cpu":
    # These models are tiny: on a CPU, one thread is as fast as several (and much faster when other
    # programs share the cores), since coordinating threads costs more than the little work they split.
    torch.set_num_threads(1)
VOCAB, SEQ_LEN, TOKEN_A, TOKEN_B = 16, 12, 1, 2  # fillers are the tokens 3 .. VOCAB - 1


def which_came_first(num_examples, generator):
    """(ids (N, SEQ_LEN), labels (N,)): label 1.0 when TOKEN_A stands before TOKEN_B."""
    ids = torch.randint(3, VOCAB, (num_examples, SEQ_LEN), generator=generator)
    slots = torch.rand(num_examples, SEQ_LEN, generator=generator).argsort(dim=-1)[:, :2]  # 2 distinct positions
    rows = torch.arange(num_examples)
    ids[rows, slots[:, 0]] = TOKEN_A
    ids[rows, slots[:, 1]] = TOKEN_B
    return ids, (slots[:, 0] < slots[:, 1]).float()


data_gen = seed_everything(0)
train_set = TensorDataset(*which_came_first(sized(3000, 20000), data_gen))
val_set = TensorDataset(*which_came_first(sized(1000, 4000), data_gen))
print("example:", train_set[0][0].tolist(), "label", train_set[0][1].item(), f"(A = {TOKEN_A}, B = {TOKEN_B})")
print(f"{len(train_set)} training and {len(val_set)} validation sequences; "
      f"share of label 1: {train_set.tensors[1].mean().item():.3f}")

# %% tags=["otter_ignore"]
# Experiment (not graded): an encoder classifier with no, sinusoidal or learned positions
class OrderClassifier(nn.Module):
    """embedding (+ positions) -> num_layers encoder blocks -> mean over positions -> one logit."""

    def __init__(self, positions, d_model=32, num_heads=4, d_ff=64, num_layers=2, norm_first=False):
        super().__init__()
        self.positions = positions
        self.embedding = nn.Embedding(VOCAB, d_model)
        if positions == "sinusoidal":
            self.register_buffer("pe", sinusoidal_positional_encoding(SEQ_LEN, d_model))  # (n, d), not trained
        elif positions == "learned":
            self.pos_emb = LearnedPositionalEmbedding(SEQ_LEN, d_model)
        self.blocks = nn.ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, norm_first=norm_first)
                                    for _ in range(num_layers))
        # a pre-norm stack ends with one more norm (GPT-2's ln_f): its residual stream is never normalized
        self.final_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.classifier = nn.Linear(d_model, 1)

    def forward(self, ids):
        x = self.embedding(ids)  # (B, n, d)
        if self.positions == "sinusoidal":
            x = x + self.pe[: ids.shape[1]]  # (B, n, d) + (n, d)
        elif self.positions == "learned":
            x = self.pos_emb(x)
        for block in self.blocks:
            x = block(x)  # (B, n, d)
        pooled = self.final_norm(x).mean(dim=1)  # (B, d): the mean over positions
        return self.classifier(pooled).squeeze(-1)  # (B,) logits


EPOCHS, LR = sized(5, 8), 3e-3
train_loader = DataLoader(train_set, batch_size=64, shuffle=True, generator=seed_everything(0))
val_loader = DataLoader(val_set, batch_size=500)
order_models, order_histories = {}, {}
for positions in ("none", "sinusoidal", "learned"):
    seed_everything(0)
    order_models[positions] = OrderClassifier(positions)
    order_histories[positions] = fit(order_models[positions], train_loader, epochs=EPOCHS, lr=LR,
                                     val_loader=val_loader, device=device, live_plot=False,
                                     desc=f"positions: {positions}")
plot_history(order_histories, title="which came first? (validation solid, training dashed)")
plt.show()

# %% tags=["otter_ignore"]
# Experiment (not graded): final accuracies, and the mirror test of the model without positions
for positions, model in order_models.items():
    _, accuracy = evaluate(model, val_loader, device=device)
    print(f"positions: {positions:<10}  validation accuracy {accuracy:.3f}")
ids = val_set.tensors[0][:5].to(device)
with torch.no_grad():
    blind = order_models["none"].eval()
    print("no positions, P(A first) on 5 sequences:           ", torch.sigmoid(blind(ids)).cpu().numpy().round(3))
    print("no positions, P(A first) on the same ones mirrored:", torch.sigmoid(blind(ids.flip(1))).cpu().numpy().round(3))

# %% [markdown]
# What to look at (the exact numbers depend on the sizes and the device): the three validation accuracies,
# the two rows of probabilities of the model without positions, and in the plot, how many epochs each model
# takes to leave 0.5.

# %% [raw]
# # BEGIN QUESTION
# name: positions_mirror_pairs
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own accuracies of the three models (0.481, 1.000 and 0.996 in the reference run) and the
#       identical probabilities of the mirrored sequences"
#     points: 0.5
#   - criterion: "Explains that without positions every block is permutation-equivariant and the mean over positions
#       invariant, so a sequence and its mirror (a permutation of the same tokens) get the same logit"
#     points: 1
#   - criterion: "Concludes that of a sequence and its mirror, equally likely and with opposite labels, exactly one is
#       right: accuracy about 0.5 however long it trains"
#     points: 0.5
#   - criterion: "Compares the speed of sinusoidal and learned positions from the own curves and explains it: the
#       sinusoidal table is informative from the first step, the learned one starts as noise and must be learned"
#     points: 1
#   - criterion: "Attributes the 0.5 to too little training, too small a model or a bad learning rate"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Quote the validation accuracy of the three models and the two rows of
# probabilities printed for the model without positions. Why does that model score about 0.5 however long it
# trains, and why are the two rows identical to the last digit? Which of the two models with positions
# leaves 0.5 first in your plot, and why would it?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0, 5 epochs) the validation accuracy was 0.481 without positions,
# 1.000 with sinusoidal positions and 0.996 with learned ones; the five sequences and their mirror images got
# the same probabilities, 0.475, 0.497, 0.483, 0.484, 0.422.
#
# Without positions, every part of the model is permutation-equivariant (self-attention by section 1's
# argument, the feed-forward network and the norms act on each position alone) and the mean over positions is
# invariant: the logit depends only on the multiset of tokens. A mirrored sequence is a permutation of the
# same tokens, so it gets exactly the same logit, as the two identical rows show. But its label is the
# opposite one: of the two, exactly one is answered right. Sequences and their mirrors are equally likely, so
# no setting of the weights beats 0.5 on average; the measured 0.48 to 0.53 from epoch to epoch is noise around
# it. More training, width or depth cannot help: the information is not in the input the model sees.
#
# With positions the two orders are different inputs. In the reference run the sinusoidal model reached 0.955
# after one epoch and 1.000 after three, the learned one stayed near 0.5 for two epochs (0.471, 0.502) and then
# climbed (0.742, 0.911, 0.996). The sinusoidal table is fixed and already distinguishes every position (and
# makes "earlier" a smooth function of it) from the first step, so attention only has to learn to compare the
# encodings of `A` and `B`; the learned table starts as random noise and must itself be learned from the labels
# before the comparison can be.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 8. Experiment: post-norm against pre-norm as the network gets deeper
#
# The 2017 Transformer is post-norm and needed a learning-rate *warm-up* (a small learning rate for the
# first few thousand steps) to train at all. [Xiong et al. (2020)](https://arxiv.org/abs/2002.04745)
# traced this to the placement of the norm; the written question after the experiment asks you to explain
# what you measure.
#
# Below, the same order task (sinusoidal positions) with 2 and 8 blocks, post-norm and pre-norm, the same
# Adam learning rate, no warm-up; and once more the deep post-norm model, with a short warm-up (the
# learning rate grows from 1% to 100% over the first 30 steps). The curves are the training loss of every
# optimizer step, smoothed over a few steps. (0.69 = ln 2 is the loss of guessing.)

# %% tags=["otter_ignore"]
# Experiment (not graded): training loss per step for 2 and 8 blocks, post-norm and pre-norm, and with warm-up
DEPTHS, DEEP_LR, DEEP_EPOCHS = (2, 8), 5e-3, sized(3, 4)
deep_loader = DataLoader(TensorDataset(*train_set[: sized(2000, 8000)]), batch_size=64, shuffle=True,
                         generator=seed_everything(0))


def smooth(values, width=8):
    """The running mean over `width` steps (the first ones over fewer)."""
    values = torch.tensor(values)
    cumulative = torch.cat([torch.zeros(1), values.cumsum(0)])
    starts = (torch.arange(len(values)) + 1 - width).clamp(min=0)
    return (cumulative[1:] - cumulative[starts]) / (torch.arange(len(values)) + 1 - starts)


def train_deep(depth, norm_first, warmup_steps=0):
    """Train an order classifier with `depth` blocks; returns fit's History (step_loss per step)."""
    seed_everything(0)
    model = OrderClassifier("sinusoidal", num_layers=depth, norm_first=norm_first).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=DEEP_LR)
    scheduler = None
    if warmup_steps:  # the learning rate grows linearly from 1% to 100% of DEEP_LR over warmup_steps
        scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=warmup_steps)
    return fit(model, deep_loader, epochs=DEEP_EPOCHS, optimizer=optimizer, scheduler=scheduler, device=device,
               live_plot=False, desc=f"{depth} blocks, norm_first={norm_first}, warm-up {warmup_steps}")


depth_histories = {}
for depth in DEPTHS:
    for norm_first in (False, True):
        depth_histories[f"{depth} blocks, {'pre' if norm_first else 'post'}-norm"] = train_deep(depth, norm_first)
depth_histories[f"{DEPTHS[-1]} blocks, post-norm + warm-up"] = train_deep(DEPTHS[-1], False, warmup_steps=30)
steps = torch.arange(1, len(next(iter(depth_histories.values())).step_loss) + 1)
line_plot(steps, {name: smooth(h.step_loss) for name, h in depth_histories.items()}, xlabel="optimizer step",
          ylabel="training loss (smoothed)", title=f"post-norm vs pre-norm, Adam lr={DEEP_LR:g}")
plt.show()
for name, history in depth_histories.items():
    print(f"{name:<30} loss over the last 10 steps {sum(history.step_loss[-10:]) / 10:.3f}   "
          f"last-epoch accuracy {history.train_metric[-1]:.3f}")

# %% [markdown]
# What to look at: the five curves against the guessing loss 0.69, and the printed loss of the last steps of
# each run. Pre-norm stacks end with one last norm after the final block (`final_norm` above; `ln_f` in
# Lab 09). Post-norm is still used (BERT, Lab 08's translation model), and some recent models put norms in
# both places.

# %% [raw]
# # BEGIN QUESTION
# name: post_norm_depth
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own final losses of the five runs (0.104 and 0.059 with 2 blocks, 0.693 post-norm and
#       0.215 pre-norm with 8, 0.045 with warm-up in the reference run)"
#     points: 0.5
#   - criterion: "Identifies the 8-block post-norm run as stuck at ln 2 = 0.693, the loss of a constant prediction,
#       and pre-norm as training at 8 blocks"
#     points: 0.5
#   - criterion: "Explains from the block structure: post-norm normalises after each residual sum, so the gradient to
#       early layers passes through every norm and the gradients at initialisation are large near the output (Xiong et
#       al.); pre-norm keeps an identity residual path from the loss to every layer"
#     points: 1
#   - criterion: "Explains the warm-up: small steps at first keep the large early gradients from throwing the deep
#       post-norm model into a region where it predicts a constant, after which the full rate is safe"
#     points: 1
#   - criterion: "Says the deep post-norm model lacks capacity or needs more epochs (it has the same parameters as the
#       pre-norm one and trains with a warm-up)"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Quote the loss of the last steps of your five runs. Which run does not
# learn, and what does its loss of about 0.69 mean? Explain, from where the norm sits relative to the
# residual connection in the two blocks, why depth hurts post-norm and not pre-norm, and why a 30-step
# warm-up is enough to rescue the deep post-norm model.

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0, learning rate 5e-3) the loss over the last 10 steps was 0.104
# (2 blocks, post-norm), 0.059 (2, pre-norm), 0.693 (8, post-norm), 0.215 (8, pre-norm) and 0.045 (8,
# post-norm with 30 steps of warm-up). The 8-block post-norm model sat at 0.69 from about step 30 to the end.
#
# $0.693 = \ln 2$ is the cross-entropy of predicting 0.5 for every sequence: the deep post-norm model has
# collapsed to a constant output and stays there (its gradients vanish there, so it does not come back).
#
# Post-norm computes $x_{l+1} = \mathrm{LN}(x_l + F(x_l))$: the norm sits *on* the residual path, so the signal
# and the gradient of every layer pass through every later norm, and at initialisation the gradients of the
# parameters near the output are large (Xiong et al., 2020). A full-size Adam step on them with 8 blocks throws
# the model off course in its first steps, here into the constant prediction. Pre-norm computes
# $x_{l+1} = x_l + F(\mathrm{LN}(x_l))$: the residual stream is a plain sum, an identity path runs from the loss to
# every layer, and the gradients stay of similar size at every depth, so the same learning rate is safe (it
# trains more slowly than the shallow models, but it trains).
#
# The warm-up grows the learning rate from 1% to 100% over 30 steps: while the early gradients are large the
# steps stay small, and by the time the full rate applies the model has left the region of its
# initialisation where those gradients were dangerous. That is why the original (post-norm) Transformer needed
# its warm-up; a lower learning rate would work too, more slowly.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### Going further (not graded)
#
# - Train on sequences of 12, then test on sequences of 24 (a sinusoidal table of 24 rows is no problem):
#   what does `LearnedPositionalEmbedding` do, and how well does the sinusoidal model handle positions it
#   never saw in training?
# - Replace the sum $e_p + \mathrm{PE}[p]$ by a concatenation (`torch.cat` along the features, and a wider
#   model): does it learn faster?
# - How few warm-up steps does the 8-block post-norm model need? Does pre-norm train faster with one?
# - Lab 05's sentiment corpus had "contrast twins", sentences with the same words in a different order.
#   Add positions and your blocks to its attention classifier: does it pass the bag-of-words ceiling now?
