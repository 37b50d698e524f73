"""Hidden tests of Lab 11 (the Vision Transformer), against the narrow interface.

Every test draws its inputs from ``rng`` only and compares the student's answer with a trusted value computed
here: ``F.unfold`` (the patches of ``patchify``), ``F.conv2d`` with the embedding's weights (``PatchEmbedding``), a
ViT assembled from ``F.conv2d``, ``nn.TransformerEncoderLayer(norm_first=True)`` and ``F.layer_norm`` on the same,
randomised weights (``ViT``), the rollout formula written here in float64, symmetric InfoNCE written out with
``logsumexp`` in float64 (``clip_loss``, its gradients by autograd of that formula), hand-worked answers, and the
reference (the solution's code) for the gradients. A blank notebook scores 0: the error test checks a value first.

Questions and points (26 in all):

    patchify            5
    PatchEmbedding      5
    ViT                 6
    attention_rollout   5
    clip_loss           5

Tolerances: ``checks.tolerance`` (``patchify`` moves values only: compared exactly; the ViT is ``VIT_DEPTH``
layers deep, its gradients twice that; the float32 ViT takes its expected values from the reference in float64 and
``checks.measured_atol`` against the reference's own float32 error, as Lab 07 does for LayerNorm's backward).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import randint, randn
from attnlab.grading.worker.executor import StudentError

# Each question graded on its own: the classes run with the reference's patchify, and ViT with the reference class
# PatchEmbedding too (built and run by the grader: grading/worker/module_calls.py; docs/CURRICULUM.md)
suite = HiddenSuite("lab11_vision_transformer", policy_questions=None,
                    graded_on_reference={"PatchEmbedding": ("patchify",), "ViT": ("patchify", "PatchEmbedding")})

F32, F64 = torch.float32, torch.float64
PATCHIFY, EMBED, VIT, ROLLOUT = "patchify", "PatchEmbedding", "ViT", "attention_rollout"
CLIP = "clip_loss"
VIT_DEPTH = 2 + 4 * 2  # embedding, final norm and head, four sub-layers per block (two blocks at most here)


# ---------------------------------------------------------------------------------------------- patchify
def unfold_patches(images: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, N, C p p) by ``F.unfold``: channel-first within a block, blocks in row-major order."""
    return F.unfold(images, kernel_size=patch, stride=patch).transpose(1, 2)  # (B, C p p, N) -> (B, N, C p p)


