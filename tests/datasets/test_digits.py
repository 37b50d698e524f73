"""scikit-learn's handwritten digits (lab11 section 7): values, the seeded split, and the message without sklearn."""

from __future__ import annotations

import sys

import pytest
import torch

from attnlab.kit.datasets.digits import DIGITS_SIZE, load_digits_splits


def test_digits_split_values_and_shapes():
    pytest.importorskip("sklearn")
    from sklearn.datasets import load_digits

    train_x, train_y, test_x, test_y = load_digits_splits(test_size=500, seed=0)
    assert train_x.shape == (1297, 1, 8, 8) and test_x.shape == (500, 1, 8, 8)
    assert train_x.dtype == torch.float32 and train_y.dtype == torch.int64
    assert float(train_x.min()) == 0.0 and float(train_x.max()) == 1.0  # 0..16 ink counts / 16
    assert sorted(torch.cat([train_y, test_y]).bincount().tolist()) == sorted(
        torch.as_tensor(load_digits().target).bincount().tolist())
    # every image is one of sklearn's, with its own label: image 0 of sklearn is a 0
    bunch = load_digits()
    everything = torch.cat([train_x, test_x]).flatten(1) * 16
    labels = torch.cat([train_y, test_y])
    first = torch.as_tensor(bunch.data[0], dtype=torch.float32)
    matches = (everything == first).all(dim=1).nonzero().flatten()
    assert len(matches) >= 1 and labels[matches[0]] == int(bunch.target[0]) == 0


def test_digits_split_is_seeded_and_disjoint():
    pytest.importorskip("sklearn")
    a, b = load_digits_splits(seed=3), load_digits_splits(seed=3)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = load_digits_splits(seed=4)
    assert not torch.equal(a[2], c[2])
    train_rows = {tuple(row.tolist()) for row in a[0].flatten(1)}
    test_rows = [tuple(row.tolist()) for row in a[2].flatten(1)]
    assert len(a[0]) + len(a[2]) == DIGITS_SIZE
    # a few digits are exact duplicates in the source; the split itself never puts one index in both parts
    assert sum(row in train_rows for row in test_rows) < 20


@pytest.mark.parametrize("bad", [0, DIGITS_SIZE, -1, 2.5, True, "100"])
def test_digits_bad_test_size_names_the_value(bad):
    with pytest.raises(ValueError, match="test_size"):
        load_digits_splits(test_size=bad)


def test_digits_without_sklearn_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        load_digits_splits()
