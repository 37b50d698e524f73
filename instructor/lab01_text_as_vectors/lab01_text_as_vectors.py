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
# # Lab 01: Text as vectors
#
# A neural network computes with numbers, so before it can read a sentence the sentence has to become a
# vector. This lab builds the classic pipeline, one idea at a time, and runs every piece on real text:
#
# 1. `tokenize`: cut a string into tokens, and look at how often words occur (Zipf's law).
# 2. `build_vocab`: give every frequent token an integer id.
# 3. `encode`: turn a list of tokens into a fixed-length tensor of ids.
# 4. `bag_of_words`: one count (or presence bit) per vocabulary word.
# 5. `tfidf`: weigh the counts by how rare each word is, and find similar sentences.
# 6. `MeanEmbeddingClassifier`: learn a vector per word and classify a sentence by their mean.
# 7. Experiments: where word-order-free models stop, on a corpus built to show it, and the real
#    benchmark (IMDB movie reviews) at full size.
#
# Lab 02 learns word vectors from context (Word2Vec), Lab 03 reads local word order with convolutions,
# Lab 04 reads whole sequences with recurrent networks, and Lab 05 starts attention.
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
# - Plain Python (`re`, `collections.Counter`, `sorted`) for the text functions; `torch` and `torch.nn`
#   for the tensor ones. No ready-made tokenizer or vectorizer (scikit-learn, torchtext, ...).
# - Token id 0 is `<pad>` and id 1 is `<unk>` in this lab (later labs add `<bos>` and `<eos>`).
#   Batches are right-padded with 0.
# - Tensor functions keep a floating input's dtype (float32 or float64), work on whatever device their
#   inputs are on (CPU or GPU) and do not change their inputs in place.
#
# **How you are graded.** After each question, `grader.check("name")` runs a few public checks. The
# grade comes from hidden tests that call your functions on other inputs (unicode text, ties in the
# counts, padding, empty rows, float32 and float64, random weights) and compare the results, and for
# the classifier the gradients, with a reference. Cells whose first line says *Experiment* or *Demo*
# are not run by the grader: do not define anything graded in them.
#
# **Data.** Real English sentences come from Multi30k (29,000 image captions, downloaded once into a
# cache by `attnlab.kit.datasets.multi30k`); the classifiers first train on a small synthetic movie-review
# corpus (`attnlab.kit.datasets.sentiment`, offline), then, at full size, on IMDB (50,000 real reviews,
# `attnlab.kit.datasets.imdb`).
#
# **Sizes.** On a CPU the experiments use small sizes and the whole notebook runs in about a minute; on a
# GPU (Colab: *Runtime > Change runtime type*) they use larger ones. `sized(fast, full)` picks between
# the two; set the environment variable `ATTNLAB_FAST=1` or `0` to force either.

# %%
# The graded names and signatures follow the course contract: docs/CURRICULUM.md, Lab 01.
import math
import re
from collections import Counter

import matplotlib.pyplot as plt
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 (F.one_hot, F.pad, ... for your answers)
from torch.utils.data import DataLoader, Subset, TensorDataset

from attnlab.kit.datasets.download import DatasetUnavailable
from attnlab.kit.datasets.multi30k import load_multi30k
from attnlab.kit.datasets.sentiment import bag_of_words_ceiling, sentiment_splits
from attnlab.kit.device import sized
from attnlab.kit.plotting import line_plot, plot_history
from attnlab.kit.seeding import seed_everything
from attnlab.kit.training import evaluate, fit

# %% [markdown]
# ## 1. Tokens
#
# A *token* is the unit a model sees. Here a token is a word, a number, or a single punctuation mark:
#
# - the text is **lowercased** first (`str.lower()`), so `The` and `the` are one token;
# - a token is a **maximal run of word characters and apostrophes**. Word characters are letters (of any
#   alphabet: `é`, `ß`, `λ`, `日` count), digits and the underscore, exactly what `\w` matches in a
#   Python regular expression. The apostrophe is the ASCII `'`, so `don't` and `rock'n'roll` are one
#   token each, and so is `'quoted'`;
# - every other character that is not white space is a token **on its own**: `!!` is two tokens, `3.14`
#   is `3`, `.`, `14`, and an emoji is one token;
# - white space (spaces, tabs, newlines, non-breaking spaces) only separates tokens.
#
# Worked example:
#
# ```
# tokenize("Don't panic: it's 3.14 -- NOT 42!!")
# == ["don't", "panic", ":", "it's", "3", ".", "14", "-", "-", "not", "42", "!", "!"]
# tokenize("Café naïve, 'quoted' snake_case 🙂")
# == ["café", "naïve", ",", "'quoted'", "snake_case", "🙂"]
# ```
#
# *Hint.* One call of `re.findall` with two alternatives does it: `[\w']+` for the runs, then a class
# for "one character that is neither a word character nor white space" (`\s` is white space; a class
# can be negated with `^`). Use a raw string `r"..."` for the pattern.

# %% [raw]
# # BEGIN QUESTION
# name: tokenize
# points: 5

# %%
def tokenize(text):
    """Lowercase ``text`` and cut it into tokens.

    A token is a maximal run of word characters (letters, digits, underscore) and apostrophes ('), or
    one character that is neither a word character nor white space.

    Args:
        text: str
    Returns:
        list[str], the tokens in order
    """
    # BEGIN SOLUTION
    return re.findall(r"[\w']+|[^\w\s]", text.lower())
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: words, apostrophes, digits, punctuation
tokens = tokenize("Don't panic: it's 3.14 -- NOT 42!!")
expected = ["don't", "panic", ":", "it's", "3", ".", "14", "-", "-", "not", "42", "!", "!"]
assert tokens == expected, f"tokenize gave {tokens}, expected {expected}"

# %%
# letters of any alphabet, underscores and emoji
tokens = tokenize("Café naïve, 'quoted' snake_case 🙂")
expected = ["café", "naïve", ",", "'quoted'", "snake_case", "🙂"]
assert tokens == expected, f"tokenize gave {tokens}, expected {expected}"

# %%
# white space only separates, and empty text has no token
assert tokenize("  a\tb\nc\u00a0d  ") == ["a", "b", "c", "d"], (
    "tabs, newlines and non-breaking spaces separate tokens and are never tokens themselves")
