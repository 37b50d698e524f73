"""Tiny Shakespeare: about 1 MB of Shakespeare's plays as one text file (Lab 09, character-level mini-GPT).

Source: Andrej Karpathy's char-rnn repository (https://github.com/karpathy/char-rnn); the plays are in the
public domain. See ``datasets/README.md``.
"""

from __future__ import annotations

import os

from attnlab.kit.datasets.download import RemoteFile, fetch_file

__all__ = ["TINY_SHAKESPEARE", "load_tiny_shakespeare"]

TINY_SHAKESPEARE = RemoteFile(
    name="tinyshakespeare/input.txt",
    url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
    sha256="86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    size=1_115_394,
)


def load_tiny_shakespeare(cache_dir: str | os.PathLike | None = None, progress: bool = True) -> str:
    """The whole text of Tiny Shakespeare (1,115,394 characters), downloaded into the cache on first use.

    cache_dir: default ``$ATTNLAB_DATA`` or ``~/.cache/attnlab``; ``$ATTNLAB_DATA_MIRROR`` is honoured.
    """
    path = fetch_file(TINY_SHAKESPEARE, cache_dir=cache_dir, progress=progress)
    return path.read_text(encoding="utf-8")
