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
# # Lab 05: Self-attention
#
# In Lab 04 a decoder state *attended* to the states of an encoder: one query scored every encoder state,
# a softmax turned the scores into weights, and the weighted sum became the context. In this lab every
# token of a sentence attends to every token of **the same** sentence. That is *self-attention*, the
# operation at the heart of the Transformer ([Vaswani et al., 2017, *Attention Is All You
# Need*](https://arxiv.org/abs/1706.03762)); Labs 06 to 09 build on what you write here.
#
# You will build it one idea at a time:
#
# 1. `simple_self_attention`: self-attention without any parameter, $\mathrm{softmax}(XX^\top)X$.
# 2. An experiment: why the scores are divided by $\sqrt{d}$.
# 3. `scaled_dot_product_attention`: queries, keys, values, and masks.
# 4. `causal_mask` and `padding_mask`: the two masks every Transformer uses.
# 5. `SelfAttention`: learned projections for queries, keys and values.
# 6. `AttentionClassifier`: a sentiment classifier built on self-attention.
# 7. Experiments: self-attention against a mean of embeddings on sentences where negation decides the
#    label, and what the trained model attends to.
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
# **Each question graded on its own.** A question whose code calls an earlier graded function is graded with the
# reference version of that function: `SelfAttention` and `AttentionClassifier` run with the reference
# `scaled_dot_product_attention` (and the reference `causal_mask` and `padding_mask`) wherever your code calls them,
# so a mistake there costs only its own question, and their feedback says "graded with the reference ...". The same
# holds for a class: `AttentionClassifier` runs with the reference `SelfAttention` (its parameters held under the
# same names, so build it as `SelfAttention(embed_dim)` and reach it as `self.attention`), so a mistake in your
# `SelfAttention` costs that question only.
#
# **Rules of this lab.**
#
# - Build attention by hand from matrix products and `torch.softmax`. `F.scaled_dot_product_attention`
#   and `nn.MultiheadAttention` are **not allowed** anywhere in the graded cells: the grader reads your
#   code, and a use of either costs the whole question whose code holds it (its own cell, or a helper it
#   calls), and no other question. (Lab 09 lets you use the fast built-in, once you have built it yourself.)
#   Everything else in `torch` and `torch.nn` is fine.
# - A boolean mask is **True where attention is allowed**. This is the convention of
#   `F.scaled_dot_product_attention`, and the opposite of the `key_padding_mask` of `nn.MultiheadAttention`.
# - Tensors are batch-first, and functions accept any number of leading (batch) dimensions `...`.
# - Functions that compute attention return a pair `(output, weights)`.
# - Token id 0 is `<pad>`; batches are right-padded.
# - Your functions must work in float32 and float64 (keep the input's dtype), on whatever device their
#   inputs are on (CPU or GPU), must not change their inputs in place, and must keep the autograd graph
#   (no `.detach()`, `.item()`, `.numpy()` inside).
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The
# grade comes from hidden tests that call your functions and classes on random inputs (float32 and
# float64, several batch shapes, every kind of mask, huge scores) and compare the outputs *and the
# gradients* with a reference. Cells whose first line says *Experiment* or *Demo* are not run by the
# grader: do not define anything graded in them.
#
# **Data.** The experiments use a small synthetic movie-review corpus, generated offline by
# `attnlab.kit.datasets.sentiment` (no download, the same sentences for the same seed), in which negation
# and word order decide the label. Section 7.1 says how to use a real corpus instead.
#
# **Sizes.** On a CPU the experiments use small sizes and the whole notebook runs in a minute or two;
# on a GPU (Colab: *Runtime > Change runtime type*) they use larger ones. `sized(fast, full)` picks
# between the two; set the environment variable `ATTNLAB_FAST=1` or `0` to force either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 05.
import math

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

from attnlab.kit.datasets.sentiment import bag_of_words_ceiling, encode_texts, sentiment_splits
from attnlab.kit.device import sized
from attnlab.kit.plotting import attention_heatmap, line_plot, plot_history
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import fit

# %% [markdown]
# ## 1. Self-attention without parameters
#
# A sentence of $n$ tokens, each embedded as a vector of $d$ numbers, is a matrix $X \in \mathbb{R}^{n
# \times d}$ whose row $x_i$ is token $i$. We want a new vector $y_i$ for every token that mixes in
# what the *other* tokens say, in proportion to how relevant they are to token $i$.
#
# The simplest measure of relevance is the dot product $s_{ij} = x_i \cdot x_j$: large when two
# vectors point the same way. A softmax over $j$ turns the scores of token $i$ into weights that are
# positive and sum to 1:
#
# $$\alpha_{ij} = \frac{\exp(s_{ij})}{\sum_{j'} \exp(s_{ij'})}, \qquad y_i = \sum_j \alpha_{ij}\, x_j .$$
#
# In matrix form, with the softmax applied to each row:
#
# $$S = X X^\top \in \mathbb{R}^{n \times n}, \qquad A = \mathrm{softmax}(S), \qquad Y = A X .$$
#
# Row $i$ of $A$ says where token $i$ looks; column $j$ is a *key*, row $i$ a *query*.
#
# **Batches.** `x` has shape `(..., n, d)`: any number of leading dimensions (a batch of sentences, a
# batch of heads of a batch of sentences, ...). The `@` operator multiplies the last two dimensions and
# broadcasts over all the others, so `x @ x.transpose(-2, -1)` is right for every shape. Beware of
# `x.T`, which reverses *all* dimensions, and of `x.transpose(1, 2)` or `torch.bmm`, which only work for
# exactly three. The softmax runs over the keys, the last dimension: `torch.softmax(scores, dim=-1)`.
#
# **A worked example.** Take two tokens that are the unit vectors, $X = I_2$. The scores are $XX^\top = I_2$,
# so row 0 of the weights is
#
# $$\mathrm{softmax}([1, 0]) = \left[\frac{e}{e + 1}, \frac{1}{e + 1}\right] = [0.7311, 0.2689],$$
#
# row 1 is the same reversed, and $Y = AX = A$:
#
# $$A = Y = \begin{pmatrix} 0.7311 & 0.2689 \\ 0.2689 & 0.7311 \end{pmatrix}.$$
#
# The first check below tests exactly these numbers.
#
# Implement `simple_self_attention`. No parameters, no scaling.

# %% [raw]
# # BEGIN QUESTION
# name: simple_self_attention
# points: 4

# %%
def simple_self_attention(x):
    """Parameter-free self-attention: softmax(x x^T) x, without any scaling.

    Shapes:
        x:       (..., n, d)   any number of leading dimensions
        returns: (y, weights)
        y:       (..., n, d)   y[..., i, :] = sum_j weights[..., i, j] * x[..., j, :]
        weights: (..., n, n)   weights[..., i, j] = how much token i attends to token j; rows sum to 1
    """
    # 1. scores: every token's dot product with every token, shape (..., n, n)
    # 2. weights: softmax over the keys (the last dimension)
    # 3. y: the weighted sum of the tokens
    # BEGIN SOLUTION
    scores = x @ x.transpose(-2, -1)
    weights = torch.softmax(scores, dim=-1)
    y = weights @ x
    return y, weights
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: x = I gives weights 0.7311 and 0.2689
from attnlab.kit.expect import expect_close

x = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
y, w = simple_self_attention(x)
a, b = math.e / (math.e + 1), 1 / (math.e + 1)  # 0.7311, 0.2689
expect_close(w, [[a, b], [b, a]], "the weights for x = I", atol=1e-6)
expect_close(y, [[a, b], [b, a]], "y for x = I (weights @ x)", atol=1e-6)

# %%
# shapes, dtype and row sums with two leading dimensions
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(0)
x = torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=g)
y, w = simple_self_attention(x)
assert y.shape == (2, 3, 5, 4), f"y should have shape (2, 3, 5, 4), got {tuple(y.shape)}"
assert w.shape == (2, 3, 5, 5), f"weights should have shape (2, 3, 5, 5), got {tuple(w.shape)}"
assert y.dtype == torch.float64 and w.dtype == torch.float64, "keep the input's dtype (float64 here)"
assert (w >= 0).all(), "attention weights are probabilities: never negative"
expect_close(w.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64), "the row sums of the weights (softmax over dim=-1)")

# %%
# shuffled tokens, shuffled outputs; large inputs stay finite
# (attention has no notion of order: permuting the tokens permutes the outputs the same way)
g = torch.Generator().manual_seed(1)
x = torch.randn(6, 4, generator=g)
perm = torch.randperm(6, generator=g)
y, w = simple_self_attention(x)
y_p, w_p = simple_self_attention(x[perm])
assert torch.allclose(y_p, y[perm], atol=1e-5), "permuting the tokens should permute the outputs the same way"
assert torch.allclose(w_p, w[perm][:, perm], atol=1e-6), (
    "permuting the tokens should permute the rows and the columns of the weights")
y, w = simple_self_attention(100 * x)
assert torch.isfinite(y).all() and torch.isfinite(w).all(), (
    "large inputs gave inf or nan: use torch.softmax, which is numerically stable")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# Let us look at the weights of a toy "sentence" of four words with hand-made 3-dimensional embeddings:
# `cats` and `dogs` are similar (both animals), `fish` is somewhat like `cats`, and `eat` is like none
# of them.

# %% tags=["otter_ignore"]
# Demo (not graded): the weights of simple self-attention on four hand-made word vectors
words = ["cats", "eat", "fish", "dogs"]
toy = 1.5 * torch.tensor([[1.0, 0.2, 0.0],    # cats
                          [0.0, 1.0, 0.1],    # eat
                          [0.6, 0.0, 0.8],    # fish
                          [0.9, 0.1, -0.6]])  # dogs
_, toy_weights = simple_self_attention(toy)
attention_heatmap(toy_weights, words, words, title="simple self-attention", annotate=True)
plt.show()

# %% [markdown]
# Two things to notice:
#
# - **Each token attends mostly to itself**, then to the tokens that resemble it. $x_i \cdot x_i =
#   \lVert x_i \rVert^2$ is usually the largest score in row $i$, so the output is mostly the token itself.
# - **Attention is symmetric in the scores.** $s_{ij} = s_{ji}$: `eat` cannot look for its subject
#   while `cats` looks for something else. A word has one vector and must use it to ask *and* to answer.
#
# Section 5 fixes both with learned projections. First, a look at the size of the scores.

# %% [markdown]
# ## 2. Why scale the scores by $1/\sqrt{d}$?
#
# Take a query $q$ and a key $k$ in $\mathbb{R}^d$ whose components are independent, with mean 0 and
# variance 1 (roughly what a freshly initialised network produces). How large is their dot product
# $q \cdot k = \sum_{i=1}^d q_i k_i$, and how does its spread grow with $d$? The first written question
# below asks you to work it out. What a softmax does with scores of a given spread is what the experiment
# measures; the gradient that flows back through a softmax is given by its Jacobian
#
# $$\frac{\partial \alpha_i}{\partial s_j} = \alpha_i(\delta_{ij} - \alpha_j) .$$
#
# The experiment below draws random queries and keys for $d = 4$ to $1024$ and compares the softmax of the
# raw scores with the softmax of the scores divided by $\sqrt{d}$. It reports the largest weight of each row
# (1 = one-hot, $1/n_k$ = uniform) and the size of the softmax Jacobian (the gradient signal).

# %% tags=["otter_ignore"]
# Experiment (not graded): softmax saturation with and without the 1/sqrt(d) scale
gen = torch.Generator().manual_seed(0)
dims = [4, 16, 64, 256, 1024]
n_queries, n_keys = 256, 32
unscaled, scaled = "softmax(q·k)", "softmax(q·k / √d)"
max_weight = {unscaled: [], scaled: []}
jacobian = {unscaled: [], scaled: []}
for d in dims:
    q = torch.randn(n_queries, d, generator=gen)
    k = torch.randn(n_keys, d, generator=gen)
    for name, factor in ((unscaled, 1.0), (scaled, 1.0 / math.sqrt(d))):
        w = torch.softmax(q @ k.T * factor, dim=-1)  # (n_queries, n_keys); 2-D, so .T is fine here
        max_weight[name].append(w.max(dim=-1).values.mean().item())
        jac = torch.diag_embed(w) - w[:, :, None] * w[:, None, :]  # d alpha / d s, one matrix per query
        jacobian[name].append(jac.norm(dim=(-2, -1)).mean().item())
max_weight["uniform (1 / n_keys)"] = [1 / n_keys] * len(dims)

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8), layout="constrained")
line_plot(dims, max_weight, xlabel="d (query/key dimension)", ylabel="mean of the largest weight",
          title="saturation", logx=True, ax=ax1)
line_plot(dims, jacobian, xlabel="d (query/key dimension)", ylabel="mean ‖∂α/∂s‖",
          title="gradient signal through the softmax", logx=True, ax=ax2)
plt.show()
print(f"{'d':>6} | {'max weight, unscaled':>20} | {'max weight, scaled':>18}")
for i, d in enumerate(dims):
    print(f"{d:>6} | {max_weight[unscaled][i]:>20.3f} | {max_weight[scaled][i]:>18.3f}")

# %% [markdown]
# Look at both curves of each plot as $d$ grows: the largest weight (left) and the size of the Jacobian
# (right), with and without the scale, and at the table's first and last rows.

