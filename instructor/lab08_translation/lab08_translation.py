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
# # Lab 08: The translation Transformer
#
# Lab 07 built the encoder block. This lab builds the whole model of
# [Vaswani et al. (2017)](https://arxiv.org/abs/1706.03762): an **encoder** reads a German sentence, a
# **decoder** writes its English translation one word at a time, and **cross-attention** lets every word
# the decoder writes look back at the German words. You train it on
# [Multi30k](https://github.com/multi30k/dataset) (29,000 image captions in German and English) and measure
# it the way papers do, with **sacreBLEU**.
#
# You will build it one idea at a time:
#
# 1. `TransformerDecoderBlock`: masked self-attention, cross-attention and a feed-forward network. It must
#    equal PyTorch's `nn.TransformerDecoderLayer` with the same weights.
# 2. `decoder_io`: teacher forcing, the decoder's input and its labels from one target sentence.
# 3. `Seq2SeqTransformer`: embeddings, positions, the encoder and decoder stacks, and their masks.
# 4. `sequence_loss`: cross-entropy over the real tokens, with label smoothing.
# 5. `greedy_decode`: translating a batch of sentences, one token per step; `beam_search`, which keeps the
#    best few partial translations instead of one.
# 6. Experiments: the data and its vocabulary, training curves, BLEU and translations of the test set,
#    what cross-attention looks at, and what label smoothing changes.
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
# - The ready-made `nn.Transformer`, `nn.TransformerEncoder`, `nn.TransformerDecoder`,
#   `nn.TransformerEncoderLayer` and `nn.TransformerDecoderLayer` are **not allowed** anywhere in the graded
#   cells (the grader reads your code; a use costs the points of the question). `nn.Linear`, `nn.Embedding`,
#   `nn.LayerNorm`, `nn.Dropout`, `F.cross_entropy` and the rest of `torch` are fine.
# - This lab **gives** you Lab 07's pieces (section 0): `MultiHeadAttention`, `FeedForward`,
#   `TransformerEncoderBlock`, `sinusoidal_positional_encoding`. Use them as they are.
# - Name the sub-layers exactly as asked (`self_attn`, `cross_attn`, `ff`, `norm1`, ..., `src_emb`,
#   `encoder`, `decoder`, `generator`): the grader loads weights by these names.
# - A boolean mask is **True where attention is allowed** (the opposite of `nn.TransformerDecoderLayer`'s
#   `tgt_mask` and `memory_key_padding_mask`, where True means *blocked*).
# - Token ids: `<pad>` = 0, `<bos>` = 1 (beginning of sentence), `<eos>` = 2 (end), `<unk>` = 3. Batches are
#   right-padded.
# - Your code must work in float32 and float64 on whatever device the inputs are on (CPU or GPU), must not
#   change its inputs in place, and must keep the autograd graph (no `.detach()`, `.item()`) where a
#   gradient flows.
#
# **Shape legend** used throughout: `B` batch, `S` source length, `T` target length, `d` (or `d_model`) the
# model width, `h` the number of heads, `V` a vocabulary size (`V_src`, `V_tgt`).
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The grade
# comes from hidden tests that call your functions and classes on random inputs and compare the outputs
# *and the gradients* with a reference and with PyTorch's own layers. Cells whose first line says
# *Experiment*, *Demo* or *Data* are not run by the grader: do not define anything graded in them.
#
# **Sizes.** On a CPU the experiments use a small model trained for a few minutes at most; on a GPU
# (Colab: *Runtime > Change runtime type*) they train the size of the
# [PyTorch Seq2Seq tutorials](https://github.com/bentrevett/pytorch-seq2seq) (256 dims, 3 + 3 layers).
# `sized(fast, full)` picks between the two; set the environment variable `ATTNLAB_FAST=1` or `0` to force
# either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 08.
import math
import re
import time
from collections import Counter

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

from attnlab.kit.device import sized
from attnlab.kit.plotting import attention_grid, line_plot, plot_history
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import fit

# %% [markdown]
# ## 0. Given: Lab 07's building blocks
#
# The working code of Lab 07 (and of Lab 06's attention inside it). `MultiHeadAttention(d_model, num_heads,
# dropout)` has `forward(query, key, value, mask=None) -> (out (B, n_q, d), weights (B, h, n_q, n_k))`, with a
# boolean mask (True = may attend) that broadcasts against `(B, h, n_q, n_k)`: `(T, T)` for a causal mask,
# `(B, 1, 1, S)` for a padding mask over the keys. `TransformerEncoderBlock(d_model, num_heads, d_ff, dropout)`
# has `forward(x, mask=None)`. `FeedForward(d_model, d_ff, dropout)` is `linear2(dropout(relu(linear1(x))))`.

# %%
# GIVEN from lab07_transformer_block: scaled_dot_product_attention, split_heads, merge_heads, MultiHeadAttention


# %%
# GIVEN from lab07_transformer_block: sinusoidal_positional_encoding, FeedForward, TransformerEncoderBlock


# %% [markdown]
# ## 1. The decoder block
#
# An encoder block lets every source word look at every other source word. A **decoder** block has three
# sub-layers:
#
# 1. **Masked self-attention** over the target words written so far. Word $t$ may look at words $0 \dots t$
#    only (a causal mask), because at translation time the later words do not exist yet.
# 2. **Cross-attention**: the queries come from the decoder, the keys and values from the encoder's output,
#    the *memory*. This is where the translation looks at the source sentence; source pads are masked.
# 3. The position-wise **feed-forward** network.
#
# Each sub-layer has a residual connection and a layer norm, placed as in Lab 07:
#
# ```
#   post-norm (norm_first=False, the 2017 paper)            pre-norm (norm_first=True)
#
#   y = norm1(y + SA(y, tgt_mask))                          y = y + SA(norm1(y), tgt_mask)
#   y = norm2(y + CA(y, memory, memory_mask))               y = y + CA(norm2(y), memory, memory_mask)
#   y = norm3(y + FF(y))                                    y = y + FF(norm3(y))
# ```
#
# `SA(y)` is `self_attn(y, y, y, mask=tgt_mask)[0]`; `CA(y, memory)` is `cross_attn(y, memory, memory,
# mask=memory_mask)[0]`: the query is the decoder's state, key and value are the memory, which is never
# normalized here. Dropout sits where `nn.TransformerDecoderLayer` puts it: inside the attentions and the
# feed-forward network (pass `dropout` on), and on each sub-layer's output before the residual addition.
#
# ```
#   y:            (B, T, d)    the decoder's input (target embeddings, or the previous block's output)
#   memory:       (B, S, d)    the encoder's output
#   tgt_mask:     None or bool broadcasting to (B, h, T, T): (T, T) causal, (B, 1, T, T)
#   memory_mask:  None or bool broadcasting to (B, h, T, S): (B, 1, 1, S) source padding
#   returns:      (B, T, d)
# ```
#
# Implement `TransformerDecoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False)` with the
# attributes `self_attn`, `cross_attn` (two given `MultiHeadAttention`s), `ff` (a given `FeedForward`, ReLU),
# `norm1`, `norm2`, `norm3` (`nn.LayerNorm(d_model)`). With dropout 0 and the same weights it must equal
# `nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=...)`.

# %% [raw]
# # BEGIN QUESTION
# name: TransformerDecoderBlock
# points: 10

