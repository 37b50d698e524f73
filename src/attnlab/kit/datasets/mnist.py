"""MNIST and Fashion-MNIST: 28 x 28 grey images in ten classes, 60,000 for training and 10,000 for testing (Lab 11).

Two sources of the same format, four gzipped IDX files each (``train`` and ``t10k``, images and labels):

- ``"mnist"``: handwritten digits 0 to 9 (LeCun, Cortes and Burges), from the Google Cloud Storage copy that
  TensorFlow Datasets downloads (the original site, yann.lecun.com, often refuses downloads).
- ``"fashion_mnist"``: photos of clothes in ten classes (Xiao, Rasul and Vollgraf, 2017, Zalando Research, MIT
  licence), from the files in the project's GitHub repository.

IDX layout (big-endian): a magic number ``0x0000 08 <ndim>`` (08: unsigned bytes), then ``ndim`` sizes as 32-bit
integers, then the bytes in C order. Image files are ``idx3`` ``(n, 28, 28)``, label files ``idx1`` ``(n,)``.
See ``datasets/README.md``.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path

import torch

from attnlab.kit.datasets.download import RemoteFile, fetch_file

__all__ = ["MNIST_CLASSES", "MNIST_FILES", "MNIST_SIZES", "MNIST_SOURCES", "MNIST_SPLITS", "load_mnist",
           "mnist_file", "read_idx"]

MNIST_SOURCES = ("mnist", "fashion_mnist")
MNIST_SPLITS = ("train", "test")
MNIST_SIZES = {"train": 60_000, "test": 10_000}  # images (and labels) per split, both sources
MNIST_CLASSES = {
    "mnist": tuple(str(digit) for digit in range(10)),
    "fashion_mnist": ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                      "Ankle boot"),
}

_URL = {
    "mnist": "https://storage.googleapis.com/cvdf-datasets/mnist/{name}",
    "fashion_mnist": "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/{name}",
}
_PREFIX = {"train": "train", "test": "t10k"}
_KINDS = {"images": "images-idx3-ubyte.gz", "labels": "labels-idx1-ubyte.gz"}

# SHA-256 and size of each file. Sources, which agree digit for digit:
# - MNIST: TensorFlow Datasets, tensorflow_datasets/url_checksums/mnist.txt (the same URLs, with sizes), and
#   torchvision for Ruby, ankane/torchvision-ruby lib/torchvision/datasets/mnist.rb (sha256 of the same files).
# - Fashion-MNIST: TensorFlow Datasets, tensorflow_datasets/url_checksums/fashion_mnist.txt (the Zalando S3 copy,
#   with sizes), and Flux.jl, FluxML/Flux.jl src/data/fashion-mnist.jl. The two label files were also hashed here
#   from the bytes in zalandoresearch/fashion-mnist's repository (data/fashion/, commit b2617bb): both match.
# None was checked against a download of the images: this repository's machines have no internet.
_SHA256 = {
    ("mnist", "train-images-idx3-ubyte.gz"): "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
    ("mnist", "train-labels-idx1-ubyte.gz"): "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
    ("mnist", "t10k-images-idx3-ubyte.gz"): "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    ("mnist", "t10k-labels-idx1-ubyte.gz"): "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    ("fashion_mnist", "train-images-idx3-ubyte.gz"):
        "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
    ("fashion_mnist", "train-labels-idx1-ubyte.gz"):
        "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
    ("fashion_mnist", "t10k-images-idx3-ubyte.gz"):
        "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
    ("fashion_mnist", "t10k-labels-idx1-ubyte.gz"):
        "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
}
_SIZE = {  # bytes of each .gz file (TensorFlow Datasets' checksum files)
    ("mnist", "train-images-idx3-ubyte.gz"): 9_912_422, ("mnist", "train-labels-idx1-ubyte.gz"): 28_881,
    ("mnist", "t10k-images-idx3-ubyte.gz"): 1_648_877, ("mnist", "t10k-labels-idx1-ubyte.gz"): 4_542,
    ("fashion_mnist", "train-images-idx3-ubyte.gz"): 26_421_880,
    ("fashion_mnist", "train-labels-idx1-ubyte.gz"): 29_515,
    ("fashion_mnist", "t10k-images-idx3-ubyte.gz"): 4_422_102,
    ("fashion_mnist", "t10k-labels-idx1-ubyte.gz"): 5_148,
}


def _remote(source: str, split: str, kind: str) -> RemoteFile:
    name = f"{_PREFIX[split]}-{_KINDS[kind]}"
    return RemoteFile(name=f"{source}/{name}", url=_URL[source].format(name=name),
                      sha256=_SHA256[source, name], size=_SIZE[source, name])


# (source, split, kind) -> RemoteFile, e.g. MNIST_FILES["mnist", "test", "labels"].name
# == "mnist/t10k-labels-idx1-ubyte.gz" (the name in the cache and on a mirror).
MNIST_FILES = {
    (source, split, kind): _remote(source, split, kind)
    for source in MNIST_SOURCES for split in MNIST_SPLITS for kind in _KINDS
}


def mnist_file(source: str, split: str, kind: str) -> RemoteFile:
    """The ``RemoteFile`` of one file: ``source`` in ``MNIST_SOURCES``, ``split`` ``"train"`` or ``"test"``,
    ``kind`` ``"images"`` or ``"labels"``."""
    if kind not in _KINDS:
        raise ValueError(f"unknown kind {kind!r}: use 'images' or 'labels'")
    return MNIST_FILES[_check_source(source), _check_split(split), kind]


def load_mnist(
    split: str = "train",
    source: str = "mnist",
    *,
    limit: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(images, labels)`` of one split: images ``(n, 1, 28, 28)`` float32 in [0, 1], labels ``(n,)`` int64.

    split:  ``"train"`` (60,000) or ``"test"`` (10,000).
    source: ``"mnist"`` (digits) or ``"fashion_mnist"`` (clothes; class names in ``MNIST_CLASSES``).
    limit:  read only the first ``limit`` images and labels (all of them when None or larger than the split).
    The two files are downloaded into the cache on first use (``$ATTNLAB_DATA_MIRROR`` is honoured); without
    network, ``DatasetUnavailable`` says where to put them. A file that is not a complete IDX file of the
    expected kind raises ``ValueError`` naming it.
    """
    source, split = _check_source(source), _check_split(split)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive whole number of images (or None for all), got {limit!r}")
    paths = {kind: fetch_file(MNIST_FILES[source, split, kind], cache_dir=cache_dir, progress=progress)
             for kind in _KINDS}
    images = read_idx(paths["images"], ndim=3, limit=limit)  # (n, 28, 28) uint8
    labels = read_idx(paths["labels"], ndim=1, limit=limit)  # (n,) uint8
    if len(images) != len(labels):
        raise ValueError(
            f"{paths['images']} holds {len(images)} images but {paths['labels']} holds {len(labels)} labels; "
            "delete both so that the next call downloads them again")
    if len(labels) and int(labels.max()) >= len(MNIST_CLASSES[source]):
        raise ValueError(f"{paths['labels']} holds the label {int(labels.max())}; {source} has classes 0 to 9")
    return images.unsqueeze(1).float() / 255, labels.long()  # (n, 1, 28, 28) in [0, 1], (n,)


