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
# # Lab 10: Pretrained Transformers
#
# Labs 07 to 09 built encoders and a GPT and trained them from scratch on one task. Since
# [BERT (Devlin et al., 2019)](https://arxiv.org/abs/1810.04805) and
# [GPT-2 (Radford et al., 2019)](https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf)
# models are first **pretrained** on plain text, where the labels come for free, and then **fine-tuned** on
# the task with few labels, or used as they are. This lab does both halves:
#
# 1. `mask_tokens`: BERT's masked-language-model corruption (15% of the tokens, 80/10/10).
# 2. `mlm_loss`: the cross-entropy over the masked positions only.
# 3. `BertEncoder`: embeddings, Lab 07's encoder blocks, pads masked out of attention.
# 4. `SequenceClassifier`: a linear head on the `[CLS]` position.
# 5. Experiment: pretrain on 20,000 unlabelled sentences, fine-tune with 8 to 128 labels, and compare with the
#    same model trained from scratch.
# 6. `load_gpt2_weights`: the Hugging Face GPT-2 checkpoint in Lab 09's GPT, logits equal to `transformers`'.
#    Where the weights can be downloaded (Colab, CPU or GPU), the real GPT-2 (124M parameters) writes text;
#    offline the notebook says so in one line and goes on.
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
# - The lab **gives** you Lab 07's `MultiHeadAttention`, `FeedForward` and `TransformerEncoderBlock`, and Lab
#   09's `CausalSelfAttention`, `GPTBlock`, `MiniGPT`, `sample_next` and `generate` (section 0). Use them as they are.
# - `transformers` is not needed and not used by your code (the demos use it where it is installed).
# - Name the attributes exactly as asked (`tok_emb`, `pos_emb`, `blocks`, `norm`, `head`): the grader loads
#   weights by these names.
# - Token ids of the lab's vocabulary: `<pad>` = 0, `[CLS]` = 1, `[SEP]` = 2, `<unk>` = 3, `[MASK]` = 4; the
#   ids `0 .. mask_id` are the **special** ids, the ordinary tokens are `mask_id + 1 .. vocab_size - 1`.
#   Every sequence starts with `[CLS]` and is right-padded with `<pad>`.
# - Your code must work in float32 and float64 on whatever device the inputs are on, must not change its
#   inputs in place, and must keep the autograd graph.
#
# **Shape legend**: `B` batch, `L` sequence length, `d` (or `d_model`) the model width, `V` the vocabulary
# size, `C` the number of classes.
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The grade
# comes from hidden tests that call your code on random inputs and compare it with a reference, with
# PyTorch's `nn.TransformerEncoderLayer` on the same weights, with a GPT-2 forward pass written from the
# checkpoint's own tensors, and (for the masking) with the frequencies BERT's rule gives. Cells whose first
# line says *Experiment* or *Demo* are not run by the grader: do not define anything graded in them.
#
# **Sizes.** On a CPU the experiments use a tiny model and the whole notebook runs in about two minutes; on
# a GPU they use a larger one. `sized(fast, full)` picks between the two; `ATTNLAB_FAST=1` or `0` forces either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 10.
import copy
import math
import time

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F

from attnlab.kit.datasets.download import DatasetUnavailable
from attnlab.kit.datasets.gpt2 import load_gpt2_state_dict, load_gpt2_tokenizer
from attnlab.kit.device import sized
from attnlab.kit.plotting import line_plot
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import evaluate, fit

# %% [markdown]
# ## 0. Given: the encoder of Lab 07 and the GPT of Lab 09
#
# `TransformerEncoderBlock(d_model, num_heads, d_ff, dropout=0.0, norm_first=False)` has
# `forward(x, mask=None)` with a boolean mask, **True where attention is allowed**, broadcasting to
# `(B, h, L, L)`: `(B, 1, 1, L)` masks keys (pads). It is post-norm by default (as in BERT) and equals
# `nn.TransformerEncoderLayer(..., batch_first=True)` with the same weights.
#
# `MiniGPT(vocab_size, block_size, d_model, num_heads, num_layers)` is Lab 09's GPT: `tok_emb`, `pos_emb`,
# `blocks` of `GPTBlock`s (`ln1`, `attn.qkv`, `attn.proj`, `ln2`, `mlp[0]`, `mlp[2]`), `ln_f` and `lm_head`
# tied to `tok_emb`; `forward(idx) -> (logits, loss)` and `generate(idx, max_new_tokens, ...)`.

# %%
# GIVEN from lab07_transformer_block: scaled_dot_product_attention, split_heads, merge_heads, MultiHeadAttention


# %%
# GIVEN from lab07_transformer_block: FeedForward, TransformerEncoderBlock


# %%
# GIVEN from lab09_mini_gpt: CausalSelfAttention, GPTBlock, MiniGPT, sample_next, generate


# %% [markdown]
# ## 1. Masked-language-model corruption
#
# A masked language model learns by filling in blanks: some tokens of a sentence are hidden and the model
# predicts them from **both** sides (an encoder sees the whole sentence, unlike a GPT). BERT's rule:
#
# 1. **select** each ordinary position independently with probability `p` (0.15); special ids (`<pad>`,
#    `[CLS]`, ..., `[MASK]`: every id `<= mask_id`) are never selected;
# 2. of the selected positions, **80%** become `[MASK]`, **10%** a random ordinary token (uniform over
#    `mask_id + 1 .. vocab_size - 1`, so it may happen to be the original), and **10%** stay as they are;
# 3. `labels` holds the original id at every selected position and **-100** elsewhere (the value
#    `F.cross_entropy` ignores by default).
#
# Why not always `[MASK]`? `[MASK]` never occurs when the model is used; the random and kept tokens make it
# build a good representation of *every* token, since any of them might be a blank.
#
# Worked example with `mask_id = 4`: `ids = [1, 9, 7, 12, 0, 0]` (`[CLS]`, three words, two pads). Only
# positions 1, 2, 3 can be selected. If 1 and 3 are selected, 1 turned into `[MASK]` and 3 kept:
#
# ```
#   inputs = [1, 4, 7, 12, 0, 0]
#   labels = [-100, 9, -100, 12, -100, -100]
# ```
#
# Draw every random number with `generator=generator` (`torch.rand`, `torch.randint`, `torch.bernoulli`
# all take it) so that a seeded generator gives the same corruption; return new tensors (do not change `ids`).

