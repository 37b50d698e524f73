"""Lab 11 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

_EMBEDDING_INIT = '''
import math
import torch
from torch import nn


class PatchEmbedding(nn.Module):
    def __init__(self, image_size, patch, in_channels, d_model):
        super().__init__()
        self.patch = patch
        self.proj = nn.Linear(in_channels * patch ** 2, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_emb = nn.Parameter(torch.randn(1, (image_size // patch) * (image_size // patch) + 1, d_model) * 0.02)
'''

_VIT_INIT = '''
import torch
from torch import nn


class ViT(nn.Module):
    def __init__(self, image_size, patch, in_channels, num_classes, d_model, num_heads, num_layers, d_ff,
                 dropout=0.0):
        super().__init__()
        self.embed = PatchEmbedding(image_size, patch, in_channels, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([TransformerEncoderBlock(d_model, num_heads, d_ff, dropout{norm_first})
                                     for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)
'''


def _vit(forward: str, norm_first: str = ", norm_first=True") -> str:
    return _VIT_INIT.format(norm_first=norm_first) + forward


HELDOUT = [
    # ------------------------------------------------------------------------------------------------ patchify
    HeldOut("patchify_unfold_channels_inside", "patchify", '''
def patchify(images, patch):
    B, C, H, W = images.shape
    if H % patch != 0 or W % patch != 0:
        raise ValueError(f"image {H}x{W} cannot be cut into patches of {patch}")
    t = images.unfold(2, patch, patch).unfold(3, patch, patch)  # (B, C, H/p, W/p, p, p)
    t = t.permute(0, 2, 3, 4, 5, 1)  # (B, H/p, W/p, p, p, C)
    return t.reshape(B, -1, patch * patch * C)
''', "patchify_channel_last", why="each patch flattened pixel by pixel with the channels inside"),
    HeldOut("patchify_columns_first", "patchify", '''
def patchify(images, patch):
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"H={H}, W={W} not divisible by patch={patch}")
    t = images.view(B, C, H // patch, patch, W // patch, patch)
    t = t.permute(0, 4, 2, 1, 3, 5).contiguous()  # (B, W/p, H/p, C, p, p)
    return t.flatten(3).flatten(1, 2)
''', "patchify_column_major", why="walks the patches column by column"),
    HeldOut("patchify_one_view", "patchify", '''
def patchify(images, patch):
    B, C, H, W = images.shape
    if H % patch != 0 or W % patch != 0:
        raise ValueError(f"sizes {H} and {W} must be multiples of patch {patch}")
    n = (H // patch) * (W // patch)
    return images.contiguous().view(B, n, -1)
''', "patchify_plain_reshape", why="one view of the image: a patch is a run of consecutive pixels"),
    HeldOut("patchify_crops_the_remainder", "patchify", '''
def patchify(images, patch):
    B, C, H, W = images.shape
    rows, cols = H // patch, W // patch
    images = images[:, :, : rows * patch, : cols * patch]
    t = images.reshape(B, C, rows, patch, cols, patch).permute(0, 2, 4, 1, 3, 5)
    return t.reshape(B, rows * cols, C * patch * patch)
''', None, why="no ValueError: a side that is not divisible is cropped"),
    # ------------------------------------------------------------------------------------------ PatchEmbedding
    HeldOut("embed_cls_concatenated_last", "PatchEmbedding", _EMBEDDING_INIT + '''
    def forward(self, images):
        x = self.proj(patchify(images, self.patch))
        x = torch.cat((x, self.cls_token.repeat(x.shape[0], 1, 1)), dim=1)
        return x + self.pos_emb
''', "embed_cls_appended", why="[CLS] concatenated after the patch tokens"),
    HeldOut("embed_positions_patches_only", "PatchEmbedding", _EMBEDDING_INIT + '''
    def forward(self, images):
        B = images.shape[0]
        x = self.proj(patchify(images, self.patch))
        x = x + self.pos_emb[:, 1:, :]
        return torch.cat([self.cls_token.expand(B, 1, -1), x], dim=1)
''', "embed_pos_not_on_cls", why="the positions go on the patch tokens only"),
    HeldOut("embed_scaled_by_sqrt_d", "PatchEmbedding", _EMBEDDING_INIT + '''
    def forward(self, images):
        x = self.proj(patchify(images, self.patch)) * math.sqrt(self.proj.out_features)
        cls = self.cls_token.expand(images.shape[0], -1, -1)
        return torch.cat([cls, x], dim=1) + self.pos_emb
''', None, why="multiplies the patch tokens by sqrt(d), as Lab 08's token embeddings"),
    # --------------------------------------------------------------------------------------------------- ViT
    HeldOut("vit_average_of_tokens", "ViT", _vit('''
    def forward(self, images):
        h = self.drop(self.embed(images))
        for layer in self.blocks:
            h = layer(h)
        h = self.norm(h)
        return self.head(h.mean(1))
'''), "vit_mean_pool", why="averages every token instead of reading [CLS]"),
    HeldOut("vit_norm_first_left_out", "ViT", _vit('''
    def forward(self, images):
        h = self.drop(self.embed(images))
        for layer in self.blocks:
            h = layer(h)
        return self.head(self.norm(h[:, 0]))
''', norm_first=""), "vit_post_norm_blocks", why="post-norm blocks (norm_first not passed)"),
    HeldOut("vit_norm_result_dropped", "ViT", _vit('''
    def forward(self, images):
        h = self.drop(self.embed(images))
        for layer in self.blocks:
            h = layer(h)
        self.norm(h)
        return self.head(h[:, 0])
'''), "vit_no_final_norm", why="calls the final norm but throws its result away"),
    # ------------------------------------------------------------------------------------------- attention_rollout
    HeldOut("rollout_plain_product", "attention_rollout", '''
import torch

def attention_rollout(attentions):
    rollout = attentions[0].mean(1)
    for layer in attentions[1:]:
        rollout = torch.bmm(layer.mean(1), rollout)
    return rollout
''', "rollout_no_identity", why="the head-averaged weights multiplied with no identity"),
    HeldOut("rollout_first_layer_on_the_left", "attention_rollout", '''
import torch

def attention_rollout(attentions):
    B, h, N, _ = attentions[0].shape
    out = torch.eye(N, dtype=attentions[0].dtype, device=attentions[0].device).expand(B, N, N)
    for layer in attentions:
        a = layer.mean(dim=1) + torch.eye(N, dtype=layer.dtype, device=layer.device)
        a = a / a.sum(dim=-1, keepdim=True)
        out = out @ a
    return out
''', "rollout_wrong_order", why="the product built left to right: A_1 ... A_L"),
    HeldOut("rollout_heads_summed", "attention_rollout", '''
import torch

def attention_rollout(attentions):
    result = None
    for w in attentions:
        a = w.sum(dim=1) + torch.eye(w.shape[-1], dtype=w.dtype, device=w.device)
        a = a / a.sum(dim=-1, keepdim=True)
        result = a if result is None else a @ result
    return result
''', None, why="sums the heads instead of averaging them, so the identity weighs 1/h as much"),
]

# ------------------------------------------------------------------------------------------------ clip_loss
HELDOUT += [
    HeldOut("clip_images_classify_texts_only", "clip_loss", '''
import torch
import torch.nn.functional as F

def clip_loss(image_emb, text_emb, temperature=0.07):
    a = image_emb / image_emb.norm(dim=1, keepdim=True)
    b = text_emb / text_emb.norm(dim=1, keepdim=True)
    scores = (a @ b.t()) / temperature
    return -scores.log_softmax(dim=1).diagonal().mean()
''', "clip_one_direction", why="log_softmax over the rows only: each image among the texts, never the reverse"),
    HeldOut("clip_logit_scale_is_tau", "clip_loss", '''
import torch
import torch.nn.functional as F

def clip_loss(image_emb, text_emb, temperature=0.07):
    image_emb = F.normalize(image_emb, p=2, dim=1)
    text_emb = F.normalize(text_emb, p=2, dim=1)
    logit_scale = temperature
    logits_per_image = logit_scale * image_emb @ text_emb.t()
    labels = torch.arange(image_emb.shape[0], device=image_emb.device)
    return 0.5 * (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_image.t(), labels))
''', "clip_temperature_multiplied", why="the temperature used as CLIP's logit_scale, a multiplier"),
    HeldOut("clip_raw_dot_products", "clip_loss", '''
import torch
import torch.nn.functional as F

def clip_loss(image_emb, text_emb, temperature=0.07):
    sim = torch.einsum("id,jd->ij", image_emb, text_emb) / temperature
    target = torch.arange(sim.size(0), device=sim.device)
    return (F.cross_entropy(sim, target) + F.cross_entropy(sim.T, target)) / 2
''', "clip_no_normalisation", why="einsum of the raw embeddings: the lengths count"),
]
