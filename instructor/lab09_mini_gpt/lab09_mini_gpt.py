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
# # Lab 09: A mini-GPT on tiny Shakespeare
#
# Labs 05 to 07 built attention, multi-head attention and the Transformer block. This lab puts them
# together into a small **GPT** (a decoder-only Transformer, [Radford et al., 2018/2019](https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf)),
# trains it to predict the next character of Shakespeare's plays, and makes it write. The model is the
# one of Andrej Karpathy's [nanoGPT](https://github.com/karpathy/nanoGPT), and you can compare your numbers
# with his: his CPU recipe (4 layers, 4 heads, 128 dimensions, 2,000 steps) reaches a validation loss of
# about 1.88 nats per character.
#
# You will build it one idea at a time:
#
# 1. `CharTokenizer`: text to integer ids and back, one id per character.
# 2. `bpe_pair_counts` and `bpe_merge`: the two steps of byte-pair encoding (BPE), the tokenizer of GPT-2;
#    then `BPETokenizer`, GPT-2's byte-level BPE with its regular-expression pre-split.
# 3. `get_batch`: random windows of the text as inputs, the same windows shifted by one as targets.
# 4. `CausalSelfAttention`: multi-head self-attention where a position sees only itself and the past, with
#    a **key-value cache** for generation.
# 5. `GPTBlock`: the pre-norm Transformer block of GPT-2.
# 6. `MiniGPT`: embeddings, blocks, a final norm and a language-model head tied to the embeddings.
# 7. `sample_next` and `generate`: sampling with a temperature and top-k, one token at a time, with or
#    without the cache.
# 8. Experiments: a bigram baseline against the mini-GPT, samples at several temperatures, how much faster
#    the cache generates, the model's attention maps, and how much BPE compresses the text.
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
# **Questions built on others.** Each question is graded on its own: the hidden tests of `GPTBlock` run your block
# with the reference's `CausalSelfAttention` in place of yours, and those of `MiniGPT` your model with the reference's
# `GPTBlock`, so a mistake in `CausalSelfAttention` (a mask with the wrong triangle, say) costs that question only;
# the feedback says so ("graded with the reference `CausalSelfAttention`"). For this, build the sub-layers by calling
# the classes by name (`CausalSelfAttention(d_model, num_heads, block_size, dropout)` in `GPTBlock`, `GPTBlock(...)`
# in `MiniGPT`), and reach their parameters and cache as the lab names them (`block.attn.cache`). The notebook's own
# checks run your classes together: make each one pass them before you build on it.
#
# **Rules of this lab.**
#
# - You **may** use `F.scaled_dot_product_attention(q, k, v, is_causal=True)` in `CausalSelfAttention`:
#   you built it by hand in Lab 05. `nn.MultiheadAttention` and the `nn.Transformer*` layers are not
#   needed (their parameter names would not match anyway).
# - Name the sub-layers exactly as asked (`qkv`, `proj`, `ln1`, `attn`, `ln2`, `mlp`, `tok_emb`, `pos_emb`,
#   `blocks`, `ln_f`, `lm_head`): the grader loads weights by these names.
# - Tensors are batch-first: `(B, T, d)`. Token ids are `torch.long`.
# - Your code must work in float32 and float64 on whatever device the inputs are on (CPU or GPU), must
#   not change its inputs in place, and must keep the autograd graph (no `.detach()`, `.item()` in forward).
#
# **Shape legend** used throughout: `B` batch, `T` sequence length (at most `block_size`), `d` (or
# `d_model`) the model width, `h` the number of heads, `d_h = d / h` the width of a head, `V` the vocabulary
# size, `N` the length of the whole text in tokens.
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The grade
# comes from hidden tests that call your functions and classes on random inputs (float32 and float64) and
# compare the outputs *and the gradients* with a reference and with PyTorch's own layers, check causality
# (a change to a future token must not change a past output), and check the *distribution* of your samples
# against the softmax they should follow. Cells whose first line says *Experiment* or *Demo* are not run by
# the grader: do not define anything graded in them.
#
# **Sizes.** On a CPU the experiments use a small model and the whole notebook runs in about two minutes;
# on a GPU (Colab: *Runtime > Change runtime type*) they train nanoGPT's Shakespeare model (6 layers, 6
# heads, 384 dimensions, 256 characters of context). `sized(fast, full)` picks between the two; set the
# environment variable `ATTNLAB_FAST=1` or `0` to force either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 09.
import math
import time

import matplotlib.pyplot as plt
import regex  # Python's re cannot match "any letter" (\p{L}); GPT-2's tokenizer uses this module
import torch
import torch.nn as nn
import torch.nn.functional as F

from attnlab.kit.datasets.shakespeare import load_tiny_shakespeare
from attnlab.kit.device import sized
from attnlab.kit.plotting import attention_grid, line_plot, plot_history
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import evaluate, fit

# %% [markdown]
# ## 0. The data
#
# Tiny Shakespeare is about a million characters of Shakespeare's plays in one text file. `attnlab`
# downloads it once (1.1 MB) and checks its SHA-256.

# %% tags=["otter_ignore"]
# Experiment (not graded): load the text
if device.type == "cpu":
    # These models are small: on a CPU, one thread is as fast as several (and much faster when other
    # programs share the cores), since coordinating threads costs more than the little work they split.
    torch.set_num_threads(1)
text = load_tiny_shakespeare()
print(f"{len(text):,} characters; the first 300:\n")
print(text[:300])

# %% [markdown]
# ## 1. Characters as tokens
#
# A language model reads and writes integers. The simplest tokenizer gives every distinct character an
# id: the vocabulary is the **sorted** list of the characters that occur in the text, and a character's
# id is its position in that list. For the text `"hello"` the vocabulary is `['e', 'h', 'l', 'o']`, so
#
# ```
#   encode("hello") = [1, 0, 2, 2, 3]          decode([3, 2, 0]) = "ole"          vocab_size = 4
# ```
#
# There is no `<pad>` or `<unk>` here: every window of the text is full, and every character of the text
# is in the vocabulary (so id 0 is a real character, `'\n'` in Shakespeare).
#
# Implement `CharTokenizer(text)` with `encode(s) -> list[int]`, `decode(ids) -> str` (any sequence of
# ints: a list, or a 1-D tensor) and the attribute `vocab_size`.

# %% [raw]
# # BEGIN QUESTION
# name: CharTokenizer
# points: 3

# %%
class CharTokenizer:
    """One id per distinct character; the vocabulary is the sorted list of the text's characters.

    Attributes: vocab_size (int), the number of distinct characters.
    """

    def __init__(self, text):
        # the sorted distinct characters, a dict char -> id and the reverse, and vocab_size
        # BEGIN SOLUTION
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.itos = dict(enumerate(self.chars))
        self.vocab_size = len(self.chars)
        # END SOLUTION

    def encode(self, s):
        """str -> list[int]: the id of every character of s."""
        # BEGIN SOLUTION
        return [self.stoi[ch] for ch in s]
        # END SOLUTION

    def decode(self, ids):
        """A sequence of ints (list or 1-D tensor) -> str."""
        # BEGIN SOLUTION
        return "".join(self.itos[int(i)] for i in ids)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# "hello" worked by hand: vocabulary e, h, l, o
from attnlab.kit.expect import expect_equal

tok = CharTokenizer("hello")
assert tok.vocab_size == 4, f"'hello' has 4 distinct characters, got vocab_size={tok.vocab_size}"
ids = tok.encode("hello")
assert isinstance(ids, list), f"encode should return a list of ints, got {type(ids).__name__}"
expect_equal(torch.tensor(ids), [1, 0, 2, 2, 3], "encode('hello')")
assert tok.decode([3, 2, 0]) == "ole", f"decode([3, 2, 0]) should be 'ole', got {tok.decode([3, 2, 0])!r}"

# %%
# decode(encode(s)) gives s back, spaces and newlines included
tok = CharTokenizer("To be, or not to be:\nthat is the question.")
s = "to be: not that\n"
assert tok.decode(tok.encode(s)) == s, f"the round trip gave {tok.decode(tok.encode(s))!r}, not {s!r}"
assert tok.decode(torch.tensor(tok.encode(s))) == s, "decode should also accept a 1-D tensor of ids"
assert tok.encode("\n") == [0], "the newline is the smallest character here, so its id is 0"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% tags=["otter_ignore"]
# Experiment (not graded): the vocabulary of Shakespeare, and the whole text as one tensor of ids
tokenizer = CharTokenizer(text)
print(f"vocab_size = {tokenizer.vocab_size}:", repr(tokenizer.decode(range(tokenizer.vocab_size))))
data = torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)
n_train = int(0.9 * len(data))  # the first 90% to train on, the last 10% to validate (as nanoGPT)
train_data, val_data = data[:n_train], data[n_train:]
print(f"train {len(train_data):,} tokens, validation {len(val_data):,} tokens")
print("the first 20 ids:", data[:20].tolist())

# %% [markdown]
# ## 2. Byte-pair encoding
#
# One token per character makes sequences long: a model with a context of 64 tokens sees about ten words.
# GPT-2's tokenizer, **byte-pair encoding** ([Sennrich et al., 2016](https://arxiv.org/abs/1508.07909)),
# starts from characters (bytes) and repeatedly **merges the most frequent adjacent pair** into a new
# token. Each merge is two small steps:
#
# 1. `bpe_pair_counts(ids)`: count every adjacent pair, `ids[i], ids[i + 1]` for every `i`. Pairs
#    overlap: `[5, 5, 5]` holds the pair `(5, 5)` **twice** (at positions 0 and 1).
# 2. `bpe_merge(ids, pair, new_id)`: rewrite the list, scanning **left to right**: where `pair` starts at
#    the current position, emit `new_id` and jump over both tokens; otherwise emit the token and move on
#    by one. So occurrences never overlap, and the leftmost one wins:
#
# ```
#   ids            pair     new_id   merged
#   [5, 5, 5]      (5, 5)   9        [9, 5]        not [9, 9]: the middle 5 is used once
#   [5, 5, 5, 5]   (5, 5)   9        [9, 9]
#   [1, 2, 3, 1, 2](1, 2)   7        [7, 3, 7]
# ```
#
# `bpe_pair_counts` returns a dict `{(a, b): count}`; `bpe_merge` returns a new list (the input is not
# changed).

