"""Hidden tests of Lab 03 (1D convolutions for text), written against the narrow interface.

Every test draws its inputs from ``rng`` and compares the student's answer with a trusted value computed here:
``F.conv1d`` (the library the lab rebuilds), the output length of a real ``F.conv1d`` call, the layers of
``TextCNN`` recomputed here with ``torch.nn.functional`` from the state dict, and the reference (the solution's
code) for gradients. A blank notebook scores 0: the tests that expect an error check a value first, and the
source checks for the forbidden library versions sit inside value tests, after the comparison.

Questions and points (30 in all):

    conv1d_output_length   3
    conv1d                10
    causal_conv1d          4
    receptive_field        3
    TextCNN               10

``conv1d`` and ``causal_conv1d`` must not use ``F.conv1d``, ``nn.Conv1d`` or ``torch.convolution``; the check
reads the source of those two functions only, since ``TextCNN`` is meant to use ``nn.Conv1d``. A bare call of
the student's own ``conv1d`` is fine (``forbidden_calls.forbidden_uses`` flags attributes, imports and strings only).

Tolerances: the defaults of ``checks.TOLERANCES``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import padded_ids, randint, randn, random_lengths
from attnlab.grading.policy import forbidden_calls
from attnlab.grading.worker.executor import StudentError

# Each question graded on its own (docs/CURRICULUM.md): causal_conv1d runs with the reference conv1d, so a wrong
# convolution costs its own question only
suite = HiddenSuite("lab03_convolutions", graded_on_reference={"causal_conv1d": ("conv1d",)})

F32, F64 = torch.float32, torch.float64
OLEN, CONV, CAUSAL, RF, CNN = "conv1d_output_length", "conv1d", "causal_conv1d", "receptive_field", "TextCNN"

CONV_FORBIDDEN = ["conv1d", "Conv1d", "convolution", "_convolution", "conv2d", "Conv2d", "conv_transpose1d"]
CONV_WHY = ("this lab asks you to build the convolution yourself: F.conv1d, torch.conv1d, nn.Conv1d and "
            "torch.convolution are not allowed in conv1d and causal_conv1d")


# ------------------------------------------------------------------------------------------------ helpers
def assert_not_used_in(student, name: str) -> None:
    hits = forbidden_calls.forbidden_uses_in(student, name, CONV_FORBIDDEN)  # by cell and line, as the student sees them
    if hits:  # ForbiddenUse: the grader sets the whole question to 0, as the notebook says
        raise forbidden_calls.ForbiddenUse(f"{CONV_WHY}; found {', '.join(hits[:5])}", CONV_FORBIDDEN, hits)


def torch_length(length: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """The output length of a real F.conv1d call with these settings (trusted)."""
    x, w = torch.zeros(1, 1, length), torch.zeros(1, 1, kernel)
    return int(F.conv1d(x, w, stride=stride, padding=padding, dilation=dilation).shape[-1])


def random_config(rng, *, stride=(1, 1), padding=(0, 0), dilation=(1, 1), kernel=(1, 5)) -> dict:
    """Convolution settings drawn from the ranges given, with an input long enough for one window at least."""
    kernel = randint(rng, *kernel)
    s, p, d = randint(rng, *stride), randint(rng, *padding), randint(rng, *dilation)
    length = max(1, d * (kernel - 1) + 1 - 2 * p + randint(rng, 0, 12))  # L + 2p >= the window's span
    return {"length": length, "kernel": kernel, "stride": s, "padding": p, "dilation": d}


def conv_inputs(rng, cfg: dict, *, dtype=F64, bias: bool = True, batch: int = 2):
    c_in, c_out = randint(rng, 1, 4), randint(rng, 1, 5)
    x = randn(rng, batch, c_in, cfg["length"], dtype=dtype)
    w = randn(rng, c_out, c_in, cfg["kernel"], dtype=dtype)
    b = randn(rng, c_out, dtype=dtype) if bias else None
    return x, w, b


def compare_conv(student, ref, rng, cfg: dict, *, dtype=F64, bias=True, grad=True) -> None:
    """The student's conv1d against F.conv1d (values) and the reference (gradients of x, weight, bias)."""
    x, w, b = conv_inputs(rng, cfg, dtype=dtype, bias=bias)
    kw = {"stride": cfg["stride"], "padding": cfg["padding"], "dilation": cfg["dilation"]}
    got = student.call(CONV, x, w, b, **kw).output
    what = (f"conv1d on x {tuple(x.shape)}, weight {tuple(w.shape)}, bias {'given' if bias else 'None'}, "
            f"stride={kw['stride']}, padding={kw['padding']}, dilation={kw['dilation']}")
    checks.compare_values(got, F.conv1d(x, w, b, **kw), name=what)
    if grad:
        checks.compare_call(student, ref, CONV, x, w, b, grad=True, rng=rng, **kw)