def read_idx(path: str | os.PathLike, ndim: int, limit: int | None = None) -> torch.Tensor:
    """The unsigned bytes of a gzipped IDX file with ``ndim`` dimensions, as a uint8 tensor of its shape.

    limit: read only the first ``limit`` items along the first dimension. Raises ``ValueError`` naming the file
    for a wrong magic number (not an IDX file of bytes with ``ndim`` dimensions), a file shorter than its
    header says (truncated), trailing bytes, or a damaged gzip stream.
    """
    path = Path(path)
    try:
        with gzip.open(path, "rb") as f:
            shape = _read_header(f, path, ndim)
            count = shape[0] if limit is None else min(limit, shape[0])
            shape = (count, *shape[1:])
            expected = math.prod(shape)
            data = f.read(expected)
            if len(data) < expected:
                raise ValueError(_damaged(path, f"it is truncated: its header announces {shape} bytes "
                                                f"({expected:,}) after the header, but only {len(data):,} follow"))
            if limit is None and f.read(1):
                raise ValueError(_damaged(path, f"more bytes follow the {expected:,} its header announces"))
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise ValueError(_damaged(path, f"it is not a complete gzip file ({type(exc).__name__}: {exc})")) from None
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).reshape(shape)


def _read_header(f, path: Path, ndim: int) -> tuple[int, ...]:
    """The sizes in the header of an IDX file of unsigned bytes with ``ndim`` dimensions."""
    expected_magic = 0x0800 + ndim
    head = f.read(4 + 4 * ndim)
    magic = int.from_bytes(head[:4], "big") if len(head) >= 4 else None
    if magic != expected_magic:
        shown = "missing" if magic is None else f"0x{magic:08x}"
        raise ValueError(_damaged(path, f"its magic number is {shown}, not 0x{expected_magic:08x} (an IDX file of "
                                        f"unsigned bytes with {ndim} dimension{'s' * (ndim > 1)}: "
                                        f"{'images' if ndim == 3 else 'labels' if ndim == 1 else 'data'})"))
    if len(head) < 4 + 4 * ndim:
        raise ValueError(_damaged(path, f"it is truncated inside its header ({len(head)} of {4 + 4 * ndim} bytes)"))
    return tuple(int.from_bytes(head[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))


def _damaged(path: Path, what: str) -> str:
    return (f"{path} cannot be read as an IDX file: {what}. Delete it so that the next call downloads it again "
            "(or check the copy on your mirror).")


def _check_source(source: str) -> str:
    if source not in MNIST_SOURCES:
        raise ValueError(f"unknown source {source!r}: use one of {MNIST_SOURCES}")
    return source


def _check_split(split: str) -> str:
    if split not in MNIST_SPLITS:
        raise ValueError(f"unknown MNIST split {split!r}: use one of {MNIST_SPLITS} ('test' is the t10k files)")
    return split