# %% [raw]
# # BEGIN QUESTION
# name: bpe_pair_counts
# points: 2

# %%
def bpe_pair_counts(ids):
    """list[int] -> dict[(int, int), int]: how often each adjacent pair occurs (overlaps counted)."""
    # BEGIN SOLUTION
    counts = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# [5, 5, 5] holds the pair (5, 5) twice: pairs overlap
counts = bpe_pair_counts([5, 5, 5])
assert isinstance(counts, dict), f"bpe_pair_counts should return a dict, got {type(counts).__name__}"
assert counts == {(5, 5): 2}, f"bpe_pair_counts([5, 5, 5]) should be {{(5, 5): 2}}, got {counts}"

# %%
# Every adjacent pair is counted; no pairs in a list of one
counts = bpe_pair_counts([1, 2, 3, 1, 2])
expected = {(1, 2): 2, (2, 3): 1, (3, 1): 1}
assert counts == expected, f"bpe_pair_counts([1, 2, 3, 1, 2]) should be {expected}, got {counts}"
assert bpe_pair_counts([4]) == {}, "a list of one token has no pairs"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: bpe_merge
# points: 3

# %%
def bpe_merge(ids, pair, new_id):
    """Replace every occurrence of pair in ids by new_id, left to right, without overlaps.

    ids: list[int]; pair: (int, int); new_id: int. Returns a new list[int].
    """
    # BEGIN SOLUTION
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# "aaa": [5, 5, 5] merges to [9, 5], the leftmost pair wins
merged = bpe_merge([5, 5, 5], (5, 5), 9)
assert merged == [9, 5], f"bpe_merge([5, 5, 5], (5, 5), 9) should be [9, 5], got {merged}"
merged = bpe_merge([5, 5, 5, 5], (5, 5), 9)
assert merged == [9, 9], f"bpe_merge([5, 5, 5, 5], (5, 5), 9) should be [9, 9], got {merged}"

# %%
# Every occurrence is merged, the last too; input unchanged
ids = [1, 2, 3, 1, 2]
merged = bpe_merge(ids, (1, 2), 7)
assert merged == [7, 3, 7], f"bpe_merge([1, 2, 3, 1, 2], (1, 2), 7) should be [7, 3, 7], got {merged}"
assert ids == [1, 2, 3, 1, 2], "bpe_merge changed its input list: build a new one"
assert bpe_merge([2, 1], (1, 2), 7) == [2, 1], "the order inside a pair matters: (1, 2) is not (2, 1)"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 2.1 Experiment: how much does BPE compress?
#
# Training a BPE tokenizer is the loop: count the pairs, merge the most frequent one into a new id
# (`vocab_size`, `vocab_size + 1`, ...), repeat. The **compression ratio** is the number of characters per
# token. The plot shows it against the number of merges on the first part of the text: the first merges
# (`e` + space, `t` + `h`, ...) gain the most, later ones less and less.

# %% tags=["otter_ignore"]
# Experiment (not graded): train BPE on the start of the text; compression ratio against the number of merges
bpe_text = text[: sized(20_000, 200_000)]
bpe_ids = tokenizer.encode(bpe_text)
num_merges = sized(120, 500)
ratios, merges = [len(bpe_text) / len(bpe_ids)], {}
start = time.perf_counter()
for step in range(num_merges):
    counts = bpe_pair_counts(bpe_ids)
    best = max(counts, key=counts.get)  # the most frequent pair (the first one seen on ties)
    new_id = tokenizer.vocab_size + step
    merges[new_id] = best
    bpe_ids = bpe_merge(bpe_ids, best, new_id)
    ratios.append(len(bpe_text) / len(bpe_ids))
print(f"{num_merges} merges in {time.perf_counter() - start:.1f} s: {len(bpe_text):,} characters -> "
      f"{len(bpe_ids):,} tokens, {ratios[-1]:.2f} characters per token")


def bpe_token_text(token_id):
    """The characters a BPE token stands for (merges applied backwards)."""
    if token_id < tokenizer.vocab_size:
        return tokenizer.decode([token_id])
    a, b = merges[token_id]
    return bpe_token_text(a) + bpe_token_text(b)


print("the first 12 merges:", [bpe_token_text(t) for t in list(merges)[:12]])
print("the last 6 merges:  ", [bpe_token_text(t) for t in list(merges)[-6:]])
line_plot(torch.arange(num_merges + 1), {"tiny Shakespeare": ratios}, xlabel="number of merges",
          ylabel="characters per token", title="BPE compression ratio")
plt.show()

# %% [markdown]
# ### 2.2 GPT-2's byte-level BPE
#
# The merges above are learned on the characters of the whole text, so a merge can cross a word boundary:
# `'e '` (an `e`, then a space) is one of the first, and longer ones such as `'e t'` follow. GPT-2's
# tokenizer changes two things (the GPT-2 paper linked at the top, Radford et al., 2019, section 2.2, states
# the rule; the regular expression itself is in OpenAI's released encoder, `encoder.py` of `openai/gpt-2`):
#
# 1. **Bytes, not characters.** The text is encoded in UTF-8 and the base tokens are the 256 byte values,
#    so any string can be encoded, whatever its script, its accents or its emoji (`'é'` is the two bytes
#    `195, 169`; `'🙂'` is four). The first merge gets id 256, the next 257, and so on.
# 2. **A pre-split.** A regular expression first cuts the text into chunks, a word with the space before
#    it, a run of digits, a run of punctuation, a run of white space, and merges are learned and applied
#    **inside a chunk only**: no token ever spans two words. The pattern, GPT-2's (as in Karpathy's
#    [minbpe](https://github.com/karpathy/minbpe)), is given below; `\p{L}` is "any letter", which Python's
#    `re` cannot express, hence the `regex` module.
#
# Training is the loop of section 2.1 over the chunks: count the pairs of every chunk (added up over the
# chunks), merge the most frequent pair in every chunk, repeat until the vocabulary has `vocab_size` tokens
# (or no pair is left). **On a tie, take the pair counted first**, scanning the chunks in order: that is
# what `max(counts, key=counts.get)` returns for a dict filled in that order. Encoding a new text splits
# it the same way and applies the learned merges to each chunk **in the order they were learned**;
# decoding joins the tokens' bytes and decodes them as UTF-8, with `errors="replace"` (a list of ids can
# end in the middle of a character: the broken piece becomes `'\ufffd'`).
#
# Worked example, `train("hug hugs", vocab_size=259)`. The chunks are `'hug'` and `' hugs'`; in bytes
# `[104, 117, 103]` and `[32, 104, 117, 103, 115]` (h = 104, u = 117, g = 103, space = 32, s = 115).
#
# ```
#   counts                                              best          new id   chunks after the merge
#   (104,117):2 (117,103):2 (32,104):1 (103,115):1      (104, 117)    256      [256, 103]  [32, 256, 103, 115]
#   (256,103):2 (32,256):1 (103,115):1                  (256, 103)    257      [257]       [32, 257, 115]
#   (32,257):1 (257,115):1                              (32, 257)     258      [257]       [258, 115]
# ```
#
# So `merges = {(104, 117): 256, (256, 103): 257, (32, 257): 258}` (`'hu'`, `'hug'`, `' hug'`),
# `encode("hugs hug") = [257, 115, 258]` and `decode([258, 257]) = ' hughug'`. The pair `(103, 32)`, a `g`
# then a space, never even gets counted: it straddles two chunks.
#
# Implement `BPETokenizer` with `train(text, vocab_size)`, `encode(text) -> list[int]` and
# `decode(ids) -> str`, using your `bpe_pair_counts` and `bpe_merge`. Keep the learned merges in
# `self.merges` (`{(a, b): new_id}`, in the order learned) and each token's bytes in `self.vocab`
# (`{id: bytes}`); the constructor and `vocab_size` are given.

# %%
# GPT-2's pre-split pattern (minbpe's GPT2_SPLIT_PATTERN): contractions, letters, digits, other symbols, white space
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# %% tags=["otter_ignore"]
# Demo (not graded): the chunks of a sentence
print(regex.findall(GPT2_SPLIT_PATTERN, "Hello world, it's 2024!!  🙂"))

# %% [raw]
# # BEGIN QUESTION
# name: BPETokenizer
# points: 6