assert tokenize("") == [] and tokenize("   ") == [], "text without tokens should give an empty list"
assert isinstance(tokenize("a b"), list), "return a list of strings"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### Zipf's law on real text
#
# Count the tokens of the 29,000 English captions of Multi30k and sort the words by frequency. A handful
# of words (`a`, `.`, `in`, `the`, `on`) make up a large share of all tokens, while most words occur once
# or twice. George Kingsley Zipf noticed that the frequency $f(r)$ of the word of rank $r$ falls roughly
# like $1/r$:
#
# $$f(r) \approx \frac{C}{r^{s}}, \qquad s \approx 1, \qquad\text{so}\qquad \log f(r) \approx \log C - s
# \log r,$$
#
# a straight line of slope $-s$ on a log-log plot. This is why vocabularies are cut (section 2): keeping
# a few thousand words covers almost every token, and the long tail is mostly names, typos and rare words.

# %% tags=["otter_ignore"]
# Experiment (not graded): Zipf's law on the English captions of Multi30k
if device.type == "cpu":
    torch.set_num_threads(1)  # this lab's tensors are small: one CPU thread is faster than several
captions = [en for en, _ in load_multi30k("train", src="en", tgt="de")]
caption_tokens = [tokenize(c) for c in captions]
word_counts = Counter(t for tokens in caption_tokens for t in tokens)
frequencies = torch.tensor(sorted(word_counts.values(), reverse=True), dtype=torch.float64)  # (types,)
ranks = torch.arange(1, len(frequencies) + 1, dtype=torch.float64)  # (types,)
fit_range = slice(9, 2000)  # ranks 10 to 2000: past the few function words, before the tail of 1s
slope, intercept = torch.linalg.lstsq(
    torch.stack([ranks[fit_range].log(), torch.ones_like(ranks[fit_range])], dim=1),  # (n, 2)
    frequencies[fit_range].log()[:, None],  # (n, 1)
).solution[:, 0].tolist()

fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
line_plot(ranks, {"Multi30k English captions": frequencies,
                  f"fit: C / rank^{-slope:.2f}": math.exp(intercept) * ranks ** slope},
          xlabel="rank of the word", ylabel="count", title="Zipf's law", logx=True, logy=True, ax=ax)
plt.show()
total = int(frequencies.sum())
print(f"{len(captions)} captions, {total} tokens, {len(word_counts)} distinct tokens; fitted slope {slope:.2f}")
print("most frequent:", ", ".join(f"{w} ({c})" for w, c in word_counts.most_common(12)))
once = sum(1 for c in word_counts.values() if c == 1)
print(f"{once} tokens ({once / len(word_counts):.0%} of the distinct ones) occur exactly once")
for k in (10, 100, 1000, 5000):
    print(f"the {k:>5} most frequent tokens cover {frequencies[:k].sum().item() / total:.1%} of the text")

# %% [markdown]
# The counts fall on a nearly straight line over three orders of magnitude, a little steeper than $-1$
# (we measured a slope of about $-1.25$ for the ranks 10 to 2,000: Multi30k's captions are short and
# simple, with a small vocabulary). The 10 most frequent tokens are more than a third of the text, the
# 1,000 most frequent cover about 90% and the 5,000 most frequent 98.5%, while 40% of the distinct tokens
# occur only once.

# %% [markdown]
# ## 2. A vocabulary
#
# A *vocabulary* maps each token to an integer id. Ours reserves two ids:
#
# - `<pad>` = 0 fills the end of short sentences in a batch (section 3);
# - `<unk>` = 1 stands for every token that is not in the vocabulary.
#
# The other tokens get the ids 2, 3, ... **by descending count** over all the token lists, and tokens with
# the same count **in alphabetical order** (Python's `sorted` order of strings, so `"!"` comes before
# `"a"`). Two arguments cut the long tail:
#
# - `min_freq`: only tokens that occur **at least** `min_freq` times are kept;
# - `max_size`: the vocabulary has at most `max_size` entries **including the two specials**, so at most
#   `max_size - 2` tokens. `max_size=None` means no limit. A `max_size` below 2 cannot hold the specials:
#   raise a `ValueError` that names the value (`max_size=1 is too small: ...`).
#
# Worked example, with the counts `a`: 3, `b`: 2, `c`: 2, `d`: 1:
#
# ```
# lists = [["b", "a", "a"], ["c", "b", "a"], ["c"], ["d"]]
# build_vocab(lists)              == {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3, "c": 4, "d": 5}
# build_vocab(lists, min_freq=2)  == {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3, "c": 4}
# build_vocab(lists, max_size=4)  == {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3}   # b and c tie: b first
# ```
#
# *Careful.* `Counter.most_common()` orders ties by first appearance, not alphabetically; `sorted` with a
# key such as `(-count, token)` does both orders at once.

# %% [raw]
# # BEGIN QUESTION
# name: build_vocab
# points: 5

# %%
def build_vocab(token_lists, max_size=None, min_freq=1):
    """Token -> id: "<pad>" = 0, "<unk>" = 1, then the tokens by descending count, ties alphabetical.

    Args:
        token_lists: list of lists of tokens (what tokenize returns, one list per text)
        max_size:    at most this many entries, the two specials included (None: no limit);
                     ValueError (naming the value) when it is below 2
        min_freq:    keep only tokens that occur at least min_freq times in all
    Returns:
        dict[str, int] with the ids 0, 1, ..., len - 1
    """
    # BEGIN SOLUTION
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size} is too small: the vocabulary needs room for <pad> and <unk>")
    counts = Counter(token for tokens in token_lists for token in tokens)
    kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
    if max_size is not None:
        kept = kept[: max_size - 2]
    vocab = {"<pad>": 0, "<unk>": 1}
    for token in kept:
        vocab[token] = len(vocab)
    return vocab
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example: counts first, ties alphabetical
lists = [["b", "a", "a"], ["c", "b", "a"], ["c"], ["d"]]
vocab = build_vocab(lists)
expected = {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3, "c": 4, "d": 5}
assert vocab == expected, f"build_vocab gave {vocab}, expected {expected}"

# %%
# min_freq keeps tokens seen at least that many times
lists = [["b", "a", "a"], ["c", "b", "a"], ["c"], ["d"]]
vocab = build_vocab(lists, min_freq=2)
expected = {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3, "c": 4}
assert vocab == expected, f"build_vocab(lists, min_freq=2) gave {vocab}, expected {expected}"

