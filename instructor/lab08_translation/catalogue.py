"""Lab 08 catalogue: the mistakes students make (MUTANTS, each must lose points on its question) and
correct alternatives (VARIANTS, each must keep full marks everywhere).

Each ``source`` is run after the reference code, so a redefined ``TransformerDecoderBlock`` is also what the
reference ``Seq2SeqTransformer`` builds, and the given Lab 07 code and ``ToyTranslator`` stay available to every
entry (the hidden tests pass a ``ToyTranslator`` to whichever ``greedy_decode`` is defined last).
"""

from attnlab.grading.core.mutants import ALL, MOST, PART, SLIP, Entry

_IMPORTS = '''
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
'''

_BLOCK_INIT = _IMPORTS + '''

class TransformerDecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout)
        self.ff = FeedForward(d_model, d_ff, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drop1 = nn.Dropout(dropout)
        self.drop2 = nn.Dropout(dropout)
        self.drop3 = nn.Dropout(dropout)

    def sa(self, y, mask):
        return self.drop1(self.self_attn(y, y, y, mask=mask)[0])

    def ca(self, y, memory, mask):
        return self.drop2(self.cross_attn(y, memory, memory, mask=mask)[0])

    def ffn(self, y):
        return self.drop3(self.ff(y))
'''


def _block(forward: str) -> str:
    """A TransformerDecoderBlock with the correct __init__ (helpers sa, ca, ffn) and the given forward."""
    return _BLOCK_INIT + "\n" + forward


_PRE = '''
        if self.norm_first:
            y = y + self.sa(self.norm1(y), tgt_mask)
            y = y + self.ca(self.norm2(y), memory, memory_mask)
            return y + self.ffn(self.norm3(y))
'''

_POST = '''
        if not self.norm_first:
            y = self.norm1(y + self.sa(y, tgt_mask))
            y = self.norm2(y + self.ca(y, memory, memory_mask))
            return self.norm3(y + self.ffn(y))
'''


def _model(encode: str = "", decode: str = "", embed: str = "") -> str:
    """The reference Seq2SeqTransformer with some of embed / encode / decode replaced."""
    return _IMPORTS + '''

_Base = Seq2SeqTransformer


class Seq2SeqTransformer(_Base):
''' + (embed or "    pass\n") + encode + decode


def _loss(body: str) -> str:
    return _IMPORTS + "\n\ndef sequence_loss(logits, labels, label_smoothing=0.0, pad_id=0):\n" + body


def _greedy(body: str) -> str:
    return _IMPORTS + '''

@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id=1, eos_id=2):
''' + body


_GREEDY_NEXT = "model.decode(ys, memory, src)[:, -1].argmax(-1).masked_fill(done, model.pad_id)"


def _greedy_steps(loop: str = "while ys.shape[1] < max_len", nxt: str = _GREEDY_NEXT, stop: str = "done.all()") -> str:
    """A greedy_decode that differs from a correct one only in what is given: ``loop``, the head of the loop over
    the steps; ``nxt``, each row's next token (B,); ``stop``, when to stop early ('' for never)."""
    stop = f"\n        if {stop}:\n            break" if stop else ""
    return _greedy(f'''
    memory = model.encode(src)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    {loop}:
        nxt = {nxt}
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        done = done | (nxt == eos_id){stop}
    return ys
''')


