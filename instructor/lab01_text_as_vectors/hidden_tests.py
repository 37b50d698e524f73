"""Hidden tests of Lab 01 (text as vectors), written against the narrow interface.

Every test compares the student's answer with the reference on inputs drawn from ``rng`` (or fixed edge
cases), so a blank notebook (every function raising NotImplementedError) scores 0. The text functions
(``tokenize``, ``build_vocab``) are called through ``student.call`` like the tensor ones: their lists,
strings and dicts come back as plain values.

Questions and points (30 in all):

    tokenize                 5
    build_vocab              5
    encode                   4
    bag_of_words             4
    tfidf                    6
    MeanEmbeddingClassifier  6

Tolerances are the defaults of ``checks.TOLERANCES`` everywhere.
"""

from __future__ import annotations

from collections import Counter

import torch

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import padded_ids, randint, random_lengths

suite = HiddenSuite("lab01_text_as_vectors")

F32, F64 = torch.float32, torch.float64


def pick(rng: torch.Generator, items: list):
    return items[randint(rng, 0, len(items) - 1)]


# ------------------------------------------------------------------------------------------------ tokenize
# Pieces of text: words in several alphabets, numbers, apostrophes, punctuation, emoji.
PIECES = [
    "the", "The", "MOVIE", "Was", "don't", "It's", "'quoted'", "rock'n'roll", "o'clock", "3.14", "42", "2024",
    "r2d2", "snake_case", "__init__", "café", "Naïve", "ÜBER", "Straße", "λόγος", "москва", "日本語", "!", "!!",
    "?!", "...", ",", ";", ":", "-", "--", "—", "(", ")", '"', "«", "»", "…", "🙂", "#tag", "@user", "e-mail",
    "U.S.A.", "$5", "50%", "a+b", "x=1", "l'été",
]
SEPARATORS = [" ", " ", " ", "  ", "\t", "\n", "\u00a0", ""]


def compare_tokens(student, ref, text: str) -> None:
    expected = ref.call("tokenize", text).output
    got = student.call("tokenize", text).output
    assert isinstance(got, (list, tuple)), f"tokenize({text!r}) should return a list of strings, got {type(got).__name__}"
    assert all(isinstance(t, str) for t in got), f"tokenize({text!r}) should return strings only, got {got!r}"
    assert list(got) == expected, f"tokenize({text!r}) gave {list(got)!r}, expected {expected!r}"


@suite.test("tokenize", points=1.0)
def tokenize_hand_worked(student, ref, rng):
    for text in ["Don't panic: it's 3.14 -- NOT 42!!", "The cat sat on the mat.", "Hello, World!",
                 "A man is playing a guitar .", "Wow!!! 10/10, would watch again..."]:
        compare_tokens(student, ref, text)


@suite.test("tokenize", points=1.0)
def tokenize_unicode_letters(student, ref, rng):
    for text in ["Café naïve über Straße", "ΛΌΓΟΣ και λόγος", "Москва — столица", "日本語のテキスト",
                 "l'été à Zürich", "ÉCOLE Normale"]:
        compare_tokens(student, ref, text)


@suite.test("tokenize", points=1.0)
def tokenize_apostrophes_and_punctuation(student, ref, rng):
    for text in ["'quoted' rock'n'roll o'clock", "don't!!! won't?!", "U.S.A. e-mail a+b=c", "(yes) [no] {maybe}",
                 "50% of $5 is #2 @user", "wait... what?", "🙂🙂 great 👍", "__init__ snake_case r2d2 x_1"]:
        compare_tokens(student, ref, text)


@suite.test("tokenize", points=1.5)
def tokenize_random_mixes(student, ref, rng):
    for _ in range(8):
        parts = []
        for _ in range(randint(rng, 3, 12)):
            parts += [pick(rng, PIECES), pick(rng, SEPARATORS)]
        compare_tokens(student, ref, "".join(parts))


@suite.test("tokenize", points=0.5)
def tokenize_white_space_and_empty(student, ref, rng):
    for text in ["", "   ", "\t\n\r\n", "a\u00a0b\u2003c", "  leading and trailing  ", "one"]:
        compare_tokens(student, ref, text)


# --------------------------------------------------------------------------------------------- build_vocab
ALPHABET = ["a", "b", "c", "d", "e", "f", "g", "h", "the", "cat", "!", ".", "0", "42", "é", "z", "don't", "_x"]


def random_token_lists(rng: torch.Generator, n_types: int, max_count: int) -> list[list[str]]:
    """Token lists whose counts are drawn in [1, max_count] (many ties), occurrences shuffled and split."""
    types = [ALPHABET[i] for i in torch.randperm(len(ALPHABET), generator=rng)[:n_types].tolist()]
    tokens = [t for t in types for _ in range(randint(rng, 1, max_count))]
    tokens = [tokens[i] for i in torch.randperm(len(tokens), generator=rng).tolist()]
    cuts = sorted({0, len(tokens), *(randint(rng, 0, len(tokens)) for _ in range(4))})
    return [tokens[a:b] for a, b in zip(cuts, cuts[1:])]