# %%
# max_size counts the two specials
lists = [["b", "a", "a"], ["c", "b", "a"], ["c"], ["d"]]
vocab = build_vocab(lists, max_size=4)
expected = {"<pad>": 0, "<unk>": 1, "a": 2, "b": 3}
assert vocab == expected, f"build_vocab(lists, max_size=4) gave {vocab}, expected {expected}"
assert build_vocab(lists, max_size=2) == {"<pad>": 0, "<unk>": 1}, "max_size=2 leaves room for the specials only"
assert build_vocab([]) == {"<pad>": 0, "<unk>": 1}, "no text: only the two specials"

# %%
# a max_size below 2 raises a ValueError naming it
try:
    build_vocab([["a"]], max_size=1)
except ValueError as exc:
    assert "1" in str(exc), f"the message should name max_size=1, got {exc!r}"
else:
    raise AssertionError("build_vocab(..., max_size=1) should raise ValueError: no room for <pad> and <unk>")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 3. Encoding a sentence
#
# A model reads batches of sentences, and a batch is a rectangle: every row has the same length
# `max_len`. `encode(tokens, vocab, max_len)` turns one token list into a row of ids:
#
# - each token becomes its id, and a token missing from `vocab` becomes `<unk>` = 1;
# - a list longer than `max_len` is **truncated** (the first `max_len` tokens are kept);
# - a shorter one is **right-padded** with `<pad>` = 0.
#
# The result is a `LongTensor` (`torch.long`, the dtype `nn.Embedding` wants) of shape `(max_len,)`.
#
# ```
# vocab = {"<pad>": 0, "<unk>": 1, "the": 2, "cat": 3, "sat": 4}
# encode(["the", "cat", "sat"], vocab, 5)         == tensor([2, 3, 4, 0, 0])
# encode(["the", "dog", "sat"], vocab, 5)         == tensor([2, 1, 4, 0, 0])   # dog is unknown
# encode(["the", "cat", "sat", "sat"], vocab, 2)  == tensor([2, 3])            # truncated
# ```

# %% [raw]
# # BEGIN QUESTION
# name: encode
# points: 4

# %%
def encode(tokens, vocab, max_len):
    """Ids of ``tokens``, unknown tokens -> 1, truncated to ``max_len`` and right-padded with 0.

    Shapes:
        tokens:  list[str] of any length
        vocab:   dict[str, int] with "<pad>" = 0 and "<unk>" = 1
        returns: LongTensor (max_len,)
    """
    # BEGIN SOLUTION
    ids = [vocab.get(token, 1) for token in tokens[:max_len]]
    return torch.tensor(ids + [0] * (max_len - len(ids)), dtype=torch.long)
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# known ids, <unk> for unknown tokens, <pad> at the end
from attnlab.kit.expect import expect_equal

vocab = {"<pad>": 0, "<unk>": 1, "the": 2, "cat": 3, "sat": 4}
expect_equal(encode(["the", "cat", "sat"], vocab, 5), [2, 3, 4, 0, 0], 'encode(["the", "cat", "sat"], vocab, 5)')
expect_equal(encode(["the", "dog", "sat"], vocab, 5), [2, 1, 4, 0, 0], 'encode(["the", "dog", "sat"], vocab, 5)')

# %%
# long lists are truncated, empty ones are all padding
from attnlab.kit.expect import expect_equal

vocab = {"<pad>": 0, "<unk>": 1, "the": 2, "cat": 3, "sat": 4}
expect_equal(encode(["the", "cat", "sat", "sat"], vocab, 2), [2, 3], "truncated to max_len=2")
expect_equal(encode([], vocab, 3), [0, 0, 0], "an empty list")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 4. Bag of words
#
# The simplest sentence vector forgets the order: one number per vocabulary word. For a batch of encoded
# sentences `ids (B, L)` and a vocabulary of `V` words, `bag_of_words(ids, V, binary)` returns a float32
# tensor `(B, V)` whose entry `[b, w]` is
#
# - `binary=True` (the default): 1.0 if word `w` occurs in sentence `b`, else 0.0;
# - `binary=False`: how many times word `w` occurs in sentence `b`.
#
# Padding is not a word: **column 0 stays 0**. `<unk>` (column 1) is counted like any word. Every id must
# lie in `[0, vocab_size)`; raise a `ValueError` that names the offending id and `vocab_size` otherwise
# (indexing with it would fail with a message that does not say why, or, on a GPU, not at all).
#
# ```
# ids = tensor([[2, 3, 2, 0],          bag_of_words(ids, 5, binary=False) == [[0, 0, 2, 1, 0],
#               [4, 1, 0, 0]])                                                  [0, 1, 0, 0, 1]]
# ```
#
# *Hints.* `torch.zeros(B, V).scatter_add_(1, ids, ones)` adds 1 at `[b, ids[b, t]]` for every `t`;
# `F.one_hot(ids, V).sum(1)` does the same with a `(B, L, V)` intermediate. Then zero column 0, and for
# the binary bag compare with 0.

# %% [raw]
# # BEGIN QUESTION
# name: bag_of_words
# points: 4

# %%
def bag_of_words(ids, vocab_size, binary=True):
    """Bag-of-words vectors of a batch of encoded sentences; column 0 (<pad>) stays 0.

    Shapes:
        ids:     LongTensor (B, L), every id in [0, vocab_size); ValueError (naming the id) otherwise
        returns: float32 (B, V) with V = vocab_size; [b, w] = 1.0 if w occurs in row b else 0.0
                 (binary=True), or the number of times it occurs (binary=False)
    """
    # BEGIN SOLUTION
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        bad = int(ids.max()) if int(ids.max()) >= vocab_size else int(ids.min())
        raise ValueError(f"id {bad} is outside [0, vocab_size={vocab_size}): encode with the same vocabulary")
    bags = torch.zeros(ids.shape[0], vocab_size, dtype=torch.float32, device=ids.device)  # (B, V)
    bags.scatter_add_(1, ids, torch.ones(ids.shape, dtype=torch.float32, device=ids.device))
    bags[:, 0] = 0.0  # padding is not a word
    return (bags > 0).float() if binary else bags
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# counts and presence bits of the worked example
from attnlab.kit.expect import expect_close

ids = torch.tensor([[2, 3, 2, 0], [4, 1, 0, 0]])
expect_close(bag_of_words(ids, 5, binary=False), [[0, 0, 2, 1, 0], [0, 1, 0, 0, 1]], "bag_of_words(ids, 5, binary=False)")
expect_close(bag_of_words(ids, 5), [[0, 0, 1, 1, 0], [0, 1, 0, 0, 1]], "bag_of_words(ids, 5) (binary by default)")