# %%
class TransformerDecoderBlock(nn.Module):
    """Masked self-attention, cross-attention over the memory, feed-forward; residuals and layer norms.

    Args:
        d_model, num_heads, d_ff: model width, number of heads, feed-forward hidden width
        dropout:    dropout probability (attention weights, feed-forward hidden layer, sub-layer outputs)
        norm_first: False: post-norm, y = norm(y + sublayer(y)); True: pre-norm, y = y + sublayer(norm(y))

    Attributes: self_attn, cross_attn (MultiHeadAttention), ff (FeedForward), norm1, norm2, norm3 (nn.LayerNorm)
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        # keep norm_first; create self_attn, cross_attn, ff, norm1, norm2, norm3 (dropout passed on),
        # and three nn.Dropout(dropout) for the outputs of the three sub-layers
        # BEGIN SOLUTION
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)  # on the self-attention output
        self.dropout2 = nn.Dropout(dropout)  # on the cross-attention output
        self.dropout3 = nn.Dropout(dropout)  # on the feed-forward output
        # END SOLUTION

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        """y: (B, T, d), memory: (B, S, d), masks: None or bool (True = may attend) -> (B, T, d)."""
        # BEGIN SOLUTION
        if self.norm_first:
            h = self.norm1(y)  # (B, T, d)
            y = y + self.dropout1(self.self_attn(h, h, h, mask=tgt_mask)[0])  # (B, T, d)
            h = self.norm2(y)  # (B, T, d)
            y = y + self.dropout2(self.cross_attn(h, memory, memory, mask=memory_mask)[0])  # (B, T, d)
            y = y + self.dropout3(self.ff(self.norm3(y)))  # (B, T, d)
        else:
            y = self.norm1(y + self.dropout1(self.self_attn(y, y, y, mask=tgt_mask)[0]))  # (B, T, d)
            y = self.norm2(y + self.dropout2(self.cross_attn(y, memory, memory, mask=memory_mask)[0]))
            y = self.norm3(y + self.dropout3(self.ff(y)))  # (B, T, d)
        return y
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# sub-layers are named as asked and the shape is kept
block = TransformerDecoderBlock(16, 4, 32)
for name in ("self_attn", "cross_attn"):
    assert isinstance(getattr(block, name, None), MultiHeadAttention), f"{name} should be the given MultiHeadAttention"
assert isinstance(getattr(block, "ff", None), FeedForward), "ff should be the given FeedForward"
for name in ("norm1", "norm2", "norm3"):
    assert isinstance(getattr(block, name, None), nn.LayerNorm), f"{name} should be nn.LayerNorm(d_model)"
out = block(torch.randn(2, 5, 16), torch.randn(2, 7, 16))
assert isinstance(out, torch.Tensor), f"the block should return one tensor, got {type(out).__name__}"
assert out.shape == (2, 5, 16), f"the output should have shape (B, T, d) = (2, 5, 16), got {tuple(out.shape)}"

# %%
# with a causal mask, position 0 sees only itself
torch.manual_seed(0)
block = TransformerDecoderBlock(16, 4, 32).eval()
y, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
causal = torch.ones(5, 5, dtype=torch.bool).tril()
first_alone = block(y[:, :1], memory, tgt_mask=causal[:1, :1])  # (B, 1, d)
changed = y.clone()
changed[:, 3:] = torch.randn(2, 2, 16)  # new words at positions 3 and 4
out, out_changed = block(y, memory, tgt_mask=causal), block(changed, memory, tgt_mask=causal)
assert torch.allclose(out[:, :1], first_alone, atol=1e-5), "position 0 should only see itself: pass tgt_mask to self_attn"
assert torch.allclose(out[:, :3], out_changed[:, :3], atol=1e-5), (
    "changing positions 3 and 4 changed earlier outputs: pass tgt_mask to self-attention")
assert not torch.allclose(block(y, memory), out), "tgt_mask has no effect: pass it to self_attn"

# %%
# masked memory positions are not looked at
torch.manual_seed(0)
block = TransformerDecoderBlock(16, 4, 32).eval()
y, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
keep = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])[:, None, None, :]  # (B, 1, 1, S)
garbage = memory.clone()
garbage[1, 4:] = 100.0  # row 1's masked positions
out = block(y, memory, memory_mask=keep)
assert torch.allclose(out, block(y, garbage, memory_mask=keep), atol=1e-5), (
    "the output depends on masked memory positions: pass memory_mask to cross_attn")
assert not torch.allclose(out, block(y, memory)), "memory_mask has no effect: pass it to cross_attn"
assert not torch.allclose(out, block(y, torch.randn(2, 7, 16), memory_mask=keep)), (
    "the output does not depend on the memory: cross_attn's keys and values are the memory")

# %%
# zero sub-layers: post-norm is norm3(norm2(norm1(y)))
for norm_first in (False, True):
    block = TransformerDecoderBlock(16, 4, 32, norm_first=norm_first)
    with torch.no_grad():
        for linear in (block.self_attn.out_proj, block.cross_attn.out_proj, block.ff.linear2):
            linear.weight.zero_()
            linear.bias.zero_()
        for norm in (block.norm1, block.norm2, block.norm3):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    y = 3 * torch.randn(2, 5, 16) + 1
    expected = y if norm_first else block.norm3(block.norm2(block.norm1(y)))
    rule = "y (pre-norm adds zeros to y)" if norm_first else "norm3(norm2(norm1(y))) (post-norm)"
    assert torch.allclose(block(y, torch.randn(2, 3, 16)), expected, atol=1e-5), (
        f"norm_first={norm_first}: with every sub-layer switched off the block should give {rule}")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# Your block against PyTorch's. `nn.TransformerDecoderLayer` keeps the query, key and value projections of
# each attention stacked in one matrix (`in_proj_weight`), calls cross-attention `multihead_attn`, and takes
# masks with **True = blocked**: our causal mask becomes `tgt_mask=~causal` and our source padding mask
# `memory_key_padding_mask=~keep`.

# %% tags=["otter_ignore"]
# Demo (not graded): your block equals nn.TransformerDecoderLayer with the same weights
def mha_state(mha, prefix):
    """A given MultiHeadAttention's weights under nn.MultiheadAttention's names (q, k, v stacked)."""
    qkv = (mha.q_proj, mha.k_proj, mha.v_proj)
    return {f"{prefix}.in_proj_weight": torch.cat([p.weight for p in qkv]),  # (3d, d)
            f"{prefix}.in_proj_bias": torch.cat([p.bias for p in qkv]),  # (3d,)
            f"{prefix}.out_proj.weight": mha.out_proj.weight, f"{prefix}.out_proj.bias": mha.out_proj.bias}


def to_torch_decoder_layer(block, d_model, num_heads, d_ff, norm_first):
    layer = nn.TransformerDecoderLayer(d_model, num_heads, d_ff, dropout=0.0, batch_first=True, norm_first=norm_first)
    state = {**mha_state(block.self_attn, "self_attn"), **mha_state(block.cross_attn, "multihead_attn"),
             "linear1.weight": block.ff.linear1.weight, "linear1.bias": block.ff.linear1.bias,
             "linear2.weight": block.ff.linear2.weight, "linear2.bias": block.ff.linear2.bias}
    for i in (1, 2, 3):
        norm = getattr(block, f"norm{i}")
        state[f"norm{i}.weight"], state[f"norm{i}.bias"] = norm.weight, norm.bias
    layer.load_state_dict({k: v.detach() for k, v in state.items()})
    return layer.eval()


seed_everything(0)
y, memory = torch.randn(2, 6, 16), torch.randn(2, 8, 16)
causal = torch.ones(6, 6, dtype=torch.bool).tril()
keep = torch.tensor([[True] * 8, [True] * 5 + [False] * 3])  # (B, S): True at real source tokens
for norm_first in (False, True):
    block = TransformerDecoderBlock(16, 4, 64, norm_first=norm_first).eval()
    with torch.no_grad():
        for i in (1, 2, 3):  # non-trivial norm weights, so a swapped norm would show
            getattr(block, f"norm{i}").weight.uniform_(0.5, 1.5)
            getattr(block, f"norm{i}").bias.uniform_(-0.5, 0.5)
    layer = to_torch_decoder_layer(block, 16, 4, 64, norm_first)
    with torch.no_grad():
        ours = block(y, memory, tgt_mask=causal, memory_mask=keep[:, None, None, :])
        theirs = layer(y, memory, tgt_mask=~causal, memory_key_padding_mask=~keep)
    print(f"norm_first={norm_first!s:5}: largest difference to nn.TransformerDecoderLayer "
          f"{(ours - theirs).abs().max().item():.1e}")

# %% [markdown]
# ## 2. Teacher forcing
#
# The decoder learns to predict the next word. In training we do not feed it its own guesses (they are
# wrong at first, and one step at a time is slow); we feed it the **true** previous words, all positions
# at once, and the causal mask hides the future. This is *teacher forcing*. A target sentence in a batch is
# `BOS w1 w2 ... wn EOS PAD ... PAD`; the decoder's input drops the last column and the labels drop the
# first, so that at every position the label is the word that comes next:
#
# ```
#   tgt     :  BOS   a    dog  runs  EOS  PAD        (B, T)     [[1, 5, 6, 7, 2, 0]]
#   dec_in  :  BOS   a    dog  runs  EOS             (B, T-1)   [[1, 5, 6, 7, 2]]     tgt[:, :-1]
#   labels  :   a   dog  runs  EOS   PAD             (B, T-1)   [[5, 6, 7, 2, 0]]     tgt[:, 1:]
# ```
#
# Reading down the columns: after `BOS` predict `a`, after `a` predict `dog`, ..., after `runs` predict
# `EOS`. Where the label is `PAD` (after a shorter sentence's `EOS`) the loss will ignore the position, so
# it does not matter that `EOS` or `PAD` is an input there.
#
# Implement `decoder_io(tgt)` returning `(dec_in, labels)`, both `(B, T-1)`, without changing `tgt`.

# %% [raw]
# # BEGIN QUESTION
# name: decoder_io
# points: 3

# %%
def decoder_io(tgt):
    """Teacher forcing: the decoder's input and its labels.

    Shapes:
        tgt:     (B, T) token ids, each row BOS ... EOS PAD*
        returns: (dec_in (B, T-1), labels (B, T-1)); dec_in = tgt without its last column,
                 labels = tgt without its first column
    """
    # BEGIN SOLUTION
    return tgt[:, :-1], tgt[:, 1:]
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: labels are the inputs shifted by one
from attnlab.kit.expect import expect_equal

tgt = torch.tensor([[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0]])
result = decoder_io(tgt)
assert isinstance(result, tuple) and len(result) == 2, "decoder_io should return a pair (dec_in, labels)"
dec_in, labels = result
expect_equal(dec_in, [[1, 5, 6, 7, 2], [1, 8, 2, 0, 0]], "dec_in")
expect_equal(labels, [[5, 6, 7, 2, 0], [8, 2, 0, 0, 0]], "labels")
expect_equal(tgt, [[1, 5, 6, 7, 2, 0], [1, 8, 2, 0, 0, 0]], "tgt after the call (do not change it)")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 3. The model
#
# ```
#   src (B, S) --src_emb--> *sqrt(d) + PE --dropout--> [encoder block] x N_enc --> memory (B, S, d)
#                                                                                     |
#   dec_in (B, T) --tgt_emb--> *sqrt(d) + PE --dropout--> [decoder block] x N_dec <---+--> generator --> logits (B, T, V_tgt)
# ```
#
# - **Embeddings.** `src_emb` (`nn.Embedding(src_vocab, d_model)`) and `tgt_emb` (`nn.Embedding(tgt_vocab,
#   d_model)`). A token's vector is `emb(ids) * sqrt(d_model) + PE[:n]`, with Lab 07's sinusoidal table `PE`
#   (a buffer, `register_buffer(..., persistent=False)`: not a parameter, not trained), then dropout. The
#   factor `sqrt(d_model)` is the paper's (its section 3.4 multiplies the embedding weights by it and gives
#   no reason); a common reading is that it keeps the word vectors from being drowned by the positions.
#   (Initialise the embeddings with `nn.init.normal_(emb.weight, std=d_model ** -0.5)`, so that
#   `emb * sqrt(d_model)` has values of size 1, like the positions; the grader loads its own weights.)
# - **Encoder.** `encoder`, an `nn.ModuleList` of `num_encoder_layers` post-norm `TransformerEncoderBlock`s.
#   `encode(src)` masks the source pads as keys: `mask = (src != pad_id)` shaped `(B, 1, 1, S)`.
# - **Decoder.** `decoder`, an `nn.ModuleList` of `num_decoder_layers` post-norm `TransformerDecoderBlock`s.
#   `decode(dec_in, memory, src)` uses a causal `(T, T)` mask in self-attention and the source padding mask
#   `(B, 1, 1, S)` in cross-attention (that is why it needs `src`), and returns `generator(y)`, the logits.
# - **Generator.** `generator`, `nn.Linear(d_model, tgt_vocab)`: a score for every target word.
# - `forward(src, dec_in) = decode(dec_in, encode(src), src)`. Keep `pad_id` as an attribute (`self.pad_id`):
#   `greedy_decode` reads it. A sequence longer than `max_len` raises a `ValueError` naming both lengths.
#
# ```
#   src:     (B, S)    source ids, right-padded with pad_id
#   dec_in:  (B, T)    target ids (BOS first)
#   memory:  (B, S, d)
#   logits:  (B, T, V_tgt)
# ```

# %% [raw]
# # BEGIN QUESTION
# name: Seq2SeqTransformer
# points: 8

# %%
class Seq2SeqTransformer(nn.Module):
    """An encoder-decoder Transformer for translation (post-norm blocks, sinusoidal positions).

    Attributes: src_emb, tgt_emb (nn.Embedding), encoder, decoder (nn.ModuleList of blocks),
                generator (nn.Linear(d_model, tgt_vocab)), pad_id; a non-persistent buffer with the positions
    """

    def __init__(self, src_vocab, tgt_vocab, d_model=128, num_heads=4, num_encoder_layers=2,
                 num_decoder_layers=2, d_ff=512, max_len=128, dropout=0.1, pad_id=0):
        super().__init__()
        # BEGIN SOLUTION
        self.d_model = d_model
        self.pad_id = pad_id  # greedy_decode pads finished rows with it
        self.max_len = max_len
        self.src_emb = nn.Embedding(src_vocab, d_model)
        self.tgt_emb = nn.Embedding(tgt_vocab, d_model)
        for emb in (self.src_emb, self.tgt_emb):
            nn.init.normal_(emb.weight, std=d_model ** -0.5)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_encoder_layers))
        self.decoder = nn.ModuleList(TransformerDecoderBlock(d_model, num_heads, d_ff, dropout)
                                     for _ in range(num_decoder_layers))
        self.generator = nn.Linear(d_model, tgt_vocab)
        # END SOLUTION

    def embed(self, emb, ids):
        """ids (B, n) -> dropout(emb(ids) * sqrt(d_model) + PE[:n]), (B, n, d)."""
        # BEGIN SOLUTION
        n = ids.shape[1]
        if n > self.max_len:
            raise ValueError(f"a sequence of {n} tokens is longer than max_len={self.max_len}")
        return self.dropout(emb(ids) * math.sqrt(self.d_model) + self.pe[:n])  # (B, n, d) + (n, d)
        # END SOLUTION

    def encode(self, src):
        """src (B, S) -> memory (B, S, d); source pads are masked as keys."""
        # BEGIN SOLUTION
        keep = (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        x = self.embed(self.src_emb, src)  # (B, S, d)
        for block in self.encoder:
            x = block(x, mask=keep)  # (B, S, d)
        return x
        # END SOLUTION

    def decode(self, dec_in, memory, src):
        """dec_in (B, T), memory (B, S, d), src (B, S) -> logits (B, T, V_tgt); causal and source pad masks."""
        # BEGIN SOLUTION
        T = dec_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=dec_in.device).tril()  # (T, T)
        keep = (src != self.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        y = self.embed(self.tgt_emb, dec_in)  # (B, T, d)
        for block in self.decoder:
            y = block(y, memory, tgt_mask=causal, memory_mask=keep)  # (B, T, d)
        return self.generator(y)  # (B, T, V_tgt)
        # END SOLUTION

    def forward(self, src, dec_in):
        """src (B, S), dec_in (B, T) -> logits (B, T, V_tgt)."""
        # BEGIN SOLUTION
        return self.decode(dec_in, self.encode(src), src)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# attributes, parameter shapes and the logits' shape
model = Seq2SeqTransformer(11, 13, d_model=16, num_heads=2, num_encoder_layers=2, num_decoder_layers=3,
                           d_ff=32, max_len=20)
assert isinstance(model.src_emb, nn.Embedding) and isinstance(model.tgt_emb, nn.Embedding), (
    "src_emb and tgt_emb should be nn.Embedding")
assert isinstance(model.encoder, nn.ModuleList) and len(model.encoder) == 2, "encoder: a ModuleList of 2 blocks"
assert isinstance(model.decoder, nn.ModuleList) and len(model.decoder) == 3, "decoder: a ModuleList of 3 blocks"
assert all(isinstance(b, TransformerEncoderBlock) for b in model.encoder), "encoder blocks: TransformerEncoderBlock"
assert all(isinstance(b, TransformerDecoderBlock) for b in model.decoder), "decoder blocks: TransformerDecoderBlock"
assert model.generator.weight.shape == (13, 16), (
    f"generator should be nn.Linear(d_model, tgt_vocab): weight (13, 16), got {tuple(model.generator.weight.shape)}")
assert not any("pe" in name.split(".")[-1] for name, _ in model.named_parameters()), (
    "the positional table should be a buffer, not a parameter")
src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
dec_in = torch.tensor([[1, 3, 4], [1, 5, 0]])
logits = model(src, dec_in)
assert logits.shape == (2, 3, 13), f"the logits should have shape (B, T, V_tgt) = (2, 3, 13), got {tuple(logits.shape)}"

# %%
# a later target word does not change earlier logits
torch.manual_seed(0)
model = Seq2SeqTransformer(11, 13, d_model=16, num_heads=2, d_ff=32, max_len=20).eval()
src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
dec_in = torch.tensor([[1, 3, 4, 5], [1, 5, 6, 7]])
later = dec_in.clone()
later[:, 2:] = torch.tensor([[9, 10], [11, 12]])
assert torch.allclose(model(src, dec_in)[:, :2], model(src, later)[:, :2], atol=1e-5), (
    "changing target positions 2 and 3 changed the logits at 0 and 1: use a causal mask in decode")

# %%
# more source padding changes nothing
torch.manual_seed(0)
model = Seq2SeqTransformer(11, 13, d_model=16, num_heads=2, d_ff=32, max_len=20).eval()
with torch.no_grad():
    model.src_emb.weight[0] = 5.0  # a pad embedding far from zero, so that an unmasked pad shows
src = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
dec_in = torch.tensor([[1, 3, 4], [1, 5, 6]])
longer = torch.cat([src, torch.zeros(2, 3, dtype=torch.long)], dim=1)  # three more pads per row
assert torch.allclose(model(src, dec_in), model(longer, dec_in), atol=1e-5), (
    "extra source pads changed the logits: mask pads as keys in encode and in cross-attention")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. The loss
#
# The model gives a distribution $p = \mathrm{softmax}(\text{logits})$ over the target vocabulary at every
# position. The loss is the cross-entropy $-\log p_{y}$ of the true next word $y$, **averaged over the real
# tokens only**: positions whose label is `pad_id` do not count, neither in the sum nor in the number it is
# divided by.
#
# **Label smoothing** ([Szegedy et al., 2016](https://arxiv.org/abs/1512.00567); used by the 2017
# Transformer with $\varepsilon = 0.1$) trains towards a softened target: probability $1 - \varepsilon$ on
# the true word plus $\varepsilon / V$ on every word. Per token,
#
# $$\ell = (1 - \varepsilon)\,\big(-\log p_y\big) + \varepsilon \cdot \frac{1}{V}\sum_{v=1}^{V} \big(-\log p_v\big).$$
#
# Why train towards a target that is, on purpose, a little wrong? Section 10 measures what it changes. It is
# exactly `F.cross_entropy(logits (N, V), labels (N,), ignore_index=pad_id,
# label_smoothing=eps)`; you may use it (mind the shapes: it wants the classes on dimension 1) or write the
# formula with `log_softmax`.
#
# **Worked example** ($V = 3$, `pad_id = 0`, so label 0 never counts). Logits $(0, \ln 2, 0)$ give
# $p = (1/4, 1/2, 1/4)$. With label 1 the loss is $\ln 2 = 0.6931$, with label 2 it is $\ln 4 = 1.3863$. A batch
# `labels = [[1, 2, PAD]]` with these logits at every position has loss $(0.6931 + 1.3863)/2 = 1.0397$ (two real
# tokens, not three). With $\varepsilon = 0.3$ and label 1: $0.7 \cdot 0.6931 + 0.3 \cdot (1.3863 + 0.6931 +
# 1.3863)/3 = 0.8318$.

# %% [raw]
# # BEGIN QUESTION
# name: sequence_loss
# points: 4

# %%
def sequence_loss(logits, labels, label_smoothing=0.0, pad_id=0):
    """Mean cross-entropy over the non-pad tokens, with optional label smoothing.

    Shapes:
        logits:  (B, T, V) float
        labels:  (B, T) token ids; positions equal to pad_id are ignored
        returns: scalar, equal to F.cross_entropy on the (B*T, V) logits and (B*T,) labels with the
                 pad positions ignored and the same label smoothing
    """
    # BEGIN SOLUTION
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1),  # (B*T, V), (B*T,)
                           ignore_index=pad_id, label_smoothing=label_smoothing)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: pads do not count
from attnlab.kit.expect import expect_close

logits = torch.log(torch.tensor([[[1.0, 2.0, 1.0]] * 3]))  # (1, 3, 3): p = (1/4, 1/2, 1/4) everywhere
loss = sequence_loss(logits, torch.tensor([[1, 2, 0]]))
assert isinstance(loss, torch.Tensor) and loss.dim() == 0, f"the loss should be a scalar tensor, got {loss!r}"
expect_close(loss, 1.0397, "the loss of labels [[1, 2, PAD]] (mean over the two real tokens)", atol=1e-4)
expect_close(sequence_loss(logits, torch.tensor([[1, 2, 2]]), pad_id=2), math.log(2),
             "the loss with pad_id=2 (only position 0 counts)", atol=1e-4)

# %%
# label smoothing: the worked example with eps = 0.3
from attnlab.kit.expect import expect_close

logits = torch.log(torch.tensor([[[1.0, 2.0, 1.0]]]))  # (1, 1, 3)
expect_close(sequence_loss(logits, torch.tensor([[1]]), label_smoothing=0.3), 0.8318,
             "the loss with label_smoothing=0.3", atol=1e-4)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 5. Greedy decoding
#
# At translation time there is no target sentence. The decoder starts from `BOS` alone and writes one word
# per step: run the decoder on everything written so far, take the logits of the **last** position, append
# their argmax, repeat. The source is encoded once.
#
# A batch holds sentences that end at different steps. A row that has produced `EOS` is finished: from then
# on it gets `model.pad_id` in every new column, whatever the model says. Decoding stops as soon as every
# row has produced `EOS`, or when the output has `max_len` columns (counting the `BOS` column).
#
# ```
#   step 0:  [[BOS], [BOS]]
#   step 1:  [[BOS, a], [BOS, EOS]]                              row 1 is finished
#   step 2:  [[BOS, a, dog], [BOS, EOS, PAD]]
#   step 3:  [[BOS, a, dog, EOS], [BOS, EOS, PAD, PAD]]          every row finished: stop, (B, 4)
# ```
#
# Implement `greedy_decode(model, src, max_len, bos_id=1, eos_id=2)` returning a `LongTensor (B, L)` with
# `L <= max_len`, on the device of `src`. Use the model only through `model.encode(src)`,
# `model.decode(ys, memory, src)` (or `model(src, ys)`) and `model.pad_id`: the checks also run it on a
# small stand-in model with that interface. The decorator `@torch.no_grad()` turns gradients off; the caller
# puts the model in eval mode.

# %% [markdown]
# **Given: the stand-in model of the checks.** `ToyTranslator` has the interface of `Seq2SeqTransformer`
# (`encode`, `decode`, `forward`, `pad_id`) and almost no insides: the logits at position $t$ are a score
# for the token at $t$ (`next_token`), for the position (`position`), and for the source words (`source`,
# averaged over the real ones). The checks below script it; the grader gives it random weights and runs your
# `greedy_decode` on it (leave it as it is).

# %%
class ToyTranslator(nn.Module):
    """A stand-in translation model for testing greedy_decode: logits = next_token[y_t] + position[t] + source.

    Shapes: encode(src (B, S)) -> memory (B, 1, V_tgt); decode(dec_in (B, T), memory, src) -> (B, T, V_tgt)
    """

    def __init__(self, src_vocab, tgt_vocab, max_len=64, pad_id=0):
        super().__init__()
        self.pad_id = int(pad_id)  # the id greedy_decode pads finished rows with
        self.next_token = nn.Parameter(torch.randn(tgt_vocab, tgt_vocab))  # (V_tgt, V_tgt)
        self.position = nn.Parameter(torch.randn(max_len, tgt_vocab))  # (max_len, V_tgt)
        self.source = nn.Parameter(torch.randn(src_vocab, tgt_vocab))  # (V_src, V_tgt)

    def encode(self, src):
        real = (src != self.pad_id).unsqueeze(-1).to(self.source.dtype)  # (B, S, 1)
        return (self.source[src] * real).sum(1, keepdim=True) / real.sum(1, keepdim=True)  # (B, 1, V_tgt)

    def decode(self, dec_in, memory, src):
        return self.next_token[dec_in] + self.position[: dec_in.shape[1]] + memory  # (B, T, V_tgt)

    def forward(self, src, dec_in):
        memory = self.encode(src)  # (B, 1, V_tgt)
        return self.decode(dec_in, memory, src)


# %% [raw]
# # BEGIN QUESTION
# name: greedy_decode
# points: 6

# %%
@torch.no_grad()  # no gradients while decoding
def greedy_decode(model, src, max_len, bos_id=1, eos_id=2):
    """Greedy translation of a batch.

    Shapes:
        src:     (B, S) source ids
        returns: (B, L) LongTensor, L <= max_len: column 0 is bos_id, then the argmax of the last position at
                 every step; model.pad_id after a row's eos_id; stops when every row has produced eos_id
    """
    # BEGIN SOLUTION
    memory = model.encode(src)  # (B, S, d), computed once
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (B,)
    while ys.shape[1] < max_len:
        next_id = model.decode(ys, memory, src)[:, -1].argmax(dim=-1)  # (B,): the last position's argmax
        next_id = next_id.masked_fill(finished, model.pad_id)  # finished rows get pads
        ys = torch.cat([ys, next_id[:, None]], dim=1)  # (B, t + 1)
        finished = finished | (next_id == eos_id)
        if bool(finished.all()):
            break
    return ys
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# a scripted model: EOS, pads after it, early stop
from attnlab.kit.expect import expect_equal

toy = ToyTranslator(10, 8)
with torch.no_grad():
    toy.position.zero_()
    toy.source.zero_()
    toy.next_token.zero_()
    for a, b in [(1, 4), (4, 5), (5, 2), (2, 6), (0, 6)]:  # BOS -> 4 -> 5 -> EOS
        toy.next_token[a, b] = 10.0
    toy.source[9, 2] = 30.0  # a source holding word 9 says EOS at once
out = greedy_decode(toy.eval(), torch.tensor([[3, 7], [9, 0]]), max_len=10)
assert isinstance(out, torch.Tensor) and out.dtype == torch.long, f"expected a LongTensor, got {out!r}"
expect_equal(out, [[1, 4, 5, 2], [1, 2, 0, 0]], "greedy_decode on the scripted model")

# %%
# max_len columns at most, BOS counted
from attnlab.kit.expect import expect_equal

toy = ToyTranslator(10, 8)
with torch.no_grad():
    toy.position.zero_()
    toy.source.zero_()
    toy.next_token.zero_()
    toy.next_token[:, 7] = 10.0  # always word 7, never EOS
out = greedy_decode(toy.eval(), torch.tensor([[3, 4, 5]]), max_len=5)
expect_equal(out, [[1, 7, 7, 7, 7]], "greedy_decode with max_len=5 on a model that never says EOS")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 5.1 Beam search
#
# Greedy decoding commits to the best word at every step, and a good first word can lead to a poor
# sentence. **Beam search** keeps the `beam_size` best *partial translations* (hypotheses) instead of one,
# scored by the sum of their tokens' log-probabilities, $\mathrm{score}(y) = \sum_t \log p(y_t \mid y_{<t},
# x)$ ([Sutskever et al., 2014](https://arxiv.org/abs/1409.3215); [d2l.ai, 10.8](https://d2l.ai/chapter_recurrent-modern/beam-search.html)).
# For each source sentence:
#
# 1. start with one hypothesis, `[BOS]`, of score 0; no finished hypotheses;
# 2. at each step, run the decoder on every live hypothesis, take the **log-softmax** of its last position,
#    and form every extension: (hypothesis, next token) with score = hypothesis score + log-probability of
#    the token. Keep the best `beam_size - (number finished)` extensions **over all hypotheses together**
#    (`torch.topk` on the flattened `(k, V)` scores; the best extensions may all come from one parent, or
#    from several);
# 3. an extension that ends with `EOS` is **finished**: it leaves the beam, and the beam shrinks by one;
# 4. stop when `beam_size` hypotheses are finished, or when the hypotheses have `max_len` tokens (`BOS`
#    counted): the live ones then count as finished as they are;
# 5. return the finished hypothesis with the best **length-normalised** score, $\mathrm{score}(y) /
#    |y|^{\alpha}$, where $|y|$ is the number of tokens after `BOS` (`EOS` counted, at least 1) and $\alpha$
#    is `length_penalty`. Every token adds a negative log-probability, so without the division ($\alpha =
#    0$) short translations win; $\alpha = 1$ compares the mean log-probability per token.
#
# With `beam_size = 1` every step keeps the single best extension: exactly `greedy_decode`.
#
# **Worked example** (the checks script it with `ToyTranslator`, the next token depending only on the
# previous one). From `BOS` the model says `a` with probability 0.5, `b` 0.4, `c` 0.1; after `a`: `EOS`
# 0.4, `c` 0.32, `b` 0.28; after `b`: `EOS` 0.9, `c` 0.1. Greedy writes `BOS a EOS`, probability $0.5 \cdot 0.4
# = 0.2$. A beam of 2 keeps `a` (0.5) and `b` (0.4); their best extensions are `b EOS` ($0.36$) and `a EOS`
# ($0.2$), both finished, so the search stops and returns `BOS b EOS`, the better translation. Both have
# two tokens after `BOS`, so $\alpha$ does not matter here; the second check shows a case where it does.
#
# Implement `beam_search(model, src, beam_size, max_len, length_penalty=1.0, bos_id=1, eos_id=2)`. It returns
# a `LongTensor (B, L)` like `greedy_decode`: one row per source sentence, its best hypothesis from `BOS`
# on, rows right-padded with `model.pad_id` to the longest. Decoding each sentence on its own is fine (a
# loop over `src`'s rows, each with a batch of `k` hypotheses: `memory.expand(k, -1, -1)`); use the model
# only through `encode`, `decode` (or `forward`) and `pad_id`.

# %% [raw]
# # BEGIN QUESTION
# name: beam_search
# points: 6

# %%
@torch.no_grad()
def beam_search(model, src, beam_size, max_len, length_penalty=1.0, bos_id=1, eos_id=2):
    """Beam search translation of a batch, one sentence at a time.

    Shapes:
        src:     (B, S) source ids
        returns: (B, L) LongTensor, L <= max_len: each row the best finished hypothesis (score / length **
                 length_penalty, length = tokens after BOS), BOS first, right-padded with model.pad_id
    """
    # BEGIN SOLUTION
    rows = []
    for b in range(src.shape[0]):
        source = src[b:b + 1]  # (1, S)
        memory = model.encode(source)  # (1, S, d)
        live = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)  # (k, t) the live hypotheses
        scores = torch.zeros(1, device=src.device)  # (k,) their summed log-probabilities
        finished = []  # (normalised score, token list)
        while len(live) and live.shape[1] < max_len:
            k = len(live)
            logits = model.decode(live, memory.expand(k, *memory.shape[1:]), source.expand(k, -1))[:, -1]  # (k, V)
            total = (scores.to(logits.dtype)[:, None] + torch.log_softmax(logits, dim=-1)).flatten()  # (k * V,)
            scores, best = total.topk(min(beam_size - len(finished), total.numel()))
            parent, token = best // logits.shape[1], best % logits.shape[1]
            live = torch.cat([live[parent], token[:, None]], dim=1)  # (k', t + 1)
            done = token == eos_id
            for tokens, score in zip(live[done].tolist(), scores[done].tolist()):
                finished.append((score / max(len(tokens) - 1, 1) ** length_penalty, tokens))
            live, scores = live[~done], scores[~done]
        for tokens, score in zip(live.tolist(), scores.tolist()):  # max_len reached
            finished.append((score / max(len(tokens) - 1, 1) ** length_penalty, tokens))
        rows.append(max(finished, key=lambda pair: pair[0])[1])
    longest = max(map(len, rows))
    return torch.tensor([row + [model.pad_id] * (longest - len(row)) for row in rows], device=src.device)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# worked example: greedy BOS a EOS, a beam of 2 BOS b EOS
from attnlab.kit.expect import expect_equal

toy = ToyTranslator(5, 6)  # ids: 0 pad, 1 BOS, 2 EOS, 3 a, 4 b, 5 c
with torch.no_grad():
    toy.position.zero_()
    toy.source.zero_()
    toy.next_token.fill_(-30.0)  # every other token: almost impossible
    for previous, probabilities in {1: {3: 0.5, 4: 0.4, 5: 0.1}, 3: {2: 0.4, 5: 0.32, 4: 0.28},
                                    4: {2: 0.9, 5: 0.1}, 5: {2: 0.9, 3: 0.1}}.items():
        for token, p in probabilities.items():
            toy.next_token[previous, token] = math.log(p)
src = torch.tensor([[3, 4], [2, 0]])
expect_equal(greedy_decode(toy.eval(), src, max_len=6), [[1, 3, 2], [1, 3, 2]], "greedy_decode on the example")
out = beam_search(toy, src, beam_size=2, max_len=6)
assert isinstance(out, torch.Tensor) and out.dtype == torch.long, f"expected a LongTensor, got {out!r}"
expect_equal(out, [[1, 4, 2], [1, 4, 2]], "beam_search with beam_size=2 on the example")

# %%
# length_penalty: 0 prefers the short sentence, 1 the long one
from attnlab.kit.expect import expect_equal

toy = ToyTranslator(5, 6)
with torch.no_grad():
    toy.position.zero_()
    toy.source.zero_()
    toy.next_token.fill_(-30.0)
    for previous, probabilities in {1: {2: 0.3, 3: 0.7}, 3: {4: 0.6, 2: 0.3, 5: 0.1}, 4: {2: 0.6, 5: 0.3, 3: 0.1},
                                    5: {2: 1.0}}.items():
        for token, p in probabilities.items():
            toy.next_token[previous, token] = math.log(p)
src = torch.tensor([[3, 4]])
# BOS EOS: log 0.3 = -1.20 for 1 token; BOS a b EOS: log(0.7 * 0.6 * 0.6) = -1.38 for 3 tokens (-0.46 each)
expect_equal(beam_search(toy.eval(), src, 2, 8, length_penalty=0.0), [[1, 2]], "beam_search, length_penalty=0")
expect_equal(beam_search(toy, src, 2, 8, length_penalty=1.0), [[1, 3, 4, 2]], "beam_search, length_penalty=1")

# %%
# a beam of 1 is greedy_decode
from attnlab.kit.expect import expect_equal

torch.manual_seed(0)
toy = ToyTranslator(9, 8).eval()
src = torch.randint(1, 9, (4, 5))
expect_equal(beam_search(toy, src, 1, 12), greedy_decode(toy, src, 12), "beam_search(beam_size=1) against greedy_decode")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 6. The data: Multi30k, German to English
#
# [Multi30k](https://github.com/multi30k/dataset) (Elliott et al., 2016) holds descriptions of Flickr photos
# in English with human translations into German: 29,000 training pairs, 1,014 for validation and 1,000 for
# testing (`test_2016_flickr`, the test set papers report on). The kit downloads it once (a few MB).
#
# **Tokens and vocabulary.** We keep it simple and self-contained (no downloaded tokenizer): lowercase the
# sentence, then a token is a word (letters and digits, with inner hyphens and apostrophes kept, as in
# `t-shirt` and `man's`) or a single punctuation mark. Each vocabulary is built **from the training split
# only**: the special tokens `<pad>`, `<bos>`, `<eos>`, `<unk>` (ids 0 to 3), then every word seen at least
# `MIN_FREQ` times, most frequent first. Any other word becomes `<unk>`, also in the validation and test
# sets: building the vocabulary on the test set (as some tutorials do) leaks information from it.

# %% tags=["otter_ignore"]
# Data (not graded): Multi30k, the tokenizer and the two vocabularies
from attnlab.kit.datasets.multi30k import load_multi30k

if device.type == "cpu":
    # Small models on a CPU: one thread is as fast as several, and much faster when other programs share the
    # cores (coordinating threads costs more than the little work they split).
    torch.set_num_threads(1)

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]  # ids 0, 1, 2, 3
PAD, BOS, EOS, UNK = 0, 1, 2, 3
MIN_FREQ = sized(5, 2)
TOKEN = re.compile(r"\w+(?:['\-]\w+)*|[^\w\s]")  # a word (inner ' and - kept) or one punctuation mark


def tokenize(sentence):
    """'A man's T-shirt.' -> ['a', "man's", 't-shirt', '.']"""
    return TOKEN.findall(sentence.lower())