def compare_vocab(student, ref, token_lists, *args, **kwargs) -> None:
    shown = ", ".join([*(repr(a) for a in args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    what = f"build_vocab(token_lists{', ' + shown if shown else ''})"
    expected = ref.call("build_vocab", token_lists, *args, **kwargs).output
    got = student.call("build_vocab", token_lists, *args, **kwargs).output
    assert isinstance(got, dict), f"{what} should return a dict token -> id, got {type(got).__name__}"
    counts = Counter(t for tokens in token_lists for t in tokens)
    for special, i in (("<pad>", 0), ("<unk>", 1)):
        assert got.get(special) == i, f"{what}: {special} should have id {i}, got {got.get(special)!r}"
    missing = sorted(set(expected) - set(got), key=expected.get)
    extra = sorted(set(got) - set(expected), key=lambda t: str(got[t]))
    if missing or extra:
        raise AssertionError(
            f"{what} has {len(got)} entries, expected {len(expected)}"
            + (f"; missing {missing[:5]} (counts {[counts[t] for t in missing[:5]]})" if missing else "")
            + (f"; unexpected {extra[:5]} (counts {[counts[t] for t in extra[:5]]})" if extra else "")
            + " (min_freq keeps counts >= min_freq; max_size counts <pad> and <unk>; ties are broken alphabetically)")
    for token in sorted(expected, key=expected.get):
        if got[token] != expected[token]:
            raise AssertionError(
                f"{what}: token {token!r} (count {counts[token]}) has id {got[token]!r}, expected {expected[token]} "
                "(ids 2, 3, ... go by descending count of every occurrence in all the lists, equal counts in "
                "alphabetical order)")


@suite.test("build_vocab", points=1.0)
def vocab_counts_then_alphabet(student, ref, rng):
    compare_vocab(student, ref, [["b", "a", "a"], ["c", "b", "a"], ["c"], ["d"]])
    # every occurrence counts, not the lists a token is in: b 3 (in one list) before a 2 (in two)
    compare_vocab(student, ref, [["b", "b", "b"], ["a"], ["a"]])
    for _ in range(3):
        compare_vocab(student, ref, random_token_lists(rng, n_types=randint(rng, 4, 12), max_count=6))


@suite.test("build_vocab", points=1.0)
def vocab_ties_alphabetical(student, ref, rng):
    # every count the same, first appearances in reverse alphabetical order; punctuation and digits sort first
    types = ["z", "é", "the", "cat", "b", "a", "42", "0", ".", "!"]
    compare_vocab(student, ref, [types, list(reversed(types))])
    compare_vocab(student, ref, [["z", "y", "x"], ["x", "w"], ["w", "z"], ["y"]])
    compare_vocab(student, ref, [["a", "a"], ["b"], ["b"]])  # a twice in one list ties b in two lists: a first
    compare_vocab(student, ref, random_token_lists(rng, n_types=12, max_count=2))


@suite.test("build_vocab", points=1.0)
def vocab_min_freq(student, ref, rng):
    lists = random_token_lists(rng, n_types=10, max_count=5)
    for min_freq in (2, 3, 5):
        compare_vocab(student, ref, lists, min_freq=min_freq)
    compare_vocab(student, ref, lists, None, 4)  # positional max_size, min_freq
    compare_vocab(student, ref, [["a", "b"], ["a"]], min_freq=9)  # nothing is frequent enough
    compare_vocab(student, ref, [["a", "b", "b"], ["c"]], min_freq=2)  # b's 2 occurrences are in one list


@suite.test("build_vocab", points=1.0)
def vocab_max_size_with_ties_at_the_cut(student, ref, rng):
    lists = [["m", "k", "a"], ["k", "m", "q"], ["a", "q", "m", "z"]]  # m 3, a 2, k 2, q 2, z 1
    for max_size in (2, 3, 4, 5, 7, 100):
        compare_vocab(student, ref, lists, max_size=max_size)
    compare_vocab(student, ref, [["t", "t", "t"], ["s"], ["s"]], max_size=3)  # t 3 (one list) is kept, s 2 is cut
    random_lists = random_token_lists(rng, n_types=12, max_count=3)
    compare_vocab(student, ref, random_lists, max_size=randint(rng, 4, 9))
    compare_vocab(student, ref, random_lists, max_size=randint(rng, 4, 9), min_freq=2)


@suite.test("build_vocab", points=0.5)
def vocab_empty_input(student, ref, rng):
    compare_vocab(student, ref, [])
    compare_vocab(student, ref, [[], []])
    compare_vocab(student, ref, [["only"]], max_size=2)


@suite.test("build_vocab", points=0.5)
def vocab_max_size_below_two_raises(student, ref, rng):
    compare_vocab(student, ref, [["a", "b", "b"]], max_size=3)
    for bad in (1, 0):
        checks.expect_student_error(lambda bad=bad: student.call("build_vocab", [["a", "b"]], max_size=bad), "ValueError",
                             what=f"build_vocab(..., max_size={bad})", mentions=(str(bad),))


# -------------------------------------------------------------------------------------------------- encode
VOCAB = {"<pad>": 0, "<unk>": 1, "the": 2, "cat": 3, "sat": 4, "on": 5, "mat": 6, ".": 7}
WORDS = ["the", "cat", "sat", "on", "mat", ".", "dog", "ran", "<unk>x", "a"]  # the last four are unknown


def random_tokens(rng, n):
    return [pick(rng, WORDS) for _ in range(n)]


@suite.test("encode", points=1.0)
def encode_hand_worked(student, ref, rng):
    checks.compare_call(student, ref, "encode", ["the", "cat", "sat"], VOCAB, 5)
    checks.compare_call(student, ref, "encode", ["the", "dog", "sat"], VOCAB, 5)
    checks.compare_call(student, ref, "encode", ["the", "cat", "sat", "on", "the", "mat"], VOCAB, 3)


@suite.test("encode", points=1.0)
def encode_unknown_and_padding(student, ref, rng):
    checks.compare_call(student, ref, "encode", ["dog", "ran", "a", "dog"], VOCAB, 8)  # all unknown
    checks.compare_call(student, ref, "encode", random_tokens(rng, randint(rng, 1, 5)), VOCAB, 9)
    checks.compare_call(student, ref, "encode", [], VOCAB, 4)


@suite.test("encode", points=1.0)
def encode_truncation(student, ref, rng):
    tokens = random_tokens(rng, 12)
    for max_len in (1, 5, 12):
        checks.compare_call(student, ref, "encode", tokens, VOCAB, max_len)


@suite.test("encode", points=1.0)
def encode_random_vocabulary(student, ref, rng):
    ids = (torch.randperm(40, generator=rng)[: len(WORDS)] + 2).tolist()  # ids in no particular order
    vocab = {"<pad>": 0, "<unk>": 1, **{w: i for w, i in zip(WORDS[:6], ids)}}
    for _ in range(3):
        checks.compare_call(student, ref, "encode", random_tokens(rng, randint(rng, 0, 10)), vocab, randint(rng, 1, 8))


# -------------------------------------------------------------------------------------------- bag_of_words
@suite.test("bag_of_words", points=1.0)
def bow_binary_by_default(student, ref, rng):
    ids = padded_ids(rng, random_lengths(rng, 5, 8), 8, 6)  # vocabulary of 6: many repeated ids
    checks.compare_call(student, ref, "bag_of_words", ids, 6)
    checks.compare_call(student, ref, "bag_of_words", ids, 6, binary=True)


@suite.test("bag_of_words", points=1.0)
def bow_counts(student, ref, rng):
    ids = padded_ids(rng, random_lengths(rng, 4, 10), 10, 5)
    checks.compare_call(student, ref, "bag_of_words", ids, 5, binary=False)
    checks.compare_call(student, ref, "bag_of_words", ids, 5, False)


@suite.test("bag_of_words", points=1.0)
def bow_padding_and_width(student, ref, rng):
    ids = torch.tensor([[0, 0, 0], [1, 1, 0], [2, 1, 0]])  # an all-padding row; <unk> counts like a word
    checks.compare_call(student, ref, "bag_of_words", ids, 12, binary=False)  # wider than the largest id
    checks.compare_call(student, ref, "bag_of_words", ids, 3)
    checks.compare_call(student, ref, "bag_of_words", torch.tensor([[4]]), 5, binary=False)  # B = L = 1


@suite.test("bag_of_words", points=0.5)
def bow_larger_random(student, ref, rng):
    ids = padded_ids(rng, random_lengths(rng, 16, 30), 30, 50)
    checks.compare_call(student, ref, "bag_of_words", ids, 60, binary=False)
    checks.compare_call(student, ref, "bag_of_words", ids, 50)


@suite.test("bag_of_words", points=0.5)
def bow_id_out_of_range_raises(student, ref, rng):
    checks.compare_call(student, ref, "bag_of_words", torch.tensor([[3, 4, 0]]), 5)
    vocab_size = randint(rng, 5, 20)
    bad = vocab_size + randint(rng, 0, 5)
    ids = torch.tensor([[2, 1, 0], [bad, 3, 0]])
    checks.expect_student_error(lambda: student.call("bag_of_words", ids, vocab_size), "ValueError",
                         what=f"bag_of_words with id {bad} and vocab_size={vocab_size}", mentions=(str(bad),))


# --------------------------------------------------------------------------------------------------- tfidf
WORKED = torch.tensor([[0, 0, 1, 1, 0, 0], [0, 0, 1, 0, 2, 1], [0, 0, 2, 0, 0, 0], [0, 1, 1, 1, 0, 1]], dtype=F32)


def random_counts(rng, n, v, dtype=F64, p_zero=0.6):
    """Integer-valued counts (n, v) in ``dtype`` with many zeros, and two columns no document contains."""
    counts = torch.randint(1, 4, (n, v), generator=rng).to(dtype)
    counts = counts.masked_fill(torch.rand(n, v, generator=rng) < p_zero, 0.0)
    counts[:, 0] = 0.0  # <pad>
    counts[:, v // 2] = 0.0
    return counts


@suite.test("tfidf", points=1.0)
def tfidf_hand_worked(student, ref, rng):
    checks.compare_call(student, ref, "tfidf", WORKED, normalize=False)
    checks.compare_call(student, ref, "tfidf", WORKED)


@suite.test("tfidf", points=1.0)
def tfidf_float64_unnormalized(student, ref, rng):
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 7, 9), normalize=False)
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 12, 5), False)