def causal_expected(x, w, b, dilation: int) -> torch.Tensor:
    """Causal convolution from F.conv1d: left padding of dilation * (K - 1) zeros (trusted)."""
    return F.conv1d(F.pad(x, (dilation * (w.shape[-1] - 1), 0)), w, b, dilation=dilation)


def textcnn_expected(state: dict, ids: torch.Tensor, pool_size: int, num_classes: int) -> torch.Tensor:
    """TextCNN recomputed here from its state dict with torch.nn.functional (trusted)."""
    h = F.embedding(ids, state["embedding.weight"]).transpose(1, 2)  # (B, E, L)
    h = F.relu(F.conv1d(h, state["conv1.weight"], state["conv1.bias"]))
    h = F.max_pool1d(h, pool_size)
    h = F.relu(F.conv1d(h, state["conv2.weight"], state["conv2.bias"]))
    logits = F.linear(h.amax(-1), state["classifier.weight"], state["classifier.bias"])  # (B, C)
    return logits.squeeze(-1) if num_classes == 1 else logits


def compare_textcnn(student, ref, rng, *, vocab=30, embed=8, filters=6, kernel=3, pool=2, classes=1,
                    batch=3, length=None, dtype=F64, grad=True, ids=None, min_time=1) -> None:
    """``min_time``: the least length of conv2's output (B, F, T), the axis the max is over; at T = 1 a mean over
    time equals the max. Length L gives T = (L - K + 1) // pool - K + 1."""
    kwargs = {"num_filters": filters, "kernel_size": kernel, "pool_size": pool, "num_classes": classes}
    s_mod, r_mod = checks.build_pair(student, ref, CNN, vocab, embed, rng=rng, dtype=dtype, **kwargs)
    if ids is None:
        length = length or (kernel - 1) + pool * (kernel + min_time - 1) + randint(rng, 0, 6)
        ids = torch.randint(1, vocab, (batch, length), generator=rng)
    s, _ = checks.compare_module_call(s_mod, r_mod, ids, grad=grad, rng=rng)
    expected = textcnn_expected(r_mod.state_dict(), ids, pool, classes)
    checks.compare_values(s.output, expected, name=f"TextCNN({vocab}, {embed}, {kwargs}) logits")


# --------------------------------------------------------------------------------- conv1d_output_length
def compare_lengths(student, configs) -> None:
    for cfg in configs:
        args = (cfg["length"], cfg["kernel"])
        kw = {"stride": cfg["stride"], "padding": cfg["padding"], "dilation": cfg["dilation"]}
        got = student.call(OLEN, *args, **kw).output
        expected = torch_length(*args, **kw)
        checks.compare_values(got, expected, name=f"conv1d_output_length({args[0]}, {args[1]}, {kw})")


@suite.test(OLEN, points=1.0)
def olen_stride_one_and_padding(student, ref, rng):
    configs = [random_config(rng, padding=(0, 3)) for _ in range(6)]
    configs.append({"length": 7, "kernel": 3, "stride": 1, "padding": 1, "dilation": 1})  # 7 + 2 - 2 = 7 (padding twice)
    compare_lengths(student, configs)


@suite.test(OLEN, points=1.0)
def olen_strides_round_down(student, ref, rng):
    configs = [random_config(rng, stride=(2, 4), padding=(0, 2)) for _ in range(6)]
    configs.append({"length": 10, "kernel": 3, "stride": 3, "padding": 0, "dilation": 1})  # floor(7/3) + 1 = 3
    compare_lengths(student, configs)