def build_vocab(token_lists, min_freq):
    """{token: id}: the specials, then the tokens seen at least min_freq times, most frequent first."""
    counts = Counter(token for tokens in token_lists for token in tokens)
    words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    return {token: i for i, token in enumerate(SPECIALS + words)}


pairs = {split: load_multi30k(split, src="de", tgt="en") for split in ("train", "val", "test_2016_flickr")}
src_vocab = build_vocab([tokenize(de) for de, _ in pairs["train"]], MIN_FREQ)
tgt_vocab = build_vocab([tokenize(en) for _, en in pairs["train"]], MIN_FREQ)
tgt_words = {i: w for w, i in tgt_vocab.items()}  # id -> word
print({split: len(p) for split, p in pairs.items()})
print(f"vocabularies (min_freq={MIN_FREQ}): German {len(src_vocab)}, English {len(tgt_vocab)} tokens")
print(pairs["train"][0], "->", tokenize(pairs["train"][0][0]))

# %% [markdown]
# A sentence becomes `BOS ids EOS`. Sentences of similar length go into the same batch (fewer pads, less
# wasted work); a batch holds about `BATCH_TOKENS` tokens, and the batches are shuffled every epoch. Each
# batch is `(src, dec_in, labels)` with `decoder_io`, so that `fit` calls `model(src, dec_in)` and compares
# the logits with `labels`.

