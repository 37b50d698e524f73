import random

import numpy as np
import pytest
import torch

from attnlab.kit.seeding import seed_everything


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_same_seed_gives_the_same_numbers_everywhere():
    seed_everything(123)
    first = _draws()
    seed_everything(123)
    assert _draws() == first
    seed_everything(124)
    other = _draws()
    # each source changes with the seed
    assert all(a != b for a, b in zip(first, other, strict=True))


def test_returned_generator_is_seeded_and_independent_of_the_global_stream():
    g = seed_everything(7)
    torch.rand(100)  # consuming the global stream must not move the returned generator
    expected = torch.rand(4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(torch.rand(4, generator=g), expected)
    assert g.device == torch.device("cpu")
    assert g.initial_seed() == 7


def test_default_seed_is_zero():
    assert seed_everything().initial_seed() == 0


@pytest.mark.parametrize("bad", [-1, 2**32, 1.5, True, "3"])
def test_bad_seed_is_rejected(bad):
    with pytest.raises(ValueError, match="seed="):
        seed_everything(bad)
