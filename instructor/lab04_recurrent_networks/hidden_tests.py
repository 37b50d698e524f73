"""Hidden tests of Lab 04 (recurrent networks), written against the narrow interface.

Every test compares the student's answer with the reference on inputs drawn from ``rng`` only, so a blank
notebook (functions returning None, modules without parameters) scores 0. Besides the reference, the
recurrences are compared with PyTorch's own modules on the same weights, every parameter randomised first:
``nn.RNNCell`` and ``nn.RNN`` (rnn_cell, ElmanRNN), ``nn.LSTMCell`` (lstm_cell), ``nn.GRUCell`` (gru_cell),
``nn.GRU(bidirectional=True)`` and each direction as a one-way ``nn.GRU`` (BiGRUEncoder), ``nn.LSTM`` over a
packed padded batch (RNNClassifier). Source checks for the forbidden library versions sit inside value tests, after
the comparison.

Questions and points (40 in all):

    rnn_cell            3
    ElmanRNN            6
    lstm_cell           6
    gru_cell            4
    BiGRUEncoder        6
    last_valid_state    3
    RNNClassifier       6
    attention_context   6

Tolerances are the defaults of ``checks.TOLERANCES`` everywhere.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from attnlab.grading.core import checks
from attnlab.grading.core.hidden import HiddenSuite
from attnlab.grading.core.inputs import padded_ids, randint, randn, random_lengths, random_mask
from attnlab.grading.policy import forbidden_calls

# Each question graded on its own (docs/CURRICULUM.md): the layers run with the reference cells, the classifier with
# the reference last_valid_state, so a wrong cell or index costs its own question only
suite = HiddenSuite("lab04_recurrent_networks",
                    graded_on_reference={"ElmanRNN": ("rnn_cell",), "BiGRUEncoder": ("gru_cell",),
                                         "RNNClassifier": ("last_valid_state",)})

# The ready-made recurrences (nn.RNN and nn.RNNCell, nn.LSTMCell, and the functions behind them).
# nn.LSTM itself is allowed (RNNClassifier must use it).
FORBIDDEN = ["RNN", "RNNBase", "RNNCell", "LSTMCell", "rnn_tanh", "rnn_tanh_cell", "rnn_relu", "rnn_relu_cell",
             "lstm_cell"]
WHY = ("this lab asks you to build the recurrences by hand: nn.RNN, nn.RNNCell, nn.LSTMCell and torch's "
       "rnn_tanh / lstm_cell functions are not allowed in the graded cells (nn.LSTM in RNNClassifier is)")

F32, F64 = torch.float32, torch.float64


# ------------------------------------------------------------------------------------------------ helpers
def cell_weights(rng, gates: int, d: int, h: int, dtype=F64, scale: float = 0.5):
    """W_ih (gates*H, D), W_hh (gates*H, H), b_ih, b_hh (gates*H,)."""
    return (randn(rng, gates * h, d, dtype=dtype, scale=scale), randn(rng, gates * h, h, dtype=dtype, scale=scale),
            randn(rng, gates * h, dtype=dtype, scale=scale), randn(rng, gates * h, dtype=dtype, scale=scale))


def torch_module_like(module: nn.Module, state: dict, dtype) -> nn.Module:
    """``module`` (a fresh torch.nn module) with ``state`` loaded, in ``dtype``, in eval mode."""
    module = module.to(dtype)
    module.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    return module.eval()


def masked_weights_are_zero(weights, mask: torch.Tensor, name: str) -> None:
    off = weights.masked_select(~mask)
    bad = int((off != 0).sum())
    assert bad == 0, (f"{name}: {bad} weights of masked positions are not exactly 0 (largest "
                      f"{off.abs().max().item():.3g}); set the masked scores to -inf before the softmax")


# ---------------------------------------------------------------------------------------------- rnn_cell
@suite.test("rnn_cell", points=1.5)
def rnn_cell_float64_matches_nn_rnncell_grad(student, ref, rng):
    b, d, h = 4, 3, 5
    x, h_prev = randn(rng, b, d), randn(rng, b, h)
    weights = cell_weights(rng, 1, d, h)
    s, _ = checks.compare_call(student, ref, "rnn_cell", x, h_prev, *weights, grad=True, rng=rng)
    cell = nn.RNNCell(d, h).to(F64)
    with torch.no_grad():
        for p, w in zip((cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh), weights):
            p.copy_(w)
        torch_h = cell(x, h_prev)
    checks.assert_close(s.output, torch_h, name="rnn_cell compared with nn.RNNCell on the same weights")
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test("rnn_cell", points=1.0)
def rnn_cell_float32_batch_of_one_grad(student, ref, rng):
    d, h = 6, 2
    args = (randn(rng, 1, d, dtype=F32), randn(rng, 1, h, dtype=F32), *cell_weights(rng, 1, d, h, dtype=F32))
    checks.compare_call(student, ref, "rnn_cell", *args, grad=True, rng=rng)


@suite.test("rnn_cell", points=0.5)
def rnn_cell_saturated(student, ref, rng):
    d, h = 3, 4
    args = (randn(rng, 5, d, scale=10.0), randn(rng, 5, h), *cell_weights(rng, 1, d, h, scale=2.0))
    checks.compare_call(student, ref, "rnn_cell", *args, grad=True, rng=rng)


# ---------------------------------------------------------------------------------------------- ElmanRNN
def _nn_rnn_outputs(r_mod, d, h, x, h0=None):
    rnn = torch_module_like(nn.RNN(d, h, batch_first=True), r_mod.state_dict(), x.dtype)
    with torch.no_grad():
        out, h_n = rnn(x, None if h0 is None else h0[None])
    return out, h_n[0]


@suite.test("ElmanRNN", points=2.0)
def elman_float64_h0_none_matches_nn_rnn_grad(student, ref, rng):
    d, h = 3, 5
    s_mod, r_mod = checks.build_pair(student, ref, "ElmanRNN", d, h, rng=rng, dtype=F64)
    x = randn(rng, 4, 6, d)
    s, _ = checks.compare_module_call(s_mod, r_mod, x, grad=True, rng=rng)
    out, h_n = _nn_rnn_outputs(r_mod, d, h, x)
    checks.compare_values(s.output, (out, h_n), name="ElmanRNN's (outputs, h_T) compared with nn.RNN on the same weights")
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test("ElmanRNN", points=1.5)
def elman_float64_h0_given_matches_nn_rnn_grad(student, ref, rng):
    d, h = 4, 3
    s_mod, r_mod = checks.build_pair(student, ref, "ElmanRNN", d, h, rng=rng, dtype=F64)
    x, h0 = randn(rng, 3, 5, d), randn(rng, 3, h)
    s, _ = checks.compare_module_call(s_mod, r_mod, x, h0, grad=True, rng=rng)
    out, h_n = _nn_rnn_outputs(r_mod, d, h, x, h0)
    checks.compare_values(s.output, (out, h_n), name="ElmanRNN with h0 compared with nn.RNN on the same weights")
    checks.compare_module_call(s_mod, r_mod, x, h0=h0, name="ElmanRNN.forward(x, h0=h0)")


@suite.test("ElmanRNN", points=1.0)
def elman_float32_one_step_batch_of_one(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "ElmanRNN", 5, 4, rng=rng, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 1, 1, 5, dtype=F32), grad=True, rng=rng)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 7, 5, dtype=F32), grad=True, rng=rng)


@suite.test("ElmanRNN", points=1.0)
def elman_long_sequence_grad(student, ref, rng):
    d, h = 2, 6
    s_mod, r_mod = checks.build_pair(student, ref, "ElmanRNN", d, h, rng=rng, dtype=F64)
    x, h0 = randn(rng, 2, 25, d), randn(rng, 2, h)
    checks.compare_module_call(s_mod, r_mod, x, h0, grad=True, rng=rng)


@suite.test("ElmanRNN", points=0.5)
def elman_default_initialisation_range(student, ref, rng):
    h = randint(rng, 9, 16)
    s_mod = student.create("ElmanRNN", 3, h)
    state = s_mod.state_dict()
    bound = 1 / h ** 0.5
    for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):
        value = state.get(name)
        checks.expect_tensor(value, name=f"ElmanRNN(3, {h}).{name}")
        assert value.abs().max() <= bound + 1e-7, (
            f"ElmanRNN(3, {h}).{name} has values up to {value.abs().max().item():.3g}; initialise it uniform in "
            f"[-1/sqrt(H), 1/sqrt(H)] = [-{bound:.3g}, {bound:.3g}] as nn.RNN does")
        assert value.abs().max() > bound / 4, (
            f"ElmanRNN(3, {h}).{name} is (nearly) all zeros; initialise it uniform in [-1/sqrt(H), 1/sqrt(H)]")
    # the layout and a forward pass, so that a module with only the right parameters earns nothing
    s_mod, r_mod = checks.build_pair(student, ref, "ElmanRNN", 3, h, rng=rng, dtype=F64)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 3, 3))


# --------------------------------------------------------------------------------------------- lstm_cell
def _nn_lstm_cell(x, h_prev, c_prev, weights):
    d, h = x.shape[-1], h_prev.shape[-1]
    cell = nn.LSTMCell(d, h).to(x.dtype)
    with torch.no_grad():
        for p, w in zip((cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh), weights):
            p.copy_(w)
        return cell(x, (h_prev, c_prev))


@suite.test("lstm_cell", points=2.0)
def lstm_cell_float64_matches_nn_lstmcell_grad(student, ref, rng):
    b, d, h = 4, 3, 5
    x, h_prev, c_prev = randn(rng, b, d), randn(rng, b, h), randn(rng, b, h)
    weights = cell_weights(rng, 4, d, h)
    s, _ = checks.compare_call(student, ref, "lstm_cell", x, h_prev, c_prev, *weights, grad=True, rng=rng)
    checks.compare_values(s.output, _nn_lstm_cell(x, h_prev, c_prev, weights),
                          name="lstm_cell's (h_t, c_t) compared with nn.LSTMCell on the same weights")
    forbidden_calls.assert_not_used(student, FORBIDDEN, why=WHY)


@suite.test("lstm_cell", points=1.5)
def lstm_cell_gate_order_by_biases(student, ref, rng):
    # small weights and one large, distinct bias per gate block: each gate is pinned to a different value,
    # so any permutation of the four blocks (or a sigmoid on g) shows in the values
    b, d, h = 3, 2, 4
    x, h_prev, c_prev = randn(rng, b, d), randn(rng, b, h), randn(rng, b, h, scale=2.0)
    w_ih, w_hh, _, _ = cell_weights(rng, 4, d, h, scale=0.1)
    b_ih = torch.cat([torch.full((h,), v, dtype=F64) for v in (2.0, -1.5, -2.5, 0.5)]) + randn(rng, 4 * h, scale=0.1)
    b_hh = randn(rng, 4 * h, scale=0.1)
    weights = (w_ih, w_hh, b_ih, b_hh)
    s, _ = checks.compare_call(student, ref, "lstm_cell", x, h_prev, c_prev, *weights, grad=True, rng=rng)
    checks.compare_values(s.output, _nn_lstm_cell(x, h_prev, c_prev, weights),
                          name="lstm_cell with one bias per gate (order i, f, g, o) compared with nn.LSTMCell")


@suite.test("lstm_cell", points=1.5)
def lstm_cell_float32_batch_of_one_grad(student, ref, rng):
    d, h = 5, 3
    args = (randn(rng, 1, d, dtype=F32), randn(rng, 1, h, dtype=F32), randn(rng, 1, h, dtype=F32),
            *cell_weights(rng, 4, d, h, dtype=F32))
    checks.compare_call(student, ref, "lstm_cell", *args, grad=True, rng=rng)


@suite.test("lstm_cell", points=1.0)
def lstm_cell_large_cell_state(student, ref, rng):
    d, h = 3, 3
    args = (randn(rng, 6, d), randn(rng, 6, h), randn(rng, 6, h, scale=4.0), *cell_weights(rng, 4, d, h, scale=1.0))
    checks.compare_call(student, ref, "lstm_cell", *args, grad=True, rng=rng)


# ---------------------------------------------------------------------------------------------- gru_cell
# nn.GRU, nn.GRUCell and the functions behind them, on top of FORBIDDEN, for the GRU questions.
GRU_FORBIDDEN = FORBIDDEN + ["GRU", "GRUCell", "gru", "gru_cell"]
GRU_WHY = ("this lab asks you to build the GRU by hand: nn.GRU, nn.GRUCell and torch.gru / torch.gru_cell are "
           "not allowed in the graded cells")


def _nn_gru_cell(x, h_prev, weights):
    cell = nn.GRUCell(x.shape[-1], h_prev.shape[-1]).to(x.dtype)
    with torch.no_grad():
        for p, w in zip((cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh), weights):
            p.copy_(w)
        return cell(x, h_prev)


@suite.test("gru_cell", points=1.5)
def gru_cell_float64_matches_nn_grucell_grad(student, ref, rng):
    b, d, h = 4, 3, 5
    x, h_prev = randn(rng, b, d), randn(rng, b, h)
    weights = cell_weights(rng, 3, d, h)
    s, _ = checks.compare_call(student, ref, "gru_cell", x, h_prev, *weights, grad=True, rng=rng)
    checks.assert_close(s.output, _nn_gru_cell(x, h_prev, weights),
                        name="gru_cell compared with nn.GRUCell on the same weights")
    forbidden_calls.assert_not_used(student, GRU_FORBIDDEN, why=GRU_WHY)


@suite.test("gru_cell", points=1.0)
def gru_cell_gate_order_and_reset_on_hidden_bias(student, ref, rng):
    # one large, distinct bias per block pins r, z and n apart, and a large b_hn with a large h_prev makes the
    # reset gate's place (around W_hn h + b_hn, not W_hn h alone) and z against 1 - z show in the values
    b, d, h = 3, 2, 4
    x, h_prev = randn(rng, b, d), randn(rng, b, h, scale=2.0)
    w_ih, w_hh, _, _ = cell_weights(rng, 3, d, h, scale=0.2)
    b_ih = torch.cat([torch.full((h,), v, dtype=F64) for v in (-1.0, 1.5, 0.3)]) + randn(rng, 3 * h, scale=0.1)
    b_hh = torch.cat([torch.full((h,), v, dtype=F64) for v in (0.5, -0.5, 2.0)]) + randn(rng, 3 * h, scale=0.1)
    weights = (w_ih, w_hh, b_ih, b_hh)
    s, _ = checks.compare_call(student, ref, "gru_cell", x, h_prev, *weights, grad=True, rng=rng)
    checks.assert_close(s.output, _nn_gru_cell(x, h_prev, weights),
                        name="gru_cell with one bias per gate (order r, z, n) compared with nn.GRUCell")


@suite.test("gru_cell", points=1.0)
def gru_cell_float32_batch_of_one_grad(student, ref, rng):
    d, h = 5, 3
    args = (randn(rng, 1, d, dtype=F32), randn(rng, 1, h, dtype=F32), *cell_weights(rng, 3, d, h, dtype=F32))
    checks.compare_call(student, ref, "gru_cell", *args, grad=True, rng=rng)


@suite.test("gru_cell", points=0.5)
def gru_cell_square_weights(student, ref, rng):
    d = h = 4  # D == H: a product with the wrong matrix still runs
    args = (randn(rng, 5, d), randn(rng, 5, h), *cell_weights(rng, 3, d, h, scale=1.0))
    checks.compare_call(student, ref, "gru_cell", *args, grad=True, rng=rng)


# ------------------------------------------------------------------------------------------ BiGRUEncoder
def _nn_bigru(r_mod, d, h, x):
    """nn.GRU(bidirectional=True) with the reference's weights: (outputs, h_n)."""
    gru = torch_module_like(nn.GRU(d, h, batch_first=True, bidirectional=True), r_mod.state_dict(), x.dtype)
    with torch.no_grad():
        return gru(x)