# %% tags=["otter_ignore"]
# Data (not graded): ids, length-sorted batches
def encode_ids(sentence, vocab):
    return [BOS] + [vocab.get(token, UNK) for token in tokenize(sentence)] + [EOS]


def pad_rows(rows):
    """A list of id lists -> (N, longest) LongTensor, right-padded with PAD."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])


class LengthBatches:
    """Batches of about `batch_tokens` tokens of similar length, reshuffled at every pass (re-iterable)."""

    def __init__(self, split, batch_tokens, shuffle, seed=0):
        ids = [(encode_ids(de, src_vocab), encode_ids(en, tgt_vocab)) for de, en in pairs[split]]
        order = sorted(range(len(ids)), key=lambda i: (len(ids[i][0]), len(ids[i][1])))
        groups, group, width = [], [], 0
        for i in order:
            width_with = max(width, len(ids[i][0]), len(ids[i][1]))
            if group and width_with * (len(group) + 1) > batch_tokens:
                groups.append(group)
                group, width_with = [], max(len(ids[i][0]), len(ids[i][1]))
            group.append(i)
            width = width_with
        groups.append(group)
        self.batches = []
        for group in groups:
            src = pad_rows([ids[i][0] for i in group])  # (B, S)
            dec_in, labels = decoder_io(pad_rows([ids[i][1] for i in group]))  # (B, T-1) each
            self.batches.append((src, dec_in, labels))
        self.shuffle, self.generator = shuffle, torch.Generator().manual_seed(seed)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        order = torch.randperm(len(self.batches), generator=self.generator) if self.shuffle else range(len(self))
        return (self.batches[int(i)] for i in order)


BATCH_TOKENS = sized(1500, 6000)  # on a CPU, smaller batches: more steps for the same time
train_batches = LengthBatches("train", BATCH_TOKENS, shuffle=True)
val_batches = LengthBatches("val", 8000, shuffle=False)
src, dec_in, labels = next(iter(train_batches))
print(f"{len(train_batches)} training batches; one of them: src {tuple(src.shape)}, dec_in {tuple(dec_in.shape)}")
print("its first target row:", " ".join(tgt_words[int(i)] for i in labels[0]))

# %% [markdown]
# ## 7. Training
#
# `fit` (the kit's training loop) with your `sequence_loss` (label smoothing 0.1, as in the paper), Adam with
# the paper's $\beta_2 = 0.98$, a short linear warm-up of the learning rate (post-norm Transformers need one,
# Lab 07), and gradient clipping. On a CPU the model is small and trains for a fraction of an epoch; on a GPU
# it has the tutorial's size, 256 dims, 3 + 3 layers and 8 heads, and trains for 10 epochs.
#
# **The warm-up, plotted.** The paper (Vaswani et al. 2017, section 5.3) sets the learning rate at step
# $s \ge 1$ to $d_{model}^{-0.5} \min(s^{-0.5}, s \cdot w^{-1.5})$: a linear rise over the first $w$ steps
# (4,000 in the paper), then a decay as $1/\sqrt{s}$. The peak, at $s = w$, is $(d_{model}\, w)^{-0.5}$. We
# keep the linear rise and then hold the rate constant (the `LambdaLR` below), which is simpler for short runs.

# %% tags=["otter_ignore"]
# Intuition (not graded): the paper's warm-up schedule against ours, per optimizer step
def noam_rate(step, d_model=512, warmup=4000):
    """Vaswani et al.'s learning rate at optimizer step `step` (counted from 1)."""
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