# %% [raw]
# # BEGIN QUESTION
# name: mask_tokens
# points: 6

# %%
def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    """BERT's corruption: select ordinary positions with probability p; of them 80% [MASK], 10% random, 10% kept.

    Shapes:
        ids:     (B, L) long; ids 0 .. mask_id are special (never selected)
        returns: inputs (B, L) long, labels (B, L) long (the original id where selected, -100 elsewhere)
    """
    # BEGIN SOLUTION
    ordinary = ids > mask_id  # (B, L)
    draws = torch.rand(ids.shape, generator=generator, device=ids.device)  # (B, L)
    selected = ordinary & (draws < p)
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    kind = torch.rand(ids.shape, generator=generator, device=ids.device)  # (B, L): < 0.8 mask, < 0.9 random
    random_ids = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator, device=ids.device)
    inputs = torch.where(selected & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    return inputs, labels
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Specials are never selected; labels match the originals
from attnlab.kit.expect import expect_equal

ids = torch.tensor([[1, 9, 7, 12, 0, 0], [1, 5, 6, 7, 8, 2]])
inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=13, p=1.0, generator=torch.Generator().manual_seed(0))
assert inputs.shape == ids.shape and labels.shape == ids.shape, "inputs and labels should have the shape of ids"
assert inputs.dtype == torch.long and labels.dtype == torch.long, "inputs and labels should be long tensors"
expect_equal(labels, [[-100, 9, 7, 12, -100, -100], [-100, 5, 6, 7, 8, -100]],
             "labels with p=1 (every ordinary position selected)")
expect_equal(inputs[labels == -100], ids[labels == -100], "the inputs at positions that are not selected")
assert torch.equal(ids, torch.tensor([[1, 9, 7, 12, 0, 0], [1, 5, 6, 7, 8, 2]])), "mask_tokens changed ids in place"

# %%
# About 15% selected; of them 80% [MASK], 10% random, 10% kept
from attnlab.kit.expect import expect_close

ids = torch.randint(5, 105, (400, 50), generator=torch.Generator().manual_seed(1))
inputs, labels = mask_tokens(ids, mask_id=4, vocab_size=105, generator=torch.Generator().manual_seed(2))
selected = labels != -100
masked = (inputs == 4) & selected
kept = (inputs == ids) & selected
shares = torch.stack([selected.float().mean(), masked.sum() / selected.sum(), kept.sum() / selected.sum()])
expect_close(shares, [0.15, 0.8, 0.101], "shares: selected, [MASK] among them, unchanged among them", atol=0.015)
assert (inputs[selected & ~masked & ~kept] > 4).all(), "a random replacement should be an ordinary token (> mask_id)"

# %%
# The same generator seed gives the same corruption
ids = torch.randint(5, 30, (4, 20))
a = mask_tokens(ids, 4, 30, generator=torch.Generator().manual_seed(3))
b = mask_tokens(ids, 4, 30, generator=torch.Generator().manual_seed(3))
assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), "pass generator to every random draw"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 2. The masked-LM loss
#
# The model predicts a token at every position, but only the selected ones count: the loss is the mean
# cross-entropy over the positions whose label is not -100. With logits `(B, L, V)` flattened to `(B * L, V)`
# and labels to `(B * L,)`, `F.cross_entropy(..., ignore_index=-100)` does exactly this (and -100 is its
# default). Worked example: two selected positions whose correct tokens get probabilities 0.5 and 0.25 cost
# $(\ln 2 + \ln 4) / 2 = 1.040$, whatever the other positions predict.

# %% [raw]
# # BEGIN QUESTION
# name: mlm_loss
# points: 3

# %%
def mlm_loss(logits, labels):
    """Mean cross-entropy over the positions whose label is not -100.

    Shapes:
        logits:  (B, L, V)
        labels:  (B, L) long, -100 where nothing is predicted
        returns: scalar
    """
    # BEGIN SOLUTION
    B, L, V = logits.shape
    return F.cross_entropy(logits.reshape(B * L, V), labels.reshape(B * L), ignore_index=-100)  # (B*L, V), (B*L,)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Worked example: probabilities 0.5 and 0.25 cost 1.040
from attnlab.kit.expect import expect_close

logits = torch.full((1, 3, 4), -1e4)
logits[0, 0, :2] = 0.0  # position 0: tokens 0 and 1 at probability 0.5 each
logits[0, 1] = 0.0  # position 1: uniform, 0.25 each
labels = torch.tensor([[1, 3, -100]])
expect_close(mlm_loss(logits, labels), (math.log(2) + math.log(4)) / 2, "mlm_loss of the worked example")

# %%
# Positions labelled -100 do not count
from attnlab.kit.expect import expect_close

