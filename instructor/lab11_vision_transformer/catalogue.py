"""Lab 11 catalogue: the mistakes students make (MUTANTS, each must lose points on its question) and
correct alternatives (VARIANTS, each must keep full marks everywhere).

Each ``source`` is run after the reference code, so a redefined ``patchify`` is also what the reference
``PatchEmbedding`` calls, and the given ``TransformerEncoderBlock`` stays available to every entry.
"""

from attnlab.grading.core.mutants import MOST, SLIP, Entry

_IMPORTS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
'''


def _patchify(body: str) -> str:
    """A patchify with the divisibility check and the given body (indented 4 spaces)."""
    return _IMPORTS + '''

def patchify(images, patch):
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"H={H} and W={W} must be divisible by patch={patch}")
''' + body


_EMBED_INIT = _IMPORTS + '''

class PatchEmbedding(nn.Module):
    def __init__(self, image_size, patch, in_channels, d_model):
        super().__init__()
        self.patch = patch
        n = (image_size // patch) ** 2
        self.proj = nn.Linear(in_channels * patch * patch, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_emb = nn.Parameter(0.02 * torch.randn(1, n + 1, d_model))

'''


def _embed(forward: str) -> str:
    """A PatchEmbedding with the correct __init__ and the given forward (indented 4 spaces)."""
    return _EMBED_INIT + forward


def _vit(init_blocks: str, forward: str) -> str:
    """A ViT with ``init_blocks`` building ``self.blocks`` and the given forward."""
    return _IMPORTS + '''

class ViT(nn.Module):
    def __init__(self, image_size, patch, in_channels, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.0):
        super().__init__()
        self.embed = PatchEmbedding(image_size, patch, in_channels, d_model)
        self.dropout = nn.Dropout(dropout)
''' + init_blocks + '''
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)

''' + forward


_PRE_NORM_BLOCKS = '''
        self.blocks = nn.ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True)
                                    for _ in range(num_layers))'''

_ENCODE = '''
    def encode(self, images):
        x = self.dropout(self.embed(images))
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
'''


def _rollout(layer: str, combine: str) -> str:
    """An attention_rollout whose per-layer matrix is ``layer`` (from ``w``) and product ``combine``."""
    return _IMPORTS + f'''

def attention_rollout(attentions):
    result = None
    for w in attentions:
        eye = torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)
        a = {layer}
        result = a if result is None else {combine}
    return result