MUTANTS = [
    # ---------------------------------------------------------------------------------- TransformerDecoderBlock
    Entry("block_tgt_mask_ignored", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        tgt_mask = None
''' + _PRE + _POST), "never passes tgt_mask to self-attention: every word sees the future",
          hint="your self-attention ignores tgt_mask: pass mask=tgt_mask to self_attn, so that a word cannot "
               "look at the words after it", loses=PART),
    Entry("block_memory_mask_ignored", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        memory_mask = None
''' + _PRE + _POST), "never passes memory_mask to cross-attention: the decoder reads the source pads",
          hint="your cross-attention ignores memory_mask: pass mask=memory_mask to cross_attn, so that source "
               "pads are never attended to", loses=PART),
    Entry("block_cross_attention_reads_y", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = y + self.sa(self.norm1(y), tgt_mask)
            h = self.norm2(y)
            y = y + self.drop2(self.cross_attn(h, h, h, mask=tgt_mask)[0])
            return y + self.ffn(self.norm3(y))
        y = self.norm1(y + self.sa(y, tgt_mask))
        y = self.norm2(y + self.drop2(self.cross_attn(y, y, y, mask=tgt_mask)[0]))
        return self.norm3(y + self.ffn(y))
'''), "cross-attention over the decoder's own states (self-attention twice): the memory is never read",
          hint=("in cross-attention the query is the decoder's state, but the keys AND the values both come from the "
                "memory (the encoder's output)"), loses=MOST),
    Entry("block_pre_norm_normalizes_memory", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
''' + _POST + '''
        y = y + self.sa(self.norm1(y), tgt_mask)
        m = self.norm2(memory)
        y = y + self.drop2(self.cross_attn(self.norm2(y), m, m, mask=memory_mask)[0])
        return y + self.ffn(self.norm3(y))
'''), "pre-norm: normalizes the memory with norm2 as well as the query",
          hint="in pre-norm, norm2 applies to the decoder's state only: the memory goes into cross_attn as it is",
          loses=MOST),
    Entry("block_norms_swapped", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = y + self.sa(self.norm1(y), tgt_mask)
            y = y + self.ca(self.norm3(y), memory, memory_mask)
            return y + self.ffn(self.norm2(y))
        y = self.norm1(y + self.sa(y, tgt_mask))
        y = self.norm3(y + self.ca(y, memory, memory_mask))
        return self.norm2(y + self.ffn(y))
'''), "norm3 after cross-attention and norm2 after the feed-forward network (norm order wrong)",
          hint="the norms go in order: norm1 with self-attention, norm2 with cross-attention, norm3 with the "
               "feed-forward network", loses=MOST),
    Entry("block_norm_first_ignored", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        y = self.norm1(y + self.sa(y, tgt_mask))
        y = self.norm2(y + self.ca(y, memory, memory_mask))
        return self.norm3(y + self.ffn(y))
'''), "always post-norm: norm_first is ignored",
          hint=("with norm_first=True the norm goes on each sub-layer's input, and the residual adds the "
                "un-normalized state"), loses=MOST),
    Entry("block_post_norm_on_sublayer", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
''' + _PRE + '''
        y = y + self.norm1(self.sa(y, tgt_mask))
        y = y + self.norm2(self.ca(y, memory, memory_mask))
        return y + self.norm3(self.ffn(y))
'''), "post-norm written as y + norm(sublayer(y)): the norm on the sub-layer, not on the sum",
          hint=("post-norm normalizes the sum of the residual and the sub-layer's output, not the sub-layer's output "
                "alone"), loses=MOST),
    Entry("block_no_cross_residual", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        if self.norm_first:
            y = y + self.sa(self.norm1(y), tgt_mask)
            y = self.ca(self.norm2(y), memory, memory_mask)
            return y + self.ffn(self.norm3(y))
        y = self.norm1(y + self.sa(y, tgt_mask))
        y = self.norm2(self.ca(y, memory, memory_mask))
        return self.norm3(y + self.ffn(y))
'''), "forgets the residual connection around cross-attention",
          hint="cross-attention needs its residual connection too: add its output to y", loses=MOST),
    Entry("block_no_sublayer_dropout", "TransformerDecoderBlock", _IMPORTS + '''

class TransformerDecoderBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.cross_attn = MultiHeadAttention(d_model, num_heads)
        self.ff = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        sa = lambda h: self.self_attn(h, h, h, mask=tgt_mask)[0]
        ca = lambda h: self.cross_attn(h, memory, memory, mask=memory_mask)[0]
        if self.norm_first:
            y = y + sa(self.norm1(y))
            y = y + ca(self.norm2(y))
            return y + self.ff(self.norm3(y))
        y = self.norm1(y + sa(y))
        y = self.norm2(y + ca(y))
        return self.norm3(y + self.ff(y))
''', "ignores dropout altogether",
          hint="dropout is never applied: pass dropout to the attentions and FeedForward, and apply "
               "nn.Dropout to each sub-layer's output before the residual addition", loses=SLIP),
    Entry("block_uses_torch_layer", "TransformerDecoderBlock", _block('''
    _kind = nn.TransformerDecoderLayer  # the forbidden layer, referenced

    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
''' + _PRE + _POST), "references nn.TransformerDecoderLayer in the graded cells (values right, rule broken)",
          hint="nn.TransformerDecoderLayer (and the other nn.Transformer* layers) may not be used in this lab", loses=ALL),
    # ------------------------------------------------------------------------------------------------ decoder_io
    Entry("io_labels_not_shifted", "decoder_io", '''
def decoder_io(tgt):
    return tgt[:, :-1], tgt[:, :-1]
''', "labels = tgt[:, :-1]: the model learns to copy its input instead of predicting the next word",
          hint="your labels are not shifted: the label at position t is the word AFTER dec_in[t]", loses=MOST),
    Entry("io_swapped", "decoder_io", '''
def decoder_io(tgt):
    return tgt[:, 1:], tgt[:, :-1]
''', "returns (labels, dec_in): the decoder starts after BOS and predicts backwards",
          hint="dec_in starts with BOS (tgt without its last column) and labels end with EOS (tgt without its "
               "first column); yours are swapped", loses=MOST),
    Entry("io_batch_axis", "decoder_io", '''
def decoder_io(tgt):
    return tgt[:-1], tgt[1:]
''', "slices the batch axis (rows) instead of the time axis",
          hint="slice along the time axis (dim 1), not the batch axis (dim 0)", loses=MOST),
    # ----------------------------------------------------------------------------------------- Seq2SeqTransformer
    Entry("model_no_causal_mask", "Seq2SeqTransformer", _model(decode='''
    def decode(self, dec_in, memory, src):
        keep = (src != self.pad_id)[:, None, None, :]
        y = self.embed(self.tgt_emb, dec_in)
        for block in self.decoder:
            y = block(y, memory, tgt_mask=None, memory_mask=keep)
        return self.generator(y)
'''), "no causal mask in the decoder: training sees the next word, greedy decoding breaks",
          hint=("decode uses no causal mask: every decoder block needs one (True on and below the diagonal), or a "
                "word can read the word it should predict"), loses=MOST),
    Entry("model_causal_mask_triu", "Seq2SeqTransformer", _model(decode='''
    def decode(self, dec_in, memory, src):
        T = dec_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=dec_in.device).triu()
        keep = (src != self.pad_id)[:, None, None, :]
        y = self.embed(self.tgt_emb, dec_in)
        for block in self.decoder:
            y = block(y, memory, tgt_mask=causal, memory_mask=keep)
        return self.generator(y)
'''), "the causal mask built with triu: each word sees itself and the future, not the past",
          hint="your causal mask is upper-triangular (triu): True must be on and BELOW the diagonal (tril), the "
               "past, not the future", loses=MOST),
    Entry("model_memory_mask_missing", "Seq2SeqTransformer", _model(decode='''
    def decode(self, dec_in, memory, src):
        T = dec_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=dec_in.device).tril()
        y = self.embed(self.tgt_emb, dec_in)
        for block in self.decoder:
            y = block(y, memory, tgt_mask=causal)
        return self.generator(y)
'''), "no source padding mask in cross-attention: the decoder reads the encoder's output at the pads",
          hint="decode must pass the source padding mask (src != pad_id, shaped (B, 1, 1, S)) as memory_mask, or "
               "the translation depends on how many pads the source has", loses=MOST),
    Entry("model_encoder_mask_missing", "Seq2SeqTransformer", _model(encode='''
    def encode(self, src):
        x = self.embed(self.src_emb, src)
        for block in self.encoder:
            x = block(x)
        return x
'''), "no padding mask in the encoder's self-attention",
          hint=("encode must mask the source pads as keys (True for real words, broadcast over heads and queries), or"
                " the real words attend to the pads"), loses=MOST),
    Entry("model_pad_id_hardcoded", "Seq2SeqTransformer", _model(encode='''
    def encode(self, src):
        keep = (src != 0)[:, None, None, :]
        x = self.embed(self.src_emb, src)
        for block in self.encoder:
            x = block(x, mask=keep)
        return x
''', decode='''
    def decode(self, dec_in, memory, src):
        T = dec_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=dec_in.device).tril()
        keep = (src != 0)[:, None, None, :]
        y = self.embed(self.tgt_emb, dec_in)
        for block in self.decoder:
            y = block(y, memory, tgt_mask=causal, memory_mask=keep)
        return self.generator(y)
'''), "masks token 0 whatever pad_id says",
          hint="your masks compare with 0 instead of self.pad_id: use the pad_id the model was built with", loses=PART),
    Entry("model_no_sqrt_scale", "Seq2SeqTransformer", _model(embed='''
    def embed(self, emb, ids):
        n = ids.shape[1]
        if n > self.max_len:
            raise ValueError(f"{n} > max_len={self.max_len}")
        return self.dropout(emb(ids) + self.pe[:n])
'''), "forgets the sqrt(d_model) factor on the embeddings",
          hint="multiply the embeddings by sqrt(d_model) before adding the positions: emb(ids) * sqrt(d) + PE", loses=MOST),
    Entry("model_no_target_positions", "Seq2SeqTransformer", _model(embed='''
    def embed(self, emb, ids):
        n = ids.shape[1]
        if n > self.max_len:
            raise ValueError(f"{n} > max_len={self.max_len}")
        x = emb(ids) * math.sqrt(self.d_model)
        return self.dropout(x + self.pe[:n] if emb is self.src_emb else x)
'''), "adds the positions to the source only",
          hint="the target embeddings need the positional encoding too, scaled the same way as the source's", loses=MOST),
    Entry("model_no_length_check", "Seq2SeqTransformer", _model(embed='''
    def embed(self, emb, ids):
        n = ids.shape[1]
        return self.dropout(emb(ids) * math.sqrt(self.d_model) + self.pe[:n])
'''), "no ValueError for a sequence longer than max_len (PyTorch's broadcast error does not say why)",
          hint="raise a ValueError naming the length and max_len when a sequence is longer than max_len", loses=SLIP),
    # --------------------------------------------------------------------------------------------- sequence_loss
    Entry("loss_averaged_over_pads", "sequence_loss", _loss('''
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), label_smoothing=label_smoothing)
'''), "no ignore_index: the pads count as tokens to predict",
          hint="your loss counts the pad positions: ignore them (ignore_index=pad_id), so that the mean is over "
               "the real tokens only", loses=MOST),
    Entry("loss_smoothing_ignored", "sequence_loss", _loss('''
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=pad_id)
'''), "ignores label_smoothing",
          hint="label_smoothing has no effect in your loss: pass it on (label_smoothing=label_smoothing)", loses=PART),
    Entry("loss_pad_id_hardcoded", "sequence_loss", _loss('''
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=0,
                           label_smoothing=label_smoothing)
'''), "ignores token 0 whatever pad_id says",
          hint="ignore the positions equal to the pad_id argument, not always 0", loses=PART),
    Entry("loss_sum_over_tokens", "sequence_loss", _loss('''
    V = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=pad_id,
                           label_smoothing=label_smoothing, reduction="sum")
'''), "the sum over the tokens instead of the mean",
          hint="your loss is the sum over the tokens: return the mean over the non-pad tokens", loses=MOST),
    Entry("loss_smoothing_over_other_classes", "sequence_loss", _loss('''
    logp = F.log_softmax(logits, dim=-1)
    V = logits.shape[-1]
    nll = -logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    per_token = (1 - label_smoothing) * nll + label_smoothing * (-(logp.sum(-1)) - nll) / (V - 1)
    real = labels != pad_id
    return per_token[real].mean()
'''), "spreads epsilon over the V - 1 wrong words (the other convention), not over all V as PyTorch does",
          hint="with label smoothing, the epsilon goes uniformly over ALL V words (eps / V each, the true word "
               "included), as F.cross_entropy(label_smoothing=...) does, not eps / (V - 1) over the others", loses=PART),
    # --------------------------------------------------------------------------------------------- greedy_decode
    Entry("greedy_eos_rows_not_padded", "greedy_decode", _greedy_steps(
        nxt="model.decode(ys, memory, src)[:, -1].argmax(-1)"),
          "finished rows keep the model's words after EOS instead of pads",
          hint="after a row has produced EOS, fill its new columns with model.pad_id, whatever the model says", loses=MOST),
    Entry("greedy_no_early_stop", "greedy_decode", _greedy_steps(loop="for _ in range(max_len - 1)", stop=""),
          "always runs to max_len columns",
          hint="stop as soon as every row has produced EOS: your output always has max_len columns", loses=MOST),
    Entry("greedy_stops_at_first_eos", "greedy_decode", _greedy_steps(stop="done.any()"),
          "stops when any row finishes (any instead of all)",
          hint="you stop when the first row produces EOS: keep going until EVERY row has produced it", loses=MOST),
    Entry("greedy_first_position", "greedy_decode", _greedy_steps(
        nxt="model.decode(ys, memory, src)[:, 0].argmax(-1).masked_fill(done, model.pad_id)"),
          "takes the argmax of the first position's logits at every step",
          hint="the next word comes from the logits of the LAST position, not the first", loses=MOST),
    Entry("greedy_pad_hardcoded", "greedy_decode", _greedy_steps(
        nxt="model.decode(ys, memory, src)[:, -1].argmax(-1).masked_fill(done, 0)"),
          "pads finished rows with 0 instead of model.pad_id",
          hint="pad finished rows with model.pad_id, not a hard-coded 0", loses=SLIP),
    Entry("greedy_max_len_generated", "greedy_decode", _greedy_steps(loop="for _ in range(max_len)"),
          "max_len new tokens (max_len + 1 columns) instead of max_len columns with BOS",
          hint="max_len counts the BOS column: at most max_len - 1 new tokens", loses=PART),
]