# %% [raw]
# # BEGIN QUESTION
# name: scaling_variance
# manual: true
# points: 3
# rubric:
#   - criterion: "Derives E[q.k] = 0 and Var(q.k) = d: d independent products q_i k_i, each of mean 0 and variance
#       E[q_i^2] E[k_i^2] = 1, whose variances add"
#     points: 1
#   - criterion: "Concludes that q.k / sqrt(d) has variance d / d = 1 whatever d is (Var(cX) = c^2 Var(X))"
#     points: 0.5
#   - criterion: "Quotes the own table: the unscaled largest weight climbs towards 1 with d while the scaled one stays
#       flat (0.33 to 0.95 against about 0.15 to 0.17 in the reference run)"
#     points: 0.5
#   - criterion: "Uses the Jacobian alpha_i (delta_ij - alpha_j) to explain that a nearly one-hot softmax passes
#       almost no gradient, as the falling unscaled curve of the right plot shows"
#     points: 1
#   - criterion: "Quotes no number of the own run"
#     points: -0.5
#   - criterion: "Claims that the scale changes which key gets the largest weight (dividing by a positive constant
#       keeps the order of the scores)"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** (a) Under the assumptions above (the components of $q$ and $k$
# independent, mean 0, variance 1), derive $\mathbb{E}[q \cdot k]$ and $\mathrm{Var}[q \cdot k]$ as
# functions of $d$, and the variance of $q \cdot k / \sqrt{d}$. (b) Quote the largest weight of your table at
# $d = 4$ and at $d = 1024$, with and without the scale, and explain with the Jacobian above why the
# unscaled softmax learns badly at large $d$ (what does your right-hand plot show?).

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# **(a)** $q \cdot k = \sum_{i=1}^d q_i k_i$. Each term has mean $\mathbb{E}[q_i]\,\mathbb{E}[k_i] = 0$ (the two
# factors are independent) and variance $\mathbb{E}[q_i^2 k_i^2] - 0 = \mathbb{E}[q_i^2]\,\mathbb{E}[k_i^2] = 1$.
# The $d$ terms are independent of each other, so means and variances add:
# $\mathbb{E}[q \cdot k] = 0$, $\mathrm{Var}[q \cdot k] = d$, a standard deviation of $\sqrt{d}$ (32 at
# $d = 1024$, where scores beyond $\pm 30$ are common). Since $\mathrm{Var}[cX] = c^2\,\mathrm{Var}[X]$,
# $\mathrm{Var}[q \cdot k / \sqrt{d}] = d / d = 1$ for every $d$.
#
# **(b)** In the reference run (fast size, CPU, seed 0) the unscaled largest weight went from 0.328 at
# $d = 4$ to 0.954 at $d = 1024$, nearly one-hot, while the scaled one stayed between 0.148 and 0.169 (the
# uniform weight is $1/32 = 0.031$). The mean Jacobian norm, unscaled, fell from 0.29 to 0.06; scaled it stayed
# at about 0.24. When one weight $\alpha_m \approx 1$ and the others $\approx 0$, every entry
# $\alpha_i(\delta_{ij} - \alpha_j)$ is close to 0 ($\alpha_m(1 - \alpha_m) \approx 0$, and
# $\alpha_i \approx 0$ for the other rows), so almost no gradient reaches the scores, the queries and the
# keys: the attention pattern freezes where initialisation put it. Dividing by $\sqrt{d}$ keeps the scores'
# spread at 1 whatever $d$ is, so the softmax stays in its sensitive range. (The scale does not change which
# key wins: dividing by a positive number keeps the order; it changes how sharply it wins.)

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 3. Scaled dot-product attention, with masks
#
# Self-attention compares a sequence with itself. The general operation takes three inputs:
#
# - **queries** $Q \in \mathbb{R}^{n_q \times d_k}$: what each position is looking for,
# - **keys** $K \in \mathbb{R}^{n_k \times d_k}$: what each position offers to be found by,
# - **values** $V \in \mathbb{R}^{n_k \times d_v}$: what each position hands over when it is found,
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}} + M\right) V .$$
#
# **A soft dictionary lookup.** MIT's *Introduction to Deep Learning* (6.S191, the lecture on sequence
# models and attention) frames attention as a search: the query is what you type, the keys are the titles
# of what is stored, the values are the things themselves. A Python dict does this with exact matches:
# `d[query]` finds the one key equal to the query and returns its value, or fails. Attention makes every
# step soft: the query is compared with **every** key (a dot product, a similarity rather than equal or not),
# the softmax turns the similarities into weights that sum to 1, and the answer is the **weighted average of
# all the values**, the best-matching keys contributing most. Worked example with two stored items, keys
# $k_1 = [1, 0]$, $k_2 = [0, 1]$, values $v_1 = 10$, $v_2 = 20$, and the query $q = [2, 0]$: the scaled scores
# are $[2, 0] / \sqrt{2} = [1.41, 0]$, the weights $\mathrm{softmax} = [0.804, 0.196]$, and the answer
# $0.804 \cdot 10 + 0.196 \cdot 20 = 11.96$: mostly $v_1$, whose key matches, a little of $v_2$. A dict would
# return exactly 10; a query halfway between the keys, $[1, 1]$, would get $15$, an even blend. Because every
# step is smooth, gradients flow into the query, the keys and the values, so a network can *learn* what to
# look up.
#
# Queries and keys may come from different sequences ($n_q \ne n_k$: in Lab 08 the decoder's queries
# look at the encoder's keys), and the values may have another width $d_v$. The output has one row per
# query: shape $(n_q, d_v)$.
#
# **Masks.** $M$ decides which keys each query may see: $M_{ij} = 0$ where attention is allowed and
# $-\infty$ where it is not. Since $\exp(-\infty) = 0$, a masked key gets a weight of **exactly 0** and
# the softmax renormalises the others by itself. In code the mask is a boolean tensor, **True where
# attention is allowed**, and the $-\infty$ goes in before the softmax:
# `scores.masked_fill(~mask, float("-inf"))`. Three classic mistakes:
#
# | mistake | what goes wrong |
# |---|---|
# | `scores.masked_fill(~mask, 0)` | $\exp(0) = 1$: masked keys still get weight |
# | `weights * mask` after the softmax | masked weights are 0, but rows no longer sum to 1 |
# | `scores.masked_fill(mask, float("-inf"))` | the mask is inverted: our masks are True where allowed |
#
# The mask *broadcasts* against the scores `(..., n_q, n_k)`, so one function serves every case:
# `(n_q, n_k)` is the same mask for every sequence (causal, section 4), `(B, 1, n_k)` says per sequence
# which keys are padding (the 1 broadcasts over the queries), `(B, n_q, n_k)` is anything, and with
# attention heads (Lab 06) `(B, 1, 1, n_k)`. Every query always has at least one allowed key.
#
# **Numerical care.** $\mathrm{softmax}(s) = \mathrm{softmax}(s - \max s)$, and `torch.softmax` uses
# this to stay finite for huge scores; a hand-written `exp(s) / exp(s).sum()` overflows for scores above
# about 88 in float32. Use `math.sqrt(d_k)` (a Python float keeps the input's dtype; `torch.tensor(d_k)`
# would be float32 on the CPU) and create no new tensors on a fixed device.
#
# **A worked example.** Take $Q = K = I_2$ ($d_k = 2$) and $V = \begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}$.
# The scores are $I_2 / \sqrt 2$, so row 0 of the weights is $\mathrm{softmax}([0.7071, 0]) = [p, 1 - p]$ with
# $p = e^{0.7071} / (e^{0.7071} + 1) = 0.6698$, and row 1 is $[0.3302, 0.6698]$. The output's row 0 is
# $0.6698 \cdot [1, 2] + 0.3302 \cdot [3, 4] = [1.6604, 2.6604]$. With the mask
# $\begin{pmatrix} T & F \\ T & T \end{pmatrix}$, query 0 sees key 0 only: its weights are $[1, 0]$ exactly, and
# its output is $[1, 2]$; query 1 still sees both keys. The first check tests these numbers.

