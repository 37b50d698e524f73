"""A synthetic movie-review sentiment corpus where negation and word order decide the label (Lab 05).

Offline, deterministic for a seed, with a vocabulary of about 70 words and sentences of 4 to 15 tokens.
Three kinds of sentences, drawn so that about 30% / 30% / 40% of the examples are of each kind:

- ``"plain"``:    ``the movie was really good`` (label = the adjective's polarity);
- ``"negated"``:  ``the movie was not good``, ``the plot is never dull`` (the polarity flipped);
- ``"contrast"``: always drawn as a *twin pair*, two sentences with the same multiset of tokens and opposite
  labels, in which only the order of the words tells which adjective counts:

  - ``the movie was not bad , it was good`` (1) / ``the movie was not good , it was bad`` (0)
  - ``the acting was good but the plot was dull`` (0) / ``the acting was dull but the plot was good`` (1)
  - ``the film was clever , not boring`` (1) / ``the film was boring , not clever`` (0)

What this shows in the lab:

- A mean-of-embeddings classifier is a linear function of word frequencies, so it cannot learn that "not"
  flips the adjective after it (that is an XOR of two words): it fails on much of ``"negated"``.
- Self-attention lets words interact, so it can learn negation; but self-attention *without positions* is
  still order-free, and no order-free model can tell the two sentences of a twin pair apart: its accuracy is
  bounded by :func:`bag_of_words_ceiling` (about 0.8). Positional information (Lab 07) lifts that bound.

Texts are lowercase with punctuation as separate tokens; tokenisation is ``text.lower().split()``.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch.utils.data import TensorDataset

__all__ = [
    "PAD",
    "UNK",
    "SentimentExample",
    "SentimentSplits",
    "bag_of_words_ceiling",
    "build_vocab",
    "encode_texts",
    "generate_sentiment",
    "sentiment_splits",
]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = {PAD: 0, BOS: 1, EOS: 2, UNK: 3}  # the curriculum's ids: pad 0, BOS 1, EOS 2, unk 3

# ---------------------------------------------------------------------------------------------- word lists
_DETERMINERS = ("the", "this")
_NOUNS = ("movie", "film", "plot", "story", "acting", "cast", "script", "ending", "music", "show", "dialogue",
          "soundtrack")
_VERBS = ("was", "is", "felt", "seemed")
_ADVERBS = ("", "", "", "really", "very", "quite", "truly")  # "" (no adverb) three times as likely as each
_POSITIVE = ("good", "great", "fun", "funny", "brilliant", "lovely", "clever", "charming", "moving",
             "excellent", "superb", "gripping", "fresh", "beautiful")
_NEGATIVE = ("bad", "dull", "boring", "awful", "poor", "weak", "bland", "terrible", "silly", "clumsy", "slow",
             "messy", "stale", "ugly")
_NEGATORS = ("not", "never")
# A negated verb: each holds exactly one of _NEGATORS.
_NEGATED_VERBS = ("was not", "is not", "was never", "is never", "did not seem", "does not seem",
                  "did not feel", "never seemed", "never felt")
_OPENERS = ("", "", "", "", "overall ,", "honestly ,", "i think", "i thought", "to be fair ,", "in the end ,")

# Probability of each kind of draw. A contrast draw yields two examples, so the share of examples is
# plain 0.3, negated 0.3, contrast 0.4 (= 2 * 0.2 / 1.0 after normalising 0.3 + 0.3 + 2 * 0.2).
_P_PLAIN, _P_NEGATED = 0.375, 0.375
_MAX_MISSES = 20_000


@dataclass(frozen=True)
class SentimentExample:
    """One sentence. ``label``: 1 positive, 0 negative. ``negated``: it contains "not" or "never".
    ``kind``: ``"plain"``, ``"negated"`` or ``"contrast"`` (one of a twin pair; see the module docstring)."""

    text: str
    label: int
    negated: bool
    kind: str = "plain"


@dataclass
class SentimentSplits:
    """What :func:`sentiment_splits` returns.

    train, val, test: ``TensorDataset(ids, labels)``, ids ``LongTensor (N, max_len)`` (right-padded with 0),
                      labels ``FloatTensor (N,)`` (1.0 positive, 0.0 negative).
    vocab:            token -> id, built on the training texts (``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3).
    texts:            split name -> the sentences, in the order of the rows.
    negated:          split name -> ``BoolTensor (N,)``, True where the sentence contains a negation.
    examples:         split name -> the ``SentimentExample`` list (pass it to :func:`bag_of_words_ceiling`).
    max_len:          the padded length.
    """

    train: TensorDataset
    val: TensorDataset
    test: TensorDataset
    vocab: dict[str, int]
    texts: dict[str, list[str]]
    negated: dict[str, torch.Tensor]
    examples: dict[str, list[SentimentExample]]
    max_len: int


# ------------------------------------------------------------------------------------------- generation
def generate_sentiment(n: int, seed: int = 0) -> list[SentimentExample]:
    """``n`` distinct sentences in random order, the same for the same ``seed``.

    About 40% of them come in twin pairs (same tokens, opposite labels); labels are close to balanced.
    """
    _check_count(n, "n")
    return _draw([n], seed)[0]


def sentiment_splits(
    n_train: int = 2000, n_val: int = 500, n_test: int = 500, seed: int = 0, max_len: int = 16
) -> SentimentSplits:
    """Train / validation / test splits, encoded with a vocabulary built on the training texts.

    No sentence occurs in two splits, and both sentences of a twin pair are always in the same split, so
    :func:`bag_of_words_ceiling` of each split is meaningful.
    """
    _check_count(n_train, "n_train", minimum=1)
    _check_count(n_val, "n_val")
    _check_count(n_test, "n_test")
    _check_count(max_len, "max_len", minimum=1)
    names = ("train", "val", "test")
    drawn = dict(zip(names, _draw([n_train, n_val, n_test], seed), strict=True))
    texts = {name: [ex.text for ex in examples] for name, examples in drawn.items()}
    vocab = build_vocab(texts["train"])
    datasets = {}
    for name, examples in drawn.items():
        ids, _ = encode_texts(texts[name], vocab, max_len)
        labels = torch.tensor([float(ex.label) for ex in examples], dtype=torch.float32)
        datasets[name] = TensorDataset(ids, labels)
    return SentimentSplits(
        train=datasets["train"],
        val=datasets["val"],
        test=datasets["test"],
        vocab=vocab,
        texts=texts,
        negated={name: torch.tensor([ex.negated for ex in ex_list], dtype=torch.bool)
                 for name, ex_list in drawn.items()},
        examples=drawn,
        max_len=max_len,
    )


def bag_of_words_ceiling(examples: Sequence[SentimentExample]) -> float:
    """The best accuracy any order-free classifier can reach on ``examples``.

    An order-free model (bag of words, mean of embeddings, self-attention without positions) gives the same
    answer to sentences with the same multiset of tokens; the best it can do is the majority label of each
    such group. Returns (sum over groups of the majority count) / len(examples).
    """
    if len(examples) == 0:
        raise ValueError("bag_of_words_ceiling needs at least one example, got an empty list")
    groups: dict[tuple[str, ...], Counter] = defaultdict(Counter)
    for ex in examples:
        groups[tuple(sorted(_tokens(ex.text)))][ex.label] += 1
    return sum(max(counts.values()) for counts in groups.values()) / len(examples)


def _draw(sizes: list[int], seed: int) -> list[list[SentimentExample]]:
    """Fill one list per size from a single seeded stream of draws, never repeating a sentence."""
    rng = random.Random(seed)
    draws = _draws(rng)
    seen: set[str] = set()
    out = []
    for size in sizes:
        split: list[SentimentExample] = []
        misses = 0
        while len(split) < size:
            unit = next(draws)
            if len(unit) > size - len(split) or any(ex.text in seen for ex in unit):
                misses += 1
                if misses > _MAX_MISSES:
                    raise ValueError(
                        f"could not draw {sum(sizes)} distinct sentences (got {len(seen)}); ask for fewer"
                    )
                continue
            misses = 0
            seen.update(ex.text for ex in unit)
            split.extend(unit)
        rng.shuffle(split)
        out.append(split)
    return out


def _draws(rng: random.Random) -> Iterator[tuple[SentimentExample, ...]]:
    """Endless draws: one plain sentence, one negated sentence, or one contrast twin pair."""
    while True:
        r = rng.random()
        if r < _P_PLAIN:
            yield (_plain(rng),)
        elif r < _P_PLAIN + _P_NEGATED:
            yield (_negated(rng),)
        else:
            yield _contrast_pair(rng)


def _plain(rng: random.Random) -> SentimentExample:
    label = rng.randrange(2)
    words = [_opener(rng), _subject(rng), rng.choice(_VERBS), rng.choice(_ADVERBS), _adjective(rng, label)]
    return _example(words, label, "plain")


def _negated(rng: random.Random) -> SentimentExample:
    label = rng.randrange(2)
    adjective = _adjective(rng, 1 - label)
    words = [_opener(rng), _subject(rng), rng.choice(_NEGATED_VERBS), rng.choice(_ADVERBS), adjective]
    return _example(words, label, "negated")


def _contrast_pair(rng: random.Random) -> tuple[SentimentExample, SentimentExample]:
    """Two sentences that differ only by swapping a positive and a negative adjective: opposite labels."""
    pos, neg = rng.choice(_POSITIVE), rng.choice(_NEGATIVE)
    opener, template = _opener(rng), rng.randrange(3)
    if template == 0:  # "the movie was not bad , it was good": the adjective after ", it was" counts
        subject, negated_verb, adverb1 = _subject(rng), rng.choice(_NEGATED_VERBS), rng.choice(_ADVERBS)
        verb2, adverb2 = rng.choice(_VERBS), rng.choice(_ADVERBS)

        def make(first: str, second: str) -> list[str]:
            return [opener, subject, negated_verb, adverb1, first, ", it", verb2, adverb2, second]

    elif template == 1:  # "the acting was good but the plot was dull": the adjective after "but" counts
        subject1, subject2 = rng.sample([f"the {noun}" for noun in _NOUNS], 2)
        verb1, verb2 = rng.choice(_VERBS), rng.choice(_VERBS)

        def make(first: str, second: str) -> list[str]:
            return [opener, subject1, verb1, first, "but", subject2, verb2, second]

    else:  # "the film was clever , not boring": the adjective before ", not" counts
        subject, verb, adverb = _subject(rng), rng.choice(_VERBS), rng.choice(_ADVERBS)

        def make(first: str, second: str) -> list[str]:
            return [opener, subject, verb, adverb, second, ", not", first]

    # make(first, second): the adjective in the `second` slot decides the label.
    return _example(make(neg, pos), 1, "contrast"), _example(make(pos, neg), 0, "contrast")


def _opener(rng: random.Random) -> str:
    return rng.choice(_OPENERS)


def _subject(rng: random.Random) -> str:
    return f"{rng.choice(_DETERMINERS)} {rng.choice(_NOUNS)}"


def _adjective(rng: random.Random, polarity: int) -> str:
    return rng.choice(_POSITIVE if polarity == 1 else _NEGATIVE)


def _example(words: list[str], label: int, kind: str) -> SentimentExample:
    tokens = " ".join(words).split()
    return SentimentExample(
        text=" ".join(tokens), label=label, negated=any(t in _NEGATORS for t in tokens), kind=kind
    )


# ------------------------------------------------------------------------------------- vocabulary, ids
def _tokens(text: str) -> list[str]:
    return text.lower().split()


def build_vocab(texts: Iterable[str]) -> dict[str, int]:
    """token -> id: the specials ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2, ``<unk>`` = 3 (the curriculum's
    ids; BOS/EOS are unused by the classifiers), then tokens by descending count, ties alphabetical.

    Tokens are ``text.lower().split()``.
    """
    texts = _check_texts(texts)
    counts = Counter(token for text in texts for token in _tokens(text))
    for special in SPECIALS:
        counts.pop(special, None)
    ordered = sorted(counts, key=lambda token: (-counts[token], token))
    return {**SPECIALS, **{token: i for i, token in enumerate(ordered, start=len(SPECIALS))}}


def encode_texts(
    texts: Iterable[str], vocab: dict[str, int], max_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids of each text, truncated to ``max_len`` and right-padded with 0; unknown tokens become ``<unk>`` (3).

    Shapes (N = number of texts, L = max_len):
        ids     LongTensor (N, L)
        lengths LongTensor (N,)  number of real (non-pad) tokens of each row, at most L
    """
    texts = _check_texts(texts)
    _check_count(max_len, "max_len", minimum=1)
    ids = torch.zeros(len(texts), max_len, dtype=torch.long)
    lengths = torch.zeros(len(texts), dtype=torch.long)
    for row, text in enumerate(texts):
        unk = vocab.get(UNK, SPECIALS[UNK])
        token_ids = [vocab.get(token, unk) for token in _tokens(text)][:max_len]
        ids[row, : len(token_ids)] = torch.tensor(token_ids, dtype=torch.long)
        lengths[row] = len(token_ids)
    return ids, lengths


def _check_texts(texts: Iterable[str]) -> list[str]:
    if isinstance(texts, str):
        raise ValueError(f"texts must be a list of strings, got one string {texts[:40]!r}; wrap it: [text]")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"texts[{i}] must be a string, got {type(text).__name__} {text!r}")
    return texts


def _check_count(value: int, name: str, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