# %%
class BPETokenizer:
    """Byte-level BPE with GPT-2's pre-split: merges are learned and applied inside the chunks of
    GPT2_SPLIT_PATTERN only.

    Attributes: merges (dict (a, b) -> new id, in the order learned), vocab (dict id -> bytes),
    vocab_size (int: 256 + the number of merges)
    """

    def __init__(self):
        self.merges = {}
        self.vocab = {i: bytes([i]) for i in range(256)}

    @property
    def vocab_size(self):
        return len(self.vocab)

    def train(self, text, vocab_size):
        """Learn vocab_size - 256 merges from text (fewer if no pair is left)."""
        if vocab_size < 256:
            raise ValueError(f"vocab_size={vocab_size} is below 256, the number of byte values")
        # BEGIN SOLUTION
        chunks = [list(chunk.encode("utf-8")) for chunk in regex.findall(GPT2_SPLIT_PATTERN, text)]
        for new_id in range(256, vocab_size):
            counts = {}
            for chunk in chunks:
                for pair, n in bpe_pair_counts(chunk).items():
                    counts[pair] = counts.get(pair, 0) + n
            if not counts:
                break
            pair = max(counts, key=counts.get)  # the most frequent pair, the first counted on ties
            chunks = [bpe_merge(chunk, pair, new_id) for chunk in chunks]
            self.merges[pair] = new_id
            self.vocab[new_id] = self.vocab[pair[0]] + self.vocab[pair[1]]
        # END SOLUTION

    def encode(self, text):
        """str -> list[int]: each chunk's UTF-8 bytes with the merges applied in the order learned."""
        # BEGIN SOLUTION
        ids = []
        for chunk in regex.findall(GPT2_SPLIT_PATTERN, text):
            chunk_ids = list(chunk.encode("utf-8"))
            while len(chunk_ids) >= 2:
                # the pair learned first among those present (later merges may build on it)
                pair = min(bpe_pair_counts(chunk_ids), key=lambda p: self.merges.get(p, float("inf")))
                if pair not in self.merges:
                    break
                chunk_ids = bpe_merge(chunk_ids, pair, self.merges[pair])
            ids.extend(chunk_ids)
        return ids
        # END SOLUTION

    def decode(self, ids):
        """A sequence of ints (list or 1-D tensor) -> str; bytes that are not valid UTF-8 become '\ufffd'."""
        # BEGIN SOLUTION
        return b"".join(self.vocab[int(i)] for i in ids).decode("utf-8", errors="replace")
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# "hug hugs" worked by hand: merges 'hu', 'hug', ' hug'
from attnlab.kit.expect import expect_equal

tok = BPETokenizer()
tok.train("hug hugs", 259)
assert tok.merges == {(104, 117): 256, (256, 103): 257, (32, 257): 258}, (
    f"train('hug hugs', 259) should learn {{(104, 117): 256, (256, 103): 257, (32, 257): 258}}, got {tok.merges}")
assert tok.vocab_size == 259 and tok.vocab[258] == b" hug", f"vocab[258] should be b' hug', got {tok.vocab.get(258)}"
expect_equal(torch.tensor(tok.encode("hugs hug")), [257, 115, 258], "encode('hugs hug')")
assert tok.decode([258, 257]) == " hughug", f"decode([258, 257]) should be ' hughug', got {tok.decode([258, 257])!r}"

# %%
# No merge crosses a chunk: 'g' + space is never learned
tok = BPETokenizer()
tok.train("big dog dig bag fig " * 5, 300)
pieces = [tok.vocab[i].decode() for i in tok.merges.values()]
crossing = [p for p in pieces if len(regex.findall(GPT2_SPLIT_PATTERN, p)) > 1]
assert not crossing, f"these merged tokens span two chunks of GPT2_SPLIT_PATTERN: {crossing}"
assert len(pieces) > 5, f"train should learn merges inside the words here, got only {len(pieces)}"

# %%
# decode(encode(s)) == s for any text, emoji and accents too
tok = BPETokenizer()
tok.train("Café crème, naïve façade! 🙂🙂 日本語 2024", 280)
for s in ["Café 🙂", "😀👍🏽 Zoë's 42nd façade!\n\n  ok", "", "日本語のテキスト", "a\u0301 e\u0301"]:
    ids = tok.encode(s)
    assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids), f"encode({s!r}) gave ids {ids}"
    assert tok.decode(ids) == s, f"decode(encode({s!r})) gave {tok.decode(ids)!r}"
assert tok.decode([240, 159]) == "\ufffd", "decode should use errors='replace' for bytes that are not valid UTF-8"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% tags=["otter_ignore"]
# Experiment (not graded): GPT-2's byte-level BPE on the same text as section 2.1, and what its merges look like
byte_bpe = BPETokenizer()
start = time.perf_counter()
byte_bpe.train(bpe_text, 256 + num_merges)
byte_ids = byte_bpe.encode(bpe_text)
print(f"{num_merges} merges in {time.perf_counter() - start:.1f} s: {len(bpe_text):,} characters -> "
      f"{len(byte_ids):,} tokens, {len(bpe_text) / len(byte_ids):.2f} characters per token "
      f"(character-level BPE above: {ratios[-1]:.2f})")
print("the first 12 merges:", [byte_bpe.decode([i]) for i in list(byte_bpe.merges.values())[:12]])

def crosses_chunks(piece):
    """Whether GPT-2's pre-split would cut this piece of text in two or more chunks."""
    return len(regex.findall(GPT2_SPLIT_PATTERN, piece)) > 1


crossing = [bpe_token_text(t) for t in merges if crosses_chunks(bpe_token_text(t))]
byte_crossing = [t for t in byte_bpe.merges.values() if crosses_chunks(byte_bpe.vocab[t].decode("utf-8", "replace"))]
print(f"merges that cross a chunk: character-level {len(crossing)} of {num_merges}, e.g. {crossing[:6]}; "
      f"byte-level {len(byte_crossing)}")
sample = "To be, or not to be: that is the question. 🙂"
print(f"{sample!r} -> {byte_bpe.encode(sample)}\n-> {[byte_bpe.decode([i]) for i in byte_bpe.encode(sample)]}")
assert byte_bpe.decode(byte_bpe.encode(sample)) == sample

# %% [markdown]
# What to look at: the characters per token of the two tokenizers, the first merges of each, the count of
# merges that cross a chunk, and how the sentence with the emoji is cut. GPT-2 learns 50,000 merges this
# way. The rest of this lab stays with characters: a vocabulary of 65 keeps the model small and the output
# head cheap.

# %% [raw]
# # BEGIN QUESTION
# name: bpe_chunk_merges
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes the own characters per token of both tokenizers and the number of character-level merges that
#       cross a chunk (1.76 and 1.72, 65 of 120 against 0 in the reference run)"
#     points: 0.5
#   - criterion: "Explains why character-level BPE learns such merges: it counts pairs over the whole text, where a
#       word's last letter followed by a space is among the most frequent pairs"
#     points: 0.5
#   - criterion: "Explains what is wrong with them: a token then depends on the next word (the same word is cut
#       differently in different places) and merges are spent on word-boundary pairs; the pre-split makes every token
#       a piece of one word with its leading space"
#     points: 0.5
#   - criterion: "Explains the emoji: none of its bytes were merged in training, so it is encoded as its four bytes,
#       none of which is a character on its own (each decodes to the replacement character), while the whole decodes
#       back exactly"
#     points: 0.5

# %% [markdown]
# **Written question (2 points).** Quote your characters per token of both tokenizers and how many merges of
# each cross a chunk, with a few examples of such merges. Why does the character-level BPE learn so many merges
# across a word boundary, and why is that a poor choice for a tokenizer, though it compresses as well? How is
# the emoji, never seen in training, encoded, and why does it print as four `'�'`?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size: 120 merges on the first 20,000 characters) the character-level BPE reached
# 1.76 characters per token, the byte-level one 1.72; 65 of the 120 character-level merges crossed a chunk
# (`'e '`, `'t '`, `'s '`, `', '`, `'d '`, `'r '`), none of the byte-level ones did.
#
# Character-level BPE counts pairs over the whole text as one sequence. English words end in a few letters
# (`e`, `t`, `s`, `d`) and nearly every word is followed by a space, so "last letter + space" pairs are among
# the most frequent of all and are merged first. Such a token glues the end of one word to the gap before the
# next: how a word is cut then depends on what follows it (`the ` and `the,` get different tokens), the same
# word has several spellings in tokens, and merges are spent on boundary pairs instead of on word pieces.
# GPT-2's pre-split forbids pairs across chunks, so its merges are pieces of one word with the space in
# front of it (`' t'`, `'he'`, `' the'`): a word is cut the same way wherever it stands. The price is small:
# a few frequent pairs are forbidden, so the compression is a little lower (1.72 against 1.76).
#
# The emoji is the four UTF-8 bytes `240, 159, 153, 130`. No merge was learned on them, so it stays four base
# tokens; decoded one at a time, none of them is a whole UTF-8 character, so each becomes the replacement
# character `'�'`; decoded together they give back the emoji. Byte-level BPE can encode any string.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 3. Batches for next-token prediction
#
# A language model learns to predict, at **every** position, the next token. One training example is a
# window of `block_size` consecutive tokens starting at a random position `s`; its targets are the same
# window shifted by one:
#
# ```
#   data:  ...  F  i  r  s  t     C  i  t  i  z  e  n  ...
#               ^ s
#   x:          F  i  r  s  t     C  i        data[s : s + T]
#   y:          i  r  s  t     C  i  t        data[s + 1 : s + T + 1]
# ```
#
# So one window gives `T` examples at once: predict `y[t]` from `x[0..t]`. The start `s` can be any of
# `0, 1, ..., N - T - 1` (the last window's target ends at the last token), chosen uniformly at random
# with `torch.randint(..., generator=generator)` so that a fixed generator gives the same batches.
#
# Implement `get_batch(data, block_size, batch_size, generator=None) -> (x, y)`, both `(B, T)` with
# the dtype and device of `data`.
#
# *Hint.* `starts[:, None] + torch.arange(T)` is a `(B, T)` table of positions; indexing `data` with it
# gives all the windows at once.

# %% [raw]
# # BEGIN QUESTION
# name: get_batch
# points: 3

# %%
def get_batch(data, block_size, batch_size, generator=None):
    """Random windows of data and the same windows shifted by one.

    Shapes:
        data:    (N,) token ids
        returns: x (B, T), y (B, T), T = block_size, B = batch_size; y[b, t] = data[s_b + t + 1]
    The starts s_b are uniform over 0 .. N - T - 1, drawn with generator.
    """
    # BEGIN SOLUTION
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
    positions = starts[:, None] + torch.arange(block_size)[None, :]  # (B, T)
    positions = positions.to(data.device)
    return data[positions], data[positions + 1]  # (B, T), (B, T)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# y is x shifted by one, and x is a window of the data