# %%
# float32 of shape (B, vocab_size), padding never counted
ids = torch.tensor([[0, 0, 0], [7, 7, 0]])
bags = bag_of_words(ids, 10, binary=False)
assert bags.shape == (2, 10), f"the shape should be (B, vocab_size) = (2, 10), got {tuple(bags.shape)}"
assert bags.dtype == torch.float32, f"the bags should be float32, got {bags.dtype}"
assert (bags[:, 0] == 0).all(), "column 0 is <pad>: it must stay 0"
assert bags[1, 7] == 2, "row 1 holds id 7 twice"

# %%
# an id outside [0, vocab_size) raises a ValueError naming it
try:
    bag_of_words(torch.tensor([[2, 9]]), 5)
except ValueError as exc:
    assert "9" in str(exc), f"the message should name the id 9, got {exc!r}"
else:
    raise AssertionError("bag_of_words with id 9 and vocab_size=5 should raise ValueError")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 5. TF-IDF
#
# In a bag of words every word weighs the same, so two captions look alike because both contain `a`,
# `in` and `.`. *TF-IDF* (term frequency times inverse document frequency) down-weights the words that
# occur everywhere. For a matrix of counts `(N, V)`, one row per document:
#
# - `tf[d, w]` is the count itself (`counts[d, w]`);
# - `df[w]` is the number of documents (rows) in which `w` occurs at least once;
# - `idf[w] = log(N / df[w])` (natural log): 0 for a word in every document, large for a rare one;
# - `tfidf[d, w] = tf[d, w] * idf[w]`, and **0 where `df[w] = 0`** (a word no document contains, such
#   as `<pad>`: its `log(N / 0)` would be infinite, and `0 * inf` is `nan`);
# - with `normalize=True` (the default) each row is divided by its L2 norm, so that the dot product of
#   two rows is their cosine similarity. A row whose vector is all zeros stays all zeros (no `nan`).
#
# The result keeps the dtype of floating counts (float32 or float64); integer counts give float32.
#
# Worked example, with the columns `<pad>, <unk>, the, cat, dog, sat` and N = 4 documents:
#
# ```
# counts = [[0, 0, 1, 1, 0, 0],    # the cat
#           [0, 0, 1, 0, 2, 1],    # the dog dog sat
#           [0, 0, 2, 0, 0, 0],    # the the
#           [0, 1, 1, 1, 0, 1]]    # the cat sat <unk>
# df  = [0, 1, 4, 2, 1, 2]
# idf = [0, log 4, log 1, log 2, log 4, log 2] = [0, 1.3863, 0, 0.6931, 1.3863, 0.6931]
# tfidf(counts, normalize=False) = [[0, 0,      0, 0.6931, 0,      0     ],
#                                   [0, 0,      0, 0,      2.7726, 0.6931],
#                                   [0, 0,      0, 0,      0,      0     ],
#                                   [0, 1.3863, 0, 0.6931, 0,      0.6931]]
# tfidf(counts)                  = [[0, 0,      0, 1,      0,      0     ],
#                                   [0, 0,      0, 0,      0.9701, 0.2425],
#                                   [0, 0,      0, 0,      0,      0     ],     # stays 0
#                                   [0, 0.8165, 0, 0.4082, 0,      0.4082]]
# ```
#
# *Hints.* `(counts > 0).sum(dim=0)` counts the documents of each word; `torch.where(df > 0, ..., 0)`
# guards the zeros; `x.norm(dim=1, keepdim=True)` is the norm of each row `(N, 1)`, and dividing by
# `norm.clamp_min(1e-12)` (or `torch.nn.functional.normalize`) leaves zero rows at zero.

# %% [raw]
# # BEGIN QUESTION
# name: tfidf
# points: 6

# %%
def tfidf(counts, normalize=True):
    """TF-IDF weights of a count matrix: counts * log(N / df), 0 where df = 0, rows L2-normalised.

    Shapes:
        counts:  (N, V) counts (float32, float64, or an integer dtype), one row per document
        returns: (N, V) in the counts' floating dtype (float32 for integer counts)
    """
    # BEGIN SOLUTION
    if not counts.is_floating_point():
        counts = counts.float()
    n_docs = counts.shape[0]
    df = (counts > 0).sum(dim=0)  # (V,) documents containing each word
    idf = torch.where(df > 0, torch.log(n_docs / df.clamp_min(1).to(counts.dtype)),
                      torch.zeros((), dtype=counts.dtype, device=counts.device))  # (V,)
    weights = counts * idf  # (N, V)
    if normalize:
        weights = weights / weights.norm(dim=1, keepdim=True).clamp_min(1e-12)  # (N, V) / (N, 1)
    return weights
    # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# the worked example, without normalisation
from attnlab.kit.expect import expect_close

counts = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 0, 1, 0, 2, 1], [0, 0, 2, 0, 0, 0], [0, 1, 1, 1, 0, 1]],
                      dtype=torch.float32)
a, b = math.log(4), math.log(2)
expected = [[0, 0, 0, b, 0, 0], [0, 0, 0, 0, 2 * a, b], [0, 0, 0, 0, 0, 0], [0, a, 0, b, 0, b]]
expect_close(tfidf(counts, normalize=False), expected, "tfidf(counts, normalize=False)", atol=1e-4)

# %%
# the worked example, rows normalised; a zero row stays 0
from attnlab.kit.expect import expect_close

counts = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 0, 1, 0, 2, 1], [0, 0, 2, 0, 0, 0], [0, 1, 1, 1, 0, 1]],
                      dtype=torch.float32)
expected = [[0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0.9701, 0.2425], [0, 0, 0, 0, 0, 0], [0, 0.8165, 0, 0.4082, 0, 0.4082]]
expect_close(tfidf(counts), expected, "tfidf(counts)", atol=1e-4)

# %%
# float64 counts stay float64, and the input is left alone
counts = torch.tensor([[0.0, 3.0, 1.0], [0.0, 0.0, 2.0]], dtype=torch.float64)
before = counts.clone()
out = tfidf(counts)
assert out.dtype == torch.float64, f"float64 counts should give float64 weights, got {out.dtype}"
assert torch.equal(counts, before), "tfidf changed its input in place: work on new tensors"
assert torch.isfinite(out).all(), "a word no document contains (df = 0) must get 0, not nan or inf"

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### Similar sentences with TF-IDF
#
# Each Multi30k caption becomes a TF-IDF row; since the rows have norm 1, `X @ X.T` holds the cosine
# similarity of every pair of captions. For a few captions we show the most similar other caption, once
# with raw counts (rows normalised, no idf) and once with TF-IDF. Then a number: over a few hundred
# random captions, how often the nearest neighbour shares at least one *content* word (a token outside
# the 30 most frequent ones) with the query.

