"""Lab 10's GPT-2 mapping against the library: the reference ``load_gpt2_weights`` (the solution's code, run in
this process) and the hidden tests' own ``gpt2_forward`` give ``transformers``' ``GPT2LMHeadModel`` logits on a
small random checkpoint, every tensor random (layer norms included). ``transformers`` is a test dependency only
(the ``dev`` extra): grading compares with ``gpt2_forward``, which this test holds to the library."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from attnlab.course import load_course
from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import import_file

transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[dev]')")

ROOT = Path(__file__).resolve().parents[1]
LAB = load_course(ROOT).lab("lab10")
CONFIG = dict(vocab_size=37, n_positions=12, n_embd=24, n_layer=3, n_head=4)


@pytest.fixture(scope="module")
def checkpoint():
    """A random GPT2LMHeadModel (float64, eval) and its state dict as Hugging Face names it."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(**CONFIG, attn_implementation="eager")
    hf = transformers.GPT2LMHeadModel(config).double().eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_(0, 0.3)
    return hf, {k: v.detach().clone() for k, v in hf.state_dict().items()}


def _their_logits(hf, ids):
    with torch.no_grad():
        return hf(ids).logits


def test_reference_mapping_gives_gpt2lmheadmodel_logits(checkpoint):
    hf, state = checkpoint
    reference = load_bundle(LAB.autograder_dir).reference
    ns = reference.executor.namespace
    model = ns["GPT2"](vocab_size=37, block_size=12, d_model=24, num_heads=4, num_layers=3).double().eval()
    assert ns["load_gpt2_weights"](model, state) is model
    ids = torch.randint(37, (3, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ours = model(ids)[0]
    theirs = _their_logits(hf, ids)
    assert torch.allclose(ours, theirs, atol=1e-9, rtol=0), (ours - theirs).abs().max()
    assert any(k.startswith("transformer.") for k in state), "the library's names carry the transformer. prefix"


def test_hidden_tests_forward_pass_gives_gpt2lmheadmodel_logits(checkpoint):
    hf, state = checkpoint
    hidden = import_file(LAB.hidden_tests, "lab10_hidden_for_test", what="hidden tests from ")
    plain = {k.removeprefix("transformer."): v for k, v in state.items()}
    ids = torch.randint(37, (2, 12), generator=torch.Generator().manual_seed(2))
    ours = hidden.gpt2_forward(plain, ids, num_heads=4)
    theirs = _their_logits(hf, ids)
    assert torch.allclose(ours, theirs, atol=1e-9, rtol=0), (ours - theirs).abs().max()


def test_a_mapping_that_skips_the_conv1d_transpose_differs_from_the_library(checkpoint):
    """The comparison can fail: the square attention projection loaded untransposed changes the logits."""
    hf, state = checkpoint
    ns = load_bundle(LAB.autograder_dir).reference.executor.namespace
    model = ns["GPT2"](vocab_size=37, block_size=12, d_model=24, num_heads=4, num_layers=3).double().eval()
    ns["load_gpt2_weights"](model, state)
    with torch.no_grad():
        model.blocks[0].attn.proj.weight.copy_(model.blocks[0].attn.proj.weight.T.clone())
        ids = torch.randint(37, (2, 12), generator=torch.Generator().manual_seed(3))
        assert not torch.allclose(model(ids)[0], _their_logits(hf, ids), atol=1e-3)