data = torch.arange(100, 150)  # the value tells the position: data[i] = 100 + i
x, y = get_batch(data, 8, 4, generator=torch.Generator().manual_seed(0))
assert x.shape == (4, 8) and y.shape == (4, 8), f"x and y should be (4, 8), got {tuple(x.shape)}, {tuple(y.shape)}"
assert x.dtype == torch.long and y.dtype == torch.long, f"keep the dtype of data (long), got {x.dtype}, {y.dtype}"
assert torch.equal(y, x + 1), "y should be x shifted by one position: y[b, t] = data[s + t + 1]"
assert torch.equal(x[:, 1:], x[:, :-1] + 1), "each row of x should be consecutive tokens of the data"

# %%
# Every start from 0 to N - T - 1 is possible, no other
data = torch.arange(12)
starts = set()
for seed in range(40):
    x, y = get_batch(data, 8, 16, generator=torch.Generator().manual_seed(seed))
    starts.update(x[:, 0].tolist())
assert starts == {0, 1, 2, 3}, f"with N=12 and T=8 the starts should be 0..3, got {sorted(starts)}"
g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
x1, _ = get_batch(torch.arange(1000), 8, 4, generator=g1)
x2, _ = get_batch(torch.arange(1000), 8, 4, generator=g2)
assert torch.equal(x1, x2), "the same generator seed should give the same batch: pass generator to torch.randint"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. Causal self-attention
#
# In a language model, position `t` must not see the tokens after it: they are what it is asked to
# predict. **Causal** self-attention masks the scores above the diagonal (Lab 05's `causal_mask`), so the
# output at `t` depends on `x[0..t]` only. Everything else is Lab 06's multi-head attention, with two
# GPT-2 habits:
#
# - one linear layer `qkv = nn.Linear(d, 3d)` computes queries, keys and values at once; its output is
#   split into three `d`-wide parts **in the order q, k, v** (the order of `nn.MultiheadAttention`'s
#   `in_proj_weight`);
# - each part is split into `h` heads of width `d_h = d / h`, **head `i` taking the columns
#   `i * d_h ... (i + 1) * d_h - 1`** (as Lab 06's `split_heads`), then `proj = nn.Linear(d, d)` mixes
#   the merged heads.
#
# ```
#   x:              (B, T, d)
#   qkv(x):         (B, T, 3d)      -> split in q, k, v, each (B, T, d)
#   heads:          (B, h, T, d_h)  view(B, T, h, d_h).transpose(1, 2)
#   attention:      (B, h, T, d_h)  softmax(q k^T / sqrt(d_h) + causal mask) v
#   merged:         (B, T, d)       transpose(1, 2).reshape(B, T, d)
#   proj(merged):   (B, T, d)
# ```
#
# You may compute the attention with `F.scaled_dot_product_attention(q, k, v, is_causal=True)` (it takes
# `(B, h, T, d_h)` tensors and applies the causal mask and the scale itself) or by hand. **Dropout**
# (`dropout`) goes on the attention weights (in training only; `dropout_p=` of the function) and on the
# output of `proj`. With the same weights and dropout 0 the layer equals
# `nn.MultiheadAttention(d, h, batch_first=True)` with a causal mask (shown in the demo after the question).
#
# **From an average to attention** (Karpathy's nanoGPT lecture). The simplest way for position `t` to use
# its past is the mean of `x[0..t]`. That is a matrix product with a lower-triangular matrix whose rows
# sum to 1; and the same matrix comes out of a softmax over scores of 0 whose future entries were set to
# `-inf`. Self-attention keeps the `tril`, the `-inf` and the softmax, and replaces the zero scores by
# `q k^T / sqrt(d_h)`: a weighted average that each position chooses from the data.

# %% tags=["otter_ignore"]
# Intuition (not graded): averaging the past three ways gives the same result
toy = torch.randn(1, 4, 2)  # (B, T, C)
by_loop = torch.stack([toy[:, : t + 1].mean(dim=1) for t in range(4)], dim=1)  # (B, T, C)
tril = torch.tril(torch.ones(4, 4))
by_matrix = (tril / tril.sum(dim=1, keepdim=True)) @ toy  # rows of 1/1, 1/2, 1/3, 1/4
weights = torch.zeros(4, 4).masked_fill(tril == 0, float("-inf")).softmax(dim=-1)  # (T, T)
by_softmax = weights @ toy
print(weights)
assert torch.allclose(by_loop, by_matrix, atol=1e-6) and torch.allclose(by_loop, by_softmax, atol=1e-6)
print("loop, tril matrix and masked softmax give the same average")

# %% [markdown]
# **The key-value cache.** Generating text calls the model once per new token, and without help each call
# recomputes the keys and values of the whole context, though only the last token is new: the keys and
# values of the earlier positions do not change (position `t` sees nothing after it). So the layer keeps
# them: `forward(x, use_cache=True)` takes the **new** tokens only, computes their queries, keys and values,
# appends the keys and values to `self.cache` and lets each new query attend to every cached position and
# to the new ones up to itself.
#
# ```
#   self.cache:        None, or (k, v), each (B, h, T_past, d_h): the keys and values of the tokens so far
#   x:                 (B, T, d), the T new tokens (positions T_past .. T_past + T - 1)
#   k, v after append: (B, h, T_past + T, d_h)     torch.cat([cached, new], dim=2), stored back in self.cache
#   mask:              (T, T_past + T)             new token i may see the keys 0 .. T_past + i
#                                                  torch.ones(T, T_past + T, dtype=torch.bool).tril(T_past)
# ```
#
# Worked example: with 3 tokens cached and 2 new ones, the mask is (`1` = may attend)
#
# ```
#   keys:      0 1 2 3 4
#   query 3:   1 1 1 1 0
#   query 4:   1 1 1 1 1
# ```
#
# Careful: `F.scaled_dot_product_attention(..., is_causal=True)` aligns its mask with the **top left**
# corner (query 0 sees key 0 only) whatever the number of keys, which is wrong as soon as something is
# cached; pass the mask above as `attn_mask=` instead (`True` = may attend) when `T_past > 0`. With
# `use_cache=False` (the default, used in training) the layer neither reads nor changes `self.cache`.
# `__init__` sets `self.cache = None`.

# %% [raw]
# # BEGIN QUESTION
# name: CausalSelfAttention
# points: 10