def _nn_one_direction(r_mod, d, h, x, suffix):
    """One direction alone: an nn.GRU with that direction's weights; the backward one reads x flipped in time
    and its outputs are flipped back, so position t holds the state after reading x_T .. x_t."""
    state = {k[:-len(suffix)] if suffix else k: v for k, v in r_mod.state_dict().items()
             if k.endswith("_reverse") == bool(suffix)}
    gru = torch_module_like(nn.GRU(d, h, batch_first=True), state, x.dtype)
    with torch.no_grad():
        if suffix:
            return gru(x.flip(1))[0].flip(1)
        return gru(x)[0]


@suite.test("BiGRUEncoder", points=2.0)
def bigru_float64_matches_nn_gru_grad(student, ref, rng):
    d, h = 3, 4
    s_mod, r_mod = checks.build_pair(student, ref, "BiGRUEncoder", d, h, rng=rng, dtype=F64)
    x = randn(rng, 3, 6, d)
    s, _ = checks.compare_module_call(s_mod, r_mod, x, grad=True, rng=rng)
    checks.compare_values(s.output, _nn_bigru(r_mod, d, h, x),
                          name="BiGRUEncoder's (outputs, h_n) compared with nn.GRU(bidirectional=True)")
    forbidden_calls.assert_not_used(student, GRU_FORBIDDEN, why=GRU_WHY)