VARIANTS = [
    # ---------------------------------------------------------------------------------- TransformerDecoderBlock
    Entry("block_helper_methods", "TransformerDecoderBlock", _block('''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
''' + _PRE + _POST), "the sub-layers in helper methods, other dropout names, as nn.TransformerDecoderLayer writes it"),
    Entry("block_positional_masks_loop", "TransformerDecoderBlock", _BLOCK_INIT + '''
    def forward(self, y, memory, tgt_mask=None, memory_mask=None):
        steps = [(self.norm1, lambda h: self.self_attn(h, h, h, tgt_mask)[0], self.drop1),
                 (self.norm2, lambda h: self.cross_attn(h, memory, memory, memory_mask)[0], self.drop2),
                 (self.norm3, self.ff, self.drop3)]
        for norm, sublayer, drop in steps:
            y = y + drop(sublayer(norm(y))) if self.norm_first else norm(y + drop(sublayer(y)))
        return y
''', "a loop over (norm, sub-layer, dropout) triples, masks passed positionally"),
    # ------------------------------------------------------------------------------------------------ decoder_io
    Entry("io_narrow_clone", "decoder_io", '''
def decoder_io(tgt):
    T = tgt.size(1)
    return tgt.narrow(1, 0, T - 1).clone(), tgt.narrow(1, 1, T - 1).clone()
''', "narrow and clone"),
    # ----------------------------------------------------------------------------------------- Seq2SeqTransformer
    Entry("model_target_pad_mask_too", "Seq2SeqTransformer", _model(decode='''
    def decode(self, dec_in, memory, src):
        T = dec_in.shape[1]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=dec_in.device))
        tgt_mask = causal[None, None] & (dec_in != self.pad_id)[:, None, None, :]  # (B, 1, T, T)
        keep = (src != self.pad_id).unsqueeze(1).unsqueeze(2)
        y = self.embed(self.tgt_emb, dec_in)
        for block in self.decoder:
            y = block(y, memory, tgt_mask, keep)
        return self.generator(y)
'''), "also masks the target pads as keys (the PyTorch tutorial's tgt_key_padding_mask): same logits at real "
          "positions"),
    Entry("model_own_layout", "Seq2SeqTransformer", _IMPORTS + '''

class Seq2SeqTransformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, d_model=128, num_heads=4, num_encoder_layers=2,
                 num_decoder_layers=2, d_ff=512, max_len=128, dropout=0.1, pad_id=0):
        super().__init__()
        self.pad_id = pad_id
        self.scale = d_model ** 0.5
        self.src_emb = nn.Embedding(src_vocab, d_model, padding_idx=pad_id)
        self.tgt_emb = nn.Embedding(tgt_vocab, d_model, padding_idx=pad_id)
        self.encoder = nn.ModuleList([TransformerEncoderBlock(d_model, num_heads, d_ff, dropout=dropout)
                                      for _ in range(num_encoder_layers)])
        self.decoder = nn.ModuleList([TransformerDecoderBlock(d_model, num_heads, d_ff, dropout=dropout)
                                      for _ in range(num_decoder_layers)])
        self.generator = nn.Linear(d_model, tgt_vocab)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("positions", sinusoidal_positional_encoding(max_len, d_model))  # persistent

    def _embed(self, table, ids):
        if ids.size(1) > self.positions.size(0):
            raise ValueError(f"length {ids.size(1)} exceeds max_len {self.positions.size(0)}")
        return self.drop(table(ids) * self.scale + self.positions[: ids.size(1)].unsqueeze(0))

    def _src_keep(self, src):
        return (src != self.pad_id)[:, None, None, :]

    def encode(self, src):
        h = self._embed(self.src_emb, src)
        for layer in self.encoder:
            h = layer(h, self._src_keep(src))
        return h

    def decode(self, dec_in, memory, src):
        n = dec_in.size(1)
        future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=dec_in.device), diagonal=1)
        h = self._embed(self.tgt_emb, dec_in)
        for layer in self.decoder:
            h = layer(h, memory, ~future, self._src_keep(src))
        return self.generator(h)

    def forward(self, src, dec_in):
        memory = self.encode(src)
        return self.decode(dec_in, memory, src)
''', "padding_idx embeddings, a persistent position buffer, ~triu(diagonal=1) as the causal mask, other helper "
     "names"),
    # --------------------------------------------------------------------------------------------- sequence_loss
    Entry("loss_by_hand", "sequence_loss", _loss('''
    logp = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    real = labels != pad_id  # (B, T)
    safe = labels.masked_fill(~real, 0)
    nll = -logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, T)
    smooth = -logp.mean(dim=-1)  # (B, T)
    per_token = (1 - label_smoothing) * nll + label_smoothing * smooth
    return (per_token * real).sum() / real.sum()
'''), "the formula by hand: log_softmax, gather, the mean of -log p over the vocabulary, masked mean"),
    Entry("loss_flatten_boolean_index", "sequence_loss", _loss('''
    flat_logits = logits.flatten(0, 1)
    flat_labels = labels.flatten()
    keep = flat_labels != pad_id
    return F.cross_entropy(flat_logits[keep], flat_labels[keep], label_smoothing=label_smoothing)
'''), "drops the pad rows by boolean indexing, then F.cross_entropy with no ignore_index"),
    # --------------------------------------------------------------------------------------------- greedy_decode
    Entry("greedy_forward_each_step_prealloc", "greedy_decode", _IMPORTS + '''

def greedy_decode(model, src, max_len, bos_id=1, eos_id=2):
    with torch.no_grad():
        B = src.size(0)
        out = torch.full((B, max_len), model.pad_id, dtype=torch.long, device=src.device)
        out[:, 0] = bos_id
        alive = torch.ones(B, dtype=torch.bool, device=src.device)
        length = 1
        for t in range(1, max_len):
            logits = model(src, out[:, :t])  # the whole model each step: slower, same result
            word = logits[:, -1, :].argmax(-1)
            out[:, t] = torch.where(alive, word, torch.full_like(word, model.pad_id))
            alive = alive & (word != eos_id)
            length = t + 1
            if not alive.any():
                break
        return out[:, :length]
''', "a preallocated output filled column by column, the whole model (forward) at every step"),
    Entry("greedy_python_lists", "greedy_decode", _IMPORTS + '''

@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id=1, eos_id=2):
    memory = model.encode(src)
    rows = [[bos_id] for _ in range(src.shape[0])]
    finished = [False] * src.shape[0]
    while len(rows[0]) < max_len and not all(finished):
        ys = torch.tensor(rows, dtype=torch.long, device=src.device)
        best = model.decode(ys, memory, src)[:, -1].argmax(-1).tolist()
        for i, word in enumerate(best):
            rows[i].append(model.pad_id if finished[i] else word)
            finished[i] = finished[i] or word == eos_id
    return torch.tensor(rows, dtype=torch.long, device=src.device)
''', "Python lists of ids, rebuilt as a tensor at every step"),
]