# %%
class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where position t attends to positions 0..t only.

    Attributes: qkv (nn.Linear(d_model, 3 * d_model), output split q, k, v), proj (nn.Linear(d_model, d_model)),
    cache (None, or the keys and values cached by forward(x, use_cache=True): (k, v), each (B, h, T_past, d_h))
    """

    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        if d_model % num_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
        # keep num_heads and dropout; create qkv, proj and an nn.Dropout for the output of proj
        # BEGIN SOLUTION
        self.num_heads = num_heads
        self.dropout = dropout
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.resid_dropout = nn.Dropout(dropout)
        # END SOLUTION
        self.cache = None  # (k, v), each (B, h, T_past, d_h), filled by forward(x, use_cache=True)

    def forward(self, x, use_cache=False):
        """x: (B, T, d) -> (B, T, d); the output at t depends on x[:, :t + 1] only.

        With use_cache=True, x holds the T tokens that follow the cached ones: their keys and values are
        appended to self.cache, and each attends to every cached position and to the new ones up to itself.
        """
        # BEGIN SOLUTION
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)  # 3 x (B, T, d), in the order q, k, v
        q, k, v = (t.view(B, T, self.num_heads, d // self.num_heads).transpose(1, 2)  # (B, h, T, d_h)
                   for t in (q, k, v))
        if use_cache:
            if self.cache is not None:
                k = torch.cat([self.cache[0], k], dim=2)  # (B, h, T_past + T, d_h)
                v = torch.cat([self.cache[1], v], dim=2)
            self.cache = (k, v)
        past = k.shape[2] - T  # T_past: the positions before the new tokens
        mask = None if past == 0 else torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(past)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                             dropout_p=self.dropout if self.training else 0.0)  # (B, h, T, d_h)
        out = out.transpose(1, 2).reshape(B, T, d)  # (B, T, d): heads merged back
        return self.resid_dropout(self.proj(out))  # (B, T, d)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Sub-layers and shapes
from attnlab.kit.expect import expect_equal

attn = CausalSelfAttention(16, 4, block_size=8)
shapes = {name: tuple(p.shape) for name, p in attn.named_parameters()}
expected = {"qkv.weight": (48, 16), "qkv.bias": (48,), "proj.weight": (16, 16), "proj.bias": (16,)}
assert shapes == expected, f"CausalSelfAttention(16, 4, 8) should have the parameters {expected}, got {shapes}"
out = attn(torch.randn(2, 5, 16))
assert isinstance(out, torch.Tensor), f"forward should return one tensor, got {type(out).__name__}"
expect_equal(torch.tensor(out.shape), [2, 5, 16], "the output shape")

# %%
# Changing token 3 changes no output before position 3
from attnlab.kit.expect import expect_close

attn = CausalSelfAttention(16, 4, block_size=8).eval()
x = torch.randn(1, 6, 16)
x_changed = x.clone()
x_changed[:, 3] += 5.0
out, out_changed = attn(x), attn(x_changed)
expect_close(out_changed[:, :3], out[:, :3], "outputs before the change", atol=1e-5)
assert not torch.allclose(out_changed[:, 3], out[:, 3]), "the output at position 3 should see its own token"

# %%
# Position 0 attends only to itself: its output is proj(v_0)
from attnlab.kit.expect import expect_close

attn = CausalSelfAttention(8, 2, block_size=4).eval()
x = torch.randn(3, 4, 8)
v0 = attn.qkv(x[:, 0])[:, 16:]  # (B, d): the value part (the third) of position 0
expect_close(attn(x)[:, 0], attn.proj(v0), "the output at position 0", atol=1e-5)

# %%
# Cached, one token at a time: the outputs of the full pass
from attnlab.kit.expect import expect_close

attn = CausalSelfAttention(8, 2, block_size=6).eval()
x = torch.randn(2, 6, 8)
full = attn(x)
assert attn.cache is None, "forward(x) without use_cache should leave self.cache as it is (None)"
steps = [attn(x[:, :3], use_cache=True)] + [attn(x[:, t:t + 1], use_cache=True) for t in range(3, 6)]
k, v = attn.cache
assert k.shape == (2, 2, 6, 4) and v.shape == (2, 2, 6, 4), f"the cache should hold (B, h, 6, d_h), got {tuple(k.shape)}"
expect_close(torch.cat(steps, dim=1), full, "3 tokens, then 3 more one at a time, with the cache", atol=1e-5)

# %%
# Two new tokens after three cached: the mask is tril(3)
from attnlab.kit.expect import expect_close

attn = CausalSelfAttention(8, 2, block_size=6).eval()
x = torch.randn(1, 5, 8)
first, second = attn(x[:, :3], use_cache=True), attn(x[:, 3:], use_cache=True)
expect_close(second, attn(x)[:, 3:], "the 2 tokens after 3 cached ones (query i sees keys 0 .. 3 + i)", atol=1e-5)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% tags=["otter_ignore"]
# Demo (not graded): your layer equals nn.MultiheadAttention with the same weights and a causal mask
seed_everything(0)
attn = CausalSelfAttention(16, 4, block_size=8).eval()
torch_mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
with torch.no_grad():
    torch_mha.in_proj_weight.copy_(attn.qkv.weight)  # (3d, d): q, k, v stacked in this order
    torch_mha.in_proj_bias.copy_(attn.qkv.bias)
    torch_mha.out_proj.weight.copy_(attn.proj.weight)
    torch_mha.out_proj.bias.copy_(attn.proj.bias)
    x = torch.randn(2, 8, 16)
    blocked = torch.ones(8, 8, dtype=torch.bool).triu(1)  # PyTorch's convention: True = may NOT attend
    theirs, _ = torch_mha(x, x, x, attn_mask=blocked, need_weights=False)
    print("largest difference to nn.MultiheadAttention:", (attn(x) - theirs).abs().max().item())

# %% [markdown]
# ## 5. The GPT block
#
# GPT-2's block is Lab 07's **pre-norm** block with causal attention and a GELU feed-forward network
# four times wider than the model:
#
# ```
#   x = x + attn(ln1(x))          attn: CausalSelfAttention
#   x = x + mlp(ln2(x))           mlp:  nn.Sequential(nn.Linear(d, 4d), nn.GELU(), nn.Linear(4d, d), nn.Dropout(dropout))
# ```
#
# `ln1` and `ln2` are `nn.LayerNorm(d)`. Build `mlp` exactly as written (an `nn.Sequential` of those four
# layers, so its parameters are `mlp.0.*` and `mlp.2.*`; `nn.GELU()` is the exact erf form).
# `forward(x, use_cache=False)` passes `use_cache` on to `attn` (the other layers work position by position
# and need no cache).

# %% [raw]
# # BEGIN QUESTION
# name: GPTBlock
# points: 5

# %%
class GPTBlock(nn.Module):
    """Pre-norm Transformer block with causal self-attention.

    Attributes: ln1, attn (CausalSelfAttention), ln2, mlp (nn.Sequential(Linear(d, 4d), GELU(), Linear(4d, d), Dropout))
    """

    def __init__(self, d_model, num_heads, block_size, dropout=0.0):
        super().__init__()
        # BEGIN SOLUTION
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, num_heads, block_size, dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model),
                                 nn.Dropout(dropout))
        # END SOLUTION

    def forward(self, x, use_cache=False):
        """x: (B, T, d) -> (B, T, d); use_cache is passed on to attn."""
        # BEGIN SOLUTION
        x = x + self.attn(self.ln1(x), use_cache=use_cache)  # (B, T, d)
        return x + self.mlp(self.ln2(x))  # (B, T, d)
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Sub-layers: ln1, attn, ln2, mlp four times wider
block = GPTBlock(16, 4, block_size=8)
assert isinstance(block.attn, CausalSelfAttention), "attn should be your CausalSelfAttention"
assert isinstance(block.ln1, nn.LayerNorm) and isinstance(block.ln2, nn.LayerNorm), "ln1, ln2: nn.LayerNorm(d)"
assert isinstance(block.mlp, nn.Sequential) and len(block.mlp) == 4, "mlp should be an nn.Sequential of 4 layers"
assert tuple(block.mlp[0].weight.shape) == (64, 16), "mlp[0] should be nn.Linear(d, 4d)"
assert isinstance(block.mlp[1], nn.GELU), "mlp[1] should be nn.GELU()"
out = block(torch.randn(2, 5, 16))
assert out.shape == (2, 5, 16), f"the block should keep the shape (2, 5, 16), got {tuple(out.shape)}"

# %%
# With zero output layers the block is the identity (pre-norm)
from attnlab.kit.expect import expect_close

block = GPTBlock(16, 4, block_size=8)
with torch.no_grad():
    for linear in (block.attn.proj, block.mlp[2]):
        linear.weight.zero_()
        linear.bias.zero_()
x = 3 * torch.randn(2, 5, 16) + 1
expect_close(block(x), x, "the block with zero sub-layers (x + attn(ln1(x)), then x + mlp(ln2(x)))", atol=1e-5)

# %%
# With the cache, one token at a time: the full pass
from attnlab.kit.expect import expect_close

block = GPTBlock(16, 4, block_size=8).eval()
x = torch.randn(2, 5, 16)
full = block(x)
steps = [block(x[:, :2], use_cache=True)] + [block(x[:, t:t + 1], use_cache=True) for t in range(2, 5)]
assert block.attn.cache is not None, (
    "after block(x, use_cache=True) the cache of attn is still empty: forward should pass use_cache on to attn")
expect_close(torch.cat(steps, dim=1), full, "2 tokens, then 3 more one at a time, with the cache", atol=1e-5)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 6. The mini-GPT
#
# The whole model, GPT-2's layout:
#
# ```
#   idx:       (B, T) token ids, T <= block_size
#   x = tok_emb(idx) + pos_emb(arange(T))     (B, T, d)   token and learned position embeddings (then dropout)
#   x = blocks(x)                              (B, T, d)   num_layers GPTBlocks, one after the other
#   logits = lm_head(ln_f(x))                  (B, T, V)   a last LayerNorm, then a linear layer to the vocabulary
#   loss = cross_entropy(logits, targets)                  the mean over all B * T positions
# ```
#
# **Weight tying** ([Press & Wolf, 2017](https://arxiv.org/abs/1608.05859)): the output layer
# `lm_head = nn.Linear(d, V, bias=False)` has a `(V, d)` weight, the shape of the embedding table; GPT-2
# uses **the same parameter** for both (`self.lm_head.weight = self.tok_emb.weight`): a token's input
# vector is also the vector its logit is read with. It saves `V * d` parameters and usually helps a
# little. After tying, `named_parameters()` lists the table once, as `tok_emb.weight`.
#
# Implement `MiniGPT(vocab_size, block_size, d_model, num_heads, num_layers, dropout=0.0)` with the
# attributes `tok_emb` (`nn.Embedding(V, d)`), `pos_emb` (`nn.Embedding(block_size, d)`), `blocks` (an
# `nn.ModuleList` or `nn.Sequential` of `GPTBlock`s), `ln_f` (`nn.LayerNorm(d)`), `lm_head` (tied), and
# keep `block_size` as an attribute. `forward(idx, targets=None)` returns `(logits, loss)`, the loss
# `None` without targets (`F.cross_entropy` wants `(B * T, V)` logits and `(B * T,)` targets). A sequence
# longer than `block_size` raises a `ValueError` that names both lengths.
#
# **With the cache**, `forward(idx, use_cache=True)` gets the tokens that follow the cached ones, so their
# positions start at `T_past = self.cache_length()` (given): `pos_emb(arange(T_past, T_past + T))`, and
# `use_cache` goes on to every block. Then `T_past + T` may not exceed `block_size` (a `ValueError` naming
# both). `reset_cache()` (given) empties every layer's cache.
#
# The initialisation is given (GPT-2's: normal with standard deviation 0.02, smaller for the layers that
# write into the residual stream); the method `generate` at the end of the class is given too, it calls
# your function `generate` of section 7.

# %% [raw]
# # BEGIN QUESTION
# name: MiniGPT
# points: 10

# %%
class MiniGPT(nn.Module):
    """A decoder-only Transformer language model.

    Attributes: block_size, tok_emb (nn.Embedding(V, d)), pos_emb (nn.Embedding(block_size, d)),
    blocks (GPTBlocks), ln_f (nn.LayerNorm(d)), lm_head (nn.Linear(d, V, bias=False), weight tied to tok_emb)
    """

    def __init__(self, vocab_size, block_size, d_model, num_heads, num_layers, dropout=0.0):
        super().__init__()
        self.block_size = block_size
        # create tok_emb, pos_emb, an nn.Dropout(dropout) for the embeddings, blocks, ln_f and lm_head; tie lm_head
        # BEGIN SOLUTION
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(block_size, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(GPTBlock(d_model, num_heads, block_size, dropout) for _ in range(num_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # weight tying: one (V, d) parameter
        # END SOLUTION
        self.init_weights(num_layers)

    def init_weights(self, num_layers):
        """Given: GPT-2's initialisation."""
        for name, p in self.named_parameters():
            if p.dim() < 2:  # biases and LayerNorm parameters
                nn.init.zeros_(p) if name.endswith("bias") else nn.init.ones_(p)
            elif name.endswith(("proj.weight", "mlp.2.weight")):  # the layers that write into the residual stream
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * num_layers))
            else:
                nn.init.normal_(p, mean=0.0, std=0.02)

    def cache_length(self):
        """Given: the number of positions in the key-value cache (0 when it is empty)."""
        cache = self.blocks[0].attn.cache
        return 0 if cache is None else cache[0].shape[2]

    def reset_cache(self):
        """Given: empty every layer's key-value cache."""
        for layer in self.blocks:
            layer.attn.cache = None

    def forward(self, idx, targets=None, use_cache=False):
        """idx: (B, T) ids, targets: None or (B, T) ids -> (logits (B, T, V), loss (scalar) or None).

        With use_cache=True, idx holds the tokens after the cached ones (positions cache_length() onwards).
        """
        # BEGIN SOLUTION
        B, T = idx.shape
        past = self.cache_length() if use_cache else 0  # T_past: the positions already in the cache
        if past + T > self.block_size:
            raise ValueError(f"the sequence has T={past + T} tokens ({past} cached), more than "
                             f"block_size={self.block_size}")
        positions = torch.arange(past, past + T, device=idx.device)  # (T,)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))  # (B, T, d) + (T, d)
        for block in self.blocks:
            x = block(x, use_cache=use_cache)  # (B, T, d)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))  # (B*T, V), (B*T,)
        return logits, loss
        # END SOLUTION

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
        """Given: max_new_tokens tokens after idx (B, T0), with your function generate (section 7)."""
        return generate(self, idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator,
                        use_cache=use_cache)


