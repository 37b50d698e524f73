"""The MNIST / Fashion-MNIST loader on tiny IDX files written by the test and served through a file:// mirror.

The real files are never downloaded here: the tests swap the ``RemoteFile`` of each file for one with the same
relative name and the tiny file's digest, so mirror, cache, digest check and IDX parsing run as on the real files.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import pytest
import torch

from attnlab.kit.datasets import mnist
from attnlab.kit.datasets.download import DatasetUnavailable, RemoteFile

# Three 28 x 28 images: 0, 51 and 255 everywhere except one pixel that tells them apart (row 3, column 5).
PIXELS = torch.tensor([0, 51, 255], dtype=torch.uint8)[:, None, None].repeat(1, 28, 28)  # (3, 28, 28)
PIXELS[:, 3, 5] = torch.tensor([7, 8, 9], dtype=torch.uint8)
LABELS = torch.tensor([7, 0, 9], dtype=torch.uint8)


def idx_bytes(data: torch.Tensor, magic: int | None = None) -> bytes:
    """The IDX encoding of a uint8 tensor: magic 0x0000_08_<ndim>, the sizes (big-endian 32-bit), the bytes."""
    magic = 0x0800 + data.dim() if magic is None else magic
    header = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in data.shape)
    return header + data.numpy().tobytes()


def write_gz(path: Path, payload: bytes) -> str:
    """Gzip ``payload`` into ``path``; returns the SHA-256 of the .gz file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(payload, mtime=0))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def serve_split(monkeypatch, folder: Path, source: str, split: str, images: bytes, labels: bytes) -> None:
    """Write the two files of one split on the mirror ``folder`` and patch their digests into MNIST_FILES."""
    for kind, payload in (("images", images), ("labels", labels)):
        real = mnist.MNIST_FILES[source, split, kind]
        digest = write_gz(folder / real.name, payload)
        monkeypatch.setitem(mnist.MNIST_FILES, (source, split, kind), RemoteFile(real.name, real.url, digest))


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Path:
    """A file:// mirror holding the tiny test split of both sources, set as ATTNLAB_DATA_MIRROR."""
    folder = tmp_path / "mirror"
    for source in mnist.MNIST_SOURCES:
        serve_split(monkeypatch, folder, source, "test", idx_bytes(PIXELS), idx_bytes(LABELS))
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", folder.as_uri())
    return folder


def test_the_real_files_are_described_exactly():
    remote = mnist.mnist_file("mnist", "train", "images")
    assert remote.name == "mnist/train-images-idx3-ubyte.gz"
    assert remote.url == "https://storage.googleapis.com/cvdf-datasets/mnist/train-images-idx3-ubyte.gz"
    assert remote.sha256 == "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609"
    assert remote.size == 9_912_422
    remote = mnist.mnist_file("fashion_mnist", "test", "labels")
    assert remote.name == "fashion_mnist/t10k-labels-idx1-ubyte.gz"
    assert remote.url == ("https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"
                          "t10k-labels-idx1-ubyte.gz")
    assert remote.sha256 == "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5"
    assert len(mnist.MNIST_FILES) == 8 and len({f.sha256 for f in mnist.MNIST_FILES.values()}) == 8
    assert all(len(names) == 10 for names in mnist.MNIST_CLASSES.values())


@pytest.mark.parametrize("source", mnist.MNIST_SOURCES)
def test_images_and_labels_parsed_shaped_and_scaled(source, mirror, tmp_path):
    images, labels = mnist.load_mnist("test", source, cache_dir=tmp_path / "cache", progress=False)
    assert images.shape == (3, 1, 28, 28) and images.dtype == torch.float32
    assert labels.tolist() == [7, 0, 9] and labels.dtype == torch.int64
    assert torch.equal(images[:, 0, 0, 0], torch.tensor([0.0, 0.2, 1.0]))  # 0, 51, 255 divided by 255 (float32)
    assert torch.equal(images[:, 0, 3, 5], torch.tensor([7, 8, 9]) / 255)  # row 3, column 5: row-major pixels
    assert images.min() >= 0 and images.max() <= 1
    cached = tmp_path / "cache" / source / "t10k-images-idx3-ubyte.gz"
    assert cached.read_bytes() == (mirror / source / "t10k-images-idx3-ubyte.gz").read_bytes()