schedule_steps = list(range(1, 20001, 50))
paper_rates = [noam_rate(s) for s in schedule_steps]
peak = max(range(1, 20001), key=noam_rate)
assert peak == 4000 and math.isclose(noam_rate(peak), (512 * 4000) ** -0.5), (peak, noam_rate(peak))
line_plot(schedule_steps, {"paper (d 512, w 4000)": paper_rates,
                           "linear warm-up, then constant": [7e-4 * min(1.0, s / 4000) for s in schedule_steps]},
          xlabel="optimizer step", ylabel="learning rate", title="Warm-up schedules")
plt.show()
print(f"paper's peak: {noam_rate(peak):.2e} at step {peak}; at step 20,000: {noam_rate(20000):.2e}")

# %% tags=["otter_ignore"]
# Experiment (not graded): train the translation model
CONFIG = sized(dict(d_model=128, num_heads=4, num_encoder_layers=2, num_decoder_layers=2, d_ff=256, dropout=0.0),
               dict(d_model=256, num_heads=8, num_encoder_layers=3, num_decoder_layers=3, d_ff=512, dropout=0.1))
EPOCHS, LR, WARMUP = sized(1, 10), sized(2e-3, 5e-4), sized(30, 400)
TRAIN_STEPS = sized(160, None)  # on a CPU: the first 160 batches of one epoch (about half of it)