# %% [raw]
# # BEGIN TESTS

# %%
# The parameters, with lm_head tied to tok_emb
model = MiniGPT(vocab_size=11, block_size=8, d_model=16, num_heads=4, num_layers=2)
assert model.lm_head.weight is model.tok_emb.weight, (
    "lm_head.weight should be the very same parameter as tok_emb.weight (weight tying), not a copy")
names = [name for name, _ in model.named_parameters()]
assert "lm_head.weight" not in names and "tok_emb.weight" in names, f"the tied table is listed once, got {names[:3]}"
assert tuple(model.pos_emb.weight.shape) == (8, 16), "pos_emb should be nn.Embedding(block_size, d_model)"
assert len(model.blocks) == 2 and isinstance(model.blocks[0], GPTBlock), "blocks should hold num_layers GPTBlocks"
assert model.block_size == 8, "keep block_size as an attribute"

# %%
# Shapes; the loss of an untrained model is close to ln(V)
from attnlab.kit.expect import expect_close

seed_everything(0)
model = MiniGPT(vocab_size=11, block_size=8, d_model=16, num_heads=4, num_layers=2)
idx = torch.randint(11, (3, 8))
logits, loss = model(idx)
assert logits.shape == (3, 8, 11) and loss is None, "without targets: logits (B, T, V) and loss None"
logits, loss = model(idx, torch.randint(11, (3, 8)))
assert loss is not None and loss.dim() == 0, "with targets the loss should be a scalar tensor"
expect_close(loss, math.log(11), "the loss at initialisation (about ln V)", atol=0.1)
logits5, _ = model(idx[:, :5])
expect_close(logits5, logits[:, :5], "the logits of the first 5 tokens alone (causality)", atol=1e-5)

# %%
# A sequence longer than block_size is an error
model = MiniGPT(vocab_size=11, block_size=8, d_model=16, num_heads=4, num_layers=1)
try:
    model(torch.zeros(1, 9, dtype=torch.long))
except ValueError as exc:
    assert "9" in str(exc) and "8" in str(exc), f"the message should name T=9 and block_size=8, got {exc}"
else:
    raise AssertionError("a sequence of 9 tokens with block_size=8 should raise ValueError")

# %%
# With the cache, positions continue from cache_length()
from attnlab.kit.expect import expect_close

seed_everything(0)
model = MiniGPT(vocab_size=11, block_size=8, d_model=16, num_heads=4, num_layers=2).eval()
idx = torch.randint(11, (2, 8))
full, _ = model(idx)
steps = [model(idx[:, :5], use_cache=True)[0]] + [model(idx[:, t:t + 1], use_cache=True)[0] for t in range(5, 8)]
assert model.cache_length() == 8, f"after 5 + 3 tokens the cache should hold 8 positions, got {model.cache_length()}"
expect_close(torch.cat(steps, dim=1), full, "5 tokens, then 3 one at a time, with the cache", atol=1e-5)
MiniGPT.reset_cache(model)  # the given method: empties the cache
expect_close(model(idx[:, :2], use_cache=True)[0], full[:, :2], "the first 2 tokens after reset_cache()", atol=1e-5)

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 7. Sampling
#
# The model gives, for the last position, a vector of logits over the vocabulary. Three ways to pick the
# next token from them:
#
# - **Temperature** $\tau$: sample from $\mathrm{softmax}(\text{logits} / \tau)$. With $\tau = 1$ this is
#   the model's own distribution; $\tau < 1$ sharpens it (safer, more repetitive text), $\tau > 1$
#   flattens it (more surprising, more mistakes). **$\tau = 0$ means greedy**: take the argmax (dividing
#   by 0 is not an option).
# - **Top-k**: keep only the `k` largest logits, set the others to $-\infty$, then softmax: the long tail
#   of unlikely tokens can never be drawn. A `top_k` of `V` or more keeps everything. On ties, keep every
#   logit equal to the `k`-th largest, so a row may keep more than `k` (the checks below use no ties; the
#   grader's hidden tests do).
# - Both together: temperature first, then top-k (the order does not matter: dividing by $\tau > 0$ keeps
#   the ranking).
#
# Worked example: logits `[2, 1, 0]`. With $\tau = 1$ the probabilities are
# `softmax([2, 1, 0]) = [0.665, 0.245, 0.090]`; with $\tau = 0.5$, `softmax([4, 2, 0]) = [0.867, 0.117, 0.016]`;
# with `top_k=2` (and $\tau = 1$), `softmax([2, 1, -inf]) = [0.731, 0.269, 0]`.
#
# Implement `sample_next(logits, temperature=1.0, top_k=None, generator=None)`: `logits (B, V)` -> one id
# per row, a `LongTensor (B,)`. Draw with `torch.multinomial(probs, 1, generator=generator)`, and do not
# change `logits` in place.

# %% [raw]
# # BEGIN QUESTION
# name: sample_next
# points: 6

# %%
def sample_next(logits, temperature=1.0, top_k=None, generator=None):
    """One token per row, from softmax(logits / temperature) restricted to the top_k largest logits.

    Shapes:
        logits:  (B, V)
        returns: (B,) long; temperature 0 means the argmax
    """
    # BEGIN SOLUTION
    if temperature == 0:
        return logits.argmax(dim=-1)  # (B,)
    logits = logits / temperature  # (B, V), a new tensor
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1): the k-th largest logit
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = F.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Temperature 0 is the argmax, and top_k=1 too
from attnlab.kit.expect import expect_equal

logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
expect_equal(sample_next(logits, temperature=0.0), [0, 1], "sample_next(logits, temperature=0)")
expect_equal(sample_next(logits, top_k=1, generator=torch.Generator().manual_seed(0)), [0, 1],
             "sample_next(logits, top_k=1)")

# %%
# Frequencies follow softmax(logits / T): [2, 1, 0] at T = 0.5
from attnlab.kit.expect import expect_close

logits = torch.tensor([[2.0, 1.0, 0.0]]).expand(20000, 3)
ids = sample_next(logits, temperature=0.5, generator=torch.Generator().manual_seed(0))
assert ids.shape == (20000,) and ids.dtype == torch.long, f"expected a (B,) long tensor, got {tuple(ids.shape)} {ids.dtype}"
freq = torch.bincount(ids, minlength=3) / 20000
expect_close(freq, [0.867, 0.117, 0.016], "the frequencies at temperature 0.5", atol=0.015)

# %%
# top_k=2: frequencies [0.731, 0.269, 0], input unchanged
from attnlab.kit.expect import expect_close

logits = torch.tensor([[2.0, 1.0, 0.0]]).expand(20000, 3)
before = logits.clone()
ids = sample_next(logits, top_k=2, generator=torch.Generator().manual_seed(1))
freq = torch.bincount(ids, minlength=3) / 20000
assert freq[2] == 0, "with top_k=2 the smallest logit must never be drawn"
expect_close(freq, [0.731, 0.269, 0.0], "the frequencies with top_k=2", atol=0.015)
assert torch.equal(logits, before), "sample_next changed logits in place: work on a new tensor"

# %%
# The same generator seed gives the same samples
logits = torch.randn(4, 10)
a = sample_next(logits, generator=torch.Generator().manual_seed(3))
b = sample_next(logits, generator=torch.Generator().manual_seed(3))
assert torch.equal(a, b), "pass generator to torch.multinomial: the same seed should give the same samples"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# **Generating text** repeats one step `max_new_tokens` times:
#
# 1. crop the context to its last `block_size` tokens (the model has no position embedding beyond that);
# 2. run the model and keep the logits of the **last** position, `(B, V)`;
# 3. draw the next token with `sample_next(..., temperature, top_k, generator)` and append it to `idx`.
#
# ```
#   idx (B, T0) -> (B, T0 + 1) -> ... -> (B, T0 + max_new_tokens)
# ```
#
# **With `use_cache=True`** step 2 feeds the model only the tokens it has not seen yet,
# `model(new, use_cache=True)`: the cropped prompt at the first step, then the one token just drawn. The
# tokens must be exactly those of `use_cache=False` (the logits agree to rounding error). One catch: the
# position embeddings are absolute, so once the context is full (`model.cache_length() + new tokens >
# block_size`) the window slides, every token moves to a new position, and every cached key and value is
# stale. Then empty the cache (`model.reset_cache()`) and feed the cropped context `idx[:, -block_size:]`
# again. Empty the cache at the start too (the model may hold another call's), and at the end.
#
# ```
#   block_size 4, prompt [a b]:  step 1 feeds [a b] (cache 2), step 2 [c] (cache 3), step 3 [d] (cache 4),
#                                step 4: full, reset, feed [b c d e] (cache 4), step 5: full again, ...
# ```
#
# Implement `generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None,
# use_cache=False)`; read the context length from `model.block_size`. Run it under `torch.no_grad()` (no
# gradients are needed).