# %% tags=["otter_ignore"]
# Experiment (not graded): nearest neighbours among real captions, raw counts against TF-IDF
n_docs = sized(8000, 20000)
m30k_vocab = build_vocab(caption_tokens[:n_docs], min_freq=2, max_size=sized(3000, 6000))
doc_ids = torch.stack([encode(tokens, m30k_vocab, 40) for tokens in caption_tokens[:n_docs]])  # (N, 40)
doc_counts = torch.cat([bag_of_words(doc_ids[i:i + 1000], len(m30k_vocab), binary=False)
                        for i in range(0, n_docs, 1000)])  # (N, V), in blocks of 1000 rows
representations = {"counts": doc_counts / doc_counts.norm(dim=1, keepdim=True).clamp_min(1e-12),  # no idf
                   "tf-idf": tfidf(doc_counts)}
print(f"{n_docs} captions, vocabulary of {len(m30k_vocab)} tokens")


def nearest(x, queries):
    """For each row index in `queries`: the most similar other row of x (N, V), rows of norm 1, and its cosine."""
    sims = torch.sparse.mm(x.to_sparse(), x[queries].T).T  # (Q, N); x is mostly zeros, so sparse is fast
    sims[torch.arange(len(queries)), queries] = -1.0  # a caption is not its own neighbour
    best = sims.argmax(dim=1)  # (Q,)
    return best.tolist(), sims.gather(1, best[:, None])[:, 0].tolist()


for keyword in ("surfboard", "violin", "umbrella", "blacksmith"):
    query = next(i for i, tokens in enumerate(caption_tokens[:n_docs]) if keyword in tokens)
    print(f"\nquery:   {captions[query]}")
    for name, x in representations.items():
        (best,), (cosine,) = nearest(x, [query])
        print(f"{name:>7}: {captions[best]}  (cosine {cosine:.2f})")

stop = {w for w, _ in word_counts.most_common(30)}
gen = torch.Generator().manual_seed(0)
queries = torch.randperm(n_docs, generator=gen)[:300].tolist()
for name, x in representations.items():
    neighbours, _ = nearest(x, queries)
    shared = sum(bool((set(caption_tokens[q]) & set(caption_tokens[b])) - stop) for q, b in zip(queries, neighbours))
    print(f"{name:>7}: the nearest neighbour shares a content word with the query for {shared / len(queries):.0%} "
          "of 300 random captions")

# %% [raw]
# # BEGIN QUESTION
# name: tfidf_neighbours
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes their own two shares of neighbours with a content word (counts and TF-IDF) and one query
#       whose neighbour changed"
#     points: 0.5
#   - criterion: "Explains with idf = log(N / df) that words in almost every caption get an idf near 0, so they no
#       longer decide the cosine, while rare words get a large weight"
#     points: 1
#   - criterion: "Notes that both representations ignore word order, so two captions with the same words in another
#       order are identical"
#     points: 0.5
#   - criterion: "Explains the difference by the normalisation of the rows, which both representations share"
#     points: -0.5

# %% [markdown]
# **Written question (2 points).** Look at what your cell printed. Quote the two shares of the last lines
# (raw counts and TF-IDF) and one query whose nearest caption changed between the two representations.
# Explain the difference with the definition of `idf` in section 5: which words decide the cosine with raw
# counts, and which with TF-IDF? (You may print `idf` of a few words in a scratch cell.) Finally, name one
# thing that neither representation can tell apart.

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# At the fast size (8,000 captions) the nearest neighbour shares a content word with the query for 86% of
# the 300 random captions with raw counts and for 100% with TF-IDF. For the surfboard query, raw counts pick
# "A child with a sweater is holding a pen in his mouth." (cosine 0.63), which shares `a`, `child`,
# `holding` and `his`; TF-IDF picks "A man on a surfboard riding a giant wave." (cosine 0.50).
#
# With raw counts every occurrence weighs the same, so the frequent words (`a`, `.`, `in`, `the`, `man`),
# which occur in most captions and often twice, dominate the dot product: the nearest caption is one with
# the same function words. TF-IDF multiplies each count by `idf = log(N / df)`: `a` occurs in 6,899 of the
# 8,000 captions (idf 0.15) and `.` in 7,592 (idf 0.05), so they hardly count, while `surfboard` (7
# captions, idf 7.0) or `blacksmith` (2 captions, idf 8.3) dominate the row. The neighbours then share what
# the caption is about.
#
# Both are bags of words: `a dog bites a man` and `a man bites a dog` get the same vector (and the same
# holds for every caption whose words are permuted). Search engines ranked documents this way for decades.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 6. A classifier on the mean of learned embeddings
#
# A bag of words has one dimension per word, and knows nothing about words being alike: `great` and
# `excellent` are as far apart as `great` and `awful`. An **embedding** gives each word a short dense
# vector (say 32 numbers) that training adjusts: `nn.Embedding(vocab_size, embed_dim)` is a table of
# `vocab_size` rows, and `embedding(ids)` looks the rows up, `(B, L) -> (B, L, embed_dim)`.
#
# `MeanEmbeddingClassifier` turns a sentence into one vector by averaging the embeddings of its **real**
# tokens, then a linear layer gives the logits:
#
# $$\bar e = \frac{\sum_t m_t\, e_t}{\sum_t m_t}, \qquad m_t = 1 \text{ if token } t \text{ is not } \texttt{<pad>}
# \text{, else } 0, \qquad \text{logits} = \texttt{classifier}(\bar e).$$
#
# - Name the sub-layers exactly `embedding` (`nn.Embedding(vocab_size, embed_dim)`) and `classifier`
#   (`nn.Linear(embed_dim, num_classes)`): the grader loads its weights by these names.
# - With `num_classes == 1` the model returns one logit per sentence, shape `(B,)` (squeeze the last
#   dimension only, so that a batch of one gives `(1,)`); otherwise `(B, num_classes)`.
# - Every row has at least one real token. Padding must change nothing: the same sentence padded to a
#   longer length gets the same logits.
#
# *Hint.* `mask = (ids != 0).unsqueeze(-1)` is `(B, L, 1)`; convert it to the embeddings' dtype, multiply,
# sum over the positions and divide by `mask.sum(1)`.