logits = torch.randn(2, 5, 7)
labels = torch.tensor([[3, -100, -100, 1, -100], [-100, 6, -100, -100, -100]])
changed = logits.clone()
changed[labels == -100] = 100 * torch.randn(7)
expect_close(mlm_loss(changed, labels), mlm_loss(logits, labels), "the loss after changing ignored positions")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 3. A BERT-like encoder
#
# Our encoder is BERT-like, not BERT: it keeps BERT's masked-LM objective and its `[CLS]` head, but has no
# segment embeddings and no next-sentence prediction, a ReLU feed-forward (BERT's is GELU), an MLM head that is
# not tied to the token embedding, and `[CLS]` (a special token) is never masked. It is the encoder of Lab 07,
# with learned positions and a layer norm on the embeddings:
#
# ```
#   ids:  (B, L) token ids, right-padded with <pad> = 0
#   x = norm(tok_emb(ids) + pos_emb(arange(L)))   (B, L, d)   then dropout
#   x = block(x, mask) for each block             (B, L, d)   mask (B, 1, 1, L): True at real tokens (keys)
#   returns x                                     (B, L, d)
# ```
#
# Pads must not change what real tokens see: the mask hides them as **keys**. The outputs *at* pad positions
# are computed like any other and never used.
#
# Implement `BertEncoder(vocab_size, max_len, d_model, num_heads, num_layers, d_ff, dropout=0.0)` with the
# attributes `tok_emb` (`nn.Embedding(V, d)`), `pos_emb` (`nn.Embedding(max_len, d)`), `blocks` (an
# `nn.ModuleList` of `num_layers` given `TransformerEncoderBlock(d, num_heads, d_ff, dropout)`, post-norm),
# `norm` (`nn.LayerNorm(d)`) and `forward(ids) -> (B, L, d)`. A sequence longer than `max_len` raises a
# `ValueError` naming both lengths. The pad id is 0 (keep it as the attribute `pad_id = 0`).

# %% [raw]
# # BEGIN QUESTION
# name: BertEncoder
# points: 8

# %%
class BertEncoder(nn.Module):
    """Token and learned position embeddings, a LayerNorm, post-norm encoder blocks; pads masked as keys.

    Attributes: pad_id (0), tok_emb (nn.Embedding(V, d)), pos_emb (nn.Embedding(max_len, d)),
    blocks (nn.ModuleList of TransformerEncoderBlock), norm (nn.LayerNorm(d), on the embeddings)
    """

    def __init__(self, vocab_size, max_len, d_model, num_heads, num_layers, d_ff, dropout=0.0):
        super().__init__()
        self.pad_id = 0
        self.max_len = max_len
        # create tok_emb, pos_emb, norm, an nn.Dropout(dropout) for the embeddings, and blocks
        # BEGIN SOLUTION
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))
        # END SOLUTION

    def forward(self, ids):
        """ids: (B, L) long -> (B, L, d)."""
        # BEGIN SOLUTION
        B, L = ids.shape
        if L > self.max_len:
            raise ValueError(f"the sequence has L={L} tokens, more than max_len={self.max_len}")
        positions = torch.arange(L, device=ids.device)  # (L,)
        x = self.drop(self.norm(self.tok_emb(ids) + self.pos_emb(positions)))  # (B, L, d)
        mask = (ids != self.pad_id)[:, None, None, :]  # (B, 1, 1, L): True at real keys
        for block in self.blocks:
            x = block(x, mask=mask)  # (B, L, d)
        return x
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Attributes and shapes
encoder = BertEncoder(vocab_size=20, max_len=8, d_model=16, num_heads=4, num_layers=2, d_ff=32)
assert tuple(encoder.tok_emb.weight.shape) == (20, 16), "tok_emb should be nn.Embedding(vocab_size, d_model)"
assert tuple(encoder.pos_emb.weight.shape) == (8, 16), "pos_emb should be nn.Embedding(max_len, d_model)"
assert isinstance(encoder.norm, nn.LayerNorm), "norm should be nn.LayerNorm(d_model)"
assert len(encoder.blocks) == 2 and isinstance(encoder.blocks[0], TransformerEncoderBlock), (
    "blocks should hold num_layers given TransformerEncoderBlocks")
out = encoder(torch.randint(1, 20, (3, 6)))
assert out.shape == (3, 6, 16), f"the output should be (B, L, d) = (3, 6, 16), got {tuple(out.shape)}"

# %%
# Extra padding changes no output at a real token
from attnlab.kit.expect import expect_close

encoder = BertEncoder(vocab_size=20, max_len=8, d_model=16, num_heads=4, num_layers=2, d_ff=32).eval()
ids = torch.tensor([[1, 7, 9, 11, 0], [1, 5, 0, 0, 0]])
longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)  # three more pads
expect_close(encoder(longer)[0, :4], encoder(ids)[0, :4], "row 0's real tokens with three more pads", atol=1e-5)
expect_close(encoder(longer)[1, :2], encoder(ids)[1, :2], "row 1's real tokens with three more pads", atol=1e-5)

# %%
# A sequence longer than max_len is an error
encoder = BertEncoder(vocab_size=20, max_len=8, d_model=16, num_heads=4, num_layers=1, d_ff=32)
try:
    encoder(torch.ones(1, 9, dtype=torch.long))
except ValueError as exc:
    assert "9" in str(exc) and "8" in str(exc), f"the message should name L=9 and max_len=8, got {exc}"
else:
    raise AssertionError("a sequence of 9 tokens with max_len=8 should raise ValueError")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. A classifier on `[CLS]`
#
# Every sequence starts with `[CLS]`. Self-attention lets that position gather what the whole sentence
# says, so BERT classifies from its output alone: `logits = head(encoder(ids)[:, 0])`, with
# `head = nn.Linear(d, C)`. Fine-tuning trains the head **and** the encoder.
#
# Implement `SequenceClassifier(encoder, num_classes)`: keep `encoder` as an attribute, read `d` from
# `encoder.tok_emb.embedding_dim`, and `forward(ids) -> (B, C)` logits.

# %% [raw]
# # BEGIN QUESTION
# name: SequenceClassifier
# points: 4

# %%
class SequenceClassifier(nn.Module):
    """A linear head on the encoder's output at position 0 ([CLS]).

    Attributes: encoder, head (nn.Linear(d_model, num_classes))
    """

    def __init__(self, encoder, num_classes):
        super().__init__()
        # BEGIN SOLUTION
        self.encoder = encoder
        self.head = nn.Linear(encoder.tok_emb.embedding_dim, num_classes)
        # END SOLUTION

    def forward(self, ids):
        """ids: (B, L) -> logits (B, C)."""
        # BEGIN SOLUTION
        return self.head(self.encoder(ids)[:, 0])  # (B, L, d) -> (B, d) -> (B, C)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# The logits come from position 0 only