class FirstBatches:
    """The first `steps` batches of a re-iterable loader, or all of them when steps is None."""

    def __init__(self, loader, steps):
        self.loader, self.steps = loader, steps

    def __len__(self):
        return len(self.loader) if self.steps is None else min(self.steps, len(self.loader))

    def __iter__(self):
        return (batch for _, batch in zip(range(len(self)), self.loader))


def train_translator(label_smoothing, desc, **overrides):
    """A fresh Seq2SeqTransformer trained with `fit`; returns (model, history)."""
    seed_everything(0)
    config = {**CONFIG, **overrides}
    model = Seq2SeqTransformer(len(src_vocab), len(tgt_vocab), max_len=128, **config).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR, betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / WARMUP))
    history = fit(model, FirstBatches(train_batches, TRAIN_STEPS), epochs=EPOCHS, optimizer=optimizer,
                  scheduler=scheduler, val_loader=val_batches, clip_grad_norm=1.0, device=device,
                  loss_fn=lambda logits, labels: sequence_loss(logits, labels, label_smoothing=label_smoothing),
                  desc=desc, live_plot=False)
    return model, history


model, history = train_translator(0.1, "translation model")
print(f"{sum(p.numel() for p in model.parameters()):,} parameters, trained in {history.seconds:.0f} s")
print(f"validation loss (label-smoothed) {history.val_loss[-1]:.3f}, token accuracy {history.val_metric[-1]:.3f}")
plot_history(history, title="German -> English (validation solid, training dashed)")
plt.show()