@suite.test("BiGRUEncoder", points=1.5)
def bigru_each_direction_alone(student, ref, rng):
    d, h = 2, 3
    s_mod, r_mod = checks.build_pair(student, ref, "BiGRUEncoder", d, h, rng=rng, dtype=F64)
    x = randn(rng, 2, 7, d)
    outputs = checks.expect_tensor(s_mod.call(x).output[0], name="BiGRUEncoder's outputs", shape=(2, 7, 2 * h))
    checks.assert_close(outputs[..., :h], _nn_one_direction(r_mod, d, h, x, ""),
                        name="outputs[..., :H], the forward direction (nn.GRU with the forward weights)")
    checks.assert_close(outputs[..., h:], _nn_one_direction(r_mod, d, h, x, "_reverse"),
                        name="outputs[..., H:], the backward direction (nn.GRU with the _reverse weights on x "
                             "flipped in time, flipped back: position t is the state after reading x_T .. x_t)")


@suite.test("BiGRUEncoder", points=1.0)
def bigru_float32_one_step_and_batch_of_one(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "BiGRUEncoder", 4, 3, rng=rng, dtype=F32)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 1, 4, dtype=F32), grad=True, rng=rng)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 1, 5, 4, dtype=F32), grad=True, rng=rng)


@suite.test("BiGRUEncoder", points=1.5)
def bigru_initialisation_and_long_sequence(student, ref, rng):
    h = randint(rng, 9, 16)
    state = student.create("BiGRUEncoder", 3, h).state_dict()
    bound = 1 / h ** 0.5
    for name in ("weight_ih_l0", "weight_hh_l0_reverse", "bias_ih_l0", "bias_hh_l0_reverse"):
        value = checks.expect_tensor(state.get(name), name=f"BiGRUEncoder(3, {h}).{name}")
        assert bound / 4 < value.abs().max() <= bound + 1e-7, (
            f"BiGRUEncoder(3, {h}).{name} has values up to {value.abs().max().item():.3g}; initialise it uniform "
            f"in [-1/sqrt(H), 1/sqrt(H)] = [-{bound:.3g}, {bound:.3g}] as nn.GRU does")
    s_mod, r_mod = checks.build_pair(student, ref, "BiGRUEncoder", 2, 5, rng=rng, dtype=F64)
    checks.compare_module_call(s_mod, r_mod, randn(rng, 2, 20, 2), grad=True, rng=rng)


