"""Multi30k task 1: Flickr30k image captions with human translations, aligned by line (Lab 08, translation).

29,000 training, 1,014 validation and 1,000 test (``test_2016_flickr``) sentence pairs in English, German and
French. Source: https://github.com/multi30k/dataset (Elliott et al., 2016 and 2017); distributed under the
Flickr30k terms of use, for research and teaching. See ``datasets/README.md``.
"""

from __future__ import annotations

import gzip
import os

from attnlab.kit.datasets.download import RemoteFile, fetch_file

__all__ = ["MULTI30K_FILES", "MULTI30K_LANGUAGES", "MULTI30K_SIZES", "MULTI30K_SPLITS", "load_multi30k",
           "multi30k_file"]

MULTI30K_SPLITS = ("train", "val", "test_2016_flickr")
MULTI30K_LANGUAGES = ("en", "de", "fr")
# Sentence pairs per split.
MULTI30K_SIZES = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}
# Accepted spellings of a split, beside the names above.
_SPLIT_ALIASES = {"test": "test_2016_flickr"}

_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/{name}"
_SHA256 = {
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}

_SIZE = {  # bytes of each .gz file
    "test_2016_flickr.de.gz": 22_890, "test_2016_flickr.en.gz": 21_077, "test_2016_flickr.fr.gz": 22_310,
    "train.de.gz": 637_044, "train.en.gz": 568_929, "train.fr.gz": 604_242,
    "val.de.gz": 24_681, "val.en.gz": 21_650, "val.fr.gz": 23_001,
}

# (split, language) -> RemoteFile, e.g. MULTI30K_FILES["train", "de"].name == "multi30k/train.de.gz".
MULTI30K_FILES = {
    (split, lang): RemoteFile(
        name=f"multi30k/{split}.{lang}.gz",
        url=_URL.format(name=f"{split}.{lang}.gz"),
        sha256=_SHA256[f"{split}.{lang}.gz"],
        size=_SIZE[f"{split}.{lang}.gz"],
    )
    for split in MULTI30K_SPLITS
    for lang in MULTI30K_LANGUAGES
}


def multi30k_file(split: str, lang: str) -> RemoteFile:
    """The ``RemoteFile`` of one split (``train``, ``val``, ``test_2016_flickr``/``test``) in one language."""
    return MULTI30K_FILES[_check_split(split), _check_lang(lang, "lang")]


def load_multi30k(
    split: str = "train",
    src: str = "de",
    tgt: str = "en",
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[tuple[str, str]]:
    """Sentence pairs ``(source, target)`` of one split, aligned by line, stripped of surrounding white space.

    split:    ``"train"`` (29,000 pairs), ``"val"`` (1,014), ``"test_2016_flickr"`` or ``"test"`` (1,000).
    src, tgt: two different languages among ``"en"``, ``"de"``, ``"fr"``.
    The two gzip files are downloaded into the cache on first use (``$ATTNLAB_DATA_MIRROR`` is honoured).
    """
    split = _check_split(split)
    src = _check_lang(src, "src")
    tgt = _check_lang(tgt, "tgt")
    if src == tgt:
        raise ValueError(
            f"src and tgt are both {src!r}: choose two different languages among {MULTI30K_LANGUAGES}"
        )
    sides = [
        _read_lines(fetch_file(MULTI30K_FILES[split, lang], cache_dir=cache_dir, progress=progress))
        for lang in (src, tgt)
    ]
    if len(sides[0]) != len(sides[1]):
        raise RuntimeError(
            f"Multi30k {split}: {len(sides[0])} {src} lines but {len(sides[1])} {tgt} lines; "
            "delete the two cached files and load again"
        )
    return list(zip(sides[0], sides[1], strict=True))


def _read_lines(path: os.PathLike) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.strip() for line in f]


def _check_split(split: str) -> str:
    if isinstance(split, str):
        split = _SPLIT_ALIASES.get(split, split)
    if split not in MULTI30K_SPLITS:
        raise ValueError(f"unknown Multi30k split {split!r}: use one of {MULTI30K_SPLITS} (or 'test')")
    return split


def _check_lang(lang: str, what: str) -> str:
    if lang not in MULTI30K_LANGUAGES:
        raise ValueError(f"unknown Multi30k language {what}={lang!r}: use one of {MULTI30K_LANGUAGES}")
    return lang
