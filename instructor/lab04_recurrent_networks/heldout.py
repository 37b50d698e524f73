"""Lab 04 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("rnn_cell_linear", "rnn_cell", '''
def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return x_t @ W_ih.t() + h_prev @ W_hh.t() + (b_ih + b_hh)
''', "rnn_cell_no_tanh", why="no tanh"),
    HeldOut("rnn_cell_no_transpose", "rnn_cell", '''
import torch

def rnn_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    return torch.tanh(torch.matmul(x_t, W_ih.mT.mT) + b_ih + torch.matmul(h_prev, W_hh) + b_hh)
''', None, why="W_hh not transposed (W_ih right): only one of the two"),
    HeldOut("elman_zero_state_always", "ElmanRNN", '''
import math
import torch
from torch import nn


class ElmanRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        b = 1 / math.sqrt(hidden_size)
        self.weight_ih_l0 = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-b, b))
        self.weight_hh_l0 = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-b, b))
        self.bias_ih_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-b, b))
        self.bias_hh_l0 = nn.Parameter(torch.empty(hidden_size).uniform_(-b, b))

    def forward(self, x, h0=None):
        h = torch.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
        outs = []
        for x_t in x.unbind(1):
            h = rnn_cell(x_t, h, self.weight_ih_l0, self.weight_hh_l0, self.bias_ih_l0, self.bias_hh_l0)
            outs.append(h)
        return torch.stack(outs, 1), h
''', "elman_h0_ignored", why="h0 ignored"),
    HeldOut("lstm_order_ifgo_as_ifog", "lstm_cell", '''
import torch

def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    H = h_prev.shape[1]
    z = torch.addmm(b_ih + b_hh, x_t, W_ih.T) + h_prev @ W_hh.T
    i = torch.sigmoid(z[:, :H])
    f = torch.sigmoid(z[:, H:2 * H])
    o = torch.sigmoid(z[:, 2 * H:3 * H])
    g = torch.tanh(z[:, 3 * H:])
    c = f * c_prev + i * g
    return o * torch.tanh(c), c
''', "lstm_gates_ifog", why="gates read in the order i, f, o, g"),
    HeldOut("lstm_h_without_tanh", "lstm_cell", '''
import torch

def lstm_cell(x_t, h_prev, c_prev, W_ih, W_hh, b_ih, b_hh):
    gates = x_t @ W_ih.T + h_prev @ W_hh.T + b_ih + b_hh
    i, f, g, o = torch.split(gates, h_prev.shape[-1], dim=1)
    c = torch.sigmoid(f) * c_prev + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * c, c
''', "lstm_no_tanh_on_c", why="h = o * c without the tanh"),
    HeldOut("last_state_at_length", "last_valid_state", '''
import torch

def last_valid_state(outputs, lengths):
    B, T, _ = outputs.shape
    if (lengths < 1).any() or (lengths > T).any():
        raise ValueError(f"lengths {lengths.tolist()} outside [1, {T}]")
    idx = lengths.clamp(max=T - 1)
    return outputs[torch.arange(B), idx]
''', "last_state_off_by_one", why="outputs[b, lengths[b]] (clamped) instead of lengths[b] - 1"),
    HeldOut("last_state_always_last", "last_valid_state", '''
def last_valid_state(outputs, lengths):
    T = outputs.shape[1]
    if int(lengths.min()) < 1 or int(lengths.max()) > T:
        raise ValueError(f"lengths must be in [1, {T}]")
    return outputs[:, T - 1, :]
''', "last_state_minus_one", why="the last time step whatever the length"),
    HeldOut("attention_ignores_mask", "attention_context", '''
import torch

def attention_context(decoder_state, encoder_states, mask=None):
    s = torch.einsum("bh,bth->bt", decoder_state, encoder_states)
    w = s.softmax(dim=1)
    return torch.einsum("bt,bth->bh", w, encoder_states), w
''', "attention_mask_ignored", why="mask ignored"),
    HeldOut("attention_softmax_dim0", "attention_context", '''
import torch

def attention_context(decoder_state, encoder_states, mask=None):
    s = torch.bmm(encoder_states, decoder_state[:, :, None])[:, :, 0]
    if mask is not None:
        s = s.masked_fill(mask == 0, -torch.inf)
    w = torch.softmax(s, dim=0)
    return torch.bmm(w[:, None, :], encoder_states)[:, 0, :], w
''', "attention_softmax_over_batch", why="softmax over the batch"),
    HeldOut("attention_scaled_sqrt_h", "attention_context", '''
import math
import torch

def attention_context(decoder_state, encoder_states, mask=None):
    s = (encoder_states * decoder_state[:, None, :]).sum(-1) / math.sqrt(decoder_state.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, torch.full_like(s, float("-inf")))
    w = torch.softmax(s, -1)
    return (w[..., None] * encoder_states).sum(1), w
''', "attention_scaled", why="scores scaled by 1/sqrt(H)"),
]