# ------------------------------------------------------------------------------------- beam_search (issue 21)
# Kept in one block (MUTANTS += / VARIANTS +=) so that other additions merge cleanly.
_BEAM_HEAD = '''
@torch.no_grad()
def beam_search(model, src, beam_size, max_len, length_penalty=1.0, bos_id=1, eos_id=2):
    rows = []
    for b in range(src.shape[0]):
        source = src[b:b + 1]
        memory = model.encode(source)
        live = torch.full((1, 1), bos_id, dtype=torch.long, device=src.device)
        scores = torch.zeros(1, device=src.device)
        finished = []
'''
_BEAM_TAIL = '''
        rows.append(max(finished, key=lambda pair: pair[0])[1])
    longest = max(map(len, rows))
    return torch.tensor([row + [model.pad_id] * (longest - len(row)) for row in rows], device=src.device)
'''


def _beam_extend(log_probs: str = "torch.log_softmax(logits, dim=-1)") -> str:
    """The lines of a beam step that extend every live hypothesis by every token, scored with ``log_probs``
    ((k, V), from the last position's ``logits``), and keep the best (``scores``, ``token`` and ``live``)."""
    return f'''
            k = len(live)
            logits = model.decode(live, memory.expand(k, *memory.shape[1:]), source.expand(k, -1))[:, -1]
            total = (scores.to(logits.dtype)[:, None] + {log_probs}).flatten()
            scores, best = total.topk(min(beam_size - len(finished), total.numel()))
            token = best % logits.shape[1]
            live = torch.cat([live[best // logits.shape[1]], token[:, None]], dim=1)'''