# %% [raw]
# # BEGIN QUESTION
# name: scaled_dot_product_attention
# points: 10

# %%
def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v, with an optional boolean mask (True = may attend).

    Shapes:
        q:       (..., n_q, d_k)
        k:       (..., n_k, d_k)
        v:       (..., n_k, d_v)
        mask:    None, or a bool tensor that broadcasts to (..., n_q, n_k):
                 (n_q, n_k), (B, 1, n_k), (B, n_q, n_k), (B, 1, 1, n_k), ...
        returns: (out, weights)
        out:     (..., n_q, d_v)
        weights: (..., n_q, n_k)   rows sum to 1; exactly 0 where mask is False
    """
    # 1. scores = q k^T / sqrt(d_k), shape (..., n_q, n_k), where d_k = q.shape[-1]
    # 2. if a mask is given: set the scores where mask is False to -inf (Tensor.masked_fill)
    # 3. weights = softmax over the keys (the last dimension: torch.softmax or F.softmax); out = weights @ v
    # BEGIN SOLUTION
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = F.softmax(scores, dim=-1)
    out = weights @ v
    return out, weights
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: q = k = I, with and without a mask
from attnlab.kit.expect import expect_close

q = k = torch.eye(2)
v = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
p = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)  # 0.6698
out, w = scaled_dot_product_attention(q, k, v)
expect_close(w, [[p, 1 - p], [1 - p, p]], "the weights (scores scaled by 1/sqrt(d_k))", atol=1e-5)
expect_close(out, [[3 - 2 * p, 4 - 2 * p], [1 + 2 * p, 2 + 2 * p]], "out, the weights times v", atol=1e-5)
out, w = scaled_dot_product_attention(q, k, v, mask=torch.tensor([[True, False], [True, True]]))
expect_close(w, [[1.0, 0.0], [1 - p, p]], "the masked weights (True = may attend)", atol=1e-5)
assert w[0, 1] == 0, f"a masked weight must be exactly 0 (fill the scores with -inf), got {w[0, 1].item()}"
expect_close(out, [[1.0, 2.0], [1 + 2 * p, 2 + 2 * p]], "out with the mask", atol=1e-5)

# %%
# shapes with n_q != n_k and d_v != d_k; rows sum to 1
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(0)
q = torch.randn(2, 3, 4, 8, dtype=torch.float64, generator=g)
k = torch.randn(2, 3, 6, 8, dtype=torch.float64, generator=g)
v = torch.randn(2, 3, 6, 5, dtype=torch.float64, generator=g)
out, w = scaled_dot_product_attention(q, k, v)
assert out.shape == (2, 3, 4, 5), f"out should have shape (..., n_q, d_v) = (2, 3, 4, 5), got {tuple(out.shape)}"
assert w.shape == (2, 3, 4, 6), f"weights should have shape (..., n_q, n_k) = (2, 3, 4, 6), got {tuple(w.shape)}"
assert out.dtype == torch.float64 and w.dtype == torch.float64, "keep the input's dtype (float64 here)"
expect_close(w.sum(-1), torch.ones(2, 3, 4, dtype=torch.float64), "the row sums of the weights (softmax over dim=-1)")

# %%
# padded keys get weight 0: the same as dropping them
# (a key-padding mask of shape (B, 1, n_k): sequence b has lengths[b] real keys)
from attnlab.kit.expect import expect_close

g = torch.Generator().manual_seed(2)
lengths = torch.tensor([5, 2, 3])
q = torch.randn(3, 4, 8, generator=g)
k = torch.randn(3, 5, 8, generator=g)
v = torch.randn(3, 5, 6, generator=g)
mask = (torch.arange(5)[None, :] < lengths[:, None])[:, None, :]  # (3, 1, 5)
out, w = scaled_dot_product_attention(q, k, v, mask=mask)
assert w.shape == (3, 4, 5) and out.shape == (3, 4, 6), "a (B, 1, n_k) mask broadcasts over the queries"
assert (w.masked_select(~mask.expand_as(w)) == 0).all(), (
    "weights of masked keys must be exactly 0 (fill the scores with -inf)")
expect_close(w.sum(-1), torch.ones(3, 4), "the row sums of the masked weights", atol=1e-6)
for b in range(3):
    n = int(lengths[b])
    out_b, _ = scaled_dot_product_attention(q[b], k[b, :n], v[b, :n])
    expect_close(out[b], out_b, f"out of sequence {b} (masking its padded keys should equal dropping them)", atol=1e-5)

# %%
# huge scores stay finite; the output is on the inputs' device
g = torch.Generator().manual_seed(3)
q = 1e4 * torch.randn(2, 3, 4, generator=g)
k = torch.randn(2, 5, 4, generator=g)
v = torch.randn(2, 5, 4, generator=g)
out, w = scaled_dot_product_attention(q, k, v)
assert torch.isfinite(out).all() and torch.isfinite(w).all(), (
    "huge scores gave inf or nan: use torch.softmax (it subtracts the max)")
mask = torch.ones(3, 5, dtype=torch.bool, device=device)
out, w = scaled_dot_product_attention(q.to(device), k.to(device), v.to(device), mask=mask)
assert out.device == q.to(device).device, f"the output should be on the inputs' device {device}, got {out.device}"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. Two masks: causal and padding
#
# **Causal mask.** A language model predicts token $t+1$ from tokens $1 \dots t$, so position $t$ must
# not see later positions. Query $i$ may attend to key $j$ exactly when $j \le i$: the mask is True on
# and below the diagonal.
#
# $$\text{causal\_mask}(4) = \begin{pmatrix} 1 & 0 & 0 & 0 \\ 1 & 1 & 0 & 0 \\ 1 & 1 & 1 & 0 \\ 1 & 1 & 1
# & 1 \end{pmatrix}$$
#
# Its shape `(n, n)` broadcasts over any batch. Build it directly on `device` (a `device=` argument of
# the tensor constructor), so that it lands on the GPU when the model is there, and make it a `bool`
# tensor: `torch.tril`, `torch.ones(..., dtype=torch.bool)` and comparisons of `torch.arange` are all
# you need.

# %% [raw]
# # BEGIN QUESTION
# name: causal_mask
# points: 2

# %%
def causal_mask(n, device=None):
    """Boolean (n, n) mask, True on and below the diagonal: query i may attend to keys 0..i.

    Shapes:
        n:       int, the sequence length
        device:  where to create the mask (None: the default device)
        returns: BoolTensor (n, n)
    """
    # BEGIN SOLUTION
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# causal_mask(3) and causal_mask(1), worked by hand
from attnlab.kit.expect import expect_equal

expect_equal(causal_mask(3), [[True, False, False], [True, True, False], [True, True, True]], "causal_mask(3)")
expect_equal(causal_mask(1), [[True]], "causal_mask(1)")
assert causal_mask(4, device=device).device.type == device.type, "create the mask on the device you are given"

# %%
# a future token never changes an earlier position's output
g = torch.Generator().manual_seed(4)
x = torch.randn(2, 6, 8, generator=g)
out, w = scaled_dot_product_attention(x, x, x, mask=causal_mask(6))
x2 = x.clone()
x2[:, 4:] = torch.randn(2, 2, 8, generator=g)  # change positions 4 and 5
out2, _ = scaled_dot_product_attention(x2, x2, x2, mask=causal_mask(6))
assert torch.allclose(out[:, :4], out2[:, :4], atol=1e-6), "positions 0..3 must not depend on positions 4 and 5"
assert (w.triu(1) == 0).all(), "weights above the diagonal must be exactly 0"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# **Padding mask.** Sentences have different lengths; a batch pads them on the right with token 0 up to
# a common `max_len`. The padding carries no meaning, so no query should attend to it. Given the
# `lengths` of the sentences, the padding mask is True at real tokens:
#
# ```
# lengths = [3, 1, 4], max_len = 5  ->  [[T, T, T, F, F],
#                                        [T, F, F, F, F],
#                                        [T, T, T, T, F]]
# ```
#
# Position $j$ is real exactly when $j <$ `lengths[b]`: compare `torch.arange(max_len)` (a row) with
# `lengths` as a column (`lengths[:, None]`) and let broadcasting do the rest. Create the `arange` on
# `lengths.device`. As a key mask for `scaled_dot_product_attention` it needs a query dimension:
# `padding_mask(lengths, n)[:, None, :]` has shape `(B, 1, n)`.

# %% [raw]
# # BEGIN QUESTION
# name: padding_mask
# points: 2

# %%
def padding_mask(lengths, max_len):
    """Boolean (B, max_len) mask, True at the real (non-pad) tokens of each right-padded sequence.

    Shapes:
        lengths: LongTensor (B,)   the number of real tokens of each sequence, at most max_len
        max_len: int               the padded length
        returns: BoolTensor (B, max_len), on lengths.device
    """
    # BEGIN SOLUTION
    positions = torch.arange(max_len, device=lengths.device)
    return positions[None, :] < lengths[:, None]
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# padding_mask([3, 1, 4], 5), the example above
from attnlab.kit.expect import expect_equal

expected = [[True, True, True, False, False],
            [True, False, False, False, False],
            [True, True, True, True, False]]
expect_equal(padding_mask(torch.tensor([3, 1, 4]), 5), expected, "padding_mask([3, 1, 4], 5)")

# %%
# max_len may be longer than every sequence
m = padding_mask(torch.tensor([2, 2]), 6)
assert m.shape == (2, 6) and m.sum().item() == 4, "max_len may be longer than every sequence: the shape is (B, max_len)"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 5. Queries, keys and values: `SelfAttention`
#
# Simple self-attention used each token's vector three times: to ask (query), to be found (key) and
# to be handed over (value). Learned linear maps let a token play the three roles differently:
#
# $$Q = X W_Q + b_Q, \qquad K = X W_K + b_K, \qquad V = X W_V + b_V,$$
#
# $$\mathrm{SelfAttention}(X) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V,$$
#
# with $W_Q, W_K \in \mathbb{R}^{d_\text{model} \times d_k}$ and $W_V \in \mathbb{R}^{d_\text{model}
# \times d_v}$. Now the score of `eat` looking at `cats` ($q_\text{eat} \cdot k_\text{cats}$) differs
# from that of `cats` looking at `eat`, and a token need not attend mostly to itself.
#
# Implement `SelfAttention` as an `nn.Module` with three `nn.Linear` layers named exactly `q_proj`,
# `k_proj` and `v_proj` (the grader loads weights by these names), each with a bias when `bias=True`.
# `d_k` and `d_v` default to `d_model`. The scale is $1/\sqrt{d_k}$, the width of the queries and keys,
# not $d_\text{model}$. Reuse your `scaled_dot_product_attention`.
#
# **A worked example.** With $W_Q = W_K = d^{1/4} I$, $W_V = I$ and no biases, the queries and keys are
# $d^{1/4} X$ and the scores are $d^{1/4} X (d^{1/4} X)^\top / \sqrt{d} = X X^\top$: `SelfAttention` then gives
# exactly what `simple_self_attention` gives. One check below builds these weights and compares the two.

# %% [raw]
# # BEGIN QUESTION
# name: SelfAttention
# points: 6

# %%
class SelfAttention(nn.Module):
    """Single-head self-attention with learned query, key and value projections.

    Args:
        d_model: the width of the input vectors
        d_k:     the width of queries and keys (default: d_model)
        d_v:     the width of values and of the output (default: d_model)
        bias:    whether the three projections have a bias

    Attributes: q_proj = nn.Linear(d_model, d_k), k_proj = nn.Linear(d_model, d_k),
                v_proj = nn.Linear(d_model, d_v)
    """

    def __init__(self, d_model, d_k=None, d_v=None, bias=True):
        super().__init__()
        # d_k and d_v default to d_model; create q_proj, k_proj, v_proj (pass bias=bias)
        # BEGIN SOLUTION
        d_k = d_model if d_k is None else d_k
        d_v = d_model if d_v is None else d_v
        self.q_proj = nn.Linear(d_model, d_k, bias=bias)
        self.k_proj = nn.Linear(d_model, d_k, bias=bias)
        self.v_proj = nn.Linear(d_model, d_v, bias=bias)
        # END SOLUTION

    def forward(self, x, mask=None):
        """Shapes:
            x:       (B, n, d_model)
            mask:    None, or a bool mask that broadcasts to (B, n, n), True = may attend
            returns: (out (B, n, d_v), weights (B, n, n))
        """
        # project x to queries, keys and values, then call scaled_dot_product_attention
        # BEGIN SOLUTION
        return scaled_dot_product_attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), mask)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# parameter names and shapes; output shapes with d_k != d_v
from attnlab.kit.expect import expect_close

sa = SelfAttention(8, d_k=4, d_v=6)
shapes = {name: tuple(p.shape) for name, p in sa.named_parameters()}
expected = {"q_proj.weight": (4, 8), "q_proj.bias": (4,), "k_proj.weight": (4, 8), "k_proj.bias": (4,),
            "v_proj.weight": (6, 8), "v_proj.bias": (6,)}
assert shapes == expected, f"SelfAttention(8, d_k=4, d_v=6) should have the parameters {expected}, got {shapes}"
no_bias = {name for name, _ in SelfAttention(8, bias=False).named_parameters()}
assert no_bias == {"q_proj.weight", "k_proj.weight", "v_proj.weight"}, f"bias=False: no biases, got {sorted(no_bias)}"
g = torch.Generator().manual_seed(5)
out, w = sa(torch.randn(3, 5, 8, generator=g))
assert out.shape == (3, 5, 6), f"out should have shape (B, n, d_v) = (3, 5, 6), got {tuple(out.shape)}"
assert w.shape == (3, 5, 5), f"weights should have shape (B, n, n) = (3, 5, 5), got {tuple(w.shape)}"
expect_close(w.sum(-1), torch.ones(3, 5), "the row sums of the weights", atol=1e-6)

# %%
# the worked example: equals simple_self_attention
from attnlab.kit.expect import expect_close

d = 4
sa = SelfAttention(d, bias=False).double()
with torch.no_grad():
    sa.q_proj.weight.copy_(d ** 0.25 * torch.eye(d))
    sa.k_proj.weight.copy_(d ** 0.25 * torch.eye(d))
    sa.v_proj.weight.copy_(torch.eye(d))
g = torch.Generator().manual_seed(6)
x = torch.randn(2, 5, d, dtype=torch.float64, generator=g)
out, w = sa(x)
y_ref, w_ref = simple_self_attention(x)
expect_close(w, w_ref, "the weights (W_Q = W_K = d^(1/4) I: equal to simple_self_attention's if scaled by 1/sqrt(d_k))")
expect_close(out, y_ref, "out (W_V = I: equal to simple_self_attention's y)")

# %%
# shuffled tokens, shuffled outputs; padded keys are ignored
g = torch.Generator().manual_seed(7)
sa = SelfAttention(8)
x = torch.randn(2, 5, 8, generator=g)
perm = torch.randperm(5, generator=g)
out, _ = sa(x)
out_p, _ = sa(x[:, perm])
assert torch.allclose(out_p, out[:, perm], atol=1e-5), "permuting the tokens should permute the outputs"
mask = padding_mask(torch.tensor([5, 3]), 5)[:, None, :]
out, w = sa(x, mask=mask)
assert (w[1, :, 3:] == 0).all(), "padded keys must get weight exactly 0"
out_short, _ = sa(x[1:, :3])
assert torch.allclose(out[1, :3], out_short[0], atol=1e-5), "masking padded keys should equal dropping them"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 6. A classifier built on self-attention
#
# A sentence classifier needs one vector per sentence. `AttentionClassifier` makes it in four steps:
#
# 1. **embed** the token ids: `embedding(ids)`, shape `(B, L, E)`;
# 2. **self-attention** over the sentence, with the pad positions masked *as keys* (a real token must
#    not look at padding): the mask `ids != 0` of shape `(B, L)` becomes `(B, 1, L)`;
# 3. **mean** of the attention output over the real (non-pad) positions only:
#    $$\bar h = \frac{\sum_t m_t\, h_t}{\sum_t m_t}, \qquad m_t = 1 \text{ if token } t \text{ is real, else } 0;$$
#    the pad positions still get an output row (their queries see the real keys), but it is left out;
# 4. **classify**: `classifier(h̄)`, a linear layer. With `num_classes == 1` the model returns one
#    logit per sentence, shape `(B,)` (squeeze the last dimension only, so that a batch of one gives
#    `(1,)`); otherwise `(B, num_classes)`.
#
# Name the sub-layers exactly `embedding` (`nn.Embedding(vocab_size, embed_dim)`), `attention`
# (`SelfAttention(embed_dim)`) and `classifier` (`nn.Linear(embed_dim, num_classes)`).
#
# Compared with Lab 01's mean of embeddings, the only new step is 2: each word's vector is replaced by
# a mixture of the words it attends to, so `not` can change what `good` contributes. Note what is
# missing: nothing tells the model *where* a word is. Self-attention without positions is order-free,
# a fact the experiments will run into.

# %% [raw]
# # BEGIN QUESTION
# name: AttentionClassifier
# points: 6

# %%
class AttentionClassifier(nn.Module):
    """Embedding -> self-attention (pads masked as keys) -> mean over real tokens -> linear.

    Args:
        vocab_size:  number of token ids (id 0 is <pad>)
        embed_dim:   width of the embeddings and of the attention
        num_classes: 1 for a binary task (one logit), else the number of classes

    Attributes: embedding = nn.Embedding(vocab_size, embed_dim), attention = SelfAttention(embed_dim),
                classifier = nn.Linear(embed_dim, num_classes)
    """

    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        # BEGIN SOLUTION
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.attention = SelfAttention(embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)
        # END SOLUTION

    def forward(self, ids):
        """Shapes:
            ids:     LongTensor (B, L), right-padded with 0, at least one real token per row
            returns: logits (B,) if num_classes == 1, else (B, num_classes)
        """
        # real = ids != 0 (B, L); key mask real[:, None, :] (B, 1, L)
        # masked mean: (h * real[..., None]).sum(1) / real.sum(1, keepdim=True), in h's dtype
        # BEGIN SOLUTION
        real = ids != 0
        h, _ = self.attention(self.embedding(ids), mask=real[:, None, :])
        m = real.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(dim=1) / m.sum(dim=1)
        logits = self.classifier(pooled)
        return logits.squeeze(-1) if self.num_classes == 1 else logits
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# sub-layers; logits (B,) for one class, (B, C) for C classes
torch.manual_seed(0)
model = AttentionClassifier(vocab_size=20, embed_dim=8)
assert isinstance(model.embedding, nn.Embedding), "embedding should be nn.Embedding(vocab_size, embed_dim)"
assert isinstance(model.attention, SelfAttention), "attention should be SelfAttention(embed_dim)"
assert isinstance(model.classifier, nn.Linear) and model.classifier.out_features == 1, (
    "classifier should be nn.Linear(embed_dim, num_classes)")
ids = torch.tensor([[5, 6, 7, 0, 0], [3, 4, 0, 0, 0], [9, 8, 7, 6, 5]])
assert model(ids).shape == (3,), f"num_classes=1: the logits should have shape (B,) = (3,), got {tuple(model(ids).shape)}"
assert model(ids[:1]).shape == (1,), "a batch of one should give logits of shape (1,): squeeze(-1), not squeeze()"
assert AttentionClassifier(20, 8, num_classes=3)(ids).shape == (3, 3), "num_classes=3: the logits should have shape (B, 3)"

# %%
# extra padding changes nothing
from attnlab.kit.expect import expect_close

torch.manual_seed(1)
model = AttentionClassifier(vocab_size=20, embed_dim=8).eval()
ids = torch.tensor([[5, 6, 7, 0], [3, 4, 0, 0]])
longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
with torch.no_grad():
    expect_close(model(longer), model(ids), "the logits with extra padding (mask the pads as keys, average over "
                 "the real tokens only)", atol=1e-6)
    expect_close(model(ids)[1:], model(torch.tensor([[3, 4]])), "the logit of a padded sentence (it should equal "
                 "the sentence's alone)", atol=1e-6)

# %%
# word order does not change the logit (no positions yet)
torch.manual_seed(2)
model = AttentionClassifier(vocab_size=20, embed_dim=8).eval()
with torch.no_grad():
    a = model(torch.tensor([[5, 6, 7, 9]]))
    b = model(torch.tensor([[9, 7, 5, 6]]))
assert torch.allclose(a, b, atol=1e-5), "without positional information the logit should not depend on word order"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 7. Experiments
#
# ### 7.1 The data
#
# `sentiment_splits` draws a synthetic corpus of short movie reviews with a vocabulary of about 70 words
# (offline, deterministic for a seed). It is built so that the interesting cases are frequent:
#
# - **plain** (about 30%): `the movie was really good`. Any model gets these right.
# - **negated** (about 30%): `the plot was not good`, `the film never seemed dull`. The label is the
#   adjective's polarity *flipped*: the model must combine two words.
# - **contrast** (about 40%), always drawn as *twin pairs* with the same words and opposite labels:
#   `the acting was good but the plot was dull` (0) / `the acting was dull but the plot was good` (1).
#   Only the order of the words tells them apart.
#
# Each split is a `TensorDataset(ids, labels)` with ids right-padded with 0 to `max_len` and labels
# 1.0 (positive) or 0.0 (negative). `splits.negated[split]` marks the sentences with `not` / `never`,
# `splits.examples[split]` holds each sentence with its `kind`.
#
# **Using a real corpus instead.** Nothing below depends on the data being synthetic. To train on real
# reviews (SST-2, IMDb, your own), put the texts and 0/1 labels in Python lists, build a vocabulary with
# `attnlab.kit.datasets.build_vocab(train_texts)` (`<pad>` = 0, `<unk>` = 1), encode each split with
# `ids, lengths = attnlab.kit.datasets.encode_texts(texts, vocab, max_len)`, and wrap it as
# `TensorDataset(ids, torch.tensor(labels, dtype=torch.float32))`. A file from the web is best fetched
# with `attnlab.kit.datasets.fetch(url, sha256)`, which caches it and checks its digest. Expect real reviews
# to need a larger `max_len`, vocabulary and model, and a GPU.

# %% tags=["otter_ignore"]
# Experiment (not graded): load the synthetic sentiment corpus
seed_everything(0)
splits = sentiment_splits(n_train=sized(4000, 20000), n_val=sized(500, 2000), n_test=sized(1000, 4000),
                          seed=0, max_len=16)
vocab_size = len(splits.vocab)
print(f"{len(splits.train)} training, {len(splits.val)} validation, {len(splits.test)} test sentences; "
      f"vocabulary of {vocab_size} tokens; max_len {splits.max_len}")
for kind in ("plain", "negated", "contrast"):
    shown = [ex for ex in splits.examples["train"] if ex.kind == kind][:2]
    for ex in shown:
        print(f"  {kind:>8}  label {ex.label}  {ex.text}")
ceiling = bag_of_words_ceiling(splits.examples["test"])
print(f"bag-of-words ceiling on the test set: {ceiling:.3f} (the best any order-free model can do)")

# %% [markdown]
# The **bag-of-words ceiling** is the best accuracy any model that ignores word order can reach on the
# test set. Why it sits where it does is part of a written question below.
#
# ### 7.2 Self-attention against a mean of embeddings
#
# The baseline is Lab 01's classifier: the mean of the embeddings of the real tokens, then a linear
# layer. The attention classifier differs by one self-attention layer. Both are trained the same way with
# `attnlab.kit.training.fit` (Adam, binary cross-entropy).

# %% tags=["otter_ignore"]
# Experiment (not graded): train a mean-of-embeddings baseline and the attention classifier
class MeanOfEmbeddings(nn.Module):
    """Lab 01's baseline: the mean of the embeddings of the real tokens, then a linear layer."""

    def __init__(self, vocab_size, dim):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        self.classifier = nn.Linear(dim, 1)

    def forward(self, ids):
        real = (ids != 0).unsqueeze(-1).to(self.embedding.weight.dtype)
        pooled = (self.embedding(ids) * real).sum(1) / real.sum(1)
        return self.classifier(pooled).squeeze(-1)