def test_limit_reads_the_first_items_and_the_cache_is_used_afterwards(mirror, tmp_path):
    cache = tmp_path / "cache"
    images, labels = mnist.load_mnist("test", limit=2, cache_dir=cache, progress=False)
    assert images.shape == (2, 1, 28, 28) and labels.tolist() == [7, 0]
    for path in (mirror / "mnist").iterdir():
        path.unlink()  # the mirror is gone: the cached copies must do
    images, labels = mnist.load_mnist("test", limit=100, cache_dir=cache, progress=False)
    assert images.shape == (3, 1, 28, 28) and labels.tolist() == [7, 0, 9]


def test_bad_arguments_raise_before_any_download(tmp_path):
    for kwargs, message in (({"split": "t10k"}, "unknown MNIST split 't10k'"),
                            ({"source": "fashion"}, "unknown source 'fashion'"),
                            ({"limit": 0}, "limit must be a positive whole number"),
                            ({"limit": 2.5}, "limit must be a positive whole number")):
        with pytest.raises(ValueError, match=message):
            mnist.load_mnist(cache_dir=tmp_path / "cache", **kwargs)
    with pytest.raises(ValueError, match="unknown kind 'pixels'"):
        mnist.mnist_file("mnist", "train", "pixels")
    assert not (tmp_path / "cache").exists()


def test_offline_says_what_to_do_first(tmp_path, monkeypatch):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", empty.as_uri())
    with pytest.raises(DatasetUnavailable) as info:
        mnist.load_mnist("train", "fashion_mnist", cache_dir=tmp_path / "cache", progress=False)
    message = str(info.value)
    remote = mnist.MNIST_FILES["fashion_mnist", "train", "images"]
    assert message.splitlines()[0].startswith("fashion_mnist/train-images-idx3-ubyte.gz is not in the cache")
    assert "ATTNLAB_DATA_MIRROR" in message.splitlines()[1]  # the action comes before what failed
    assert message.splitlines()[-1].startswith("What failed:")
    for part in (remote.url, remote.sha256, str(tmp_path / "cache" / remote.name)):
        assert part in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # raised from None


def test_a_different_file_is_refused_by_its_digest(mirror, tmp_path):
    write_gz(mirror / "mnist" / "t10k-labels-idx1-ubyte.gz", idx_bytes(torch.tensor([1, 2, 3], dtype=torch.uint8)))
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        mnist.load_mnist("test", cache_dir=tmp_path / "cache", progress=False)
    assert not (tmp_path / "cache" / "mnist" / "t10k-labels-idx1-ubyte.gz").exists()


@pytest.mark.parametrize("images, labels, message", [
    (idx_bytes(PIXELS, magic=0x0801), idx_bytes(LABELS), r"magic number is 0x00000801, not 0x00000803"),
    (idx_bytes(PIXELS), idx_bytes(PIXELS), r"magic number is 0x00000803, not 0x00000801"),
    (idx_bytes(PIXELS)[:-10], idx_bytes(LABELS), r"truncated: its header announces \(3, 28, 28\) bytes"),
    (idx_bytes(PIXELS)[:9], idx_bytes(LABELS), r"truncated inside its header \(9 of 16 bytes\)"),
    (idx_bytes(PIXELS) + b"\0", idx_bytes(LABELS), r"more bytes follow the 2,352"),
    (idx_bytes(PIXELS), idx_bytes(LABELS[:2]), r"holds 3 images but .* holds 2 labels"),
    (idx_bytes(PIXELS), idx_bytes(torch.tensor([1, 10, 2], dtype=torch.uint8)), r"holds the label 10"),
])
def test_a_damaged_file_is_named_with_what_is_wrong(images, labels, message, tmp_path, monkeypatch):
    serve_split(monkeypatch, tmp_path / "mirror", "mnist", "test", images, labels)
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", (tmp_path / "mirror").as_uri())
    with pytest.raises(ValueError, match=message) as info:
        mnist.load_mnist("test", cache_dir=tmp_path / "cache", progress=False)
    assert str(tmp_path / "cache" / "mnist") in str(info.value)


def test_a_broken_gzip_stream_is_named(tmp_path):
    path = tmp_path / "labels.gz"
    path.write_bytes(gzip.compress(idx_bytes(LABELS))[:-12])  # the stream stops before its end marker
    with pytest.raises(ValueError, match=r"labels.gz cannot be read as an IDX file: .*not a complete gzip file"):
        mnist.read_idx(path, ndim=1)
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="not a complete gzip file"):
        mnist.read_idx(path, ndim=1)
