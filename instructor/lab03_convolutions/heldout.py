"""Lab 03 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

_CNN_HEAD = '''
import torch
import torch.nn.functional as F
from torch import nn


class TextCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_filters=32, kernel_size=7, pool_size=5, num_classes=1):
        super().__init__()
        self.p, self.c = pool_size, num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.conv1 = nn.Conv1d(embed_dim, num_filters, kernel_size)
        self.conv2 = nn.Conv1d(num_filters, num_filters, kernel_size)
        self.classifier = nn.Linear(num_filters, num_classes)
'''

HELDOUT = [
    HeldOut("rf_no_jump", "receptive_field", '''
def receptive_field(layers):
    rf = 1
    for k, s, d in layers:
        rf = rf + d * (k - 1)
    return rf
''', "rf_ignores_strides", why="strides ignored"),
    HeldOut("rf_without_dilation", "receptive_field", '''
def receptive_field(layers):
    total, step = 1, 1
    for kernel, stride, _ in layers:
        total += (kernel - 1) * step
        step *= stride
    return total
''', "rf_ignores_dilation", why="dilation ignored"),
    HeldOut("rf_from_zero", "receptive_field", '''
def receptive_field(layers):
    total, step = 0, 1
    for kernel, stride, dil in layers:
        total += (kernel - 1) * dil * step
        step *= stride
    return total
''', "rf_starts_at_zero", why="starts at 0 instead of 1"),
    HeldOut("cnn_average_over_time", "TextCNN", _CNN_HEAD + '''
    def forward(self, ids):
        h = self.embedding(ids).permute(0, 2, 1)
        h = F.max_pool1d(torch.relu(self.conv1(h)), kernel_size=self.p, stride=self.p)
        h = torch.relu(self.conv2(h)).mean(dim=2)
        y = self.classifier(h)
        return y[:, 0] if self.c == 1 else y
''', "cnn_mean_over_time", why="mean over time instead of max"),
    HeldOut("cnn_pool_stride_1", "TextCNN", _CNN_HEAD + '''
    def forward(self, ids):
        h = self.embedding(ids).permute(0, 2, 1)
        h = F.max_pool1d(F.relu(self.conv1(h)), self.p, stride=1)
        h = F.relu(self.conv2(h)).max(dim=-1).values
        y = self.classifier(h)
        return y.squeeze(1) if self.c == 1 else y
''', "cnn_pool_stride_one", why="pooling with stride 1"),
    HeldOut("cnn_reshape_not_transpose", "TextCNN", _CNN_HEAD + '''
    def forward(self, ids):
        e = self.embedding(ids)
        h = e.reshape(e.shape[0], e.shape[2], e.shape[1])
        h = F.max_pool1d(F.relu(self.conv1(h)), self.p)
        h = F.relu(self.conv2(h)).amax(-1)
        y = self.classifier(h)
        return y.squeeze(-1) if self.c == 1 else y
''', "cnn_view_instead_of_transpose", why="reshape instead of transpose"),
    HeldOut("cnn_second_relu_missing", "TextCNN", _CNN_HEAD + '''
    def forward(self, ids):
        h = self.embedding(ids).transpose(-1, -2)
        h = F.max_pool1d(self.conv1(h).clamp_min(0), self.p)
        h = self.conv2(h).amax(-1)
        y = self.classifier(h)
        return y.squeeze(-1) if self.c == 1 else y
''', "cnn_no_relu_after_conv2", why="no ReLU after conv2"),
    HeldOut("conv1d_flipped_kernel", "conv1d", '''
import torch
import torch.nn.functional as F

def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    if x.shape[1] != weight.shape[1]:
        raise ValueError(f"channels: x {x.shape[1]}, weight {weight.shape[1]}")
    return F.conv1d(x, weight.flip(-1), bias, stride, padding, dilation)
''', "conv_flipped_kernel", why="a true convolution: the kernel flipped"),
    HeldOut("causal_pad_right", "causal_conv1d", '''
import torch.nn.functional as F

def causal_conv1d(x, weight, bias=None, dilation=1):
    pad = (weight.shape[-1] - 1) * dilation
    return conv1d(F.pad(x, (0, pad)), weight, bias, dilation=dilation)
''', "causal_pad_right", why="the causal padding on the right"),
    HeldOut("rf_jump_times_dilation", "receptive_field", '''
def receptive_field(layers):
    total, step = 1, 1
    for kernel, stride, dil in layers:
        total += (kernel - 1) * dil * step
        step *= stride * dil
    return total
''', None, why="the jump multiplied by the dilation too"),
    HeldOut("olen_floor_division_missing", "conv1d_output_length", '''
def conv1d_output_length(length, kernel_size, stride=1, padding=0, dilation=1):
    return int((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1
''', None, why="int() of a true division: rounds toward zero for a too-short input"),
]