@suite.test(PATCHIFY, points=1)
def patchify_known_answers(student, ref, rng):
    image = torch.arange(16.0, dtype=F64).reshape(1, 1, 4, 4)
    got = student.call(PATCHIFY, image, 2).output
    hand = torch.tensor([[[0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]], dtype=F64)
    checks.assert_close(got, hand, name="patchify of the 4 x 4 image 0..15 with patch 2 (row-major patches)",
                        atol=0.0, rtol=0.0)
    image = torch.arange(24.0, dtype=F64).reshape(1, 2, 2, 6)  # two channels, one row of three 2 x 2 patches
    got = student.call(PATCHIFY, image, 2).output
    hand = torch.tensor([[[0, 1, 6, 7, 12, 13, 18, 19], [2, 3, 8, 9, 14, 15, 20, 21],
                          [4, 5, 10, 11, 16, 17, 22, 23]]], dtype=F64)
    checks.assert_close(got, hand, name="patchify of a 2-channel 2 x 6 image with patch 2 (channel 0's pixels first)",
                        atol=0.0, rtol=0.0)


@suite.test(PATCHIFY, points=2)
def patchify_equals_unfold(student, ref, rng):
    for dtype in (F64, F32):
        patch = randint(rng, 1, 5)
        B, C = randint(rng, 1, 3), randint(rng, 1, 4)
        H, W = patch * randint(rng, 1, 5), patch * randint(rng, 1, 5)
        images = randn(rng, B, C, H, W, dtype=dtype)
        got = student.call(PATCHIFY, images, patch).output
        checks.assert_close(got, unfold_patches(images, patch), atol=0.0, rtol=0.0,
                            name=f"patchify of {tuple(images.shape)} with patch {patch} (against F.unfold)")
    images = randn(rng, 2, 3, 8, 12)
    checks.compare_call(student, ref, PATCHIFY, images, 4, grad=True, rng=rng)


@suite.test(PATCHIFY, points=1)
def patchify_matches_the_conv2d_weight_layout(student, ref, rng):
    patch, C, d = randint(rng, 2, 4), 3, randint(rng, 2, 6)
    images = randn(rng, 2, C, 3 * patch, 2 * patch)
    weight = randn(rng, d, C, patch, patch)
    got = student.call(PATCHIFY, images, patch).output
    checks.expect_tensor(got, name="patchify's output", shape=(2, 6, C * patch * patch))
    conv = F.conv2d(images, weight, stride=patch).flatten(2).transpose(1, 2)  # (B, N, d)
    checks.assert_close(got @ weight.reshape(d, -1).T, conv, name="patches @ conv.weight.reshape(d, C p p).T "
                        "(should equal Conv2d(kernel=stride=patch); flatten each patch channel-first)")


@suite.test(PATCHIFY, points=1)
def patchify_side_not_divisible(student, ref, rng):
    images = randn(rng, 1, 1, 6, 6)
    checks.assert_close(student.call(PATCHIFY, images, 3).output, unfold_patches(images, 3), atol=0.0, rtol=0.0,
                        name="patchify of a 6 x 6 image with patch 3")
    patch = randint(rng, 3, 6)
    H, W = patch * 2 + 1, patch * 3
    for shape, bad in (((1, 2, H, W), H), ((1, 2, W, H), H)):
        try:
            student.call(PATCHIFY, torch.zeros(shape, dtype=F64), patch)
        except StudentError as exc:
            text = str(exc)
            assert "raised ValueError" in text, f"patchify of {shape} with patch {patch} should raise ValueError"
            message = text.split("raised ValueError:", 1)[-1]
            assert str(bad) in message and str(patch) in message, (
                f"the ValueError for an image {shape} and patch {patch} should name the side {bad} and the patch "
                f"{patch}; got {message.strip()[:200]!r}")
        else:
            raise AssertionError(f"patchify of an image {shape} with patch {patch} should raise ValueError: "
                                 f"{bad} is not divisible by {patch}")


# ------------------------------------------------------------------------------------------ PatchEmbedding
def conv_embedding(state: dict, images: torch.Tensor, patch: int, prefix: str = "") -> torch.Tensor:
    """The embedding as a convolution: Conv2d(kernel=stride=patch) with proj's weights, [CLS] in front, + pos_emb."""
    weight = state[prefix + "proj.weight"]
    d = weight.shape[0]
    conv = F.conv2d(images, weight.reshape(d, images.shape[1], patch, patch), state[prefix + "proj.bias"],
                    stride=patch)  # (B, d, H/p, W/p)
    tokens = conv.flatten(2).transpose(1, 2)  # (B, N, d)
    cls = state[prefix + "cls_token"].expand(images.shape[0], -1, -1)  # (B, 1, d)
    return torch.cat([cls, tokens], dim=1) + state[prefix + "pos_emb"]


def embed_config(rng):
    patch = randint(rng, 2, 4)
    return patch * randint(rng, 2, 4), patch, randint(rng, 1, 3), randint(rng, 3, 12)


@suite.test(EMBED, points=2)
def embedding_equals_conv2d_float64(student, ref, rng):
    for _ in range(2):
        size, patch, C, d = embed_config(rng)
        s_mod, r_mod = checks.build_pair(student, ref, EMBED, size, patch, C, d, rng=rng, dtype=F64)
        images = randn(rng, randint(rng, 1, 3), C, size, size)
        expected = conv_embedding(r_mod.state_dict(), images, patch)
        checks.assert_close(s_mod.call(images).output, expected, depth=2,
                            name=f"PatchEmbedding({size}, {patch}, {C}, {d}) against Conv2d(kernel=stride={patch}) "
                            "with the same weights, [CLS] first, pos_emb added to every token")


@suite.test(EMBED, points=2)
def embedding_gradients_float64(student, ref, rng):
    size, patch, C, d = embed_config(rng)
    s_mod, r_mod = checks.build_pair(student, ref, EMBED, size, patch, C, d, rng=rng, dtype=F64)
    images = randn(rng, 3, C, size, size)
    checks.compare_module_call(s_mod, r_mod, images, rng=rng, grad=True, depth=2,
                               name=f"PatchEmbedding({size}, {patch}, {C}, {d})")


@suite.test(EMBED, points=1)
def embedding_float32(student, ref, rng):
    size, patch, C, d = embed_config(rng)
    s_mod, r_mod = checks.build_pair(student, ref, EMBED, size, patch, C, d, rng=rng, dtype=F32, scale=1.0)
    images = randn(rng, 2, C, size, size, dtype=F32, scale=3.0)
    state = {k: v.to(F64) for k, v in r_mod.state_dict().items()}
    expected = conv_embedding(state, images.to(F64), patch).to(F32)
    checks.assert_close(s_mod.call(images).output, expected, depth=2,
                        name=f"PatchEmbedding({size}, {patch}, {C}, {d}) in float32")


# --------------------------------------------------------------------------------------------------- ViT
def torch_block(state: dict, prefix: str, d: int, heads: int, d_ff: int) -> nn.TransformerEncoderLayer:
    """``nn.TransformerEncoderLayer(norm_first=True)`` holding the weights of block ``prefix`` (float64, eval)."""
    layer = nn.TransformerEncoderLayer(d, heads, d_ff, dropout=0.0, batch_first=True, norm_first=True, dtype=F64)
    qkv = ("q_proj", "k_proj", "v_proj")
    mapped = {
        "self_attn.in_proj_weight": torch.cat([state[f"{prefix}self_attn.{p}.weight"] for p in qkv]),
        "self_attn.in_proj_bias": torch.cat([state[f"{prefix}self_attn.{p}.bias"] for p in qkv]),
        "self_attn.out_proj.weight": state[f"{prefix}self_attn.out_proj.weight"],
        "self_attn.out_proj.bias": state[f"{prefix}self_attn.out_proj.bias"],
    }
    for ours, theirs in (("ff.linear1", "linear1"), ("ff.linear2", "linear2"), ("norm1", "norm1"),
                         ("norm2", "norm2")):
        for kind in ("weight", "bias"):
            mapped[f"{theirs}.{kind}"] = state[f"{prefix}{ours}.{kind}"]
    layer.load_state_dict({k: v.to(F64) for k, v in mapped.items()})
    return layer.eval()


def library_vit(state: dict, images: torch.Tensor, patch: int, heads: int, layers: int) -> torch.Tensor:
    """A ViT from PyTorch's layers on ``state``: conv embedding, pre-norm encoder layers, F.layer_norm, [CLS] head."""
    x = conv_embedding(state, images, patch, prefix="embed.")  # (B, N + 1, d)
    d = x.shape[-1]
    d_ff = state["blocks.0.ff.linear1.weight"].shape[0]
    with torch.no_grad():
        for i in range(layers):
            x = torch_block(state, f"blocks.{i}.", d, heads, d_ff)(x)
    x = F.layer_norm(x, (d,), state["norm.weight"], state["norm.bias"])
    return x[:, 0] @ state["head.weight"].T + state["head.bias"]  # (B, num_classes)


def vit_config(rng):
    patch = randint(rng, 2, 4)
    heads = randint(rng, 1, 3)
    return dict(image_size=patch * randint(rng, 2, 3), patch=patch, in_channels=randint(rng, 1, 3),
                num_classes=randint(rng, 2, 5), d_model=heads * randint(rng, 2, 4), num_heads=heads,
                num_layers=randint(rng, 1, 2), d_ff=randint(rng, 4, 16))


def describe(cfg: dict) -> str:
    return "ViT(" + ", ".join(f"{k}={v}" for k, v in cfg.items()) + ")"


@suite.test(VIT, points=3)
def vit_equals_pytorch_layers_float64(student, ref, rng):
    for _ in range(2):
        cfg = vit_config(rng)
        s_mod, r_mod = checks.build_pair(student, ref, VIT, rng=rng, dtype=F64, **cfg)
        size = cfg["image_size"]
        images = randn(rng, randint(rng, 1, 3), cfg["in_channels"], size, size)
        expected = library_vit(r_mod.state_dict(), images, cfg["patch"], cfg["num_heads"], cfg["num_layers"])
        checks.assert_close(s_mod.call(images).output, expected, depth=VIT_DEPTH,
                            name=f"{describe(cfg)} against a ViT of Conv2d, nn.TransformerEncoderLayer(norm_first="
                            "True), LayerNorm and Linear on [CLS], with the same weights")


@suite.test(VIT, points=2)
def vit_gradients_float64(student, ref, rng):
    cfg = vit_config(rng)
    s_mod, r_mod = checks.build_pair(student, ref, VIT, rng=rng, dtype=F64, **cfg)
    images = randn(rng, 2, cfg["in_channels"], cfg["image_size"], cfg["image_size"])
    checks.compare_module_call(s_mod, r_mod, images, rng=rng, grad=True, depth=VIT_DEPTH, name=describe(cfg))


@suite.test(VIT, points=1)
def vit_float32_with_dropout_in_eval(student, ref, rng):
    cfg = vit_config(rng)
    s_mod, r_mod = checks.build_pair(student, ref, VIT, rng=rng, dtype=F32, dropout=0.3, **cfg)
    images = randn(rng, 3, cfg["in_channels"], cfg["image_size"], cfg["image_size"], dtype=F32)
    own = r_mod.call(images).output  # the reference's float32 error measures what a correct answer needs
    r_mod.to(F64)
    exact = r_mod.call(images.to(F64)).output
    atol = checks.measured_atol(exact, own, depth=VIT_DEPTH)
    checks.assert_close(s_mod.call(images).output, exact.to(F32), depth=VIT_DEPTH, atol=atol,
                        name=f"{describe(cfg)} with dropout=0.3 in eval mode, float32")


# ---------------------------------------------------------------------------------------- attention_rollout
def rollout_formula(attentions: list[torch.Tensor]) -> torch.Tensor:
    """R = A_L ... A_1, A_l = rows of (mean over heads + I) renormalised; computed in float64."""
    result = None
    for weights in attentions:
        mixed = weights.to(F64).mean(dim=1) + torch.eye(weights.shape[-1], dtype=F64)
        mixed = mixed / mixed.sum(dim=-1, keepdim=True)
        result = mixed if result is None else mixed @ result
    return result


def random_attentions(rng, layers: int, B: int, heads: int, N: int, dtype=F64) -> list[torch.Tensor]:
    """``layers`` softmax weight tensors (B, h, N, N), with peaked rows (scores of scale 3)."""
    return [torch.softmax(randn(rng, B, heads, N, N, scale=3.0), dim=-1).to(dtype) for _ in range(layers)]


@suite.test(ROLLOUT, points=2)
def rollout_known_answers(student, ref, rng):
    a1 = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=F64)[None, None]  # everything to token 0
    a2 = torch.tensor([[0.0, 1.0], [0.0, 1.0]], dtype=F64)[None, None]  # everything to token 1
    got = student.call(ROLLOUT, [a2, a1]).output
    checks.assert_close(got, torch.tensor([[[0.5, 0.5], [0.25, 0.75]]], dtype=F64),
                        name="the rollout of [A1 = all to token 1, A2 = all to token 0] "
                        "(R = A2_hat @ A1_hat, the later layer on the left, with A_hat = (A + I) / 2)")
    heads = torch.stack([torch.eye(2, dtype=F64), torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=F64)])[None]
    got = student.call(ROLLOUT, [heads]).output
    checks.assert_close(got, torch.tensor([[[0.75, 0.25], [0.25, 0.75]]], dtype=F64),
                        name="the rollout of one layer of two heads, I and the swap (mean [[.5, .5], [.5, .5]], "
                        "+ I, rows renormalised)")