from attnlab.kit.expect import expect_close

encoder = BertEncoder(vocab_size=20, max_len=8, d_model=16, num_heads=4, num_layers=1, d_ff=32).eval()
model = SequenceClassifier(encoder, num_classes=3).eval()
assert tuple(model.head.weight.shape) == (3, 16), "head should be nn.Linear(d_model, num_classes)"
ids = torch.randint(5, 20, (4, 6))
ids[:, 0] = 1
logits = model(ids)
assert logits.shape == (4, 3), f"the logits should be (B, C) = (4, 3), got {tuple(logits.shape)}"
expect_close(logits, model.head(encoder(ids)[:, 0]),
             "the logits (the head on the encoder's output at position 0, the [CLS] token)", atol=1e-6)

# %%
# Fine-tuning reaches the encoder: it gets gradients
encoder = BertEncoder(vocab_size=20, max_len=8, d_model=16, num_heads=4, num_layers=1, d_ff=32)
model = SequenceClassifier(encoder, num_classes=2)
model(torch.randint(1, 20, (2, 5))).sum().backward()
assert encoder.tok_emb.weight.grad is not None, "the encoder's parameters should be part of the model"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 5. Experiment: pretraining, then fine-tuning with few labels
#
# We pretend labels are expensive. The text: short sentences about one of four topics (food, sport, music,
# weather), each word drawn from its topic's 25 words or from 16 common words (`the`, `of`, `and`, ...):
# `[CLS] the thunder of a gale and the rain`. The task: which topic? A masked LM is first **pretrained** on
# 20,000 unlabelled sentences; a `SequenceClassifier` is then **fine-tuned** on 8, 32 or 128 labelled
# sentences (two to 32 per topic), from a copy of the pretrained encoder or from a fresh random one (same
# steps, same seeds).

# %% tags=["otter_ignore"]
# Experiment (not graded): the four-topic corpus in the lab's vocabulary ([CLS] first, ids 0..4 special)
if device.type == "cpu":
    # These models are tiny: on a CPU, one thread is as fast as several (and much faster when other
    # programs share the cores), since coordinating threads costs more than the little work they split.
    torch.set_num_threads(1)
PAD, CLS, SEP, UNK, MASK = 0, 1, 2, 3, 4
TOPICS = {
    "food": "bread cheese soup pasta rice salad apple butter honey pepper garlic onion lemon cream sugar flour bean "
            "carrot potato tomato olive noodle cookie yogurt spinach",
    "sport": "goal match team coach striker keeper referee stadium league season ball racket court sprint medal "
             "trophy tackle penalty derby relay hurdle boxing rugby tennis cricket",
    "music": "guitar piano violin drum chorus melody rhythm song album concert singer band tempo chord lyric opera "
             "jazz bass flute harp organ tune verse stage encore",
    "weather": "rain snow wind storm cloud fog thunder sunshine frost hail breeze drizzle heat cold humid forecast "
               "gale shower sleet mist lightning drought flood monsoon rainbow",
}
COMMON = "the a of and to in is was it on with for at by from this".split()
itos = ["<pad>", "[CLS]", "[SEP]", "<unk>", "[MASK]"] + [w for words in TOPICS.values() for w in words.split()] + COMMON
vocab = {w: i for i, w in enumerate(itos)}
V, K, W, MAX_LEN = len(itos), len(TOPICS), 25, 12  # W topic words each; [CLS] + 5 to 10 words


def topic_corpus(n, generator):
    """n sentences (n, MAX_LEN) long, right-padded, and their topics (n,): each word from the topic or COMMON."""
    topics = torch.randint(K, (n,), generator=generator)
    topic_words = MASK + 1 + topics[:, None] * W + torch.randint(W, (n, MAX_LEN), generator=generator)
    common = MASK + 1 + K * W + torch.randint(len(COMMON), (n, MAX_LEN), generator=generator)
    ids = torch.where(torch.rand(n, MAX_LEN, generator=generator) < 0.5, topic_words, common)
    ids[:, 0] = CLS
    lengths = torch.randint(6, MAX_LEN, (n,), generator=generator)  # [CLS] + 5 .. 10 words
    return ids.masked_fill(torch.arange(MAX_LEN)[None, :] >= lengths[:, None], PAD), topics


g = torch.Generator().manual_seed(0)
pretrain_ids, _ = topic_corpus(20_000, g)  # unlabelled
labelled_ids, labelled_topics = topic_corpus(4_000, g)  # the pool the few labels come from
test_ids, test_topics = topic_corpus(2_000, g)
print(f"vocabulary: {V} ids; {len(pretrain_ids):,} unlabelled sentences, {len(test_ids):,} test sentences")
for row in range(3):
    print(list(TOPICS)[int(labelled_topics[row])].ljust(8), " ".join(itos[int(i)] for i in labelled_ids[row] if i != PAD))
demo_inputs, demo_labels = mask_tokens(labelled_ids[:2], MASK, V, generator=torch.Generator().manual_seed(0))
for row in range(2):
    print("masked:", " ".join(itos[int(i)] for i in demo_inputs[row] if i != PAD), "  <- labels:",
          [itos[int(i)] for i in demo_labels[row] if i != -100])

# %% [markdown]
# The pretraining model is the encoder with a linear layer to the vocabulary. Every batch is masked anew
# (RoBERTa's *dynamic masking*), with your `mask_tokens`, and the loss is your `mlm_loss`.

