"""The data of the labs: one module per source.

- :mod:`~attnlab.kit.datasets.download`: the verified download cache (``fetch``, ``fetch_file``, ``RemoteFile``).
- :mod:`~attnlab.kit.datasets.sentiment`: synthetic sentiment, negation and word order decide the label.
- :mod:`~attnlab.kit.datasets.shakespeare`: Tiny Shakespeare (real, downloaded).
- :mod:`~attnlab.kit.datasets.multi30k`: Multi30k task 1 translation pairs (real, downloaded).
- :mod:`~attnlab.kit.datasets.digits`: scikit-learn's handwritten 8 x 8 digits (real, no download; import it from its
  module).
- :mod:`~attnlab.kit.datasets.mnist`: MNIST and Fashion-MNIST images (real, downloaded; import it from its module).

Where each source comes from, its license and how to use a mirror: ``datasets/README.md``.
"""

from attnlab.kit.datasets.download import (
    DatasetUnavailable,
    RemoteFile,
    default_cache_dir,
    fetch,
    fetch_file,
)
from attnlab.kit.datasets.multi30k import MULTI30K_FILES, load_multi30k
from attnlab.kit.datasets.sentiment import (
    SentimentExample,
    SentimentSplits,
    bag_of_words_ceiling,
    build_vocab,
    encode_texts,
    generate_sentiment,
    sentiment_splits,
)
from attnlab.kit.datasets.shakespeare import TINY_SHAKESPEARE, load_tiny_shakespeare

__all__ = [
    "MULTI30K_FILES",
    "TINY_SHAKESPEARE",
    "DatasetUnavailable",
    "RemoteFile",
    "SentimentExample",
    "SentimentSplits",
    "bag_of_words_ceiling",
    "build_vocab",
    "default_cache_dir",
    "encode_texts",
    "fetch",
    "fetch_file",
    "generate_sentiment",
    "load_multi30k",
    "load_tiny_shakespeare",
    "sentiment_splits",
]
