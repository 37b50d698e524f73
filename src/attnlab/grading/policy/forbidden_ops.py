"""Rule 5 by capability: the operations a lab's forbidden library calls run, whatever route reached them.

A forbidden name (``scaled_dot_product_attention``, ``nn.LayerNorm``, ``lstm_cell``...) stands for a capability;
``FAMILIES`` lists the torch operations that carry it: the Python-level functions (``F.layer_norm``,
``torch.native_group_norm``) and the ``aten`` operators they decompose to (``native_layer_norm``,
``_scaled_dot_product_flash_attention_for_cpu``), however they are reached (``torch.ops.aten...``, ``torch._C._nn``,
a string evaluated by a library, an unpickled object, a library class that holds them). The worker's guard
(``grading/worker/op_guard.py``) sees them run during a graded call; the source check (``forbidden_calls``) refuses
their names too. Only operations no honest answer needs are listed: ``matmul``, ``softmax``, ``linear`` never.
"""

from __future__ import annotations

from typing import Iterable

_SDPA = frozenset({
    "scaled_dot_product_attention", "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_fused_attention_overrideable", "_fused_sdp_choice",
    "_flash_attention_forward", "_efficient_attention_forward", "_scaled_dot_product_attention_math_for_mps",
})
_MHA = frozenset({"multi_head_attention_forward", "_native_multi_head_attention"})
_TRANSFORMER = frozenset({"_transformer_encoder_layer_fwd", "_transformer_decoder_only_layer_fwd",
                          "_native_decoder_only_multi_head_attention"})
# group norm with one group is layer norm over all of a sample's features: the same capability
_LAYER_NORM = frozenset({"layer_norm", "native_layer_norm", "group_norm", "native_group_norm"})
_GROUP_NORM = frozenset({"group_norm", "native_group_norm"})
_BATCH_NORM = frozenset({"batch_norm", "native_batch_norm", "_native_batch_norm_legit",
                         "_native_batch_norm_legit_no_training", "_batch_norm_impl_index", "_batch_norm_with_update",
                         "_batch_norm_no_update", "cudnn_batch_norm", "miopen_batch_norm"})
_INSTANCE_NORM = frozenset({"instance_norm"}) | _BATCH_NORM  # torch computes it as a batch norm
_RMS_NORM = frozenset({"rms_norm", "_fused_rms_norm"})
_CONV = frozenset({
    "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "_convolution_mode", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "conv_tbc", "mkldnn_convolution", "_nnpack_spatial_convolution",
    "slow_conv3d", "_slow_conv2d_forward", "slow_conv_transpose2d", "slow_conv_transpose3d", "thnn_conv2d",
    "cudnn_convolution", "miopen_convolution",
})
_RNN = frozenset({"rnn_tanh", "rnn_relu"})
_RNN_CELL = frozenset({"rnn_tanh_cell", "rnn_relu_cell", "quantized_rnn_tanh_cell", "quantized_rnn_relu_cell"})
_LSTM_CELL = frozenset({"lstm_cell", "_thnn_fused_lstm_cell", "quantized_lstm_cell"})
_GRU = frozenset({"gru"})
_GRU_CELL = frozenset({"gru_cell", "_thnn_fused_gru_cell", "quantized_gru_cell"})

# a forbidden library name -> the operations that carry what it does (a name not here is watched by name only)
FAMILIES = {
    "scaled_dot_product_attention": _SDPA,
    "multi_head_attention_forward": _MHA | _SDPA, "MultiheadAttention": _MHA | _SDPA,
    **{name: _TRANSFORMER for name in ("Transformer", "TransformerEncoder", "TransformerDecoder",
                                       "TransformerEncoderLayer", "TransformerDecoderLayer")},
    "layer_norm": _LAYER_NORM, "LayerNorm": _LAYER_NORM, "native_layer_norm": _LAYER_NORM,
    "group_norm": _GROUP_NORM, "GroupNorm": _GROUP_NORM, "batch_norm": _BATCH_NORM, "instance_norm": _INSTANCE_NORM,
    "rms_norm": _RMS_NORM, "RMSNorm": _RMS_NORM,
    **{name: _CONV for name in ("conv1d", "Conv1d", "convolution", "_convolution", "conv2d", "Conv2d",
                                "conv_transpose1d")},
    "RNN": _RNN, "RNNBase": _RNN, "rnn_tanh": _RNN, "rnn_relu": _RNN,
    "RNNCell": _RNN_CELL, "rnn_tanh_cell": _RNN_CELL, "rnn_relu_cell": _RNN_CELL,
    "LSTMCell": _LSTM_CELL, "lstm_cell": _LSTM_CELL,
    "GRU": _GRU, "gru": _GRU, "GRUCell": _GRU_CELL, "gru_cell": _GRU_CELL,
}
OWNER = "aten"  # how a seen operation is named in the evidence: ``aten.native_layer_norm``


def ops_for(names: Iterable[str]) -> frozenset[str]:
    """The operations that carry the library calls ``names`` (``FAMILIES``), e.g. ``{"layer_norm"}`` ->
    ``{"layer_norm", "native_layer_norm", "group_norm", "native_group_norm"}``."""
    out: set[str] = set()
    for name in names:
        out |= FAMILIES.get(name, frozenset())
    return frozenset(out)


def op_name(func) -> str:
    """The operation a torch callable runs, by its base name: ``F.layer_norm`` -> ``layer_norm``,
    ``torch.ops.aten.native_layer_norm.default`` -> ``native_layer_norm``; ``""`` when it has no name."""
    name = getattr(func, "__name__", "")
    return name.split(".", 1)[0] if isinstance(name, str) else ""