@suite.test(ROLLOUT, points=2)
def rollout_equals_formula_float64(student, ref, rng):
    for layers in (1, 2, randint(rng, 3, 6)):
        attentions = random_attentions(rng, layers, randint(rng, 1, 3), randint(rng, 1, 4), randint(rng, 3, 17))
        checks.assert_close(student.call(ROLLOUT, attentions).output, rollout_formula(attentions), depth=layers,
                            name=f"the rollout of {layers} layers of {tuple(attentions[0].shape)} weights")
    attentions = random_attentions(rng, 3, 2, 2, 5)
    checks.compare_call(student, ref, ROLLOUT, attentions, depth=3)  # and the inputs are not changed in place


@suite.test(ROLLOUT, points=1)
def rollout_float32(student, ref, rng):
    attentions = random_attentions(rng, 4, 2, 3, randint(rng, 5, 30), dtype=F32)
    checks.assert_close(student.call(ROLLOUT, attentions).output, rollout_formula(attentions).to(F32), depth=4,
                        name=f"the rollout of 4 layers of float32 {tuple(attentions[0].shape)} weights")


# ------------------------------------------------------------------------------------------------ clip_loss
def infonce_formula(image_emb: torch.Tensor, text_emb: torch.Tensor, temperature) -> torch.Tensor:
    """Symmetric InfoNCE written out in float64: S = cos / tau, mean over rows and over columns of
    logsumexp - the diagonal, halved (no F.normalize, no F.cross_entropy: an independent form)."""
    x, t = image_emb.to(F64), text_emb.to(F64)
    x = x / x.pow(2).sum(-1, keepdim=True).sqrt()  # (B, d) unit rows
    t = t / t.pow(2).sum(-1, keepdim=True).sqrt()
    tau = temperature.to(F64) if isinstance(temperature, torch.Tensor) else temperature
    S = (x[:, None, :] * t[None, :, :]).sum(-1) / tau  # (B, B): S[i, j] = cos(image i, text j) / tau
    diagonal = S.diagonal()
    return ((S.logsumexp(dim=1) - diagonal).mean() + (S.logsumexp(dim=0) - diagonal).mean()) / 2


