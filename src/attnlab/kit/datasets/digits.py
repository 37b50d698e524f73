"""The handwritten digits that ship with scikit-learn: 1,797 grey 8 x 8 images of the digits 0 to 9 (Lab 11).

The UCI "Optical Recognition of Handwritten Digits" test set (Alpaydin and Kaynak, 1998), as
``sklearn.datasets.load_digits`` returns it: each pixel a count of ink from 0 to 16 (a 4 x 4 block of the
original 32 x 32 bitmap). It is read from inside the scikit-learn package: no download, so it runs offline.
scikit-learn is not a kit dependency (it is in the ``student`` and ``instructor`` extras, and preinstalled on
Colab); without it the loader raises ``ImportError`` naming the ``pip install``. See ``datasets/README.md``.
"""

from __future__ import annotations

import torch

__all__ = ["DIGITS_SIZE", "load_digits_splits"]

DIGITS_SIZE = 1797  # images in the set; about 180 of each digit


def _sklearn_digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise ImportError("the handwritten digits ship with scikit-learn, which is not installed here: "
                          "pip install scikit-learn") from None
    return load_digits()


def load_digits_splits(test_size: int = 500, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``(train_images, train_labels, test_images, test_labels)``, a seeded random split of the 1,797 digits.

    Images ``(n, 1, 8, 8)`` float32 in [0, 1] (the 0..16 ink counts divided by 16), labels ``(n,)`` int64 in
    0..9. ``test_size`` images (500 by default) go to the test split, the others (1,297) to training; the same
    ``seed`` gives the same split. ``ImportError`` (with the ``pip install``) when scikit-learn is missing.
    """
    if isinstance(test_size, bool) or not isinstance(test_size, int) or not 0 < test_size < DIGITS_SIZE:
        raise ValueError(f"test_size must be a whole number of images between 1 and {DIGITS_SIZE - 1}, "
                         f"got {test_size!r}")
    bunch = _sklearn_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32).div(16.0).unsqueeze(1)  # (1797, 1, 8, 8)
    labels = torch.as_tensor(bunch.target, dtype=torch.int64)  # (1797,)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    test, train = order[:test_size], order[test_size:]
    return images[train], labels[train], images[test], labels[test]