EMBED_DIM = sized(32, 64)
EPOCHS = sized(20, 12)
LR = sized(1e-2, 3e-3)  # the small model on less data takes larger steps
if device.type == "cpu":
    torch.set_num_threads(1)  # models this small train faster on one CPU thread than on several
train_loader = DataLoader(splits.train, batch_size=64, shuffle=True, generator=seed_everything(0))
val_loader = DataLoader(splits.val, batch_size=512)

seed_everything(0)
baseline = MeanOfEmbeddings(vocab_size, EMBED_DIM)
h_mean = fit(baseline, train_loader, epochs=EPOCHS, lr=LR, val_loader=val_loader, device=device,
             desc="mean of embeddings")
seed_everything(0)
attention_model = AttentionClassifier(vocab_size, EMBED_DIM)
h_attn = fit(attention_model, train_loader, epochs=EPOCHS, lr=LR, val_loader=val_loader, device=device,
             desc="self-attention")
plot_history({"mean of embeddings": h_mean, "self-attention": h_attn})
plt.show()

# %% tags=["otter_ignore"]
# Experiment (not graded): test accuracy, overall and by kind of sentence
def test_accuracy(model):
    """Accuracy on the test split: overall, on negated sentences, and per kind."""
    ids, labels = splits.test.tensors
    model.eval()
    with torch.no_grad():
        predicted = (model(ids.to(device)) > 0).float().cpu()
    correct = predicted == labels
    kinds = [ex.kind for ex in splits.examples["test"]]
    result = {"all": correct.float().mean().item(),
              "negated": correct[splits.negated["test"]].float().mean().item()}
    for kind in ("plain", "negated", "contrast"):
        chosen = torch.tensor([k == kind for k in kinds])
        result[f"kind={kind}"] = correct[chosen].float().mean().item()
    return result


