"""Answer groups: a question's answers clustered by TF-IDF and cosine similarity (what lab01 teaches), so that a
marker applies rubric items to a whole group at once, then looks at the exceptions; empty answers marked 0 at once.

The vectors: word counts (lower-case words and numbers), weighted by the smoothed inverse document frequency
``log((1 + n) / (1 + df)) + 1`` (scikit-learn's default), each row of unit length. The clustering: each answer in
key order joins the first group whose centroid is within ``threshold`` cosine similarity, else starts a group; the
empty answers are a group of their own. A few lines of numpy; deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from attnlab.buildchain.transforms.markers import PLACEHOLDER  # the answer cell's text in the student notebook
from attnlab.marking.store import WRITTEN, MarkConflict, MarkStore

THRESHOLD = 0.5  # cosine similarity to a group's centroid: near-paraphrases join, different arguments stay apart
_WORD = re.compile(r"\d+(?:\.\d+)?|[a-z][a-z0-9]*")  # a number (0.5) is one word: measured values matter


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
    tokens = [_WORD.findall(t.lower()) for t in texts]
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
    centroids: list[np.ndarray] = []
    for row, vector in enumerate(vectors):
        sims = [float(c @ vector) / (float(np.linalg.norm(c)) or 1) for c in centroids]
        best = int(np.argmax(sims)) if sims else -1
        if best >= 0 and sims[best] >= threshold:
            members[best].append(row)
            centroids[best] = centroids[best] + vector
        else:
            members.append([row])
            centroids.append(vector.copy())
    groups = [Group(tuple(texts[r] for r in rows), _label(c, vocabulary))
              for rows, c in zip(members, centroids)]
    groups.sort(key=lambda g: (-len(g.keys), g.keys[0]))
    return groups + ([Group(tuple(empty), (), empty=True)] if empty else [])


def _label(centroid: np.ndarray, vocabulary: list[str]) -> tuple[str, ...]:
    words = [vocabulary[i] for i in np.argsort(-centroid, kind="stable") if centroid[i] > 0]
    return tuple([w for w in words if len(w) > 2 and w[0].isalpha()][:4])


def mark_group(store: MarkStore, lab: str, question: str, seen: dict[str, int], items, *, marker: str,
               comment: str = "") -> tuple[list[str], list[str]]:
    """Apply ``items`` to every member ``key`` of a group, each from the mark version the marker saw (``seen``):
    a member's own other items are kept (an exception stays an exception), its comment kept unless one is given.
    Return ``(saved keys, conflicting keys)``: a member another marker changed meanwhile is left as they saved it."""
    saved, conflicts = [], []
    current = store.marks(lab, question)
    answers = {a.key: a for a in store.answers(lab, question)}
    for key, version in seen.items():
        mark = current.get((key, question))
        own = mark.items if mark and mark.version == version and key in answers and mark.marks(answers[key]) else ()
        try:
            store.save_mark(lab, key, question, items=[*own, *items], adjustment=mark.adjustment if mark else 0.0,
                            comment=comment or (mark.comment if mark else ""), marker=marker, version=version)
            saved.append(key)
        except MarkConflict:
            conflicts.append(key)
    return saved, conflicts


def mark_empty(store: MarkStore, lab: str, question: str, *, marker: str) -> int:
    """Mark 0 every empty answer of ``question`` that has no mark of its own yet (none, or one of an earlier
    submission's answer): no item, comment ``empty answer``; return how many. A mark saved meanwhile elsewhere is
    never overwritten (a conflict skips that answer)."""
    marked = store.marks(lab, question)
    done = 0
    for answer in store.answers(lab, question):
        mark = marked.get((answer.key, question))
        if answer.kind == WRITTEN and is_empty(answer.text) and not (mark and mark.marks(answer)):
            try:
                store.save_mark(lab, answer.key, question, items=[], comment="empty answer", marker=marker,
                                version=mark.version if mark else 0)
                done += 1
            except MarkConflict:
                pass
    return done