# %% [raw]
# # BEGIN QUESTION
# name: MeanEmbeddingClassifier
# points: 6

# %%
class MeanEmbeddingClassifier(nn.Module):
    """Embedding -> mean over the real (non-pad) tokens -> linear.

    Args:
        vocab_size:  number of token ids (id 0 is <pad>)
        embed_dim:   width of the embeddings
        num_classes: 1 for a binary task (one logit), else the number of classes

    Attributes: embedding = nn.Embedding(vocab_size, embed_dim), classifier = nn.Linear(embed_dim, num_classes)
    """

    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        # BEGIN SOLUTION
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)
        # END SOLUTION

    def forward(self, ids):
        """Shapes:
            ids:     LongTensor (B, L), right-padded with 0, at least one real token per row
            returns: logits (B,) if num_classes == 1, else (B, num_classes)
        """
        # BEGIN SOLUTION
        emb = self.embedding(ids)  # (B, L, E)
        mask = (ids != 0).unsqueeze(-1).to(emb.dtype)  # (B, L, 1)
        mean = (emb * mask).sum(dim=1) / mask.sum(dim=1)  # (B, E)
        logits = self.classifier(mean)  # (B, C)
        return logits.squeeze(-1) if self.num_classes == 1 else logits
        # END SOLUTION


# %% [raw]
# # BEGIN TESTS

# %%
# sub-layers and the shapes of the logits
torch.manual_seed(0)
model = MeanEmbeddingClassifier(vocab_size=20, embed_dim=8)
assert isinstance(model.embedding, nn.Embedding), "embedding should be nn.Embedding(vocab_size, embed_dim)"
assert isinstance(model.classifier, nn.Linear) and model.classifier.out_features == 1, (
    "classifier should be nn.Linear(embed_dim, num_classes)")
ids = torch.tensor([[5, 6, 7, 0, 0], [3, 4, 0, 0, 0], [9, 8, 7, 6, 5]])
assert model(ids).shape == (3,), f"num_classes=1: the logits should have shape (B,) = (3,), got {tuple(model(ids).shape)}"
assert model(ids[:1]).shape == (1,), "a batch of one should give logits of shape (1,): squeeze(-1), not squeeze()"
assert MeanEmbeddingClassifier(20, 8, num_classes=3)(ids).shape == (3, 3), (
    "num_classes=3: the logits should have shape (B, 3)")

# %%
# the logit is the classifier of the mean real embedding
from attnlab.kit.expect import expect_close

torch.manual_seed(1)
model = MeanEmbeddingClassifier(vocab_size=10, embed_dim=4)
ids = torch.tensor([[2, 5, 0, 0]])
with torch.no_grad():
    mean = (model.embedding.weight[2] + model.embedding.weight[5]) / 2
    expected = model.classifier(mean[None])[:, 0]
    expect_close(model(ids), expected, "the logit of [2, 5, <pad>, <pad>]")

# %%
# padding changes nothing
torch.manual_seed(2)
model = MeanEmbeddingClassifier(vocab_size=20, embed_dim=8)
ids = torch.tensor([[5, 6, 7, 0], [3, 4, 0, 0]])
longer = torch.cat([ids, torch.zeros(2, 3, dtype=torch.long)], dim=1)
with torch.no_grad():
    assert torch.allclose(model(ids), model(longer), atol=1e-6), (
        "extra padding changed the logits: average over the real (non-pad) tokens only")

# %% [raw]
# # END TESTS

# %% [raw]
# # END QUESTION

# %% [markdown]
# ## 7. Experiments: where order-free models stop
#
# ### 7.1 The synthetic sentiment corpus
#
# `sentiment_splits` draws short movie reviews from about 70 words (offline, the same for the same seed),
# built so that the hard cases are frequent:
#
# - **plain** (about 30%): `the movie was really good`;
# - **negated** (about 30%): `the plot was not good`: the adjective's polarity is flipped, so the label
#   depends on a *combination* of two words;
# - **contrast** (about 40%), always drawn as *twin pairs* with the same words and opposite labels:
#   `the acting was good but the plot was dull` (negative) / `the acting was dull but the plot was good`
#   (positive). Only the order of the words tells them apart.
#
# Every model in this lab is **order-free**: a bag of words, and a mean of embeddings, give the two
# sentences of a twin pair exactly the same input. So the best any of them can do is one sentence of each
# pair: the corpus reports this *bag-of-words ceiling* with `bag_of_words_ceiling`. We tokenize the
# texts with your `tokenize`, build the vocabulary on the training split with your `build_vocab` and
# encode every sentence with your `encode`.

# %% tags=["otter_ignore"]
# Experiment (not graded): the sentiment corpus through your tokenizer, vocabulary and encoder
seed_everything(0)
splits = sentiment_splits(n_train=sized(4000, 20000), n_val=sized(500, 2000), n_test=sized(1000, 4000), seed=0)
MAX_LEN = 16
vocab = build_vocab([tokenize(text) for text in splits.texts["train"]])
data = {}
for name in ("train", "val", "test"):
    ids = torch.stack([encode(tokenize(text), vocab, MAX_LEN) for text in splits.texts[name]])  # (N, MAX_LEN)
    data[name] = TensorDataset(ids, getattr(splits, name).tensors[1])  # (ids, labels 0.0/1.0)
ceiling = bag_of_words_ceiling(splits.examples["test"])
print(f"{len(data['train'])} training, {len(data['val'])} validation, {len(data['test'])} test sentences; "
      f"vocabulary of {len(vocab)} tokens")
for kind in ("plain", "negated", "contrast"):
    for ex in [ex for ex in splits.examples["train"] if ex.kind == kind][:2]:
        print(f"  {kind:>8}  label {ex.label}  {ex.text}")
print(f"bag-of-words ceiling on the test split: {ceiling:.3f}")

# %% [markdown]
# ### 7.2 Three order-free classifiers
#
# - **bag of words + logistic regression**: a linear layer on your binary `bag_of_words`, one weight per
#   word. The score of a sentence is the sum of its words' weights.
# - **mean of embeddings**: your `MeanEmbeddingClassifier`, also a linear function of the word
#   frequencies (the mean of fixed vectors, then a linear layer).
# - **bag of words + a hidden layer** (an MLP): the same bag, but a hidden layer of ReLU units can combine
#   words (`not` *and* `good`).
#
# Which of them can learn negation, and how close to the ceiling do they get? Two written questions after
# the results ask you to answer from your own numbers. All three are trained the same way with
# `attnlab.kit.training.fit` (Adam, binary cross-entropy).