# -------------------------------------------------------------------------------------- last_valid_state
@suite.test("last_valid_state", points=1.5)
def last_valid_state_mixed_lengths_float64_grad(student, ref, rng):
    outputs, lengths = randn(rng, 5, 7, 3), random_lengths(rng, 5, 7)  # one full row, one of length 1
    checks.compare_call(student, ref, "last_valid_state", outputs, lengths, grad=True, rng=rng)


@suite.test("last_valid_state", points=1.0)
def last_valid_state_all_full_and_all_one_float32(student, ref, rng):
    outputs = randn(rng, 4, 6, 2, dtype=F32)
    checks.compare_call(student, ref, "last_valid_state", outputs, torch.full((4,), 6), grad=True, rng=rng)
    checks.compare_call(student, ref, "last_valid_state", outputs, torch.ones(4, dtype=torch.long), grad=True,
                        rng=rng)


@suite.test("last_valid_state", points=0.5)
def last_valid_state_batch_of_one(student, ref, rng):
    steps = randint(rng, 3, 8)
    outputs, lengths = randn(rng, 1, steps, 4), torch.tensor([randint(rng, 1, steps - 1)])
    checks.compare_call(student, ref, "last_valid_state", outputs, lengths, grad=True, rng=rng)


# ----------------------------------------------------------------------------------------- RNNClassifier
def _packed_lstm_logits(r_mod, vocab, embed, hidden, num_classes, ids, lengths, dtype):
    """The classifier computed with torch's nn.LSTM over a packed batch (no padding is ever read)."""
    state = r_mod.state_dict()
    embedding = torch_module_like(nn.Embedding(vocab, embed), {"weight": state["embedding.weight"]}, dtype)
    lstm = torch_module_like(nn.LSTM(embed, hidden, batch_first=True),
                             {k[len("lstm."):]: v for k, v in state.items() if k.startswith("lstm.")}, dtype)
    linear = torch_module_like(nn.Linear(hidden, num_classes),
                               {k[len("classifier."):]: v for k, v in state.items() if k.startswith("classifier.")},
                               dtype)
    with torch.no_grad():
        packed = pack_padded_sequence(embedding(ids), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h_n, _) = lstm(packed)
        logits = linear(h_n[0])
    return logits.squeeze(-1) if num_classes == 1 else logits