results = {"mean of embeddings": test_accuracy(baseline), "self-attention": test_accuracy(attention_model)}
columns = list(results["self-attention"])
print(f"{'test accuracy':<20}" + "".join(f"{c:>16}" for c in columns))
for name, res in results.items():
    print(f"{name:<20}" + "".join(f"{res[c]:>16.3f}" for c in columns))
print(f"{'ceiling (order-free)':<20}{ceiling:>16.3f}")

# %% [markdown]
# What to look at (the exact numbers depend on the sizes, the seed and the device): read the table column
# by column. Compare the two models on each kind of sentence, and both with the ceiling and with chance
# (0.5). The written question below asks what the `kind=negated` column means, the one after section 7.3
# what the `kind=contrast` column means.

# %% [raw]
# # BEGIN QUESTION
# name: negation_mean_vs_attention
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes the own kind=negated accuracies of both models and notes that the mean of embeddings is below
#       chance there (0.16 against 0.96 in the reference run)"
#     points: 0.5
#   - criterion: "Explains that the mean-of-embeddings logit is a sum of one fixed term per word (linear in the word
#       counts), so not adds the same shift to 'not good' and 'not bad' and cannot flip both"
#     points: 1
#   - criterion: "Explains that in self-attention a word's output depends on the other words through the weights
#       softmax(q_i . k_j), so 'good' next to 'not' can get a different vector than 'good' alone"
#     points: 0.5
#   - criterion: "Blames word order for the failure of the mean of embeddings (negated sentences can be solved without
#       order: self-attention has no positions either)"
#     points: -0.5

