"""GPT-2 small (124M parameters): OpenAI's weights as Hugging Face publishes them, and its tokenizer (Lab 10).

Source: https://huggingface.co/openai-community/gpt2 (MIT licence), pinned to one revision so that the SHA-256
sums below stay true. Reading the files needs ``safetensors`` and ``tokenizers`` (both preinstalled on Colab;
not dependencies of the kit): a missing one raises ``ImportError`` naming the ``pip install``. See
``datasets/README.md``.
"""

from __future__ import annotations

import os

from attnlab.kit.datasets.download import RemoteFile, fetch_file

__all__ = ["GPT2_TOKENIZER", "GPT2_WEIGHTS", "load_gpt2_state_dict", "load_gpt2_tokenizer"]

_REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
_BASE = f"https://huggingface.co/openai-community/gpt2/resolve/{_REVISION}"

GPT2_WEIGHTS = RemoteFile(
    name="gpt2/model.safetensors",
    url=f"{_BASE}/model.safetensors",
    sha256="248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707",
    size=548_105_171,
)
GPT2_TOKENIZER = RemoteFile(
    name="gpt2/tokenizer.json",
    url=f"{_BASE}/tokenizer.json",
    sha256="8414cab924d8b9b33013f0d221c5862f365ee9be39c5c2bfae8a5a9e970478a6",
)


def _require(module: str):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        raise ImportError(f"reading GPT-2 needs the package {module.split('.')[0]}: pip install "
                          f"{module.split('.')[0]}") from None


def load_gpt2_state_dict(cache_dir: str | os.PathLike | None = None, progress: bool = True) -> dict:
    """GPT-2 small's tensors by their Hugging Face names (``wte.weight``, ``h.0.attn.c_attn.weight``, ...),
    float32 on the CPU; downloaded once (548 MB) into the cache. Conv1D weights are ``(in, out)``."""
    path = fetch_file(GPT2_WEIGHTS, cache_dir=cache_dir, progress=progress)
    return _require("safetensors.torch").load_file(str(path))


def load_gpt2_tokenizer(cache_dir: str | os.PathLike | None = None, progress: bool = True):
    """GPT-2's byte-level BPE tokenizer, a ``tokenizers.Tokenizer``: ``encode(text).ids``, ``decode(ids)``."""
    path = fetch_file(GPT2_TOKENIZER, cache_dir=cache_dir, progress=progress)
    return _require("tokenizers").Tokenizer.from_file(str(path))