# %% [raw]
# # BEGIN QUESTION
# name: generate
# points: 8

# %%
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None, use_cache=False):
    """idx (B, T0) -> (B, T0 + max_new_tokens): sample one token at a time, the context cropped to block_size.

    use_cache=True feeds the model only the tokens its key-value cache lacks; the tokens are the same.
    """
    # BEGIN SOLUTION
    model.reset_cache()
    new = idx[:, -model.block_size:]  # (B, <= block_size): the tokens the cache lacks
    for _ in range(max_new_tokens):
        if not use_cache:
            new = idx[:, -model.block_size:]  # (B, <= block_size)
        elif model.cache_length() + new.shape[1] > model.block_size:  # full: the window slides, the cache is stale
            model.reset_cache()
            new = idx[:, -model.block_size:]
        logits, _ = model(new, use_cache=use_cache)  # (B, T, V)
        next_id = sample_next(logits[:, -1, :], temperature=temperature, top_k=top_k, generator=generator)  # (B,)
        idx = torch.cat([idx, next_id[:, None]], dim=1)  # (B, T + 1)
        new = next_id[:, None]  # (B, 1)
    model.reset_cache()
    return idx
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# Greedy: each token is the argmax on the last block_size
seed_everything(0)
model = MiniGPT(vocab_size=11, block_size=6, d_model=16, num_heads=4, num_layers=1).eval()
with torch.no_grad():
    model.tok_emb.weight.normal_(0, 1.0)  # distinct logits, so the argmax is clear
idx = torch.randint(11, (2, 4))
out = model.generate(idx, 8, temperature=0.0)
assert out.shape == (2, 12), f"4 tokens + 8 new should give (2, 12), got {tuple(out.shape)}"
assert torch.equal(out[:, :4], idx), "the output should start with the prompt idx"
for t in range(4, 12):
    logits, _ = model(out[:, max(0, t - 6):t])
    assert torch.equal(out[:, t], logits[:, -1].argmax(-1)), (
        f"token {t} is not the argmax of the model on the last block_size=6 tokens before it")

# %%
# A fixed generator gives the same text
seed_everything(0)
model = MiniGPT(vocab_size=11, block_size=6, d_model=16, num_heads=4, num_layers=1).eval()
idx = torch.zeros(3, 1, dtype=torch.long)
a = model.generate(idx, 10, generator=torch.Generator().manual_seed(7))
b = model.generate(idx, 10, generator=torch.Generator().manual_seed(7))
assert a.shape == (3, 11) and torch.equal(a, b), "pass generator on to sample_next: the same seed, the same text"

# %%
# use_cache=True gives the tokens of use_cache=False
seed_everything(0)
model = MiniGPT(vocab_size=11, block_size=6, d_model=16, num_heads=4, num_layers=2).eval()
idx = torch.randint(11, (3, 2))
plain = model.generate(idx, 12, generator=torch.Generator().manual_seed(3))
cached = model.generate(idx, 12, generator=torch.Generator().manual_seed(3), use_cache=True)
assert torch.equal(cached, plain), f"use_cache=True gave other tokens:\n{cached}\ninstead of\n{plain}"
assert model.cache_length() == 0, "generate should leave the cache empty: empty it with the given reset_cache at the end"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 8. Experiments
#
# ### 8.1 A baseline: the bigram model
#
# The simplest language model predicts the next character from the current one only: a table of `V x V`
# logits, one row per character (an `nn.Embedding(V, V)` read as logits). Its validation loss is the bar
# the mini-GPT has to clear; for comparison, guessing uniformly among the 65 characters costs
# $\ln 65 = 4.17$ nats.
#
# Both models train with the kit's loop `fit`, on batches `(x, y, y)` (the model's `forward(x, y)`
# computes its own loss), for a fixed number of steps. The validation loss is the mean over a fixed set of
# random validation windows.

# %% tags=["otter_ignore"]
# Experiment (not graded): the training and validation batches, and the bigram baseline
class LMBatches:
    """`steps` random batches (x, y, y) of get_batch, re-iterable (fit reads it once per epoch)."""

    def __init__(self, data, block_size, batch_size, steps, seed):
        self.data, self.block_size, self.batch_size, self.steps = data, block_size, batch_size, steps
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self):
        return self.steps

    def __iter__(self):
        for _ in range(self.steps):
            x, y = get_batch(self.data, self.block_size, self.batch_size, generator=self.generator)
            yield x, y, y


def fixed_batches(data, block_size, batch_size, count, seed):
    """A list of `count` random batches (x, y, y): the same windows every time it is evaluated."""
    return list(LMBatches(data, block_size, batch_size, count, seed))


class BigramLM(nn.Module):
    """logits of the next token = a row of a V x V table chosen by the current token."""

    def __init__(self, vocab_size):
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        logits = self.table(idx)  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())  # (B*T, V), (B*T,)


BLOCK_SIZE = sized(32, 256)
seed_everything(0)
bigram = BigramLM(tokenizer.vocab_size)
bigram_history = fit(bigram, LMBatches(train_data, BLOCK_SIZE, 32, sized(600, 2000), seed=1), epochs=1, lr=1e-1,
                     metric=None, pad_id=None, device=device, live_plot=False, desc="bigram")
val_batches = fixed_batches(val_data, BLOCK_SIZE, 32, sized(20, 50), seed=2)
bigram_val, _ = evaluate(bigram, val_batches, metric=None, pad_id=None, device=device)
print(f"bigram baseline: validation loss {bigram_val:.3f} nats per character "
      f"(uniform guessing: ln {tokenizer.vocab_size} = {math.log(tokenizer.vocab_size):.3f})")

# %% [markdown]
# ### 8.2 Training the mini-GPT
#
# On a CPU: 2 layers, 4 heads, 64 dimensions, 32 characters of context, about 100k parameters, trained
# with AdamW for half a minute. On a GPU: nanoGPT's Shakespeare model (6 layers, 6 heads, 384 dimensions,
# 256 characters, dropout 0.2, 10.7M parameters). The learning rate follows a cosine from `LR` down to
# `LR / 10`. AdamW's weight decay goes, as in nanoGPT's `configure_optimizers`, on the weight matrices and
# embeddings only (the parameters with two or more dimensions, 0.1): decaying a bias or a LayerNorm gain
# towards 0 has no regularising sense, it only shifts or silences a feature. The training is cut into a
# few "epochs" of equal numbers of steps so that `fit` reports the validation loss along the way.

# %% tags=["otter_ignore"]
# Experiment (not graded): train the mini-GPT
config = sized(dict(d_model=64, num_heads=4, num_layers=2, dropout=0.0),
               dict(d_model=384, num_heads=6, num_layers=6, dropout=0.2))