# %% tags=["otter_ignore"]
# Experiment (not graded): train the three order-free classifiers
class BagOfWordsClassifier(nn.Module):
    """Binary bag of words -> linear (logistic regression), or -> hidden ReLU layer -> linear (an MLP)."""

    def __init__(self, vocab_size, hidden=0):
        super().__init__()
        self.vocab_size = vocab_size
        layers = [nn.Linear(vocab_size, hidden), nn.ReLU(), nn.Linear(hidden, 1)] if hidden else [nn.Linear(vocab_size, 1)]
        self.net = nn.Sequential(*layers)

    def forward(self, ids):
        return self.net(bag_of_words(ids, self.vocab_size)).squeeze(-1)  # (B, V) -> (B,)


EPOCHS = sized(12, 20)
train_loader = DataLoader(data["train"], batch_size=128, shuffle=True, generator=seed_everything(0))
val_loader = DataLoader(data["val"], batch_size=512)
models = {"bag of words, linear": lambda: BagOfWordsClassifier(len(vocab)),
          "mean of embeddings": lambda: MeanEmbeddingClassifier(len(vocab), 32),
          "bag of words, MLP": lambda: BagOfWordsClassifier(len(vocab), hidden=64)}
trained, histories = {}, {}
for name, make in models.items():
    seed_everything(0)
    trained[name] = make()
    histories[name] = fit(trained[name], train_loader, epochs=EPOCHS, lr=1e-2, val_loader=val_loader,
                          device=device, desc=name, live_plot=False)  # one plot at the end is enough
plot_history(histories)
plt.show()

# %% tags=["otter_ignore"]
# Experiment (not graded): test accuracy by kind of sentence, against the bag-of-words ceiling
def accuracy_by_kind(model):
    """Test accuracy overall and per kind of sentence."""
    ids, labels = data["test"].tensors
    model.eval()
    with torch.no_grad():
        correct = ((model(ids.to(device)) > 0).float().cpu() == labels)
    kinds = [ex.kind for ex in splits.examples["test"]]
    result = {"all": correct.float().mean().item()}
    for kind in ("plain", "negated", "contrast"):
        result[kind] = correct[torch.tensor([k == kind for k in kinds])].float().mean().item()
    return result


results = {name: accuracy_by_kind(model) for name, model in trained.items()}
print(f"{'test accuracy':<24}" + "".join(f"{c:>10}" for c in ("all", "plain", "negated", "contrast")))
for name, res in results.items():
    print(f"{name:<24}" + "".join(f"{res[c]:>10.3f}" for c in res))
print(f"{'ceiling (order-free)':<24}{ceiling:>10.3f}")

fig, ax = plt.subplots(figsize=(7, 3.5), layout="constrained")
names = list(results)
ax.barh(names, [results[n]["all"] for n in names], color="tab:blue")
ax.axvline(ceiling, color="tab:red", linestyle="--", label=f"bag-of-words ceiling {ceiling:.2f}")
ax.axvline(0.5, color="gray", linestyle=":", label="chance")
ax.set_xlim(0, 1)
ax.set_xlabel("test accuracy")
ax.legend(loc="lower right", fontsize="small")
plt.show()

# %% [raw]
# # BEGIN QUESTION
# name: linear_negation
# manual: true
# points: 2
# rubric:
#   - criterion: "Quotes the negated-sentence accuracy of their three models from their table"
#     points: 0.5
#   - criterion: "Writes the four inequalities and derives that the weight of not must be both negative and positive"
#     points: 1
#   - criterion: "Says that the hidden ReLU units of the MLP can respond to not and an adjective together"
#     points: 0.5
#   - criterion: "Blames the failure of the linear models on too little training or data"
#     points: -0.5

# %% [markdown]
# **Written question (2 points).** Quote the accuracy on *negated* sentences of your three models. Then
# show that a logistic regression on the binary bag of words, with score
# $s = b + \sum_w x_w \theta_w$ (positive when $s > 0$), cannot classify all four sentences `good`
# (positive), `not good` (negative), `bad` (negative) and `not bad` (positive): write the inequality each
# sentence asks of $b, \theta_\text{not}, \theta_\text{good}, \theta_\text{bad}$ and combine them. Does the same
# argument hold for the mean of embeddings? What does the MLP have that removes the contradiction?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# At the fast size we measured on negated sentences 0.425 for the linear bag of words, 0.194 for the mean of
# embeddings and 1.000 for the MLP: the linear models are at or below chance, mostly *wrong*, since they learn
# that `good` is positive and `not good` contains `good`.
#
# The four sentences ask $b + \theta_\text{good} > 0$, $b + \theta_\text{not} + \theta_\text{good} < 0$,
# $b + \theta_\text{bad} < 0$ and $b + \theta_\text{not} + \theta_\text{bad} > 0$. Subtracting the first from the
# second gives $\theta_\text{not} < 0$; subtracting the third from the fourth gives $\theta_\text{not} > 0$: no
# weights satisfy all four. The mean of embeddings followed by a linear layer is also a linear function of
# the word frequencies, so the same argument holds (with the frequencies in place of the 0/1 entries).
#
# The MLP's hidden ReLU units are non-linear: a unit such as $\mathrm{relu}(x_\text{not} + x_\text{good} - 1)$
# is active only when both words occur, so the output layer can give `not good` its own negative weight.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [raw]
# # BEGIN QUESTION
# name: order_free_ceiling
# manual: true
# points: 2
# rubric:
#   - criterion: "Writes the overall accuracy of their MLP as the weighted mean of its accuracies per kind, with their
#       own numbers, and compares it with the ceiling"
#     points: 1
#   - criterion: "Explains that the two twins of a pair give the same input, hence the same prediction, and have
#       opposite labels, so exactly one of the two is right"
#     points: 0.5
#   - criterion: "Says that passing the ceiling needs the order of the words (convolutions, recurrence or positions in
#       attention)"
#     points: 0.5
#   - criterion: "Claims that a bigger or longer-trained order-free model could pass the ceiling"
#     points: -0.5