# %% [markdown]
# ## 8. BLEU
#
# BLEU ([Papineni et al., 2002](https://aclanthology.org/P02-1040/)) counts the word n-grams (n = 1 to 4) of
# the translations that also occur in the references, over the whole test set, with a penalty for
# translations that are too short. Scores depend on how the text is tokenized before counting, which is why
# numbers from different papers (and from torchtext's old `bleu_score` on lowercased tokens) often cannot be
# compared. [sacreBLEU](https://github.com/mjpost/sacrebleu) (Post, 2018) fixes the procedure: it takes
# **detokenized** text and the **raw** reference sentences, tokenizes both itself, and prints a *signature*
# saying exactly how the score was computed. We turn our tokens back into text (join with spaces, no space
# before punctuation, capital first letter) and score the 1,000 test sentences.

# %% tags=["otter_ignore"]
# Experiment (not graded): translate the test set greedily and score it with sacreBLEU
import sacrebleu


def detokenize(ids):
    """Target ids (BOS ... EOS PAD*) -> a sentence: words joined, no space before punctuation, capitalised."""
    words = []
    for i in ids[1:]:
        if i in (EOS, PAD):
            break
        words.append(tgt_words[i])
    text = re.sub(r" ([.,!?;:)])", r"\1", " ".join(words)).replace("( ", "(")
    return text[:1].upper() + text[1:]


def translate(model, sentences, batch_size=100, extra=10, decode=greedy_decode):
    """German sentences -> English sentences with `decode` (greedy_decode; batches of similar length)."""
    model.eval()
    ids = [encode_ids(s, src_vocab) for s in sentences]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = [None] * len(ids)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        src = pad_rows([ids[i] for i in chunk]).to(device)  # (B, S)
        ys = decode(model, src, max_len=src.shape[1] + extra, bos_id=BOS, eos_id=EOS)  # (B, <= S + extra)
        for i, row in zip(chunk, ys.tolist()):
            out[i] = detokenize(row)
    return out


def bleu_of(model, split, limit=None, decode=greedy_decode):
    """(sacreBLEU's corpus score, hypotheses) of `model` on a split."""
    chosen = pairs[split][:limit]
    hypotheses = translate(model, [de for de, _ in chosen], decode=decode)
    return BLEU.corpus_score(hypotheses, [[en for _, en in chosen]]), hypotheses


BLEU = sacrebleu.metrics.BLEU()
started = time.perf_counter()
test_bleu, test_hypotheses = bleu_of(model, "test_2016_flickr")
print(f"test_2016_flickr, greedy: {test_bleu}   ({time.perf_counter() - started:.0f} s to translate)")
print("signature:", BLEU.get_signature())
for (de, en), hypothesis in list(zip(pairs["test_2016_flickr"], test_hypotheses))[:5]:
    print(f"\n  German:    {de}\n  reference: {en}\n  model:     {hypothesis}")

# %% [markdown]
# On a CPU the model is small and has seen about half an epoch, so expect a BLEU in the low tens at best and
# translations that get the gist (*a man*, *a dog*, *is running*) and miss the details. In our run (CPU, fast
# size: 160 steps of about 1,500 tokens, on a loaded 2-core machine) it scored BLEU 13.86 (45.4/19.9/9.7/4.8,
# brevity penalty 0.969, 12,560 words for 12,955 in the references). The full size
# (256 dimensions, 3 + 3 layers, 9.0M parameters) reached sacreBLEU 31.4 on
# test_2016_flickr with greedy decoding after 30 minutes of training on a 2-core CPU, with this signature.
# The tutorials' mid-thirties are *tokenised* BLEU, a different number: scores are comparable *only* with
# the same signature.
#
# ### 8.1 Greedy against beam search
#
# The same model, the same sentences, two decoders: greedy, and your `beam_search` with beams of 4
# (length penalty 1). On a CPU we decode the first `BEAM_LIMIT` test sentences only: beam search decodes one
# sentence at a time, `beam_size` hypotheses each.

# %% tags=["otter_ignore"]
# Experiment (not graded): sacreBLEU of greedy decoding and of beam search, same model, same sentences
import functools

BEAM_LIMIT = sized(200, None)
for name, decode in (("greedy", greedy_decode),
                     ("beam 4, length_penalty 1", functools.partial(beam_search, beam_size=4, length_penalty=1.0))):
    started = time.perf_counter()
    score, _ = bleu_of(model, "test_2016_flickr", limit=BEAM_LIMIT, decode=decode)
    print(f"{name:>26}: {score}   ({time.perf_counter() - started:.0f} s)")

# %% [markdown]
# sacreBLEU prints, for each decoder, the score, the four n-gram precisions, the brevity penalty `BP`, and the
# lengths of the translations (`hyp_len`) and of the references (`ref_len`). Both lines come from the same
# model and the same sentences, so only the decoder differs. Compare them field by field.