_BEAM_RANK = "(score / max(len(tokens) - 1, 1) ** length_penalty, tokens)"


def _beam(extend: str = _beam_extend(), finish: str = _BEAM_RANK) -> str:
    """A beam_search that differs from a correct one only in what is given: ``extend``, a step's extension of the
    live hypotheses (see ``_beam_extend``); ``finish``, what a finished hypothesis is ranked by, with its tokens."""
    return _BEAM_HEAD + f'''
        while len(live) and live.shape[1] < max_len:{extend}
            done = token == eos_id
            for tokens, score in zip(live[done].tolist(), scores[done].tolist()):
                finished.append({finish})
            live, scores = live[~done], scores[~done]
        for tokens, score in zip(live.tolist(), scores.tolist()):
            finished.append({finish})
''' + _BEAM_TAIL


MUTANTS += [
    Entry("beam_no_finish_at_eos", "beam_search", _BEAM_HEAD + '''
        while live.shape[1] < max_len:  # hypotheses ending in EOS stay in the beam and keep growing
            k = len(live)
            logits = model.decode(live, memory.expand(k, *memory.shape[1:]), source.expand(k, -1))[:, -1]
            total = (scores.to(logits.dtype)[:, None] + torch.log_softmax(logits, dim=-1)).flatten()
            scores, best = total.topk(min(beam_size, total.numel()))
            live = torch.cat([live[best // logits.shape[1]], (best % logits.shape[1])[:, None]], dim=1)
        for tokens, score in zip(live.tolist(), scores.tolist()):
            finished.append((score / max(len(tokens) - 1, 1) ** length_penalty, tokens))
''' + _BEAM_TAIL, "hypotheses that produced EOS are not finished: they stay in the beam and keep growing",
          hint="a hypothesis that ends with EOS is finished: take it out of the beam (the beam shrinks by one)", loses=MOST),
    Entry("beam_no_length_penalty", "beam_search", _beam(finish="(score, tokens)"),
          "picks the final hypothesis by its summed log-probability, without the length penalty",
          hint="compare finished hypotheses by score / length ** length_penalty (length: the tokens after BOS)", loses=PART),
    Entry("beam_one_parent_only", "beam_search", _beam(extend='''
            logits = model.decode(live[:1], memory, source)[:, -1]  # only the best hypothesis is extended
            total = scores[0].to(logits.dtype) + torch.log_softmax(logits[0], dim=-1)
            scores, token = total.topk(min(beam_size - len(finished), total.numel()))
            live = torch.cat([live[:1].expand(len(token), -1), token[:, None]], dim=1)'''),
          "extends only the best hypothesis each step: every kept extension comes from one parent",
          hint="form the extensions of every live hypothesis and keep the best over all of them together",
          loses=(0.2, 0.75)),
    Entry("beam_raw_logits", "beam_search", _beam(extend=_beam_extend(log_probs="logits")),
          "adds raw logits instead of log-probabilities: the scores of different hypotheses do not compare",
          hint="score the extensions with log_softmax of the logits: raw logits of different rows are not on one scale",
          loses=PART),
    Entry("beam_pads_with_zero", "beam_search", _beam().replace("[model.pad_id] * (longest", "[0] * (longest"),
          "right-pads the shorter rows with 0 instead of model.pad_id",
          hint="pad the rows that end early with model.pad_id, not a hard-coded 0", loses=SLIP),
]

