"""attnlab.kit.expect, what public checks compare with: a failure says how far off the answer is."""

from __future__ import annotations

import re

import pytest
import torch

from attnlab.kit.expect import SHOWN_WHOLE, expect_close, expect_equal


def test_a_small_value_of_the_wrong_shape_is_shown_whole():
    # lab08's beam search without the length penalty returns the short sentence: the values say so at a glance
    with pytest.raises(AssertionError) as info:
        expect_equal(torch.tensor([[1, 2]]), [[1, 3, 4, 2]], "beam_search, length_penalty=1")
    assert str(info.value) == ("beam_search, length_penalty=1 has shape (1, 2), expected (1, 4): "
                               "yours [[1, 2]], expected [[1, 3, 4, 2]]")
    with pytest.raises(AssertionError, match=re.escape("w has shape (2,), expected (3,): yours [0.5, 0.25], "
                                                       "expected [0.5, 0.25, 0.25]")):
        expect_close(torch.tensor([0.5, 0.25]), [0.5, 0.25, 0.25], "w")


def test_a_large_value_of_the_wrong_shape_gives_the_shapes_only():
    big = torch.zeros(SHOWN_WHOLE + 1)
    with pytest.raises(AssertionError) as info:
        expect_close(big, torch.zeros(SHOWN_WHOLE), "out")
    assert str(info.value) == f"out has shape ({SHOWN_WHOLE + 1},), expected ({SHOWN_WHOLE},)"
    with pytest.raises(AssertionError) as info:
        expect_equal(torch.zeros(0, 2, dtype=torch.long), [[1, 2]], "pairs")
    assert str(info.value) == "pairs has shape (0, 2), expected (1, 2)"


def test_values_off_name_the_worst_element():
    with pytest.raises(AssertionError, match=re.escape("weights: 2 of 2 values off, the worst at index (0,): "
                                                       "yours 0.5, expected 0.7311 (off by 0.231)")):
        expect_close(torch.tensor([0.5, 0.5]), [0.7311, 0.2689], "weights", atol=1e-4)
    with pytest.raises(AssertionError, match=re.escape("ids: 1 of 3 values differ, the first at index (2,): "
                                                       "yours 5, expected 4")):
        expect_equal(torch.tensor([1, 2, 5]), [1, 2, 4], "ids")
