"""Lab 10 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

_ENCODER_INIT = '''
import torch
from torch import nn


class BertEncoder(nn.Module):
    def __init__(self, vocab_size, max_len, d_model, num_heads, num_layers, d_ff, dropout=0.0):
        super().__init__()
        self.pad_id = 0
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
'''


def _encoder(blocks: str, forward: str) -> str:
    return _ENCODER_INIT + blocks + forward


_POST_NORM = '''
        self.blocks = nn.ModuleList([TransformerEncoderBlock(d_model, num_heads, d_ff, dropout=dropout)
                                     for _ in range(num_layers)])
'''

_CLASSIFIER_INIT = '''
import torch
from torch import nn


class SequenceClassifier(nn.Module):
    def __init__(self, encoder, num_classes):
        super().__init__()
        self.encoder = encoder
        width = encoder.tok_emb.weight.shape[1]
        self.head = nn.Linear(width, num_classes)
'''

HELDOUT = [
    # ---------------------------------------------------------------------------------------- mask_tokens
    HeldOut("mask_skips_pad_id_only", "mask_tokens", '''
import torch

def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    chosen = torch.rand(ids.shape, generator=generator, device=ids.device) < p
    chosen = chosen & ids.ne(0)
    labels = ids.masked_fill(~chosen, -100)
    u = torch.rand(ids.shape, generator=generator, device=ids.device)
    words = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator, device=ids.device)
    out = ids.clone()
    out[chosen & (u < 0.8)] = mask_id
    swap = chosen & (u >= 0.8) & (u < 0.9)
    out[swap] = words[swap]
    return out, labels
''', "mask_only_pads_excluded", why="excludes the pad id only, so [CLS] and the other specials can be selected"),
    HeldOut("mask_random_word_any_id", "mask_tokens", '''
import torch

def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    pick = (torch.rand(ids.shape, generator=generator, device=ids.device) < p) & (ids > mask_id)
    labels = ids.clone()
    labels[~pick] = -100
    r = torch.rand(ids.shape, generator=generator, device=ids.device)
    rand_tok = torch.randint(vocab_size, ids.shape, generator=generator, device=ids.device)
    corrupted = ids.clone()
    corrupted[pick & (r < 0.8)] = mask_id
    corrupted[pick & (r >= 0.8) & (r < 0.9)] = rand_tok[pick & (r >= 0.8) & (r < 0.9)]
    return corrupted, labels
''', "mask_random_includes_specials", why="random replacements drawn from 0 .. vocab_size - 1"),
    HeldOut("mask_writes_into_ids", "mask_tokens", '''
import torch

def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    sel = (ids > mask_id) & (torch.rand(ids.shape, generator=generator, device=ids.device) < p)
    labels = torch.full_like(ids, -100)
    labels[sel] = ids[sel]
    u = torch.rand(ids.shape, generator=generator, device=ids.device)
    rnd = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator, device=ids.device)
    to_rand = sel & (u >= 0.8) & (u < 0.9)
    ids[to_rand] = rnd[to_rand]
    ids[sel & (u < 0.8)] = mask_id
    return ids, labels
''', "mask_in_place", why="corrupts ids itself and returns it"),
    HeldOut("mask_random_never_the_original", "mask_tokens", '''
import torch

def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    sel = (ids > mask_id) & (torch.rand(ids.shape, generator=generator, device=ids.device) < p)
    labels = torch.where(sel, ids, torch.full_like(ids, -100))
    u = torch.rand(ids.shape, generator=generator, device=ids.device)
    n_ordinary = vocab_size - mask_id - 1
    shift = torch.randint(1, n_ordinary, ids.shape, generator=generator, device=ids.device)
    other = (ids - mask_id - 1 + shift) % n_ordinary + mask_id + 1
    out = torch.where(sel & (u < 0.8), torch.full_like(ids, mask_id), ids)
    out = torch.where(sel & (u >= 0.8) & (u < 0.9), other, out)
    return out, labels
''', None, why="a random replacement is never the original token (BERT's may be)"),
    # ------------------------------------------------------------------------------------------- mlm_loss
    HeldOut("loss_gather_clamped_labels", "mlm_loss", '''
import torch

def mlm_loss(logits, labels):
    logp = logits.log_softmax(dim=-1)
    target = labels.masked_fill(labels == -100, 0)
    return -logp.gather(-1, target.unsqueeze(-1)).mean()
''', "loss_every_position", why="the -100 labels become token 0 and every position is averaged"),
    HeldOut("loss_masked_sum_over_numel", "mlm_loss", '''
import torch.nn.functional as F

def mlm_loss(logits, labels):
    V = logits.shape[-1]
    per_position = F.cross_entropy(logits.view(-1, V), labels.view(-1), reduction="none")
    return per_position.sum() / labels.numel()
''', "loss_mean_over_all_positions", why="divides by every position"),
    HeldOut("loss_on_probabilities", "mlm_loss", '''
import torch.nn.functional as F

def mlm_loss(logits, labels):
    probs = F.softmax(logits, dim=2)
    return F.cross_entropy(probs.flatten(0, 1), labels.flatten(), ignore_index=-100)
''', "loss_softmax_first", why="softmax before F.cross_entropy"),
    # ----------------------------------------------------------------------------------------- BertEncoder
    HeldOut("bert_mask_marks_pads", "BertEncoder", _encoder(_POST_NORM, '''
    def forward(self, ids):
        B, L = ids.shape
        if L > self.max_len:
            raise ValueError(f"got {L} tokens but max_len is {self.max_len}")
        pos = torch.arange(L, device=ids.device).expand(B, L)
        h = self.dropout(self.norm(self.tok_emb(ids) + self.pos_emb(pos)))
        pad_mask = ids.eq(self.pad_id).unsqueeze(1).unsqueeze(1)
        for blk in self.blocks:
            h = blk(h, mask=pad_mask)
        return h
'''), "bert_mask_inverted", why="the key-padding mask is True at the pads"),
    HeldOut("bert_blocks_pre_norm", "BertEncoder", _encoder('''
        self.blocks = nn.ModuleList([TransformerEncoderBlock(d_model, num_heads, d_ff, dropout, norm_first=True)
                                     for _ in range(num_layers)])
''', '''
    def forward(self, ids):
        L = ids.shape[1]
        if L > self.max_len:
            raise ValueError(f"L={L} > max_len={self.max_len}")
        x = self.tok_emb(ids) + self.pos_emb.weight[:L]
        x = self.dropout(self.norm(x))
        keep = (ids != self.pad_id)[:, None, None, :]
        for blk in self.blocks:
            x = blk(x, keep)
        return x
'''), "bert_pre_norm_blocks", why="pre-norm blocks, as in the GPT"),
    HeldOut("bert_too_long_index_error", "BertEncoder", _encoder(_POST_NORM, '''
    def forward(self, ids):
        L = ids.shape[1]
        x = self.tok_emb(ids) + self.pos_emb(torch.arange(L, device=ids.device))
        x = self.dropout(self.norm(x))
        keep = (ids != self.pad_id)[:, None, None, :]
        for blk in self.blocks:
            x = blk(x, mask=keep)
        return x
'''), None, why="no length check: a sequence longer than max_len raises the embedding's IndexError"),
    # ---------------------------------------------------------------------------------- SequenceClassifier
    HeldOut("clf_detached_cls", "SequenceClassifier", _CLASSIFIER_INIT + '''
    def forward(self, ids):
        hidden = self.encoder(ids).detach()
        return self.head(hidden[:, 0, :])
''', "clf_frozen_encoder", why="detaches the encoder's output: no gradient reaches the encoder"),
    HeldOut("clf_final_token", "SequenceClassifier", _CLASSIFIER_INIT + '''
    def forward(self, ids):
        hidden = self.encoder(ids)
        return self.head(hidden[:, ids.shape[1] - 1, :])
''', "clf_last_position", why="reads the last position"),
    # ---------------------------------------------------------------------------------- load_gpt2_weights
    HeldOut("gpt2_transpose_when_mismatched", "load_gpt2_weights", '''
import torch

def load_gpt2_weights(model, state_dict):
    theirs = {k[len("transformer."):] if k.startswith("transformer.") else k: v for k, v in state_dict.items()}
    names = {"tok_emb.weight": "wte.weight", "pos_emb.weight": "wpe.weight", "ln_f.weight": "ln_f.weight",
             "ln_f.bias": "ln_f.bias"}
    for i in range(len(model.blocks)):
        for ours, hf in [("ln1", "ln_1"), ("ln2", "ln_2"), ("attn.qkv", "attn.c_attn"),
                         ("attn.proj", "attn.c_proj"), ("mlp.0", "mlp.c_fc"), ("mlp.2", "mlp.c_proj")]:
            for kind in ("weight", "bias"):
                names[f"blocks.{i}.{ours}.{kind}"] = f"h.{i}.{hf}.{kind}"
    params = dict(model.named_parameters())
    with torch.no_grad():
        for ours, hf in names.items():
            src = theirs[hf]
            if src.shape != params[ours].shape and src.t().shape == params[ours].shape:
                src = src.t()
            if src.shape != params[ours].shape:
                raise ValueError(f"{ours}: checkpoint {tuple(src.shape)} vs model {tuple(params[ours].shape)}")
            params[ours].copy_(src)
    return model
''', "gpt2_transpose_only_when_shapes_differ", why="transposes only what does not fit: the square c_proj stays"),
    HeldOut("gpt2_weights_only", "load_gpt2_weights", '''
import torch

def load_gpt2_weights(model, state_dict):
    sd = {k.replace("transformer.", "", 1): v for k, v in state_dict.items()}
    own = model.state_dict()
    if own["tok_emb.weight"].shape != sd["wte.weight"].shape:
        raise ValueError(f"tok_emb.weight {tuple(own['tok_emb.weight'].shape)} but wte.weight "
                         f"{tuple(sd['wte.weight'].shape)}")
    new = dict(own)
    new["tok_emb.weight"] = sd["wte.weight"]
    new["lm_head.weight"] = sd["wte.weight"]
    new["pos_emb.weight"] = sd["wpe.weight"]
    new["ln_f.weight"] = sd["ln_f.weight"]
    for i, _ in enumerate(model.blocks):
        new[f"blocks.{i}.ln1.weight"] = sd[f"h.{i}.ln_1.weight"]
        new[f"blocks.{i}.ln2.weight"] = sd[f"h.{i}.ln_2.weight"]
        new[f"blocks.{i}.attn.qkv.weight"] = sd[f"h.{i}.attn.c_attn.weight"].T
        new[f"blocks.{i}.attn.proj.weight"] = sd[f"h.{i}.attn.c_proj.weight"].T
        new[f"blocks.{i}.mlp.0.weight"] = sd[f"h.{i}.mlp.c_fc.weight"].T
        new[f"blocks.{i}.mlp.2.weight"] = sd[f"h.{i}.mlp.c_proj.weight"].T
    model.load_state_dict(new)
    return model
''', "gpt2_biases_not_copied", why="copies the weights, leaves every bias at its initial value"),
]