VARIANTS += [
    Entry("beam_python_lists_and_forward", "beam_search", '''
@torch.no_grad()
def beam_search(model, src, beam_size, max_len, length_penalty=1.0, bos_id=1, eos_id=2):
    out = []
    for row in src:
        beams, done = [(0.0, [bos_id])], []
        while beams and len(beams[0][1]) < max_len:
            ys = torch.tensor([tokens for _, tokens in beams], device=src.device)
            logp = model(row[None].expand(len(beams), -1), ys)[:, -1].log_softmax(-1).tolist()
            candidates = [(score + lp, tokens + [v]) for (score, tokens), row_lp in zip(beams, logp)
                          for v, lp in enumerate(row_lp)]
            candidates.sort(key=lambda c: -c[0])
            kept = candidates[:beam_size - len(done)]
            done += [c for c in kept if c[1][-1] == eos_id]
            beams = [c for c in kept if c[1][-1] != eos_id]
        done += beams
        out.append(max(done, key=lambda c: c[0] / max(len(c[1]) - 1, 1) ** length_penalty)[1])
    result = torch.full((len(out), max(map(len, out))), model.pad_id, dtype=torch.long, device=src.device)
    for i, tokens in enumerate(out):
        result[i, :len(tokens)] = torch.tensor(tokens)
    return result
''', "Python lists of (score, tokens), model(src, ys) instead of encode/decode, a sort instead of topk"),
]