def clip_inputs(rng, B: int, d: int, dtype=F64):
    """Random embeddings whose rows have lengths between 0.1 and 10 (normalising them is part of the loss)."""
    def rows():
        return (randn(rng, B, d) * torch.exp(randn(rng, B, 1)).clamp(0.1, 10.0)).to(dtype)  # (B, d)
    return rows(), rows()


def hand_loss(a: float) -> float:
    """The lab's worked example at 1 / tau = a: S = [[a, 0], [a, 0]]; rows log(1 + e^-a), log(1 + e^a); columns ln 2."""
    return ((math.log1p(math.exp(-a)) + math.log1p(math.exp(a))) / 2 + math.log(2)) / 2


@suite.test(CLIP, points=1)
def clip_known_answers(student, ref, rng):
    images = torch.tensor([[3.0, 0.0], [2.0, 0.0]], dtype=F64)  # both (1, 0) once normalised
    texts = torch.tensor([[1.0, 0.0], [0.0, 5.0]], dtype=F64)
    for tau in (1.0, 0.25):
        got = student.call(CLIP, images, texts, tau).output
        checks.assert_close(got, torch.tensor(hand_loss(1 / tau), dtype=F64),
                            name=f"clip_loss of the worked example at temperature {tau} (S = [[1, 0], [1, 0]] / tau; "
                            "rows and columns averaged)")


