"""Lab 03 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` runs after the reference code and redefines one or more graded names; the rest of the
reference picks the new definition up (``causal_conv1d`` calls whatever ``conv1d`` is defined). A mutant must
lose points on ``question``; a variant must keep full marks on every question.
"""

from attnlab.grading.core.mutants import ALL, MOST, PART, SLIP, Entry

_CONV_HEAD = '''
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    if weight.shape[1] != x.shape[1]:
        raise ValueError(f"x has {x.shape[1]} channels but weight expects {weight.shape[1]}")
'''

_TEXTCNN_INIT = '''
class TextCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_filters=32, kernel_size=7, pool_size=5, num_classes=1):
        super().__init__()
        self.kernel_size, self.pool_size, self.num_classes = kernel_size, pool_size, num_classes
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.conv1 = nn.Conv1d(embed_dim, num_filters, kernel_size)
        self.conv2 = nn.Conv1d(num_filters, num_filters, kernel_size)
        self.classifier = nn.Linear(num_filters, num_classes)
'''

# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # conv1d_output_length
    Entry("olen_no_dilation", "conv1d_output_length", '''
def conv1d_output_length(length, kernel_size, stride=1, padding=0, dilation=1):
    return (length + 2 * padding - (kernel_size - 1) - 1) // stride + 1
''', "forgets the dilation: the window spans d(K-1)+1 positions, not K",
          hint="your lengths are right without dilation but wrong with it: a dilated window spans "
               "dilation * (kernel_size - 1) + 1 positions", loses=PART),
    Entry("olen_padding_once", "conv1d_output_length", '''
def conv1d_output_length(length, kernel_size, stride=1, padding=0, dilation=1):
    return (length + padding - dilation * (kernel_size - 1) - 1) // stride + 1
''', "counts the padding once; it is added at both ends",
          hint="your lengths are off when there is padding: the zeros are added at both ends, so the padded "
               "input is length + 2 * padding long", loses=(0.5, 1)),
    Entry("olen_ceil", "conv1d_output_length", '''
def conv1d_output_length(length, kernel_size, stride=1, padding=0, dilation=1):
    return math.ceil((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1
''', "rounds up: counts a last window that sticks out of the input",
          hint="your lengths are one too long for some strides: round down (//), a window that sticks out of "
               "the input is not computed", loses=MOST),
    Entry("olen_precedence", "conv1d_output_length", '''
def conv1d_output_length(length, kernel_size, stride=1, padding=0, dilation=1):
    return length + 2 * padding - dilation * (kernel_size - 1) - 1 // stride + 1
''', "operator precedence: only the -1 is divided by the stride",
          hint="your lengths ignore the stride: put the whole numerator in parentheses before dividing by it", loses=MOST),

    # conv1d
    Entry("conv_flipped_kernel", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(-1, span, stride)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight.flip(-1))
    return out if bias is None else out + bias[None, :, None]
''', "flips the kernel (the mathematicians' convolution); deep learning's conv1d is a cross-correlation",
          hint="your output looks like the convolution with a flipped kernel: PyTorch's conv1d does not flip "
               "the weight (it is a cross-correlation)", loses=MOST),
    Entry("conv_dilation_ignored", "conv1d", _CONV_HEAD + '''
    windows = F.pad(x, (padding, padding)).unfold(-1, weight.shape[-1], stride)
    out = torch.einsum("bclk,ock->bol", windows, weight)
    return out if bias is None else out + bias[None, :, None]
''', "ignores the dilation: reads K consecutive positions",
          hint="your conv1d is right for dilation 1 only: a dilated window reads every dilation-th position "
               "over a span of dilation * (K - 1) + 1", loses=PART),
    Entry("conv_dilation_span_too_long", "conv1d", _CONV_HEAD + '''
    windows = F.pad(x, (padding, padding)).unfold(-1, weight.shape[-1] * dilation, stride)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight)
    return out if bias is None else out + bias[None, :, None]
''', "window span K*d instead of d(K-1)+1: too few windows with dilation",
          hint="with dilation your output is too short: a dilated window spans dilation * (K - 1) + 1 "
               "positions, not K * dilation", loses=(0.1, 0.8)),
    Entry("conv_pad_left_twice", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (2 * padding, 0)).unfold(-1, span, stride)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight)
    return out if bias is None else out + bias[None, :, None]
''', "puts all the padding on the left",
          hint="with padding your values are shifted: `padding` zeros go at each end of the sequence", loses=PART),
    Entry("conv_pad_one_side", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, 0)).unfold(-1, span, stride)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight)
    return out if bias is None else out + bias[None, :, None]