# %% tags=["otter_ignore"]
# Experiment (not graded): masked-LM pretraining
class MaskedLM(nn.Module):
    """The encoder and a linear layer to the vocabulary; forward(inputs, labels) -> (logits, mlm_loss)."""

    def __init__(self, encoder, vocab_size):
        super().__init__()
        self.encoder, self.lm_head = encoder, nn.Linear(encoder.tok_emb.embedding_dim, vocab_size)

    def forward(self, inputs, labels):
        logits = self.lm_head(self.encoder(inputs))  # (B, L, V)
        return logits, mlm_loss(logits, labels)


class MaskedBatches:
    """`steps` random batches (inputs, labels, labels), masked anew each time; re-iterable."""

    def __init__(self, ids, batch_size, steps, seed):
        self.ids, self.batch_size, self.steps = ids, batch_size, steps
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.steps

    def __iter__(self):
        for _ in range(self.steps):
            rows = torch.randint(len(self.ids), (self.batch_size,), generator=self.generator)
            inputs, labels = mask_tokens(self.ids[rows], MASK, V, generator=self.generator)
            yield inputs, labels, labels


CONFIG = sized(dict(d_model=32, num_heads=4, num_layers=2, d_ff=64),
               dict(d_model=128, num_heads=4, num_layers=4, d_ff=512))