@suite.test(OLEN, points=1.0)
def olen_dilation(student, ref, rng):
    configs = [random_config(rng, stride=(1, 3), padding=(0, 2), dilation=(2, 4), kernel=(2, 5)) for _ in range(6)]
    # fixed cases that a padding counted once and a rounding up cannot pass, whatever was drawn: (9 + 4 - 4 - 1) + 1
    # = 9 (once: 7); (10 - 2 - 1) // 2 + 1 = 4 (rounded up: 5)
    configs += [{"length": 9, "kernel": 3, "stride": 1, "padding": 2, "dilation": 2},
                {"length": 10, "kernel": 2, "stride": 2, "padding": 0, "dilation": 2}]
    compare_lengths(student, configs)


# ------------------------------------------------------------------------------------------------ conv1d
@suite.test(CONV, points=2.0)
def conv1d_plain_float64_grad(student, ref, rng):
    compare_conv(student, ref, rng, random_config(rng))
    assert_not_used_in(student, CONV)


@suite.test(CONV, points=1.5)
def conv1d_stride_float32(student, ref, rng):
    for _ in range(2):
        compare_conv(student, ref, rng, random_config(rng, stride=(2, 3)), dtype=F32)


@suite.test(CONV, points=1.5)
def conv1d_padding_grad(student, ref, rng):
    for _ in range(2):
        compare_conv(student, ref, rng, random_config(rng, padding=(1, 3)))


@suite.test(CONV, points=1.5)
def conv1d_dilation_grad(student, ref, rng):
    for _ in range(2):
        compare_conv(student, ref, rng, random_config(rng, dilation=(2, 3), kernel=(2, 5)))  # a kernel of 1 hides it


@suite.test(CONV, points=1.5)
def conv1d_all_settings_without_bias(student, ref, rng):
    for _ in range(2):
        cfg = random_config(rng, stride=(2, 3), padding=(1, 2), dilation=(2, 3), kernel=(2, 5))
        compare_conv(student, ref, rng, cfg, bias=False, dtype=F32)


@suite.test(CONV, points=1.0)
def conv1d_kernel_one_and_full_length(student, ref, rng):
    compare_conv(student, ref, rng, {"length": 6, "kernel": 1, "stride": 1, "padding": 0, "dilation": 1})
    compare_conv(student, ref, rng, {"length": 5, "kernel": 5, "stride": 1, "padding": 0, "dilation": 1})


@suite.test(CONV, points=1.0)
def conv1d_channel_mismatch_raises(student, ref, rng):
    compare_conv(student, ref, rng, random_config(rng), grad=False)
    x, w = randn(rng, 1, 3, 8), randn(rng, 2, 5, 3)
    try:
        student.call(CONV, x, w)
    except StudentError as exc:
        text = str(exc)
        assert "ValueError" in text, f"conv1d with 3 input channels and a weight for 5 should raise ValueError: {text[:300]}"
        message = text.split("ValueError", 1)[-1]
        assert "3" in message and "5" in message, (
            f"the ValueError should name both channel counts (3 and 5); got {message.strip()[:200]!r}")
        return
    raise AssertionError("conv1d with 3 input channels and a weight for 5 should raise ValueError, it returned")


# ----------------------------------------------------------------------------------------- causal_conv1d
def compare_causal(student, ref, rng, *, dilation: int, kernel: int, dtype=F64, bias=True) -> None:
    x = randn(rng, 2, randint(rng, 1, 3), randint(rng, 4, 12), dtype=dtype)
    w = randn(rng, randint(rng, 1, 4), x.shape[1], kernel, dtype=dtype)
    b = randn(rng, w.shape[0], dtype=dtype) if bias else None
    got = student.call(CAUSAL, x, w, b, dilation=dilation).output
    checks.compare_values(got, causal_expected(x, w, b, dilation),
                          name=f"causal_conv1d on x {tuple(x.shape)}, kernel {kernel}, dilation {dilation}")
    checks.compare_call(student, ref, CAUSAL, x, w, b, dilation=dilation, grad=True, rng=rng)


@suite.test(CAUSAL, points=1.5)
def causal_float64_grad(student, ref, rng):
    compare_causal(student, ref, rng, dilation=1, kernel=randint(rng, 2, 4))
    assert_not_used_in(student, CAUSAL)