# %% [raw]
# # BEGIN QUESTION
# name: beam_brevity_penalty
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own greedy and beam lines: BLEU, n-gram precisions, BP and hyp_len against ref_len (13.91
#       against 14.68, BP 0.945 against 0.851, 2,407 and 2,191 words for 2,544 in the reference run)"
#     points: 0.5
#   - criterion: "Computes the brevity penalty from the own lengths, BP = exp(1 - ref_len / hyp_len) when hyp_len <
#       ref_len, and the score before the penalty (BLEU / BP: about 17.2 for beam against 14.7 for greedy in the
#       reference run), so beam search gained more than the final score shows"
#     points: 1
#   - criterion: "Explains why beam search writes shorter translations: it searches for hypotheses the model scores
#       higher, hypotheses that end early finish and are kept, and leaving out uncertain content words raises the mean
#       log-probability; greedy only stops when EOS is the single best token"
#     points: 1
#   - criterion: "Explains the trade-off (shorter output: higher precisions, lower BP) and that a larger
#       length_penalty favours longer hypotheses"
#     points: 0.5
#   - criterion: "Quotes no number of the own run"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Quote both lines of your run (BLEU, the n-gram precisions, BP,
# `hyp_len` and `ref_len`). BLEU's brevity penalty is $\mathrm{BP} = \exp(1 - r/c)$ when the translations have
# $c$ words in all and the references $r > c$ (and 1 otherwise): check your BPs from your lengths, and work out
# how large each score would have been without its penalty. Which decoder found the better n-grams, and why
# does beam search write shorter translations than greedy decoding? What would a larger `length_penalty`
# change?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0, the first 200 test sentences) greedy scored BLEU 13.91
# (47.9/21.2/10.1/4.6, BP 0.945, 2,407 words for 2,544 in the references) and beams of 4 scored 14.68
# (53.2/24.4/12.2/5.6, BP 0.851, 2,191 words).
#
# $\exp(1 - 2544/2407) = 0.945$ and $\exp(1 - 2544/2191) = \exp(-0.161) = 0.851$, as printed. Without the
# penalty (BLEU / BP, the geometric mean of the precisions) greedy would have scored 14.7 and beam search
# 17.2: every precision is higher with the beam, a gain of about 2.5 points, of which the brevity penalty
# took back about 1.8; 0.8 remained.
#
# Beam search looks for hypotheses with a higher model score. Each token adds a negative log-probability, and
# the uncertain ones (the details: colours, objects, rare words) add the most negative terms. Hypotheses that
# end early are complete as soon as `EOS` is among the best extensions; they leave the beam as finished, and
# the search stops once `beam_size` are finished, before longer candidates complete. Even after dividing by
# the length ($\alpha = 1$), a short translation that leaves out the uncertain words often has the better mean
# log-probability. Greedy decoding never considers stopping unless `EOS` is the single best next token, so
# it writes on. Shorter output raises precision (fewer risky words) but BLEU has no recall term: the brevity
# penalty is its only check on length, and here it took back most of the gain. A larger `length_penalty`
# ($\alpha$ of 1.5 or 2) divides long hypotheses' scores by more, favouring longer translations, and would keep
# more of the precision gain (at the price of some precision).

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# How much beam search gains on a better-trained model we have not measured here; it depends on the model, the
# beam size and the length penalty.
#
# ## 9. What cross-attention looks at
#
# Every decoder block's cross-attention says, for each English word it wrote, how much each German word
# contributed. We record the weights of the last decoder block with a forward hook while the model
# re-reads its own translation (teacher forcing on its output), and draw one heatmap per head.

# %% tags=["otter_ignore"]
# Experiment (not graded): cross-attention of the last decoder block, one heatmap per head
sentence = pairs["test_2016_flickr"][1][0]
src = pad_rows([encode_ids(sentence, src_vocab)]).to(device)  # (1, S)
ys = greedy_decode(model.eval(), src, max_len=src.shape[1] + 10)  # (1, T)
captured = {}
hook = model.decoder[-1].cross_attn.register_forward_hook(
    lambda module, inputs, output: captured.update(weights=output[1]))  # (1, h, T, S)
with torch.no_grad():
    model(src, ys[:, :-1])
hook.remove()
src_labels = ["<bos>"] + [t if t in src_vocab else "<unk>" for t in tokenize(sentence)] + ["<eos>"]  # as the model saw it
written = [tgt_words[int(i)] for i in ys[0, 1:]]  # the word chosen at each position
attention_grid(captured["weights"][0], x_labels=src_labels, y_labels=written, ncols=2,
               suptitle="last decoder block: which German word each English word attended to")
plt.show()
print("translation:", detokenize(ys[0].tolist()))

# %% [markdown]
# Look for near-diagonal patterns (word order is similar in the two languages), for heads that attend to
# the German noun when the English noun is written (*Hund* for *dog*), and for heads that park their
# attention on `<eos>` or a punctuation mark when they have nothing useful to read. A small model trained
# briefly shows these patterns only faintly.
#
# ## 10. Experiment: what does label smoothing change?
#
# The same model trained for the same steps with $\varepsilon = 0$. We compare the **unsmoothed**
# validation cross-entropy (the number label smoothing makes worse on purpose), the average probability the
# model gives its own argmax word (its confidence), and BLEU on the validation set.

# %% tags=["otter_ignore"]
# Experiment (not graded): label smoothing 0.1 against none, the same model and steps
def unsmoothed_report(model):
    """(mean cross-entropy without smoothing, mean probability of the argmax) over the validation tokens."""
    model.eval()
    total, confidence, count = 0.0, 0.0, 0
    with torch.no_grad():
        for src, dec_in, labels in val_batches:
            src, dec_in, labels = src.to(device), dec_in.to(device), labels.to(device)
            logits = model(src, dec_in)  # (B, T, V)
            real = labels != PAD
            total += sequence_loss(logits, labels).item() * int(real.sum())
            confidence += logits.softmax(-1).amax(-1)[real].sum().item()
            count += int(real.sum())
    return total / count, confidence / count


plain_model, plain_history = train_translator(0.0, "no label smoothing")
VAL_LIMIT = sized(200, None)
print(f"{'':24} val cross-entropy   confidence   val BLEU ({VAL_LIMIT or 'all'} sentences)")
for name, candidate in (("label smoothing 0.1", model), ("no label smoothing", plain_model)):
    ce, conf = unsmoothed_report(candidate)
    score, _ = bleu_of(candidate, "val", limit=VAL_LIMIT)
    print(f"{name:24} {ce:17.3f} {conf:12.3f} {score.score:11.2f}")

# %% [markdown]
# What to look at: the three columns of the two rows, each against the other. The paper's own ablation
# (Vaswani et al. 2017, Table 3) credits label smoothing with 0.5 BLEU on its development set (25.8 with it,
# 25.3 without); we have not measured the gain at this lab's sizes.

# %% [raw]
# # BEGIN QUESTION
# name: label_smoothing_effect
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own two rows: cross-entropy, confidence and BLEU with and without smoothing (2.938,
#       0.439, 13.83 against 2.886, 0.472, 14.25 in the reference run)"
#     points: 0.5
#   - criterion: "Shows that the expected smoothed loss is smallest when p equals the smoothed target (1 - eps)
#       one-hot + eps / V, so the model is never pushed towards probability 1 on the right word (at most 1 - eps + eps
#       / V)"
#     points: 1
#   - criterion: "Explains the two other columns: the unsmoothed cross-entropy -log p_y gets worse as mass moves off
#       the right word, while BLEU looks only at the argmax words, whose order smoothing need not change"
#     points: 1
#   - criterion: "Notes that a BLEU difference of a few tenths on 200 sentences from one run of one seed cannot be
#       told from noise"
#     points: 0.5
#   - criterion: "Claims that label smoothing lowers the (unsmoothed) validation cross-entropy or makes the model more
#       confident"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Quote your two rows. With the per-token loss of section 4, show which
# distribution $p$ minimises the *expected* smoothed loss when the true word is $y$, and use it to explain the
# confidence column. Why is the unsmoothed cross-entropy of the smoothed model no better (and often a little
# worse), while BLEU is about the same? How much does your BLEU difference say?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, 160 steps each) smoothing 0.1 gave unsmoothed cross-entropy 2.938,
# confidence 0.439 and BLEU 13.83 on 200 validation sentences; no smoothing gave 2.886, 0.472 and 14.25.
#
# The smoothed loss is the cross-entropy against the target $t = (1 - \varepsilon)\,\mathrm{onehot}(y) +
# \varepsilon/V$: $\ell = -\sum_v t_v \log p_v$. By Gibbs' inequality, $-\sum_v t_v \log p_v \ge -\sum_v t_v \log t_v$
# with equality only at $p = t$, so the best the model can do is to put $1 - \varepsilon + \varepsilon/V \approx 0.9$
# on the right word and $\varepsilon/V$ on every other. Without smoothing the optimum is $p_y \to 1$, and the
# logits are pushed apart without end. With smoothing every step also pulls the other words' probabilities up,
# so the model is less sure of its argmax: 0.439 against 0.472 (both far below 0.9 after 160 steps, but the
# pull is there from the first step).
#
# The unsmoothed cross-entropy $-\log p_y$ measures exactly the mass on the right word, which smoothing
# lowers on purpose: 2.938 against 2.886. BLEU looks only at the words decoding picks, the argmax of $p$, and
# the argmax of $t$ is still $y$: smoothing changes how sure the model is, not (much) which word it
# prefers, so BLEU stays about the same. The difference of 0.4 BLEU on 200 sentences from one run of one
# seed is well within what another seed or another 200 sentences would change; it cannot say which is better.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### Going further (not graded)
#
# - Make `greedy_decode` faster: the decoder recomputes every earlier position at each step. Cache each
#   block's keys and values (a *KV cache*, as Lab 09 builds for its GPT) so that a step only processes the new
#   token.
# - Beam search: the experiment above used beams of 4. How does BLEU change with `beam_size` 2 or 8, and with
#   the length penalty?
# - Share the target embedding with the generator (`generator.weight = tgt_emb.weight`, as the paper does):
#   fewer parameters, and often a slightly better BLEU.
# - Try pre-norm blocks (`norm_first=True`) with a final `nn.LayerNorm` after each stack, and a larger
#   learning rate without warm-up.