@suite.test("tfidf", points=1.0)
def tfidf_float64_normalized(student, ref, rng):
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 6, 10))
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 9, 8), normalize=True)


@suite.test("tfidf", points=1.0)
def tfidf_df_zero_columns_and_zero_rows(student, ref, rng):
    with_empty = random_counts(rng, 6, 8)
    with_empty[2] = 0.0  # an empty document
    common = random_counts(rng, 5, 8)
    common[:, 1] = common[:, 1].clamp_min(1.0)  # word 1 is in every document: idf = log 1 = 0
    common[3] = 0.0
    common[3, 1] = 2.0  # document 3 holds only word 1: all its weights are 0
    for counts in (with_empty, common):
        for normalize in (False, True):
            s, _ = checks.compare_call(student, ref, "tfidf", counts, normalize=normalize)
            assert (s.output[:, 0] == 0).all() and (s.output[:, 4] == 0).all(), (
                f"tfidf(normalize={normalize}): columns with df = 0 must be exactly 0")


@suite.test("tfidf", points=1.0)
def tfidf_float32_and_integer_counts(student, ref, rng):
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 8, 7, dtype=F32))
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 8, 7, dtype=F32), normalize=False)
    counts = random_counts(rng, 5, 6).long()
    checks.compare_call(student, ref, "tfidf", counts)  # integer counts: float32 weights


