"""Lab 01 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("tokenize_words_only", "tokenize", '''
import re

def tokenize(text):
    return [m.group(0) for m in re.finditer(r"[a-z0-9_']+", text.lower())]
''', None, why="words only and ASCII only: punctuation dropped and accented letters split (two mistakes)"),
    HeldOut("tokenize_no_punct_unicode", "tokenize", '''
import re

WORD = re.compile(r"[\\w']+")

def tokenize(text):
    return WORD.findall(text.casefold() if False else text.lower())
''', "tokenize_drops_punctuation", why="punctuation dropped"),
    HeldOut("vocab_more_than_min_freq", "build_vocab", '''
from collections import Counter

def build_vocab(token_lists, max_size=None, min_freq=1):
    if max_size is not None and max_size < 2:
        raise ValueError(f"max_size={max_size}: need at least 2 for the specials")
    c = Counter()
    for toks in token_lists:
        c.update(toks)
    words = [w for w, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])) if n > min_freq]
    if max_size is not None:
        words = words[: max_size - 2]
    vocab = {"<pad>": 0, "<unk>": 1}
    vocab.update({w: i for i, w in enumerate(words, start=2)})
    return vocab
''', "vocab_min_freq_strict", why="> min_freq instead of >="),
    HeldOut("encode_pad_in_front", "encode", '''
import torch

def encode(tokens, vocab, max_len):
    out = torch.zeros(max_len, dtype=torch.long)
    ids = [vocab[t] if t in vocab else 1 for t in tokens][:max_len]
    if ids:
        out[max_len - len(ids):] = torch.tensor(ids)
    return out
''', "encode_left_pad", why="pads on the left"),
    HeldOut("bow_pad_counted", "bag_of_words", '''
import torch

def bag_of_words(ids, vocab_size, binary=True):
    if ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError(f"an id in {ids.tolist()} is outside [0, {vocab_size})")
    rows = [torch.bincount(r, minlength=vocab_size).float() for r in ids]
    bags = torch.stack(rows) if rows else torch.zeros(0, vocab_size)
    return bags.clamp(max=1.0) if binary else bags
''', "bow_counts_pad", why="column 0 (pad) counted"),
    HeldOut("tfidf_sklearn_smooth", "tfidf", '''
import torch

def tfidf(counts, normalize=True):
    x = counts.to(torch.float32) if not counts.is_floating_point() else counts
    n = x.shape[0]
    df = (x != 0).sum(dim=0).to(x.dtype)
    idf = torch.log((n + 1) / (df + 1)) + 1
    out = x * idf
    if normalize:
        out = torch.nn.functional.normalize(out, dim=1)
    return out
''', "tfidf_smooth_idf", why="scikit-learn smoothing"),
    HeldOut("tfidf_df_sum_of_counts", "tfidf", '''
import torch

def tfidf(counts, normalize=True):
    x = counts if counts.is_floating_point() else counts.float()
    df = x.sum(dim=0)
    idf = torch.zeros_like(df)
    seen = df > 0
    idf[seen] = torch.log(x.shape[0] / df[seen])
    out = x * idf
    return torch.nn.functional.normalize(out, dim=1) if normalize else out
''', "tfidf_df_total_counts", why="df from the total counts"),
    HeldOut("mec_plain_mean", "MeanEmbeddingClassifier", '''
from torch import nn


class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        out = self.classifier(self.embedding(ids).mean(1))
        return out[:, 0] if self.num_classes == 1 else out
''', "mec_mean_over_pads", why="mean over the pads too"),
    HeldOut("mec_divides_by_max_len_sum", "MeanEmbeddingClassifier", '''
from torch import nn


class MeanEmbeddingClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes=1):
        super().__init__()
        self.num_classes = num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.classifier = nn.Linear(embed_dim, num_classes)

    def forward(self, ids):
        keep = (ids > 0).unsqueeze(2).float()
        pooled = (self.embedding(ids) * keep).sum(1) / (keep.sum(1) + 1.0)
        out = self.classifier(pooled)
        return out.squeeze(1) if self.num_classes == 1 else out
''', None, why="divides by the length plus one"),
]