''', "pads the left end only",
          hint="with padding your output is too short: the zeros go at both ends, not one", loses=(0.1, 0.8)),
    Entry("conv_bias_ignored", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(-1, span, stride)[..., ::dilation]
    return torch.einsum("bclk,ock->bol", windows, weight)
''', "forgets the bias",
          hint="your output is off by a constant per output channel: add each channel's bias to every position", loses=MOST),
    Entry("conv_stride_ignored", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(-1, span, 1)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight)
    return out if bias is None else out + bias[None, :, None]
''', "ignores the stride: a window at every position",
          hint="with stride > 1 your output is too long: the window moves by `stride` positions at a time", loses=PART),
    Entry("conv_mean_over_kernel", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(-1, span, stride)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight) / weight.shape[-1]
    return out if bias is None else out + bias[None, :, None]
''', "averages over the kernel positions instead of summing",
          hint="your values are too small by a factor of K: the output sums over channels and kernel "
               "positions, it does not average", loses=MOST),
    Entry("conv_no_channel_check", "conv1d", '''
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(-1, span, stride)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight)
    return out if bias is None else out + bias[None, :, None]
''', "no ValueError for mismatched channels: einsum's RuntimeError says nothing useful",
          hint="for a weight whose channels do not match x, raise a ValueError that names both numbers", loses=SLIP),
    Entry("conv_uses_library", "conv1d", '''
def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1):
    if weight.shape[1] != x.shape[1]:
        raise ValueError(f"x has {x.shape[1]} channels but weight expects {weight.shape[1]}")
    return F.conv1d(x, weight, bias, stride=stride, padding=padding, dilation=dilation)
''', "calls F.conv1d, which the lab forbids in conv1d",
          hint="your conv1d calls F.conv1d: this lab asks you to build it from tensor operations", loses=ALL),

    # causal_conv1d
    Entry("causal_pad_ignores_dilation", "causal_conv1d", '''
def causal_conv1d(x, weight, bias=None, dilation=1):
    return conv1d(F.pad(x, (weight.shape[-1] - 1, 0)), weight, bias, dilation=dilation)
''', "pads K-1 instead of d(K-1): the output is too short with dilation",
          hint="with dilation your output is shorter than the input: pad dilation * (K - 1) zeros on the left", loses=MOST),
    Entry("causal_pad_right", "causal_conv1d", '''
def causal_conv1d(x, weight, bias=None, dilation=1):
    return conv1d(F.pad(x, (0, dilation * (weight.shape[-1] - 1))), weight, bias, dilation=dilation)
''', "pads on the right: output t sees the future",
          hint=("your output t depends on later inputs: all the padding of a causal convolution goes on the left "
                "(after symmetric padding, keep the first L outputs, not the last)"), loses=MOST),
    Entry("causal_symmetric_keep_last", "causal_conv1d", '''
def causal_conv1d(x, weight, bias=None, dilation=1):
    left = dilation * (weight.shape[-1] - 1)
    return conv1d(x, weight, bias, padding=left, dilation=dilation)[..., -x.shape[-1]:]
''', "symmetric padding, then keeps the last L outputs: sees the future",
          hint=("your output t depends on later inputs: all the padding of a causal convolution goes on the left "
                "(after symmetric padding, keep the first L outputs, not the last)"), loses=MOST),
    Entry("causal_pad_both_sides", "causal_conv1d", '''
def causal_conv1d(x, weight, bias=None, dilation=1):
    left = dilation * (weight.shape[-1] - 1)
    return conv1d(x, weight, bias, padding=left, dilation=dilation)
''', "symmetric padding without cutting: too long, and sees the future",
          hint="your output is longer than the input: pad on the left only (or cut the output to the first L)", loses=MOST),

    # receptive_field
    Entry("rf_ignores_strides", "receptive_field", '''
def receptive_field(layers):
    return 1 + sum((k - 1) * d for k, s, d in layers)
''', "ignores the strides of earlier layers",
          hint="your field is too small after a strided layer: each later layer's step covers the product of "
               "the earlier strides", loses=MOST),
    Entry("rf_own_stride_counts", "receptive_field", '''
def receptive_field(layers):
    field, jump = 1, 1
    for k, s, d in layers:
        jump *= s
        field += (k - 1) * d * jump
    return field
''', "multiplies by the layer's own stride too",
          hint="your field is too large for strided layers: a layer's own stride widens the fields of the "
               "layers AFTER it, not its own", loses=MOST),
    Entry("rf_ignores_dilation", "receptive_field", '''
def receptive_field(layers):
    field, jump = 1, 1
    for k, s, d in layers:
        field += (k - 1) * jump
        jump *= s
    return field
''', "ignores the dilation",
          hint="your field is too small for dilated layers: a dilated layer adds dilation * (K - 1) positions", loses=MOST),
    Entry("rf_starts_at_zero", "receptive_field", '''
def receptive_field(layers):
    field, jump = 0, 1
    for k, s, d in layers:
        field += (k - 1) * d * jump
        jump *= s
    return field
''', "starts from 0: off by one",
          hint="your fields are one too small: with no layer an output sees one input, so start from 1", loses=MOST),

    # TextCNN
    Entry("cnn_mean_over_time", "TextCNN", _TEXTCNN_INIT + '''
    def forward(self, ids):
        h = F.relu(self.conv1(self.embedding(ids).transpose(1, 2)))
        h = F.relu(self.conv2(F.max_pool1d(h, self.pool_size)))
        logits = self.classifier(h.mean(-1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "averages over time instead of taking the max",
          hint="your logits look like an AVERAGE over time at the end: take the max over the last dimension",
          loses=(0.25, 0.9)),  # 40-80%: textcnn_float64_grad and the padded batch always see it (their T >= 2)
    Entry("cnn_no_relu_after_conv2", "TextCNN", _TEXTCNN_INIT + '''
    def forward(self, ids):
        h = F.relu(self.conv1(self.embedding(ids).transpose(1, 2)))
        h = self.conv2(F.max_pool1d(h, self.pool_size))
        logits = self.classifier(h.amax(-1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "forgets the ReLU after conv2",
          hint="your logits differ when conv2's outputs are negative: apply a ReLU after conv2 too", loses=MOST),
    Entry("cnn_pool_stride_one", "TextCNN", _TEXTCNN_INIT + '''
    def forward(self, ids):
        h = F.relu(self.conv1(self.embedding(ids).transpose(1, 2)))
        h = F.relu(self.conv2(F.max_pool1d(h, self.pool_size, stride=1)))
        logits = self.classifier(h.amax(-1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "pools with stride 1: overlapping windows",
          hint="your pooling windows overlap: max-pool with kernel AND stride pool_size (F.max_pool1d's default)",
          loses=MOST),
    Entry("cnn_pool_with_kernel_size", "TextCNN", _TEXTCNN_INIT + '''
    def forward(self, ids):
        h = F.relu(self.conv1(self.embedding(ids).transpose(1, 2)))
        h = F.relu(self.conv2(F.max_pool1d(h, self.kernel_size)))
        logits = self.classifier(h.amax(-1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "pools with the convolution's kernel size instead of pool_size",
          hint="your pooling uses the wrong size: pool with pool_size, not kernel_size", loses=MOST),
    Entry("cnn_view_instead_of_transpose", "TextCNN", _TEXTCNN_INIT + '''
    def forward(self, ids):
        e = self.embedding(ids)
        h = F.relu(self.conv1(e.view(e.shape[0], e.shape[2], e.shape[1])))
        h = F.relu(self.conv2(F.max_pool1d(h, self.pool_size)))
        logits = self.classifier(h.amax(-1))
        return logits.squeeze(-1) if self.num_classes == 1 else logits
''', "reshapes (B, L, E) to (B, E, L) with view: the numbers are scrambled, not transposed",
          hint=("your embeddings reach conv1 scrambled: (B, L, E) -> (B, E, L) swaps two axes; view and reshape keep "
                "the memory order and mix positions with features"), loses=MOST),
    Entry("cnn_squeeze_everything", "TextCNN", _TEXTCNN_INIT + '''
    def forward(self, ids):
        h = F.relu(self.conv1(self.embedding(ids).transpose(1, 2)))
        h = F.relu(self.conv2(F.max_pool1d(h, self.pool_size)))
        logits = self.classifier(h.amax(-1))
        return logits.squeeze() if self.num_classes == 1 else logits
''', "squeeze() of every size-1 dimension: a batch of one loses its batch dimension",
          hint="for a batch of one your logits lose the batch dimension: squeeze(-1), not squeeze()", loses=SLIP),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("olen_float_floor", "conv1d_output_length", '''
def conv1d_output_length(length, kernel_size, stride=1, padding=0, dilation=1):
    return math.floor((length + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1
''', "math.floor of a true division"),
    Entry("conv_loop_over_kernel", "conv1d", _CONV_HEAD + '''
    kernel_size = weight.shape[-1]
    xp = F.pad(x, (padding, padding))
    n_out = (xp.shape[-1] - dilation * (kernel_size - 1) - 1) // stride + 1
    out = 0
    for k in range(kernel_size):
        start = k * dilation
        part = xp[..., start: start + stride * (n_out - 1) + 1: stride]  # (B, C_in, L_out)
        out = out + torch.einsum("oc,bcl->bol", weight[:, :, k], part)
    return out if bias is None else out + bias[None, :, None]
''', "a loop over the K kernel positions with strided slices"),
    Entry("conv_loop_over_positions", "conv1d", _CONV_HEAD + '''
    kernel_size = weight.shape[-1]
    xp = F.pad(x, (padding, padding))
    n_out = (xp.shape[-1] - dilation * (kernel_size - 1) - 1) // stride + 1
    columns = []
    for t in range(n_out):
        window = xp[:, :, t * stride: t * stride + dilation * (kernel_size - 1) + 1: dilation]  # (B, C_in, K)
        columns.append((window[:, None] * weight[None]).sum(dim=(-2, -1)))  # (B, C_out)
    out = torch.stack(columns, dim=-1)
    return out if bias is None else out + bias[:, None]
''', "a Python loop over output positions (slow, correct)"),
    Entry("conv_subsample_stride", "conv1d", _CONV_HEAD + '''
    span = dilation * (weight.shape[-1] - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(-1, span, 1)[..., ::dilation]
    out = torch.einsum("bclk,ock->bol", windows, weight)[..., ::stride]
    if bias is not None:
        out = out + bias.view(1, -1, 1)
    return out
''', "stride 1 everywhere, then keep every stride-th output"),
    Entry("conv_matmul_unfolded", "conv1d", _CONV_HEAD + '''
    c_out, c_in, k = weight.shape
    span = dilation * (k - 1) + 1
    windows = F.pad(x, (padding, padding)).unfold(2, span, stride)[..., ::dilation]  # (B, C_in, L_out, K)
    cols = windows.permute(0, 2, 1, 3).reshape(x.shape[0], windows.shape[2], c_in * k)  # (B, L_out, C_in*K)
    out = (cols @ weight.reshape(c_out, c_in * k).T).transpose(1, 2)  # (B, C_out, L_out)
    return out if bias is None else out + bias[None, :, None]
''', "im2col: unfold, reshape, one matrix product"),
    Entry("causal_symmetric_keep_first", "causal_conv1d", '''
def causal_conv1d(x, weight, bias=None, dilation=1):
    left = dilation * (weight.shape[-1] - 1)
    return conv1d(x, weight, bias, padding=left, dilation=dilation)[..., : x.shape[-1]]
''', "symmetric padding, then the first L outputs"),
    Entry("rf_backwards", "receptive_field", '''
def receptive_field(layers):
    r = 1
    for k, s, d in reversed(layers):
        r = (r - 1) * s + d * (k - 1) + 1
    return r
''', "from the output back to the input: r_in = (r_out - 1) * s + d (K - 1) + 1"),
    Entry("cnn_layer_modules", "TextCNN", '''
class TextCNN(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_filters=32, kernel_size=7, pool_size=5, num_classes=1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.conv1 = nn.Conv1d(embed_dim, num_filters, kernel_size)
        self.pool = nn.MaxPool1d(pool_size)
        self.conv2 = nn.Conv1d(num_filters, num_filters, kernel_size)
        self.act = nn.ReLU()
        self.classifier = nn.Linear(num_filters, num_classes)

    def forward(self, ids):
        h = self.embedding(ids).permute(0, 2, 1)
        h = self.act(self.conv2(self.pool(self.act(self.conv1(h)))))
        logits = self.classifier(torch.max(h, dim=2).values)
        return logits[:, 0] if logits.shape[-1] == 1 else logits
''', "nn.MaxPool1d and nn.ReLU modules, permute, torch.max(...).values, logits[:, 0]"),
]