# %% [markdown]
# **Written question (2 points).** Quote the `kind=negated` accuracy of both models from your table. Why
# does the mean of embeddings do *worse than chance* on negated sentences, and why can no setting of its
# weights fix that? What does one self-attention layer add that lets the second model get most of them
# right, although it has no more idea of word order than the first?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0) the mean of embeddings scored 0.160 on negated sentences and
# self-attention 0.963.
#
# The baseline's logit is $w \cdot \frac{1}{n}\sum_i e_{t_i} + b = \frac{1}{n}\sum_i (w \cdot e_{t_i}) + b$: every word
# adds its own fixed score, whatever the words around it. From the plain sentences it learns that `good` has a
# large positive score and `bad` a negative one; `not good` still contains `good`, so it is called positive,
# which is wrong, and consistently so: hence *below* 0.5, not merely at chance. Flipping the adjective would
# need `not` to add a negative shift to `not good` and a positive one to `not bad`, but `not` adds the same
# term $w \cdot e_\text{not}$ to both. The label is an XOR of two words, and no sum of per-word terms represents
# an XOR, whatever the weights.
#
# In the attention classifier each output $y_i = \sum_j \alpha_{ij} v_j$ mixes in the other words with weights
# $\alpha_{ij} = \mathrm{softmax}_j(q_i \cdot k_j / \sqrt{d})$ that depend on the pair $(i, j)$. When `not` is
# present, the adjective (and the other words) can attend to it, and their vectors change: the sentence's
# mean vector is no longer a sum of independent per-word terms but depends on which words occur *together*.
# That interaction is enough for negation, which needs the combination of two words but not their order.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 7.3 What does the trained model attend to?
#
# Row $i$ of the weights shows where token $i$ looks. The function below runs the trained model's
# embedding and self-attention on one sentence and returns the weights and the model's probability that
# the sentence is positive.