STEPS, ROUNDS, BATCH, LR = sized(1500, 5000), sized(5, 10), sized(32, 64), sized(4e-3, 1e-3)
seed_everything(0)
gpt = MiniGPT(tokenizer.vocab_size, BLOCK_SIZE, **config).to(device)
print(f"MiniGPT {config}: {sum(p.numel() for p in gpt.parameters()):,} parameters")
decay = [p for p in gpt.parameters() if p.dim() >= 2]  # weight matrices and embedding tables
no_decay = [p for p in gpt.parameters() if p.dim() < 2]  # biases and LayerNorm parameters
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=LR, betas=(0.9, 0.99))
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=STEPS, eta_min=LR / 10)
gpt_history = fit(gpt, LMBatches(train_data, BLOCK_SIZE, BATCH, STEPS // ROUNDS, seed=3), epochs=ROUNDS,
                  optimizer=optimizer, scheduler=scheduler, val_loader=val_batches, metric=None, pad_id=None,
                  device=device, live_plot=False, desc="mini-GPT")
gpt_val = gpt_history.val_loss[-1]
print(f"{STEPS} steps in {gpt_history.seconds:.0f} s ({1000 * gpt_history.seconds / STEPS:.0f} ms per step)")
print(f"validation loss: mini-GPT {gpt_val:.3f}, bigram {bigram_val:.3f}: "
      f"{bigram_val - gpt_val:.2f} nats per character better")
plot_history({"mini-GPT": gpt_history}, metrics=("loss",),
             title=f"mini-GPT (bigram baseline: validation {bigram_val:.2f})")
plt.show()

# %% [markdown]
# What to look at: the validation losses of the two models against $\ln 65$, and in the plot, when the
# mini-GPT passes the bigram model. nanoGPT's CPU recipe (twice as wide, twice as deep, 2,000 steps) reaches
# about 1.88; the GPU model about 1.47, with this lab's model trained at nanoGPT's settings.

# %% [raw]
# # BEGIN QUESTION
# name: bigram_context
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes the own validation losses of the bigram model and the mini-GPT against ln 65 = 4.17 (2.514
#       and 1.922 in the reference run)"
#     points: 0.5
#   - criterion: "Reads a loss in nats as a perplexity exp(loss), an effective number of equally likely next
#       characters (about 65, 12 and 7)"
#     points: 0.5
#   - criterion: "Explains that the best bigram model predicts the text's distribution of the next character given the
#       current one, so its loss cannot go below that conditional entropy however long it trains"
#     points: 0.5
#   - criterion: "Explains what the mini-GPT gains: attention over up to 32 earlier characters (words, spelling, the
#       layout of a play), and why it stays above nanoGPT's 1.88 (smaller model, fewer steps)"
#     points: 0.5

# %% [markdown]
# **Written question (2 points).** Quote your validation losses of the bigram model and of the mini-GPT, and
# turn each (and $\ln 65$) into a perplexity $e^{\text{loss}}$: among how many equally likely characters is each
# model choosing? Why does the bigram model stop where it does, however long it trains, and what does the
# mini-GPT use that the bigram model cannot?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, CPU, seed 0) the bigram model reached a validation loss of 2.514 nats per
# character and the mini-GPT 1.922 after 1,500 steps; uniform guessing costs $\ln 65 = 4.174$. As perplexities:
# $e^{4.174} = 65$, $e^{2.514} \approx 12.4$, $e^{1.922} \approx 6.8$: the bigram model is as unsure as a uniform
# choice among about 12 characters, the mini-GPT among about 7.
#
# A bigram model sees only the current character. The best it can do is to predict, for each character, the
# distribution of the character that follows it in the text; its expected loss is then the conditional
# entropy $H(X_{t+1} \mid X_t)$ of the text, about 2.5 nats for Shakespeare's characters. Training only brings
# its table closer to those frequencies; no amount of it goes below that floor, because the information is
# not in its input.
#
# The mini-GPT attends to up to 32 earlier characters: within a word it knows the letters so far (spelling),
# across words the previous words, and at the start of a line the layout of a play (a name in capitals, a
# colon, a new line). Each of these lowers the uncertainty about the next character. It stays above nanoGPT's
# 1.88 because it is smaller (2 layers of 64 dimensions against 4 of 128) and trains for fewer steps.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 8.3 Samples at several temperatures
#
# The same model and prompt, sampled greedily, at three temperatures, and with top-k. Greedy decoding
# soon loops; a low temperature gives common words; a high one invents words.

# %% tags=["otter_ignore"]
# Experiment (not graded): samples at several temperatures and with top-k
gpt.eval()
prompt = torch.tensor([tokenizer.encode("ROMEO:\n")], device=device)  # (1, T0)
settings = [("greedy (temperature 0)", 0.0, None), ("temperature 0.5", 0.5, None), ("temperature 1.0", 1.0, None),
            ("temperature 1.5", 1.5, None), ("temperature 1.0, top_k=5", 1.0, 5)]
for label, temperature, top_k in settings:
    out = gpt.generate(prompt, sized(200, 400), temperature=temperature, top_k=top_k,
                       generator=torch.Generator(device=device).manual_seed(0))
    print(f"----- {label}\n{tokenizer.decode(out[0].tolist())}\n")

# %% [markdown]
# ### 8.4 How much faster is the key-value cache?
#
# Tokens per second of `generate` with and without the cache, 256 new tokens after an 8-character prompt.
# The trained model's context (32 characters on a CPU) is too short to show it: once the window slides,
# every position moves and the cache has to be refilled (section 7). So this experiment builds a model
# whose context holds the whole output, at the size of nanoGPT's CPU recipe (4 layers, 4 heads, 128
# dimensions) on a CPU and of the trained model on a GPU. Its weights are random: the speed does not
# depend on them, and the tokens must be the same with and without the cache either way.

# %% tags=["otter_ignore"]
# Experiment (not graded): tokens per second of generate with and without the cache, 256 new tokens
NEW_TOKENS, PROMPT = 256, 8
speed_config = sized(dict(d_model=128, num_heads=4, num_layers=4), dict(config, dropout=0.0))
seed_everything(0)
speed_model = MiniGPT(tokenizer.vocab_size, PROMPT + NEW_TOKENS, **speed_config).to(device).eval()
prompt = torch.tensor([tokenizer.encode(text[:PROMPT])], device=device)  # (1, PROMPT)
speed, outputs = {}, {}
for use_cache in (False, True):
    speed_model.generate(prompt, 8, use_cache=use_cache)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    outputs[use_cache] = speed_model.generate(prompt, NEW_TOKENS, generator=torch.Generator(device=device).manual_seed(0),
                                              use_cache=use_cache)
    if device.type == "cuda":
        torch.cuda.synchronize()
    speed[use_cache] = NEW_TOKENS / (time.perf_counter() - start)
same = torch.equal(outputs[True], outputs[False])
print(f"MiniGPT {speed_config}, {NEW_TOKENS} new tokens on {device.type}: without the cache "
      f"{speed[False]:.0f} tokens/s, with it {speed[True]:.0f} tokens/s: {speed[True] / speed[False]:.1f}x; "
      f"the same tokens: {same}")
assert same, "use_cache=True should give exactly the tokens of use_cache=False"

# %% [markdown]
# Without the cache, step `t` runs the model on all `t` tokens so far; with it, on one token, attending to
# `t` cached keys. The matrix products (projections and feed-forward) per step go from growing with `t` to
# constant; the attention of the one new query still grows with `t` (it reads `t` cached keys and values), but
# at these sizes it is the smaller term. So the gain grows with the number of tokens generated. On a shared 2-core CPU (one
# thread) this cell measured 28 tokens per second without the cache and 116 with it, 4.1x, while about
# twenty other jobs ran (28 against 129, 4.5x, in a second run); the same model and settings in a script at
# a quieter moment gave 49 against 207, 4.2x. The tokens were identical every time.
#
# ### 8.5 What the trained model attends to
#
# One attention map per layer and head, for a line of the play: row `t` is how much position `t` (a query)
# attends to each earlier character (the keys); every row sums to 1 and the upper triangle is 0 (causal).
# The maps are read off the trained model by a forward hook on each layer's `attn`, which records its input
# (the output of `ln1`); the weights are `softmax(q k^T / sqrt(d_h))` under the causal mask, from `qkv`.

# %% tags=["otter_ignore"]
# Experiment (not graded): the trained mini-GPT's attention maps, per layer and head, on a line of the play
line = "wherefore art thou Romeo?"
ids = torch.tensor([tokenizer.encode(line)], device=device)  # (1, T)
inputs = {}
hooks = [block.attn.register_forward_hook(lambda module, args, out, i=i: inputs.__setitem__(i, args[0]))
         for i, block in enumerate(gpt.blocks)]
with torch.no_grad():
    gpt(ids)
for hook in hooks:
    hook.remove()
T, heads = ids.shape[1], config["num_heads"]
causal = torch.ones(T, T, dtype=torch.bool, device=device).tril()  # (T, T)
for i, block in enumerate(gpt.blocks):
    with torch.no_grad():
        q, k, _ = block.attn.qkv(inputs[i]).split(config["d_model"], dim=-1)  # 2 x (1, T, d)
        q, k = (t.view(1, T, heads, -1).transpose(1, 2) for t in (q, k))  # (1, h, T, d_h)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (1, h, T, T)
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)  # (1, h, T, T)
    attention_grid(weights[0].cpu(), list(line), list(line), suptitle=f"layer {i}: attention per head",
                   ncols=min(heads, 6))
    plt.show()

# %% [markdown]
# What to look at: how far below the diagonal the weights of each head reach in each layer, and whether a
# row's weight is spread or concentrated on one earlier character. Your maps differ in the details with
# another seed or size.

# %% [raw]
# # BEGIN QUESTION
# name: attention_by_layer
# manual: true
# points: 2
# rubric:
#   - criterion: "Describes the own maps of both layers: the first layer's heads in a narrow band on and just below
#       the diagonal, the second layer's spread further back over the line, with an example of a row"
#     points: 1
#   - criterion: "Explains the division of labour: the first layer gathers the last one or two characters (what
#       spelling needs), and the second layer, reading vectors that already summarise their neighbourhood, looks
#       further back (word starts, earlier words)"
#     points: 0.5
#   - criterion: "Explains why the upper triangle is exactly 0 and each row sums to 1 (the causal mask with -inf
#       before the softmax)"
#     points: 0.5

# %% [markdown]
# **Written question (2 points).** Describe your attention maps: how far back do the heads of the first layer
# look, and those of the second? Give one row of your maps as an example (a query character and where it
# looks). Why would a character-level language model organise its two layers this way? And why is the upper
# triangle of every map exactly 0?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# In the reference run (fast size, 2 layers of 4 heads, seed 0), on the line *wherefore art thou Romeo?*, the
# four heads of the first layer put 79% to 85% of each row's weight on the character itself and the two before
# it (a mean distance of 1.4 to 1.6 characters): a narrow band on and just below the diagonal. The heads of the
# second layer put only 27% to 38% there and reached on average 5 to 7 characters back, spread over the line
# (the largest weight of a row was 0.24 to 0.36 on average, against 0.49 to 0.59 in the first layer).
#
# The first layer gathers the last one or two characters, which is what spelling needs: after `th` comes
# `e`, `o` or `a`. Its output at each position is then a summary of that position's neighbourhood, so the
# second layer, comparing those summaries, can look further back for the start of the current word or for
# the words before it, at no extra cost. Local first, wider later is the usual pattern of stacked attention
# (and of stacked convolutions).
#
# The upper triangle is exactly 0 because of the causal mask: scores of later positions are set to $-\infty$
# before the softmax, and $e^{-\infty} = 0$; the softmax renormalises the rest, so every row sums to 1. A
# language model must not see the character it is predicting.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### Going further (not graded)
#
# - Train with the BPE tokens of section 2.1 instead of characters (the loss is then per token: divide by
#   the characters per token to compare).
# - How does the validation loss change with `block_size` 16, 32, 64? With 1, 2, 4 layers?
# - Untie `lm_head` from `tok_emb`: more parameters, better or worse?