@suite.test("RNNClassifier", points=2.5)
def classifier_padded_float64_matches_packed_nn_lstm_grad(student, ref, rng):
    vocab, embed, hidden = 20, 6, 5
    s_mod, r_mod = checks.build_pair(student, ref, "RNNClassifier", vocab, embed, hidden, rng=rng, dtype=F64)
    lengths = random_lengths(rng, 6, 8)
    ids = padded_ids(rng, lengths, 8, vocab)
    s, _ = checks.compare_module_call(s_mod, r_mod, ids, lengths, grad=True, rng=rng)
    expected = _packed_lstm_logits(r_mod, vocab, embed, hidden, 1, ids, lengths, F64)
    checks.assert_close(s.output, expected, name="RNNClassifier's logits compared with nn.LSTM over the packed batch")


@suite.test("RNNClassifier", points=1.0)
def classifier_mostly_padding(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "RNNClassifier", 12, 4, 3, rng=rng, dtype=F64)
    lengths = torch.randint(1, 4, (4,), generator=rng)
    checks.compare_module_call(s_mod, r_mod, padded_ids(rng, lengths, 10, 12), lengths)  # 7+ pads per row


@suite.test("RNNClassifier", points=1.5)
def classifier_multiclass_float32_grad(student, ref, rng):
    vocab, embed, hidden = 15, 4, 6
    s_mod, r_mod = checks.build_pair(student, ref, "RNNClassifier", vocab, embed, hidden, num_classes=3, rng=rng,
                                     dtype=F32)
    lengths = random_lengths(rng, 4, 6)
    ids = padded_ids(rng, lengths, 6, vocab)
    s, _ = checks.compare_module_call(s_mod, r_mod, ids, lengths, grad=True, rng=rng)
    expected = _packed_lstm_logits(r_mod, vocab, embed, hidden, 3, ids, lengths, F32)
    checks.assert_close(s.output, expected, name="RNNClassifier's logits (3 classes) compared with nn.LSTM")