PRETRAIN_STEPS = sized(400, 4000)
seed_everything(0)
pretrained = BertEncoder(V, MAX_LEN, **CONFIG)
mlm = MaskedLM(pretrained, V)
optimizer = torch.optim.AdamW(mlm.parameters(), lr=3e-3)
mlm_history = fit(mlm, MaskedBatches(pretrain_ids, 32, PRETRAIN_STEPS // 4, seed=1), epochs=4, optimizer=optimizer,
                  metric=None, pad_id=None, device=device, live_plot=False, desc="masked LM")
print(f"{PRETRAIN_STEPS} steps in {mlm_history.seconds:.0f} s; masked-LM loss {mlm_history.train_loss[0]:.2f} "
      f"-> {mlm_history.train_loss[-1]:.2f} (uniform guessing: ln {V} = {math.log(V):.2f})")

# %% [markdown]
# What did it learn? Fill in a blank: how much probability the model puts on each topic's 25 words at a
# `[MASK]` (the rest goes to the common words). The sentence's other words tell the topic, though no label
# was ever seen. The written question after the demo asks how far the model is from the best possible.

# %% tags=["otter_ignore"]
# Demo (not graded): the pretrained model fills in blanks with words of the right topic
mlm.eval()
for text in ("[CLS] the soup and [MASK] with garlic", "[CLS] the [MASK] of the striker in the stadium",
             "[CLS] a [MASK] and thunder in the fog"):
    ids = torch.tensor([[vocab[w] for w in text.split()]], device=device)  # (1, L)
    with torch.no_grad():
        probs = mlm.lm_head(pretrained(ids))[0].softmax(-1)  # (L, V)
    at_blank = probs[int((ids[0] == MASK).nonzero()[0])]  # (V,)
    per_topic = at_blank[MASK + 1: MASK + 1 + K * W].reshape(K, W).sum(-1)  # (K,): the mass on each topic's words
    print(f"{text!r:50} -> " + ", ".join(f"{name} {p:.2f}" for name, p in zip(TOPICS, per_topic)))

# %% [raw]
# # BEGIN QUESTION
# name: mlm_loss_floor
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own masked-LM loss at the start and the end of pretraining against ln V (4.48 and 4.23
#       against ln 121 = 4.80 in the reference run) and the topic masses of the three blanks"
#     points: 0.5
#   - criterion: "Derives the loss of the best model that ignores the context: common words 1/32 each, topic words
#       1/200 each, 0.5 ln 32 + 0.5 ln 200 = 4.38"
#     points: 1
#   - criterion: "Derives the loss of a model that knows the sentence's topic: 1/32 and 1/50, 0.5 ln 32 + 0.5 ln 50 =
#       3.69, and that it would put 0.5 on the topic's words at a blank"
#     points: 1
#   - criterion: "Concludes from the own numbers: below 4.38, so the model uses the context, far above 3.69, so it
#       knows the topic only in part, as the masses at the blanks (well below 0.5) show"
#     points: 0.5
#   - criterion: "Takes ln V as the lowest loss reachable or compares the loss with 0"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Quote your masked-LM loss at the start and at the end of pretraining, and
# the topic masses of your three blanks. In this corpus each word of a sentence is, with probability 1/2, one
# of the 16 common words (uniformly) and otherwise one of its topic's 25 words (uniformly); the four topics are
# equally likely. Derive the expected loss at a `[MASK]` of (a) the best model that ignores the rest of the
# sentence and (b) a model that knows the sentence's topic for sure, and how much probability (b) puts on the
# topic's words. Where does your model stand between the two, and what does that say about what it learned?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0, 400 steps) the masked-LM loss went from 4.48 (mean of the first
# quarter) to 4.23 (the last), against $\ln 121 = 4.80$ for uniform guessing. At the blanks the soup sentence put
# 0.31 on food words, the fog sentence 0.19 on weather words, and the stadium sentence 0.10 on sport words (food
# 0.13).
#
# **(a) Without context** the best prediction is the marginal distribution of a word: each common word
# $\frac{1}{2} \cdot \frac{1}{16} = \frac{1}{32}$, each of the 100 topic words
# $\frac{1}{2} \cdot \frac{1}{4} \cdot \frac{1}{25} = \frac{1}{200}$. The expected cross-entropy is
# $\frac{1}{2}\ln 32 + \frac{1}{2}\ln 200 = 1.73 + 2.65 = 4.38$.
#
# **(b) Knowing the topic**, each common word still has $\frac{1}{32}$ and each of the topic's 25 words $\frac{1}{50}$:
# $\frac{1}{2}\ln 32 + \frac{1}{2}\ln 50 = 1.73 + 1.96 = 3.69$. It puts $25 \cdot \frac{1}{50} = 0.5$ on the topic's words
# at a blank (and 0.5 on the common words); no model can do better on average, since the word itself is random
# given the topic.
#
# The final 4.23 is below 4.38: the model uses the other words of the sentence, which it could only have learned
# from which words occur together (no label was seen). It is still far above 3.69: after 400 steps it knows the
# topic only in part, as the blanks show (0.31 on food for the soup sentence, where a sure model would put
# 0.5; the stadium sentence undecided). (The training loss also counts the 10% of selected positions kept as
# they are and the 10% replaced at random, so the comparison is approximate.) Longer pretraining moves it
# towards 3.69.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# Now fine-tuning. For each label budget and each seed, a random subset of the labelled pool (the same number
# per topic) trains a `SequenceClassifier` for the same number of steps, starting either from a copy of the
# pretrained encoder or from a fresh random one; accuracy is measured on the 2,000 test sentences (guessing: 0.25).

# %% tags=["otter_ignore"]
# Experiment (not graded): fine-tuning with few labels, pretrained against from scratch
BUDGETS = [8, 32, 128]
SEEDS = sized(3, 5)
FINETUNE_STEPS = sized(60, 200)


def finetune(encoder, budget, seed):
    """Test accuracy of a SequenceClassifier on `encoder`, trained on `budget` labelled sentences."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.cat([(labelled_topics == c).nonzero()[:, 0][torch.randperm(int((labelled_topics == c).sum()),
                                                                            generator=g)][: budget // K]
                      for c in range(K)])
    seed_everything(seed)
    model = SequenceClassifier(encoder, num_classes=K).to(device)
    order = torch.randint(len(rows), (FINETUNE_STEPS, min(budget, 16)), generator=g)
    loader = [(labelled_ids[rows[o]], labelled_topics[rows[o]]) for o in order]
    fit(model, loader, epochs=1, lr=1e-3, device=device, progress=False, live_plot=False, task="classification")
    _, accuracy = evaluate(model, [(test_ids, test_topics)], device=device, task="classification")
    return accuracy


start = time.perf_counter()
results = {"pretrained": {}, "from scratch": {}}
for budget in BUDGETS:
    for seed in range(SEEDS):
        results["pretrained"].setdefault(budget, []).append(finetune(copy.deepcopy(pretrained), budget, seed))
        seed_everything(100 + seed)
        scratch = BertEncoder(V, MAX_LEN, **CONFIG)
        results["from scratch"].setdefault(budget, []).append(finetune(scratch, budget, seed))
    print(f"{budget:4d} labels: pretrained {sum(results['pretrained'][budget]) / SEEDS:.3f}, from scratch "
          f"{sum(results['from scratch'][budget]) / SEEDS:.3f} (mean of {SEEDS} seeds; guessing 0.25)")
print(f"fine-tuning: {time.perf_counter() - start:.0f} s")
line_plot(torch.tensor(BUDGETS), {name: [sum(r[b]) / SEEDS for b in BUDGETS] for name, r in results.items()},
          xlabel="labelled sentences", ylabel="test accuracy", title="fine-tuning with few labels")
plt.xscale("log")
plt.show()

# %% [markdown]
# What to look at: the two accuracies at each budget, against guessing (0.25), and how the gap between them
# changes from 8 to 128 labels.

# %% [raw]
# # BEGIN QUESTION
# name: pretraining_few_labels
# manual: true
# points: 3
# rubric:
#   - criterion: "Quotes the own accuracies of both models at the three budgets (0.736/0.323, 0.854/0.431, 0.895/0.529
#       in the reference run, mean of 3 seeds)"
#     points: 0.5
#   - criterion: "Explains why the model from scratch stays near guessing with 8 labels: it learns a topic only for
#       the few topic words in its labelled sentences, and the test sentences are mostly made of other words"
#     points: 1
#   - criterion: "Explains what pretraining gave: filling blanks made words that occur together (one topic's words)
#       get similar representations, so a label on a few words carries over to all the words of the topic"
#     points: 1
#   - criterion: "Explains why the gap shrinks with more labels: more labelled sentences show the model from scratch
#       more of the 100 topic words"
#     points: 0.5
#   - criterion: "Credits the gain to the pretrained model being larger or trained longer on the labels (both models
#       have the same size and fine-tuning steps)"
#     points: -0.5

# %% [markdown]
# **Written question (3 points).** Quote your accuracies of both models at the three budgets. Why does the model
# from scratch stay near guessing with 8 labelled sentences, what did pretraining on unlabelled text give the
# other model that makes up for the missing labels, and why does the gap shrink as the labels grow?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, mean of 3 seeds) the pretrained model scored 0.736, 0.854 and 0.895 with
# 8, 32 and 128 labels; the model from scratch 0.323, 0.431 and 0.529 (guessing: 0.25).
#
# A sentence's topic is told by its topic words, 25 per topic, 100 in all. With 8 labelled sentences (two per
# topic, 5 to 10 words each, half of them topic words) the model from scratch sees each topic's label next to
# about 7 of the topic's 25 words at best; it can learn that those words mean their topic, but it has no way to
# know anything about the others, and the test sentences are mostly made of words it never saw with a label:
# near guessing.
#
# Pretraining asked the encoder to fill blanks. A blank in a sentence about rain is best filled with a weather
# word, so the encoder learned, from 20,000 sentences and no label, which words occur together: the words of one
# topic get similar representations (and the `[CLS]` position sees them all). Fine-tuning then only has to
# attach a label to each of four groups that already exist, and a few labelled words per topic are enough for
# the whole group.
#
# With more labels the model from scratch sees more of the topic words with their labels (at 128 sentences, most
# of the 25 words per topic), so it catches up, and the gap shrinks from 0.41 to 0.37; pretraining matters most
# where labels are fewest, which is the point of pretraining.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 6. Loading GPT-2
#
# Lab 09's `MiniGPT` is GPT-2's architecture. Two details already match: the layer norms use `eps=1e-5`
# (`nn.LayerNorm`'s default) and every linear layer but the output one has a bias. One differs: GPT-2's
# feed-forward GELU is the **tanh approximation** (`nn.GELU(approximate="tanh")`, OpenAI's original code).
# The given `GPT2` below is `MiniGPT` with the tanh GELU.

# %%
class GPT2(MiniGPT):
    """Given: Lab 09's MiniGPT with GPT-2's details (tanh GELU; LayerNorm eps 1e-5; biases; no dropout).

    Defaults are GPT-2 small (124M parameters): 50,257 tokens, 1,024 positions, 768 dims, 12 heads, 12 layers.
    """

    def __init__(self, vocab_size=50257, block_size=1024, d_model=768, num_heads=12, num_layers=12):
        super().__init__(vocab_size, block_size, d_model, num_heads, num_layers, dropout=0.0)
        for gpt_block in self.blocks:
            gpt_block.mlp[1] = nn.GELU(approximate="tanh")  # GPT-2's "gelu_new"


# %% [markdown]
# The Hugging Face checkpoint stores the same tensors under other names, and some in another layout:
#
# | Hugging Face (`transformer.` in front, or not) | shape | this lab's `GPT2` | shape |
# |---|---|---|---|
# | `wte.weight`, `wpe.weight` | `(V, d)`, `(block_size, d)` | `tok_emb.weight`, `pos_emb.weight` | same |
# | `h.{i}.ln_1.weight`, `.bias` (and `ln_2`) | `(d,)` | `blocks.{i}.ln1.weight`, `.bias` (and `ln2`) | same |
# | `h.{i}.attn.c_attn.weight` | `(d, 3d)` | `blocks.{i}.attn.qkv.weight` | `(3d, d)` |
# | `h.{i}.attn.c_attn.bias` | `(3d,)` | `blocks.{i}.attn.qkv.bias` | same |
# | `h.{i}.attn.c_proj.weight`, `.bias` | `(d, d)` | `blocks.{i}.attn.proj.weight`, `.bias` | transposed |
# | `h.{i}.mlp.c_fc.weight`, `.bias` | `(d, 4d)` | `blocks.{i}.mlp.0.weight`, `.bias` | `(4d, d)` |
# | `h.{i}.mlp.c_proj.weight`, `.bias` | `(4d, d)` | `blocks.{i}.mlp.2.weight`, `.bias` | `(d, 4d)` |
# | `ln_f.weight`, `.bias` | `(d,)` | `ln_f.weight`, `.bias` | same |
# | `lm_head.weight` (when present) | `(V, d)` | tied to `tok_emb.weight` | |
#
# **Why transposed?** GPT-2's layers are `Conv1D`, a linear layer that computes `x @ W + b` with `W` of shape
# `(in, out)`; `nn.Linear` computes `x @ W.T + b` with `W` of shape `(out, in)`. So every `Conv1D` weight is
# transposed on the way in, and a square one (`c_proj` of the attention, `(d, d)`) fits without the
# transpose but gives wrong numbers. `c_attn` holds q, k and v side by side: its columns `0 .. d-1` are the
# queries, `d .. 2d-1` the keys, `2d .. 3d-1` the values. After the transpose they are the rows in the same
# order, which is the order of Lab 09's `qkv` (split q, k, v). The embedding is tied: `lm_head.weight` is
# `tok_emb.weight`, loaded once. Some checkpoints also hold the attention's causal mask as buffers
# (`h.{i}.attn.bias`, `h.{i}.attn.masked_bias`): they are not weights, skip them.
#
# Implement `load_gpt2_weights(model, state_dict) -> model`: copy every tensor into `model` (a `GPT2` whose
# sizes match the checkpoint) and return the model. Names may start with `transformer.` or not. Copy under
# `torch.no_grad()` (or build a new state dict and `model.load_state_dict(...)`). A tensor whose shape does
# not fit raises a `ValueError` naming the model's parameter (`tok_emb.weight`, ...) and both shapes
# (`load_state_dict` raises a `RuntimeError`: check the shapes first).

# %% [raw]
# # BEGIN QUESTION
# name: load_gpt2_weights
# points: 8

# %%
def load_gpt2_weights(model, state_dict):
    """Copy a Hugging Face GPT-2 state dict into a GPT2 (Lab 09's MiniGPT layout); returns model.

    state_dict: names with or without the "transformer." prefix; Conv1D weights (in, out) are transposed.
    """
    # BEGIN SOLUTION
    sd = {name.removeprefix("transformer."): tensor for name, tensor in state_dict.items()}
    new = {"tok_emb.weight": sd["wte.weight"], "pos_emb.weight": sd["wpe.weight"],
           "ln_f.weight": sd["ln_f.weight"], "ln_f.bias": sd["ln_f.bias"]}
    pairs = [("ln_1", "ln1", False), ("ln_2", "ln2", False), ("attn.c_attn", "attn.qkv", True),
             ("attn.c_proj", "attn.proj", True), ("mlp.c_fc", "mlp.0", True), ("mlp.c_proj", "mlp.2", True)]
    for i in range(len(model.blocks)):
        for theirs, ours, conv1d in pairs:
            new[f"blocks.{i}.{ours}.weight"] = sd[f"h.{i}.{theirs}.weight"]
            new[f"blocks.{i}.{ours}.bias"] = sd[f"h.{i}.{theirs}.bias"]
            if conv1d:  # Conv1D (in, out) -> nn.Linear (out, in)
                new[f"blocks.{i}.{ours}.weight"] = new[f"blocks.{i}.{ours}.weight"].t()
    new["lm_head.weight"] = new["tok_emb.weight"]  # state_dict() lists the tied table under both names
    own = model.state_dict()
    for name, tensor in new.items():
        if tuple(own[name].shape) != tuple(tensor.shape):
            raise ValueError(f"the checkpoint's tensor for {name} has shape {tuple(tensor.shape)}, "
                             f"the model's {tuple(own[name].shape)}")
    model.load_state_dict(new)
    return model
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Conv1D weights are transposed, the rest copied
from attnlab.kit.expect import expect_close

model = GPT2(vocab_size=11, block_size=8, d_model=16, num_heads=4, num_layers=1)
sd = {"wte.weight": torch.randn(11, 16), "wpe.weight": torch.randn(8, 16), "ln_f.weight": torch.randn(16),
      "ln_f.bias": torch.randn(16)}
for name, shape in [("ln_1", (16,)), ("ln_2", (16,)), ("attn.c_attn", (16, 48)), ("attn.c_proj", (16, 16)),
                    ("mlp.c_fc", (16, 64)), ("mlp.c_proj", (64, 16))]:
    sd[f"h.0.{name}.weight"] = torch.randn(shape)
    sd[f"h.0.{name}.bias"] = torch.randn(shape[-1])
assert load_gpt2_weights(model, sd) is model, "load_gpt2_weights should return the model it was given"
expect_close(model.tok_emb.weight, sd["wte.weight"], "tok_emb.weight (from wte.weight)")
expect_close(model.blocks[0].attn.qkv.weight, sd["h.0.attn.c_attn.weight"].T, "attn.qkv.weight (c_attn, transposed)")
expect_close(model.blocks[0].attn.proj.weight, sd["h.0.attn.c_proj.weight"].T,
             "attn.proj.weight (c_proj, transposed, though square)")
expect_close(model.blocks[0].mlp[2].bias, sd["h.0.mlp.c_proj.bias"], "mlp[2].bias (from mlp.c_proj.bias)")
expect_close(model.lm_head.weight, sd["wte.weight"], "lm_head.weight (tied to the embedding)")

# %%
# "transformer." prefixes and the mask buffers are handled
from attnlab.kit.expect import expect_close

model = GPT2(vocab_size=11, block_size=8, d_model=16, num_heads=4, num_layers=1)
sd = {"transformer.wte.weight": torch.randn(11, 16), "transformer.wpe.weight": torch.randn(8, 16),
      "transformer.ln_f.weight": torch.randn(16), "transformer.ln_f.bias": torch.randn(16),
      "transformer.h.0.attn.bias": torch.ones(1, 1, 8, 8).tril()}
for name, shape in [("ln_1", (16,)), ("ln_2", (16,)), ("attn.c_attn", (16, 48)), ("attn.c_proj", (16, 16)),
                    ("mlp.c_fc", (16, 64)), ("mlp.c_proj", (64, 16))]:
    sd[f"transformer.h.0.{name}.weight"] = torch.randn(shape)
    sd[f"transformer.h.0.{name}.bias"] = torch.randn(shape[-1])
sd["lm_head.weight"] = sd["transformer.wte.weight"]
load_gpt2_weights(model, sd)
expect_close(model.pos_emb.weight, sd["transformer.wpe.weight"], "pos_emb.weight (from transformer.wpe.weight)")
expect_close(model.blocks[0].ln2.bias, sd["transformer.h.0.ln_2.bias"], "ln2.bias (from transformer.h.0.ln_2.bias)")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# Your mapping against the library: where `transformers` is installed, the demo builds a small random GPT-2
# with it, loads its weights into `GPT2` with your function, and compares the logits.

# %% tags=["otter_ignore"]
# Demo (not graded): your GPT2 with a random checkpoint equals transformers' GPT2LMHeadModel
try:
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError:
    print("transformers is not installed here: skipping the comparison (pip install transformers to run it)")
else:
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(vocab_size=50, n_positions=16, n_embd=32, n_layer=2, n_head=4)).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)  # every tensor random (layer norms included), so that a swap would show
    ours = load_gpt2_weights(GPT2(vocab_size=50, block_size=16, d_model=32, num_heads=4, num_layers=2),
                             hf.state_dict()).eval()
    idx = torch.randint(50, (2, 16))
    with torch.no_grad():
        theirs = hf(idx).logits
        print("largest difference to GPT2LMHeadModel:", (ours(idx)[0] - theirs).abs().max().item(),
              f"(logits of size {theirs.abs().max().item():.1f})")

# %% [markdown]
# ### The real GPT-2
#
# GPT-2 small is a 548 MB download (`model.safetensors`, pinned to one revision and checked against its
# SHA-256) and its tokenizer (`tokenizer.json`, read with the `tokenizers` library). Both come preinstalled
# on Colab, where the next cell downloads the model, loads it with your function, and writes, in the fast size
# too: inference of the 124M model takes seconds on a CPU. Offline, or without `safetensors`/`tokenizers`, it
# says so in one line and the notebook goes on.

# %% tags=["otter_ignore"]
# Experiment (not graded): the real GPT-2 writes, with your load_gpt2_weights
try:
    gpt2_state = load_gpt2_state_dict()
    gpt2_tokenizer = load_gpt2_tokenizer()
except (DatasetUnavailable, ImportError) as exc:
    gpt2_error = exc  # print(gpt2_error) for the whole message: how to get the files
    reason = str(exc).splitlines()[0].split(". To get it")[0]
    print(f"GPT-2 is not available here, going on without it ({reason}); print(gpt2_error) says how to get it.")
else:
    gpt2 = load_gpt2_weights(GPT2(), gpt2_state).to(device).eval()
    prompt = "The meaning of life is"
    idx = torch.tensor([gpt2_tokenizer.encode(prompt).ids], device=device)  # (1, T0)
    out = gpt2.generate(idx, 40, temperature=0.8, top_k=40, generator=torch.Generator(device=device).manual_seed(0))
    print(gpt2_tokenizer.decode(out[0].tolist()))

# %% [markdown]
# ### Going further (not graded)
#
# - Freeze the pretrained encoder and train the head only (*linear probing*): how much worse is it at 256 labels?
# - Pretrain longer, or with `p=0.3`: does the gap at 8 labels grow?
# - Compare GPT-2's greedy output with top-k sampling, as in Lab 09.