@suite.test(CLIP, points=2)
def clip_equals_formula_float64(student, ref, rng):
    for B, d in ((randint(rng, 2, 9), randint(rng, 2, 8)), (randint(rng, 10, 33), randint(rng, 3, 16))):
        image_emb, text_emb = clip_inputs(rng, B, d)
        tau = 0.05 + 0.95 * float(torch.rand((), generator=rng, dtype=F64))
        checks.assert_close(student.call(CLIP, image_emb, text_emb, tau).output,
                            infonce_formula(image_emb, text_emb, tau), depth=3,
                            name=f"clip_loss of ({B}, {d}) raw embeddings at temperature {tau:.3f} against "
                            "(mean_i [logsumexp_j S_ij - S_ii] + mean_j [logsumexp_i S_ij - S_jj]) / 2, "
                            "S = cosine / tau")
    image_emb, text_emb = clip_inputs(rng, 6, 4)
    tau = torch.tensor(0.2, dtype=F64)
    checks.assert_close(student.call(CLIP, image_emb, text_emb, tau).output, infonce_formula(image_emb, text_emb, tau),
                        depth=3, name="clip_loss with the temperature a 0-dim tensor (0.2)")


@suite.test(CLIP, points=1)
def clip_gradients_float64(student, ref, rng):
    B, d = randint(rng, 3, 12), randint(rng, 2, 8)
    image_emb, text_emb = clip_inputs(rng, B, d)
    tau = torch.tensor(0.05 + 0.5 * float(torch.rand((), generator=rng, dtype=F64)), dtype=F64)
    checks.compare_call(student, ref, CLIP, image_emb, text_emb, tau, grad=True, rng=rng, depth=3)
    leaves = [t.clone().requires_grad_(True) for t in (image_emb, text_emb, tau)]
    expected = torch.autograd.grad(infonce_formula(*leaves), leaves)  # d loss / d input, from the formula
    got = student.call(CLIP, image_emb, text_emb, tau, grad=True, grad_outputs=[torch.ones((), dtype=F64)]).grads
    for key, what in ((0, "image_emb"), (1, "text_emb"), (2, "the temperature (a learned 0-dim tensor)")):
        assert got.get(key) is not None, (f"the gradient of clip_loss with respect to {what} is missing: keep the "
                                          "autograd graph (no .detach(), .item(), float(tau))")
        checks.assert_close(got[key], expected[key], depth=6,
                            name=f"the gradient of clip_loss with respect to {what}, against autograd of the formula")


@suite.test(CLIP, points=1)
def clip_float32_small_temperature(student, ref, rng):
    image_emb, text_emb = clip_inputs(rng, 16, 8, dtype=F32)
    text_emb[:4] = image_emb[:4] * 2  # four pairs at cosine 1: logits of 100 at tau = 0.01
    got = student.call(CLIP, image_emb, text_emb, 0.01).output
    checks.assert_close(got, infonce_formula(image_emb, text_emb, 0.01).to(F32), depth=3,
                        name="clip_loss in float32 at temperature 0.01 (logits up to 100: exp overflows float32; "
                        "use F.cross_entropy or log_softmax)")
    checks.compare_call(student, ref, CLIP, image_emb, text_emb, 0.01, depth=3)  # inputs not changed in place