@suite.test("RNNClassifier", points=1.0)
def classifier_batch_of_one(student, ref, rng):
    s_mod, r_mod = checks.build_pair(student, ref, "RNNClassifier", 10, 4, 4, rng=rng, dtype=F32)
    lengths = torch.tensor([3])
    # logits (1,), not a 0-d tensor (squeeze() instead of squeeze(-1)); with grad=True the shape is also
    # checked where the output gradient flows in
    checks.compare_module_call(s_mod, r_mod, padded_ids(rng, lengths, 5, 10), lengths, grad=True, rng=rng)


# ------------------------------------------------------------------------------------- attention_context
AC = "attention_context"


@suite.test(AC, points=2.0)
def attention_no_mask_float64_grad(student, ref, rng):
    decoder_state, encoder_states = randn(rng, 3, 4), randn(rng, 3, 6, 4)  # B != T
    s, _ = checks.compare_call(student, ref, AC, decoder_state, encoder_states, grad=True, rng=rng)
    # an independent check of the weights: softmax of the dot products over T
    expected = torch.softmax(torch.einsum("bth,bh->bt", encoder_states, decoder_state), dim=-1)
    checks.assert_close(s.output[1], expected, name="the weights of attention_context (softmax over T of the dot products)")


@suite.test(AC, points=2.0)
def attention_mask_float64_grad(student, ref, rng):
    decoder_state, encoder_states = randn(rng, 4, 3), randn(rng, 4, 7, 3)
    mask = random_mask(rng, 4, 7)
    s, _ = checks.compare_call(student, ref, AC, decoder_state, encoder_states, mask, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], mask, "attention_context's weights with a mask")
    lengths = random_lengths(rng, 4, 7)  # a padding mask, as the encoder-decoder uses it
    padding = torch.arange(7)[None, :] < lengths[:, None]
    s, _ = checks.compare_call(student, ref, AC, decoder_state, encoder_states, mask=padding, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], padding, "attention_context's weights with a padding mask")


@suite.test(AC, points=1.0)
def attention_float32_batch_of_one(student, ref, rng):
    decoder_state, encoder_states = randn(rng, 1, 5, dtype=F32), randn(rng, 1, 4, 5, dtype=F32)
    checks.compare_call(student, ref, AC, decoder_state, encoder_states, grad=True, rng=rng)
    mask = random_mask(rng, 1, 4)
    s, _ = checks.compare_call(student, ref, AC, decoder_state, encoder_states, mask, grad=True, rng=rng)
    masked_weights_are_zero(s.output[1], mask, "attention_context's weights (a batch of one) with a mask")


@suite.test(AC, points=1.0)
def attention_large_scores_stay_finite(student, ref, rng):
    # scores of a few thousand: a softmax without the max trick overflows even in float64
    decoder_state, encoder_states = randn(rng, 3, 6, scale=30.0), randn(rng, 3, 5, 6, scale=30.0)
    mask = random_mask(rng, 3, 5)
    checks.compare_call(student, ref, AC, decoder_state, encoder_states, mask, grad=True, rng=rng)