# %% [markdown]
# **Written question (2 points).** Write the overall test accuracy of your MLP as the weighted mean of its
# accuracies on the three kinds of sentences (the shares of plain, negated and contrast sentences in the
# test split are about 30%, 30% and 40%; use the numbers your cell printed) and compare it with the
# ceiling. Why does every model score *exactly* 0.500 on the contrast sentences, whatever its weights?
# What would a model need to see to pass the ceiling?

# %% [raw]
# # BEGIN SOLUTION

# %% [markdown]
# At the fast size the MLP scored 1.000 on plain and negated sentences and 0.500 on contrast sentences,
# 0.799 overall: about $0.3 \cdot 1 + 0.3 \cdot 1 + 0.4 \cdot 0.5 = 0.80$, the ceiling printed by the cell
# (0.799: the contrast share of the test split is 40.2%, and $1 - 0.402 / 2 = 0.799$). The MLP gets every
# sentence right that an order-free model can get right, and stops there.
#
# The contrast sentences come in twin pairs with the same words and opposite labels. An order-free model
# (bag of words, mean of embeddings) gets the same input for both twins, so it gives them the same score
# and the same predicted label; exactly one of the two is right, whatever the weights, hence exactly 0.5 on
# the pairs, for the linear models as for the MLP.
#
# Passing the ceiling needs the order of the words: which adjective comes after `but`. Local order is seen
# by convolutions (Lab 03), the whole sequence by recurrent networks (Lab 04) and positions in attention
# (Lab 07); more hidden units or more epochs cannot help an order-free model.

# %% [raw]
# # END SOLUTION

# %% [raw]
# # END QUESTION

# %% [markdown]
# ### 7.3 The real benchmark: IMDB
#
# The Large Movie Review Dataset (Maas et al., 2011, [*Learning Word Vectors for Sentiment
# Analysis*](https://aclanthology.org/P11-1015/)) holds 50,000 IMDB reviews, half positive, half negative,
# split into 25,000 for training and 25,000 for testing. A bag-of-words logistic regression reaches about
# 88% test accuracy on it, a number every sentiment model of the field is compared with. Real reviews are
# long (230 words on average) and most are decided by their words alone, so order-free models do well.
#
# The archive is 84 MB (`aclImdb_v1.tar.gz`), so this experiment runs only at the full size (on a GPU, or
# with `ATTNLAB_FAST=0`): `attnlab.kit.datasets.imdb` downloads it once into the cache and checks its SHA-256.
# Without internet, put the archive there by hand, or point `ATTNLAB_DATA_MIRROR` at a copy (see the
# message the cell prints). The curves validate on 2,500 reviews held out of the training split; the test
# split is read once, after training, for the final figure (choosing anything by test accuracy would make
# that figure optimistic).

# %% tags=["otter_ignore"]
# Experiment (not graded, full size only): bag of words and mean of embeddings on IMDB
from attnlab.kit.datasets.imdb import IMDB_ARCHIVE, load_imdb_splits

imdb = None
if sized(True, False):
    print("IMDB is skipped at the fast size; run with ATTNLAB_FAST=0 (or on a GPU) for the real benchmark.")
else:
    try:
        imdb = load_imdb_splits(("train", "test"))
    except DatasetUnavailable as exc:
        print(f"IMDB is not available, so this experiment is skipped.\n{exc}\n(the archive: {IMDB_ARCHIVE.url}, "
              f"{IMDB_ARCHIVE.size:,} bytes, SHA-256 {IMDB_ARCHIVE.sha256})")
if imdb is not None:
    IMDB_LEN, IMDB_VOCAB = 1000, 30000
    clean = {name: [tokenize(text.replace("<br />", " ")) for text, _ in pairs] for name, pairs in imdb.items()}
    imdb_vocab = build_vocab(clean["train"], max_size=IMDB_VOCAB, min_freq=2)
    imdb_data = {name: TensorDataset(torch.stack([encode(t, imdb_vocab, IMDB_LEN) for t in clean[name]]),
                                     torch.tensor([float(label) for _, label in imdb[name]]))
                 for name in clean}
    # validation: 2,500 reviews held out of the training split; the test split is read once, for the final figure
    held_out = torch.randperm(len(imdb_data["train"]), generator=torch.Generator().manual_seed(0))
    imdb_data["val"] = Subset(imdb_data["train"], held_out[:2500].tolist())
    imdb_data["train"] = Subset(imdb_data["train"], held_out[2500:].tolist())
    print(f"{len(imdb_data['train'])} training, {len(imdb_data['val'])} validation and {len(imdb_data['test'])} "
          f"test reviews, vocabulary of {len(imdb_vocab)} tokens, reviews cut at {IMDB_LEN} tokens")
    imdb_train = DataLoader(imdb_data["train"], batch_size=128, shuffle=True, generator=seed_everything(0))
    imdb_val = DataLoader(imdb_data["val"], batch_size=512)
    imdb_test = DataLoader(imdb_data["test"], batch_size=512)
    imdb_models = {"bag of words, linear": BagOfWordsClassifier(len(imdb_vocab)),
                   "mean of embeddings": MeanEmbeddingClassifier(len(imdb_vocab), 64)}
    imdb_histories = {}
    for name, model in imdb_models.items():
        seed_everything(0)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
        imdb_histories[name] = fit(model, imdb_train, epochs=5, optimizer=optimizer, val_loader=imdb_val,
                                   device=device, desc=f"IMDB: {name}")
    plot_history(imdb_histories, title="IMDB (validation: 2,500 reviews held out of the training split)")
    plt.show()
    for name, history in imdb_histories.items():
        _, test_accuracy = evaluate(imdb_models[name], imdb_test, device=device)
        print(f"{name:<24} after {history.epochs} epochs: validation accuracy {history.val_metric[-1]:.3f}, "
              f"test accuracy {test_accuracy:.3f}")

# %% [markdown]
# At the full size the linear bag of words lands near the classic 88% and the mean of embeddings close to
# it: on real reviews the words alone say most of it. The remaining errors are where order and
# composition matter ("not as bad as I feared", "the first half is brilliant, the rest is a mess").
#
# ### Going further (not graded)
#
# - Train the linear classifier on `tfidf` features instead of the binary bag: does weighting help a
#   model that learns its own weights anyway?
# - Add word *pairs* (bigrams such as `not_good`) to the tokens before `build_vocab`: the linear bag of
#   words can then learn negation. How far towards the ceiling does it get, and can it pass it?
# - Plot the learned embeddings of the adjectives of the sentiment corpus in 2-D
#   (`attnlab.kit.plotting.embedding_scatter`): do positive and negative words separate?