@suite.test("tfidf", points=1.0)
def tfidf_one_document_and_fractional_tf(student, ref, rng):
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 1, 6))  # one document: every idf is log 1 = 0
    checks.compare_call(student, ref, "tfidf", random_counts(rng, 2, 6), normalize=False)
    fractional = random_counts(rng, 5, 7) * torch.rand(5, 7, generator=rng, dtype=F64)  # tf need not be whole
    checks.compare_call(student, ref, "tfidf", fractional, normalize=False)


# -------------------------------------------------------------------------------- MeanEmbeddingClassifier
MEC = "MeanEmbeddingClassifier"


@suite.test(MEC, points=1.5)
def classifier_no_padding_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MEC, 15, 8, rng=rng, dtype=F64)
    ids = torch.randint(1, 15, (3, 6), generator=rng)
    ids[1, 2] = 1  # <unk> is a real token
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)


@suite.test(MEC, points=2.0)
def classifier_padding_float64_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MEC, 20, 6, rng=rng, dtype=F64)
    ids = padded_ids(rng, random_lengths(rng, 5, 7), 7, 20)
    ids[0, :2] = 1  # row 0 is full: two <unk>, which are real tokens
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)


@suite.test(MEC, points=1.0)
def classifier_mostly_padding(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MEC, 12, 4, rng=rng, dtype=F64)
    lengths = torch.randint(1, 4, (4,), generator=rng)
    checks.compare_module_call(s_mod, r_mod, padded_ids(rng, lengths, 10, 12))  # at least 7 pads per row


@suite.test(MEC, points=1.0)
def classifier_multiclass_float32_grad(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MEC, 20, 8, num_classes=3, rng=rng, dtype=F32)
    ids = padded_ids(rng, random_lengths(rng, 4, 6), 6, 20)
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)


@suite.test(MEC, points=0.5)
def classifier_batch_of_one(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, MEC, 10, 4, rng=rng, dtype=F32)
    ids = padded_ids(rng, torch.tensor([3]), 5, 10)
    # logits (1,), not a 0-d tensor (squeeze() instead of squeeze(-1)): with grad=True the shape is also
    # checked where the output gradient flows in
    checks.compare_module_call(s_mod, r_mod, ids, grad=True, rng=rng)
