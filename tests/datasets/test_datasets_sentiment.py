"""The synthetic sentiment corpus: determinism, balance, twins, the order-free ceiling, vocabulary and ids."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

import pytest
import torch

from attnlab.kit.datasets import sentiment
from attnlab.kit.datasets.sentiment import (
    SentimentExample,
    bag_of_words_ceiling,
    build_vocab,
    encode_texts,
    generate_sentiment,
    sentiment_splits,
)


@pytest.fixture(scope="module")
def splits():
    return sentiment_splits()  # the defaults the lab uses: 2000 / 500 / 500, seed 0


def _bag(text: str) -> tuple[str, ...]:
    return tuple(sorted(text.split()))


def _twinned(examples) -> list[bool]:
    """For each example: does the list hold another one with the same tokens and the opposite label?"""
    labels = defaultdict(set)
    for ex in examples:
        labels[_bag(ex.text)].add(ex.label)
    return [labels[_bag(ex.text)] == {0, 1} for ex in examples]


def test_same_seed_same_data_other_seed_other_data():
    first = generate_sentiment(300, seed=3)
    assert first == generate_sentiment(300, seed=3)
    other = generate_sentiment(300, seed=4)
    assert len({ex.text for ex in first} & {ex.text for ex in other}) < 150


def test_generated_stream_is_pinned():
    # Labs quote accuracies on this corpus: change this digest only when changing the generator on purpose.
    texts = "\n".join(f"{ex.label} {ex.text}" for ex in generate_sentiment(200, seed=0))
    assert hashlib.sha256(texts.encode()).hexdigest()[:16] == "7d557e957dfcf049"


def test_sentences_are_distinct_short_lowercase_and_from_a_small_vocabulary():
    examples = generate_sentiment(3000, seed=1)
    texts = [ex.text for ex in examples]
    assert len(set(texts)) == len(texts) == 3000
    lengths = Counter(len(t.split()) for t in texts)
    assert min(lengths) == 4 and max(lengths) <= 16
    assert all(t == t.lower() and t == " ".join(t.split()) for t in texts)
    words = {w for t in texts for w in t.split()}
    assert 20 <= len(words) <= 200


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_labels_are_balanced(seed):
    examples = generate_sentiment(1000, seed=seed)
    assert 0.4 <= sum(ex.label for ex in examples) / len(examples) <= 0.6
    for kind in ("plain", "negated", "contrast"):
        of_kind = [ex.label for ex in examples if ex.kind == kind]
        assert 0.4 <= sum(of_kind) / len(of_kind) <= 0.6, kind


def test_plain_and_negated_labels_follow_the_adjective_and_the_negation():
    examples = generate_sentiment(1000, seed=5)
    for ex in examples:
        tokens = ex.text.split()
        assert ex.negated == ("not" in tokens or "never" in tokens), ex
        if ex.kind == "contrast":
            continue
        polarity = 1 if tokens[-1] in sentiment._POSITIVE else 0
        assert tokens[-1] in sentiment._POSITIVE + sentiment._NEGATIVE, ex
        assert ex.negated == (ex.kind == "negated"), ex
        assert ex.label == (1 - polarity if ex.negated else polarity), ex
    simple_negated = [ex for ex in examples if ex.kind == "negated" and len(ex.text.split()) <= 6]
    assert len(simple_negated) >= 50  # "the movie was not bad" style


def test_twin_pairs_same_tokens_opposite_labels():
    examples = generate_sentiment(2000, seed=0)
    twinned = _twinned(examples)
    assert sum(twinned) / len(examples) >= 0.3
    # Exactly the contrast sentences have a twin, and each has one: groups of two, opposite labels.
    assert twinned == [ex.kind == "contrast" for ex in examples]
    groups = Counter(_bag(ex.text) for ex in examples if ex.kind == "contrast")
    assert set(groups.values()) == {2}


def test_the_word_order_of_each_contrast_template_decides_the_label():
    templates = Counter()
    for ex in generate_sentiment(6000, seed=0):
        tokens = ex.text.split()
        if ex.kind != "contrast":
            continue
        if "it" in tokens:  # "the movie was not bad , it was good": the last adjective decides
            templates["it"] += 1
            decisive = tokens[-1]
        elif "but" in tokens:  # "the acting was bad but the plot was good": the last adjective decides
            templates["but"] += 1
            decisive = tokens[-1]
        else:  # "the film was good , not bad": the adjective before ", not" decides
            assert tokens[-3:-1] == [",", "not"], ex
            templates["not"] += 1
            decisive = tokens[-4]
        assert decisive in sentiment._POSITIVE + sentiment._NEGATIVE, ex
        assert ex.label == (decisive in sentiment._POSITIVE), ex
    assert len(templates) == 3 and min(templates.values()) > 500, templates


def test_too_many_sentences_for_the_word_lists_is_a_clear_error(monkeypatch):
    for name, words in [("_OPENERS", ("",)), ("_DETERMINERS", ("the",)), ("_NOUNS", ("movie", "film")),
                        ("_VERBS", ("was",)), ("_NEGATED_VERBS", ("was not",)), ("_ADVERBS", ("",)),
                        ("_POSITIVE", ("good",)), ("_NEGATIVE", ("bad",))]:
        monkeypatch.setattr(sentiment, name, words)
    assert len(generate_sentiment(10, seed=0)) == 10
    with pytest.raises(ValueError, match="could not draw 1000 distinct sentences .*; ask for fewer"):
        generate_sentiment(1000, seed=0)


def test_bag_of_words_ceiling_on_worked_examples():
    ex = lambda text, label: SentimentExample(text, label, False)
    assert bag_of_words_ceiling([ex("a b", 1), ex("b a", 0), ex("a c", 1)]) == pytest.approx(2 / 3)
    assert bag_of_words_ceiling([ex("x y", 1), ex("y x", 1), ex("x y", 0), ex("z", 0)]) == 0.75
    assert bag_of_words_ceiling([ex("A b", 1), ex("a B", 0)]) == 0.5  # lowercased like the tokeniser
    assert bag_of_words_ceiling([ex("a", 0)]) == 1.0
    with pytest.raises(ValueError, match="empty"):
        bag_of_words_ceiling([])


def test_ceiling_of_the_lab_splits_is_well_below_one(splits):
    for name in ("train", "val", "test"):
        examples = splits.examples[name]
        ceiling = bag_of_words_ceiling(examples)
        # Every twin pair costs an order-free model exactly one of its two sentences, nothing else does.
        assert ceiling == pytest.approx(1 - sum(_twinned(examples)) / 2 / len(examples))
        assert 0.7 <= ceiling <= 0.85, (name, ceiling)
    assert bag_of_words_ceiling(splits.examples["test"]) == pytest.approx(0.798)


def test_splits_sizes_tensors_and_no_shared_sentences(splits):
    sizes = {"train": 2000, "val": 500, "test": 500}
    for name, size in sizes.items():
        ids, labels = getattr(splits, name).tensors
        assert ids.shape == (size, 16) and ids.dtype == torch.long
        assert labels.shape == (size,) and labels.dtype == torch.float32
        examples = splits.examples[name]
        assert labels.tolist() == [float(ex.label) for ex in examples]
        assert splits.texts[name] == [ex.text for ex in examples]
        assert splits.negated[name].dtype == torch.bool
        assert splits.negated[name].tolist() == [ex.negated for ex in examples]
        assert 0.4 <= labels.mean().item() <= 0.6
        assert sum(_twinned(examples)) / size >= 0.3  # both sentences of a pair stay in the same split
    texts = {name: set(splits.texts[name]) for name in sizes}
    assert all(len(texts[name]) == sizes[name] for name in sizes)
    assert not texts["train"] & texts["val"]
    assert not texts["train"] & texts["test"]
    assert not texts["val"] & texts["test"]


def test_split_ids_decode_back_to_the_texts(splits):
    words = {i: w for w, i in splits.vocab.items()}
    assert (splits.vocab["<pad>"], splits.vocab["<unk>"]) == (0, 3)
    for name in ("train", "test"):
        ids, _ = getattr(splits, name).tensors
        for row, text in zip(ids[:50], splits.texts[name][:50], strict=True):
            real = [words[i] for i in row.tolist() if i != 0]
            assert real == text.split()
            assert (row[len(real):] == 0).all()


def test_build_vocab_counts_then_alphabet():
    vocab = build_vocab(["b a a", "c B a", "C", "d"])
    # a:3, b:2, c:2 (tie: alphabetical), d:1
    assert vocab == {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3, "a": 4, "b": 5, "c": 6, "d": 7}
    assert build_vocab([]) == {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3}
    with pytest.raises(ValueError, match="one string"):
        build_vocab("b a a")


def test_encode_texts_pads_truncates_and_maps_unknown_to_unk():
    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, "<unk>": 3, "a": 4, "b": 5, "c": 6}
    ids, lengths = encode_texts(["a B zzz", "", "c c c c c c", "b"], vocab, max_len=4)
    assert ids.tolist() == [[4, 5, 3, 0], [0, 0, 0, 0], [6, 6, 6, 6], [5, 0, 0, 0]]
    assert lengths.tolist() == [3, 0, 4, 1]
    assert ids.dtype == lengths.dtype == torch.long
    empty_ids, empty_lengths = encode_texts([], vocab, max_len=3)
    assert empty_ids.shape == (0, 3) and empty_lengths.shape == (0,)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: encode_texts(["a"], {}, max_len=0), "max_len must be an integer >= 1, got 0"),
        (lambda: encode_texts("a b", {}, max_len=2), "one string"),
        (lambda: encode_texts(["a", 3], {}, max_len=2), "texts[1]"),
        (lambda: generate_sentiment(-1), "n must be an integer >= 0, got -1"),
        (lambda: generate_sentiment(2.5), "got 2.5"),
        (lambda: sentiment_splits(n_train=0), "n_train must be an integer >= 1, got 0"),
    ],
)
def test_bad_arguments_raise_value_error_naming_the_value(call, fragment):
    with pytest.raises(ValueError) as info:
        call()
    assert fragment in str(info.value)