'''


def _clip(body: str) -> str:
    """A clip_loss whose body (indented 4 spaces) sees image_emb, text_emb and temperature."""
    return _IMPORTS + """

def clip_loss(image_emb, text_emb, temperature=0.07):
""" + body


_UNIT = """    x = F.normalize(image_emb, dim=-1)
    t = F.normalize(text_emb, dim=-1)
    targets = torch.arange(len(x), device=x.device)
"""


MUTANTS = [
    # ------------------------------------------------------------------------------------------------ patchify
    Entry("patchify_channel_last", "patchify", _patchify('''
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, C * patch * patch)
'''), "flattens each patch channel-last (row, column, channel), not as Conv2d weights are laid out",
      hint=("your patches seem flattened channel-last (pixel by pixel, channels inside): flatten each patch "
            "channel-first, all of channel 0's p * p pixels first, as Conv2d lays out its weights"), loses=MOST),
    Entry("patchify_column_major", "patchify", _patchify('''
    x = images.reshape(B, C, H // patch, patch, W // patch, patch).permute(0, 4, 2, 1, 3, 5)
    return x.reshape(B, -1, C * patch * patch)
'''), "orders the patches column by column (column-major) instead of row by row",
      hint=("your patches seem to come column by column: order them row-major, the first row of patches left to "
            "right, then the next row"), loses=MOST),
    Entry("patchify_plain_reshape", "patchify", _patchify('''
    return images.reshape(B, (H // patch) * (W // patch), C * patch * patch)
'''), "one reshape of the image: a 'patch' is a run of consecutive pixels, not a square",
      hint=("your patches seem to be runs of consecutive pixels (a plain reshape): split H and W into (which patch, "
            "where inside it), permute, then flatten"), loses=MOST),
    # ------------------------------------------------------------------------------------------ PatchEmbedding
    Entry("embed_cls_appended", "PatchEmbedding", _embed('''
    def forward(self, images):
        tokens = self.proj(patchify(images, self.patch))
        cls = self.cls_token.expand(images.shape[0], -1, -1)
        return torch.cat([tokens, cls], dim=1) + self.pos_emb
'''), "appends the [CLS] token at the end instead of putting it in front",
      hint="your [CLS] token seems to come last: put it in front, as token 0", loses=MOST),
    Entry("embed_pos_not_on_cls", "PatchEmbedding", _embed('''
    def forward(self, images):
        tokens = self.proj(patchify(images, self.patch)) + self.pos_emb[:, 1:]
        cls = self.cls_token.expand(images.shape[0], -1, -1)
        return torch.cat([cls, tokens], dim=1)
'''), "adds the positions to the patch tokens only, not to the [CLS] token",
      hint=("your [CLS] token seems to miss its position: the position embedding has N + 1 rows, one for every "
           "token, [CLS] included"), loses=MOST),
    Entry("embed_no_positions", "PatchEmbedding", _embed('''
    def forward(self, images):
        tokens = self.proj(patchify(images, self.patch))
        cls = self.cls_token.expand(images.shape[0], -1, -1)
        return torch.cat([cls, tokens], dim=1) + 0 * self.pos_emb
'''), "forgets to add the positions",
      hint="your tokens seem to miss the positions: add pos_emb (1, N + 1, d) to the tokens", loses=MOST),
    # --------------------------------------------------------------------------------------------------- ViT
    Entry("vit_mean_pool", "ViT", _vit(_PRE_NORM_BLOCKS, _ENCODE + '''
    def forward(self, images):
        return self.head(self.encode(images).mean(dim=1))
'''), "classifies from the mean over all tokens instead of the [CLS] token",
      hint="your logits seem to come from the mean over the tokens: apply head to the [CLS] token, row 0", loses=MOST),
    Entry("vit_post_norm_blocks", "ViT", _vit('''
        self.blocks = nn.ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, dropout)
                                    for _ in range(num_layers))''', _ENCODE + '''
    def forward(self, images):
        return self.head(self.encode(images)[:, 0])
'''), "builds post-norm blocks (norm_first left at False)",
      hint="your blocks seem to be post-norm: a ViT uses pre-norm blocks, TransformerEncoderBlock(..., norm_first=True)",
      loses=MOST),
    Entry("vit_no_final_norm", "ViT", _vit(_PRE_NORM_BLOCKS, '''
    def forward(self, images):
        x = self.dropout(self.embed(images))
        for block in self.blocks:
            x = block(x)
        return self.head(x[:, 0])
'''), "skips the final LayerNorm before the head",
      hint="your [CLS] vector seems to reach the head without the final norm: apply self.norm after the last block",
      loses=MOST),
    # ------------------------------------------------------------------------------------------- attention_rollout
    Entry("rollout_no_identity", "attention_rollout", _rollout("w.mean(dim=1)", "a @ result"),
          "leaves out the identity (the residual connection)",
          hint="your rollout seems to leave out the identity: add I to the head-averaged weights of every layer",
          loses=MOST),
    Entry("rollout_no_renormalisation", "attention_rollout", _rollout("w.mean(dim=1) + eye", "a @ result"),
          "adds the identity but does not renormalise the rows",
          hint="your rollout's rows seem not to sum to 1: divide A + I by its row sums in every layer", loses=MOST),
    Entry("rollout_wrong_order", "attention_rollout",
          _rollout("(w.mean(dim=1) + eye) / (w.mean(dim=1) + eye).sum(-1, keepdim=True)", "result @ a"),
          "multiplies the layers in the wrong order (A_1 ... A_L)",
          hint="your rollout seems to multiply the layers in the wrong order: R = A_L ... A_1, the later layer on the left",
          loses=MOST),
    Entry("rollout_max_over_heads", "attention_rollout",
          _rollout("(w.amax(dim=1) + eye) / (w.amax(dim=1) + eye).sum(-1, keepdim=True)", "a @ result"),
          "takes the maximum over the heads instead of the mean",
          hint="your rollout seems to take the maximum over the heads: average them (mean over dim 1)", loses=MOST),
    # ------------------------------------------------------------------------------------------------ clip_loss
    Entry("clip_one_direction", "clip_loss", _clip(_UNIT + """
    return F.cross_entropy(x @ t.T / temperature, targets)
"""), "only the image-to-text cross-entropy (the rows); CLIP averages it with text-to-image (the columns)",
      hint=("your loss seems to classify only each image among the texts: add the text-to-image cross-entropy (the "
            "columns of the similarity matrix) and average the two"), loses=MOST),
    Entry("clip_no_temperature", "clip_loss", _clip(_UNIT + """
    logits = x @ t.T
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
"""), "ignores the temperature: the logits are the bare cosines",
      hint="your loss seems not to depend on the temperature: divide the cosine similarities by it", loses=MOST),
    Entry("clip_temperature_multiplied", "clip_loss", _clip(_UNIT + """
    logits = x @ t.T * temperature
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
"""), "multiplies the cosines by the temperature instead of dividing",
      hint=("your loss seems to multiply the similarities by the temperature: divide by it (a small temperature "
            "sharpens the softmax)"), loses=MOST),
    Entry("clip_no_normalisation", "clip_loss", _clip("""
    logits = image_emb @ text_emb.T / temperature
    targets = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
"""), "uses raw dot products: the embeddings are not normalised to unit length",
      hint=("your loss seems to depend on the lengths of the embeddings: normalise each row to unit length along d "
            "before the dot products (cosine similarity)"), loses=MOST),
    Entry("clip_normalised_over_batch", "clip_loss", _clip("""
    x = F.normalize(image_emb, dim=0)
    t = F.normalize(text_emb, dim=0)
    logits = x @ t.T / temperature
    targets = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2
"""), "normalises along the batch (dim 0) instead of along each embedding",
      hint="your normalisation seems to run down the batch: make each embedding (each row, along d) of unit length",
      loses=MOST),
    Entry("clip_labels_off_diagonal", "clip_loss", _clip(_UNIT + """
    logits = x @ t.T / temperature
    first = torch.zeros_like(targets)
    return (F.cross_entropy(logits, first) + F.cross_entropy(logits.T, first)) / 2
"""), "every target is 0 (the first pair) instead of the diagonal",
      hint=("your targets seem not to be the diagonal: image i's caption is text i, so the targets are "
            "torch.arange(B)"), loses=MOST),
    Entry("clip_directions_summed", "clip_loss", _clip(_UNIT + """
    logits = x @ t.T / temperature
    return F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)
"""), "adds the two cross-entropies without halving them (twice CLIP's loss)",
      hint="your loss seems twice too large: average the two directions, (rows + columns) / 2", loses=MOST),
    Entry("clip_softmax_by_hand", "clip_loss", _clip(_UNIT + """
    e = torch.exp(x @ t.T / temperature)
    rows = -torch.log(e.diagonal() / e.sum(dim=1))
    cols = -torch.log(e.diagonal() / e.sum(dim=0))
    return (rows.mean() + cols.mean()) / 2
"""), "a softmax by hand, log(exp / sum): exp(100) overflows float32 at a small temperature",
      hint=("your loss seems to overflow at a small temperature (logits of 100 in float32): use F.cross_entropy or "
            "log_softmax, which subtract the largest logit first"), loses=SLIP),
]

VARIANTS = [
    Entry("patchify_f_unfold", "patchify", _patchify('''
    return F.unfold(images, kernel_size=patch, stride=patch).transpose(1, 2)
'''), "F.unfold (im2col) then a transpose"),
    Entry("patchify_tensor_unfold", "patchify", _patchify('''
    x = images.unfold(2, patch, patch).unfold(3, patch, patch)  # (B, C, H/p, W/p, p, p)
    return x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * patch * patch)