# %% tags=["otter_ignore"]
# Experiment (not graded): attention heatmaps of the trained classifier
def attention_of(model, text):
    """(weights (n, n), tokens, probability of positive) of the trained model on one sentence."""
    ids, lengths = encode_texts([text], splits.vocab, splits.max_len)
    ids = ids[:, : int(lengths[0])].to(device)  # drop the padding: one sentence needs none
    model.eval()
    with torch.no_grad():
        _, weights = model.attention(model.embedding(ids), mask=(ids != 0)[:, None, :])
        probability = torch.sigmoid(model(ids)).item()
    return weights[0].cpu(), text.split(), probability


sentences = ["the movie was not bad", "the acting was good but the plot was dull"]
fig, axes = plt.subplots(1, 2, figsize=(13, 5), layout="constrained")
for ax, text in zip(axes, sentences):
    weights, tokens, probability = attention_of(attention_model, text)
    attention_heatmap(weights, tokens, tokens, ax=ax, title=f"{text!r}: P(positive) = {probability:.2f}")
plt.show()

twins = ["the movie was not bad , it was good", "the movie was not good , it was bad"]
for text in twins:
    print(f"P(positive) = {attention_of(attention_model, text)[2]:.3f}  {text}")

# %% [markdown]
# The weights of a trained model are often sharp: many words put almost all their weight on one key,
# typically the word that decides the label (`not`, `but`). The mixture they pass on then says "this
# sentence is negated" to every position, which is what the mean and the classifier need.
#
# The two last sentences are a twin pair: the same words in a different order, opposite meanings. Compare
# the two probabilities the model gives them: the next question asks about them.

# %% [raw]
# # BEGIN QUESTION
# name: contrast_twins
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes the own kind=contrast accuracies (0.500 for both models in the reference run) and the two
#       equal probabilities of the printed twin pair"
#     points: 0.5
#   - criterion: "Explains that without positions the logit is a function of the multiset of words only
#       (self-attention permutes its outputs with its inputs, the mean over positions ignores the order), so both
#       twins get the same logit"
#     points: 1
#   - criterion: "Explains why exactly 0.5: one answer per pair, opposite labels, so exactly one twin of every pair is
#       right; and the ceiling as about 0.3 + 0.3 + 0.4 x 0.5 = 0.8 (plain and negated all right, contrast half)"
#     points: 0.5
#   - criterion: "Attributes the 0.5 to too little training, too small a model or bad luck"
#     points: -0.5

# %% [markdown]
# **Written question (2 points).** Both models score the same on the `kind=contrast` sentences, and the twin
# pair printed above gets the same probability twice. Quote these numbers from your run. Why is the
# contrast accuracy not merely *about* 0.5 but (up to the last digit) *exactly* 0.5, and why does the
# bag-of-words ceiling sit where it does? What would the model need to pass it?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run both models scored 0.500 on the contrast sentences, and the twins *the movie was not
# bad , it was good* / *the movie was not good , it was bad* both got $P(\text{positive}) = 0.569$.
#
# Neither model knows where a word stands. Permuting the tokens permutes the outputs of self-attention in the
# same way (it has no positions: section 1's check), and the mean over the real tokens does not depend on
# their order; the embedding-mean baseline is order-free by construction. So the logit is a function of the
# *multiset* of words. Contrast sentences come as twin pairs with the same words and opposite labels: both
# twins get the same logit, hence the same answer, and exactly one of the two is right. Every test pair is
# complete, so the accuracy on contrast sentences is exactly one half, whatever the weights, the training
# time or the model's size.
#
# The ceiling follows: an order-free model can at best get every plain and negated sentence right (about
# 30% + 30% of the test set) and half of the contrast ones (40% / 2), about $0.3 + 0.3 + 0.2 = 0.8$ (0.799
# measured on this test set). To pass it the model needs to know where each word stands: positional
# encodings added to the embeddings (Lab 07), after which the twins are different inputs.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### Going further (not graded)
#
# - Train the attention classifier once more with the scores *not* divided by $\sqrt{d_k}$ and a larger
#   `EMBED_DIM` (256): does training get slower, as section 2 predicts?
# - Add a learned position vector to each embedding (`nn.Embedding(max_len, embed_dim)` indexed by
#   `torch.arange(L)`) and train again: does the accuracy on the contrast sentences pass the ceiling?
#   Lab 07 does this properly.
# - Give the classifier `SelfAttention(embed_dim, d_k=4)`: how small can the queries and keys be before
#   negation is no longer learned?
