"""IMDB: the Large Movie Review Dataset v1.0 (Maas et al., 2011), binary sentiment of real reviews (Lab 01).

50,000 labelled reviews, 25,000 for training and 25,000 for testing, each half positive (rating >= 7 of 10)
and half negative (rating <= 4), at most 30 reviews per film; the archive also holds 50,000 unlabelled
reviews (``train/unsup``) and pre-tokenised features, which this loader ignores. Source:
https://ai.stanford.edu/~amaas/data/sentiment/ (one gzipped tar file, 84,125,825 bytes). See
``datasets/README.md``.

Layout inside the archive (the loader reads the files straight from the tar, nothing is extracted)::

    aclImdb/{train,test}/{pos,neg}/<review id>_<rating>.txt     one review per file, UTF-8, one line

The reviews keep their HTML line breaks (``<br />``); clean them in the lab, not here.
"""

from __future__ import annotations

import os
import re
import tarfile
from collections.abc import Iterable

from attnlab.kit.datasets.download import RemoteFile, fetch_file

__all__ = ["IMDB_ARCHIVE", "IMDB_LABELS", "IMDB_SIZES", "IMDB_SPLITS", "load_imdb", "load_imdb_splits"]

IMDB_SPLITS = ("train", "test")
IMDB_LABELS = {"neg": 0, "pos": 1}
# Reviews per split in the real archive (half of each label).
IMDB_SIZES = {"train": 25_000, "test": 25_000}

IMDB_ARCHIVE = RemoteFile(
    name="imdb/aclImdb_v1.tar.gz",
    url="https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
    sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
    size=84_125_825,
)

_MEMBER = re.compile(r"aclImdb/(train|test)/(pos|neg)/(\d+)_(\d+)\.txt")


def load_imdb(
    split: str = "train", cache_dir: str | os.PathLike | None = None, progress: bool = True
) -> list[tuple[str, int]]:
    """The labelled reviews of one split as ``(text, label)`` pairs, label 1 positive and 0 negative.

    split: ``"train"`` or ``"test"`` (25,000 reviews each). Order: the negative reviews, then the positive
    ones, each by review id. The archive is downloaded into the cache on first use (``$ATTNLAB_DATA_MIRROR``
    is honoured); reading one split takes a few seconds, so read both at once with :func:`load_imdb_splits`.
    """
    return load_imdb_splits((split,), cache_dir=cache_dir, progress=progress)[_check_split(split)]


def load_imdb_splits(
    splits: Iterable[str] = IMDB_SPLITS, cache_dir: str | os.PathLike | None = None, progress: bool = True
) -> dict[str, list[tuple[str, int]]]:
    """``{split: [(text, label), ...]}`` for each of ``splits``, read in one pass over the archive.

    Raises ``DatasetUnavailable`` (with what to do) when the archive cannot be downloaded, ``ValueError``
    for an unknown split, ``RuntimeError`` when the archive holds no review of a requested split.
    """
    if isinstance(splits, str):
        splits = (splits,)
    wanted = [_check_split(s) for s in splits]
    path = fetch_file(IMDB_ARCHIVE, cache_dir=cache_dir, progress=progress)
    found: dict[str, list[tuple[int, int, str]]] = {s: [] for s in wanted}
    with tarfile.open(path, mode="r:gz") as archive:
        for member in archive:
            match = _MEMBER.fullmatch(member.name.removeprefix("./"))
            if not member.isfile() or match is None or match.group(1) not in found:
                continue
            split, label, review_id = match.group(1), IMDB_LABELS[match.group(2)], int(match.group(3))
            with archive.extractfile(member) as f:
                text = f.read().decode("utf-8", errors="replace").strip()
            found[split].append((label, review_id, text))
    out = {}
    for split in wanted:
        if not found[split]:
            raise RuntimeError(
                f"{path} holds no review of the {split!r} split (expected files aclImdb/{split}/pos/*.txt and "
                f"aclImdb/{split}/neg/*.txt); delete it so that the next call downloads it again"
            )
        out[split] = [(text, label) for label, _, text in sorted(found[split])]
    return out


def _check_split(split: str) -> str:
    if split not in IMDB_SPLITS:
        raise ValueError(f"unknown IMDB split {split!r}: use one of {IMDB_SPLITS}")
    return split