'''), "Tensor.unfold along H and W, then permute"),
    Entry("embed_conv_with_proj_weights", "PatchEmbedding", _embed('''
    def forward(self, images):
        d = self.proj.out_features
        weight = self.proj.weight.view(d, images.shape[1], self.patch, self.patch)
        tokens = F.conv2d(images, weight, self.proj.bias, stride=self.patch).flatten(2).transpose(1, 2)
        cls = self.cls_token.repeat(images.shape[0], 1, 1)
        return torch.cat((cls, tokens), 1) + self.pos_emb
'''), "the convolution form on proj's weights, [CLS] repeated"),
    Entry("vit_sequential_blocks", "ViT", _vit('''
        self.blocks = nn.Sequential(*[TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True)
                                      for _ in range(num_layers)])''', '''
    def forward(self, images):
        cls = self.norm(self.blocks(self.dropout(self.embed(images))))[:, 0, :]
        return self.head(cls)
'''), "blocks as an nn.Sequential, [CLS] read after the norm of all tokens"),
    Entry("rollout_half_and_half", "attention_rollout", _rollout("0.5 * w.mean(dim=1) + 0.5 * eye", "a @ result"),
          "0.5 A + 0.5 I: the same as renormalising, since attention rows sum to 1"),
    Entry("rollout_reduce_reversed", "attention_rollout", _IMPORTS + '''
import functools


def attention_rollout(attentions):
    n = attentions[0].shape[-1]
    eye = torch.eye(n, dtype=attentions[0].dtype, device=attentions[0].device)
    mats = [(w.mean(1) + eye) / (w.mean(1) + eye).sum(-1, keepdim=True) for w in attentions]
    return functools.reduce(lambda acc, m: torch.bmm(m, acc), mats[1:], mats[0])
''', "functools.reduce with torch.bmm, the later layer on the left"),
    Entry("clip_log_softmax_diagonals", "clip_loss", _clip("""
    x = image_emb / image_emb.norm(dim=1, keepdim=True)
    t = text_emb / text_emb.norm(dim=1, keepdim=True)
    s = x @ t.T / temperature
    return -(s.log_softmax(dim=1).diagonal().mean() + s.log_softmax(dim=0).diagonal().mean()) / 2
"""), "log_softmax along the rows and along the columns, the diagonals read; norms divided by hand"),
    Entry("clip_logsumexp_two_matrices", "clip_loss", _clip(_UNIT + """
    image_to_text = x @ t.T / temperature
    text_to_image = t @ x.T / temperature
    diag = image_to_text.diagonal()
    return ((image_to_text.logsumexp(1) - diag).mean() + (text_to_image.logsumexp(1) - diag).mean()) * 0.5
"""), "logsumexp minus the diagonal, the text-to-image matrix computed as its own product"),
]
