"""Answer groups: a question's answers clustered by TF-IDF and cosine similarity (what lab01 teaches), so that a
marker applies rubric items to a whole group at once, then looks at the exceptions; empty answers marked 0 at once.

The vectors: word counts (lower-case words and numbers), weighted by the smoothed inverse document frequency
``log((1 + n) / (1 + df)) + 1`` (scikit-learn's default), each row of unit length. The clustering: each answer in
key order joins the group whose centroid is the most similar by cosine if that is at least ``threshold``, else
starts a group; the empty answers are a group of their own. A few lines of numpy, deterministic; each answer's
similarities are computed on its own words' columns only and the centroids' norms kept as answers join, so a class
of 1,000 answers groups in well under a second (benchmarks/README.md).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from attnlab.marking.records import WRITTEN, MarkConflict
from attnlab.marking.store import MarkStore
from attnlab.records.stub_text import PLACEHOLDER  # the answer cell's text in the student notebook

THRESHOLD = 0.5  # cosine similarity to a group's centroid: near-paraphrases join, different arguments stay apart
_WORD = re.compile(r"\d+(?:\.\d+)?|[a-z][a-z0-9]*")  # a number (0.5) is one word: measured values matter
_LATEX = re.compile(r"\\[A-Za-z]+")  # \frac, \cdot: typesetting, not what an answer says
# words that label no argument (a group's label is its centroid's heaviest content words)
_STOPWORDS = frozenset("""a an and are as at be because been but by can could does each for from had has have how i
if in into is it its just may more most much my no not of on one only or our so such than that the their them then
there these they this those to too very was we were what when where which while who why will with would you your
also both same all any other""".split())


@dataclass(frozen=True)
class Group:
    """``keys`` in key order; ``terms``: the centroid's heaviest words (a label for people); ``empty``: the group
    of empty answers."""

    keys: tuple[str, ...]
    terms: tuple[str, ...]
    empty: bool = False


def is_empty(text: str) -> bool:
    """Whitespace, or the unchanged placeholder of the answer cell."""
    return not text.strip() or text.strip() == PLACEHOLDER


def tfidf(texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """The unit-length TF-IDF rows of ``texts`` and the vocabulary (sorted) they index."""
    tokens = [_WORD.findall(_LATEX.sub(" ", t).lower()) for t in texts]
    vocabulary = sorted({w for words in tokens for w in words})
    index = {w: i for i, w in enumerate(vocabulary)}
    counts = np.zeros((len(texts), len(vocabulary)))
    for row, words in enumerate(tokens):
        for w in words:
            counts[row, index[w]] += 1
    df = (counts > 0).sum(axis=0)
    tfidf = counts * (np.log((1 + len(texts)) / (1 + df)) + 1)  # (n_texts, n_words)
    norms = np.linalg.norm(tfidf, axis=1, keepdims=True)
    return tfidf / np.where(norms == 0, 1, norms), vocabulary


def answer_groups(answers: dict[str, str], threshold: float = THRESHOLD) -> list[Group]:
    """The groups of ``{key: answer text}``: the largest first (ties: by first key), the empty group last."""
    keys = sorted(answers)
    empty = [k for k in keys if is_empty(answers[k])]
    texts = [k for k in keys if not is_empty(answers[k])]
    vectors, vocabulary = tfidf([answers[k] for k in texts])
    members: list[list[int]] = []
    centroids = np.zeros_like(vectors)  # row g: the sum of group g's vectors (at most one group per answer)
    squared = np.zeros(len(vectors))  # each centroid's squared norm, kept as vectors join
    for row, vector in enumerate(vectors):
        words = np.flatnonzero(vector)  # an answer has few words: the dot products need only those columns
        dots = centroids[:len(members), words] @ vector[words]
        sims = dots / np.where(squared[:len(members)] > 0, np.sqrt(squared[:len(members)]), 1)
        best = int(np.argmax(sims)) if len(members) else -1
        if best < 0 or sims[best] < threshold:
            best = len(members)
            members.append([])
        members[best].append(row)
        squared[best] += 2 * float(centroids[best, words] @ vector[words]) + float(vector @ vector)
        centroids[best, words] += vector[words]
    centroids = centroids[:len(members)]
    groups = [Group(tuple(texts[r] for r in rows), _label(c, vocabulary))
              for rows, c in zip(members, centroids)]
    groups.sort(key=lambda g: (-len(g.keys), g.keys[0]))
    return groups + ([Group(tuple(empty), (), empty=True)] if empty else [])


def _label(centroid: np.ndarray, vocabulary: list[str]) -> tuple[str, ...]:
    present = np.flatnonzero(centroid > 0)  # ascending: a stable sort keeps ties in vocabulary order
    words = (vocabulary[i] for i in present[np.argsort(-centroid[present], kind="stable")])
    return tuple(itertools.islice((w for w in words if len(w) > 2 and w[0].isalpha() and w not in _STOPWORDS), 4))


def mark_group(store: MarkStore, lab: str, question: str, seen: dict[str, int], items, *, marker: str,
               comment: str = "", done: list | None = None) -> tuple[list[str], list[str]]:
    """Apply ``items`` to every member ``key`` of a group, each from the mark version the marker saw (``seen``):
    a member's own other items are kept (an exception stays an exception), its comment kept unless one is given.
    Return ``(saved keys, conflicting keys)``: a member another marker changed meanwhile is left as they saved it.
    ``done`` gets ``(key, mark before, version saved)`` per saved member (what an undo puts back)."""
    saved, conflicts = [], []
    current = store.marks(lab, question)
    answers = {a.key: a for a in store.answers(lab, question)}
    for key, version in seen.items():
        mark = current.get((key, question))
        own = mark.items if mark and mark.version == version and key in answers and mark.marks(answers[key]) else ()
        try:
            new = store.save_mark(lab, key, question, items=[*own, *items],
                                  adjustment=mark.adjustment if mark else 0.0,
                                  comment=comment or (mark.comment if mark else ""), marker=marker, version=version)
            saved.append(key)
            if done is not None:
                done.append((key, mark if mark and mark.version == version else None, new.version))
        except MarkConflict:
            conflicts.append(key)
    return saved, conflicts


def mark_empty(store: MarkStore, lab: str, question: str, *, marker: str, done: list | None = None) -> int:
    """Mark 0 every empty answer of ``question`` that has no mark of its own yet (none, or one of an earlier
    submission's answer): no item, comment ``empty answer``; return how many. A mark saved meanwhile elsewhere is
    never overwritten (a conflict skips that answer). ``done`` as for ``mark_group``."""
    marked = store.marks(lab, question)
    count = 0
    for answer in store.answers(lab, question):
        mark = marked.get((answer.key, question))
        if answer.kind == WRITTEN and is_empty(answer.text) and not (mark and mark.marks(answer)):
            try:
                new = store.save_mark(lab, answer.key, question, items=[], comment="empty answer", marker=marker,
                                      version=mark.version if mark else 0)
                count += 1
                if done is not None:
                    done.append((answer.key, mark, new.version))
            except MarkConflict:
                pass
    return count