@suite.test(CAUSAL, points=1.5)
def causal_dilation_float32(student, ref, rng):
    for dilation in (2, randint(rng, 3, 4)):
        compare_causal(student, ref, rng, dilation=dilation, kernel=randint(rng, 2, 3), dtype=F32, bias=False)


@suite.test(CAUSAL, points=1.0)
def causal_future_never_leaks(student, ref, rng):
    x, w = randn(rng, 1, 2, 10), randn(rng, 3, 2, 3)
    got = student.call(CAUSAL, x, w, None, dilation=2).output
    checks.compare_values(got, causal_expected(x, w, None, 2), name="causal_conv1d, kernel 3, dilation 2")
    t = randint(rng, 2, 8)
    x2 = x.clone()
    x2[..., t:] += randn(rng, 1, 2, 10 - t)
    got2 = student.call(CAUSAL, x2, w, None, dilation=2).output
    leaked = (got2[..., :t] - got[..., :t]).abs().amax(dim=(0, 1)) > 1e-9
    assert not leaked.any(), (f"changing inputs {t}.. changed outputs {leaked.nonzero().flatten().tolist()}, which "
                              "come before them: output t must see inputs 0..t only")


# ---------------------------------------------------------------------------------------- receptive_field
def random_stack(rng, *, strides: bool, dilations: bool) -> list[tuple[int, int, int]]:
    return [(randint(rng, 1, 7), randint(rng, 1, 3) if strides else 1, randint(rng, 1, 4) if dilations else 1)
            for _ in range(randint(rng, 1, 5))]


@suite.test(RF, points=1.0)
def rf_hand_worked(student, ref, rng):
    for layers, expected in (([(3, 1, 1), (3, 1, 2), (3, 1, 4)], 15), ([(7, 1, 1), (5, 5, 1), (7, 1, 1)], 41),
                             ([(4, 1, 1)], 4), ([], 1)):
        checks.compare_values(student.call(RF, layers).output, expected, name=f"receptive_field({layers})")


@suite.test(RF, points=1.0)
def rf_random_dilated_stacks(student, ref, rng):
    for _ in range(5):
        layers = random_stack(rng, strides=False, dilations=True)
        checks.compare_values(student.call(RF, layers).output, ref.call(RF, layers).output,
                              name=f"receptive_field({layers})")


def strided_stack(rng) -> list[tuple[int, int, int]]:
    """A random stack whose strides change its field: a layer with kernel > 1 and stride > 1, followed by a layer
    with kernel > 1 (redrawn until so; a stack strided only at its end has the field of an unstrided one)."""
    while True:
        layers = random_stack(rng, strides=True, dilations=True)
        if any(k > 1 and s > 1 and any(k_after > 1 for k_after, _, _ in layers[i + 1:])
               for i, (k, s, _) in enumerate(layers)):
            return layers


@suite.test(RF, points=1.0)
def rf_random_strided_stacks(student, ref, rng):
    for _ in range(5):
        layers = strided_stack(rng)
        checks.compare_values(student.call(RF, layers).output, ref.call(RF, layers).output,
                              name=f"receptive_field({layers})")


# ----------------------------------------------------------------------------------------------- TextCNN
@suite.test(CNN, points=3.0)
def textcnn_float64_grad(student, ref, rng):
    compare_textcnn(student, ref, rng, min_time=2)


@suite.test(CNN, points=2.0)
def textcnn_defaults_float32(student, ref, rng):
    compare_textcnn(student, ref, rng, vocab=40, embed=16, filters=32, kernel=7, pool=5, length=45, dtype=F32)


@suite.test(CNN, points=2.0)
def textcnn_multiclass_grad(student, ref, rng):
    compare_textcnn(student, ref, rng, classes=4, filters=5)


@suite.test(CNN, points=1.0)
def textcnn_batch_of_one(student, ref, rng):
    compare_textcnn(student, ref, rng, batch=1)


@suite.test(CNN, points=1.0)
def textcnn_right_padded_batch(student, ref, rng):
    lengths = random_lengths(rng, 4, 16)
    ids = padded_ids(rng, lengths, 16, 30)
    compare_textcnn(student, ref, rng, ids=ids)


@suite.test(CNN, points=1.0)
def textcnn_pool_and_kernel_differ(student, ref, rng):
    compare_textcnn(student, ref, rng, kernel=2, pool=3, filters=4, length=14)
