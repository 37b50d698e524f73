"""Lab 10 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` runs after the reference code and redefines one graded name; the rest of the reference
picks the new definition up. A mutant must lose points on ``question``; a variant must keep full marks on every
question.
"""

from attnlab.grading.core.mutants import MOST, PART, SLIP, Entry

_IMPORTS = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
'''


# ----------------------------------------------------------------------------------------- source pieces
def _mask(body: str) -> str:
    return _IMPORTS + '''
def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
''' + body


_MASK_SELECT = '''
    draws = torch.rand(ids.shape, generator=generator, device=ids.device)
    selected = (ids > mask_id) & (draws < p)
'''
_MASK_REST = '''
    kind = torch.rand(ids.shape, generator=generator, device=ids.device)
    random_ids = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator, device=ids.device)
    inputs = torch.where(selected & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    return inputs, labels
'''
_LABELS = '''
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
'''


def _loss(body: str) -> str:
    return _IMPORTS + '''
def mlm_loss(logits, labels):
''' + body


_BERT_INIT = '''
class BertEncoder(nn.Module):
    def __init__(self, vocab_size, max_len, d_model, num_heads, num_layers, d_ff, dropout=0.0):
        super().__init__()
        self.pad_id = 0
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(TransformerEncoderBlock(d_model, num_heads, d_ff, dropout{norm_first})
                                    for _ in range(num_layers))

    def forward(self, ids):
        B, L = ids.shape
        if L > self.max_len:
            raise ValueError(f"L={{L}} is longer than max_len={{self.max_len}}")
'''


def _bert(forward_tail: str, norm_first: str = "") -> str:
    return _IMPORTS + _BERT_INIT.format(norm_first=norm_first) + forward_tail


_EMBED = '''
        x = self.drop(self.norm(self.tok_emb(ids) + self.pos_emb(torch.arange(L, device=ids.device))))
'''
_BLOCKS = '''
        for block in self.blocks:
            x = block(x, mask=mask)
        return x
'''


def _clf(init: str, forward: str) -> str:
    return _IMPORTS + '''
class SequenceClassifier(nn.Module):
    def __init__(self, encoder, num_classes):
        super().__init__()
''' + init + '''
    def forward(self, ids):
''' + forward


_CLF_INIT = '''
        self.encoder = encoder
        self.head = nn.Linear(encoder.tok_emb.embedding_dim, num_classes)
'''


def _gpt(body: str) -> str:
    return _IMPORTS + '''
def load_gpt2_weights(model, state_dict):
    sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
    new = {"tok_emb.weight": sd["wte.weight"], "pos_emb.weight": sd["wpe.weight"],
           "ln_f.weight": sd["ln_f.weight"], "ln_f.bias": sd["ln_f.bias"]}
''' + body + '''
    new["lm_head.weight"] = new["tok_emb.weight"]
    own = model.state_dict()
    for name, tensor in new.items():
        if own[name].shape != tensor.shape:
            raise ValueError(f"{name}: checkpoint {tuple(tensor.shape)}, model {tuple(own[name].shape)}")
    model.load_state_dict(new)
    return model
'''


def _gpt_pairs(pairs: str, weight: str = "w.t() if conv1d else w") -> str:
    return f'''
    for i in range(len(model.blocks)):
        for theirs, ours, conv1d in {pairs}:
            w = sd[f"h.{{i}}.{{theirs}}.weight"]
            new[f"blocks.{{i}}.{{ours}}.weight"] = {weight}
            new[f"blocks.{{i}}.{{ours}}.bias"] = sd[f"h.{{i}}.{{theirs}}.bias"]
'''


_PAIRS = ('[("ln_1", "ln1", False), ("ln_2", "ln2", False), ("attn.c_attn", "attn.qkv", True), '
          '("attn.c_proj", "attn.proj", True), ("mlp.c_fc", "mlp.0", True), ("mlp.c_proj", "mlp.2", True)]')

# ------------------------------------------------------------------------------------------------ mutants
MUTANTS = [
    # ---------------------------------------------------------------------------------------- mask_tokens
    Entry("mask_selects_specials", "mask_tokens", _mask('''
    draws = torch.rand(ids.shape, generator=generator, device=ids.device)
    selected = draws < p
''' + _LABELS + _MASK_REST), "selects every position, pads and [CLS] included",
          hint="your mask_tokens selects special ids (pads, [CLS], ...): only ids above mask_id may be selected",
          loses=MOST),
    Entry("mask_only_pads_excluded", "mask_tokens", _mask('''
    draws = torch.rand(ids.shape, generator=generator, device=ids.device)
    selected = (ids != 0) & (draws < p)
''' + _LABELS + _MASK_REST), "excludes the pads only, so [CLS], [SEP], <unk> and [MASK] can be selected",
          hint="your mask_tokens skips the pads but selects the other special ids ([CLS], ...): every id <= "
               "mask_id is special", loses=MOST),
    Entry("mask_always_mask", "mask_tokens", _mask(_MASK_SELECT + _LABELS + '''
    inputs = torch.where(selected, torch.full_like(ids, mask_id), ids)
    return inputs, labels
'''), "every selected position becomes [MASK] (no 10% random, no 10% kept)",
          hint="every selected position of yours becomes [MASK]; BERT's rule turns 80% into [MASK], 10% into a "
               "random ordinary token and keeps 10%", loses=PART),
    Entry("mask_random_share_of_the_rest", "mask_tokens", _mask(_MASK_SELECT + _LABELS + '''
    masked = selected & (torch.rand(ids.shape, generator=generator) < 0.8)
    randomised = selected & ~masked & (torch.rand(ids.shape, generator=generator) < 0.1)
    random_ids = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator)
    inputs = torch.where(masked, torch.full_like(ids, mask_id), ids)
    inputs = torch.where(randomised, random_ids, inputs)
    return inputs, labels
'''), "the 10% random drawn as 0.1 of the remaining 20% (2% of the selected)",
          hint="too few of your selected positions get a random token: after the 80% [MASK], half of the "
               "remaining 20% (not 10% of them) become random", loses=PART),
    Entry("mask_random_includes_specials", "mask_tokens", _mask(_MASK_SELECT + _LABELS + '''
    kind = torch.rand(ids.shape, generator=generator, device=ids.device)
    random_ids = torch.randint(0, vocab_size, ids.shape, generator=generator, device=ids.device)
    inputs = torch.where(selected & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    return inputs, labels
'''), "random replacements drawn from the whole vocabulary, special ids included",
          hint="your random replacements can be special ids (pad, [MASK], ...): draw them from mask_id + 1 .. "
               "vocab_size - 1", loses=PART),
    Entry("mask_labels_everywhere", "mask_tokens", _mask(_MASK_SELECT + '''
    labels = ids.clone()
''' + _MASK_REST), "labels hold the original id at every position, not -100 where nothing was selected",
          hint="your labels keep the id at every position; they should be -100 wherever the position was not "
               "selected", loses=MOST),
    Entry("mask_labels_zero_elsewhere", "mask_tokens", _mask(_MASK_SELECT + '''
    labels = torch.where(selected, ids, torch.zeros_like(ids))
''' + _MASK_REST), "0 instead of -100 at the positions that are not selected",
          hint="your labels are 0 at the positions that are not selected; use -100 (the index F.cross_entropy "
               "ignores), since 0 is a token id", loses=MOST),
    Entry("mask_labels_of_corrupted_inputs", "mask_tokens", _mask(_MASK_SELECT + '''
    kind = torch.rand(ids.shape, generator=generator, device=ids.device)
    random_ids = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator, device=ids.device)
    inputs = torch.where(selected & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    labels = torch.where(selected, inputs, torch.full_like(ids, -100))
    return inputs, labels
'''), "labels taken from the corrupted inputs ([MASK] as the label)",
          hint="your labels hold the corrupted token ([MASK] or the random one); they should hold the original id",
          loses=MOST),
    Entry("mask_ignores_generator", "mask_tokens", _mask('''
    draws = torch.rand(ids.shape, device=ids.device)
    selected = (ids > mask_id) & (draws < p)
''' + _LABELS + '''
    kind = torch.rand(ids.shape, device=ids.device)
    random_ids = torch.randint(mask_id + 1, vocab_size, ids.shape, device=ids.device)
    inputs = torch.where(selected & (kind < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(selected & (kind >= 0.8) & (kind < 0.9), random_ids, inputs)
    return inputs, labels
'''), "the generator is not passed to the random draws",
          hint="the same generator seed gave different corruptions: pass generator=generator to torch.rand and "
               "torch.randint", loses=PART),
    Entry("mask_in_place", "mask_tokens", _mask(_MASK_SELECT + _LABELS + '''
    kind = torch.rand(ids.shape, generator=generator, device=ids.device)
    random_ids = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator, device=ids.device)
    inputs = ids
    inputs[selected & (kind >= 0.8) & (kind < 0.9)] = random_ids[selected & (kind >= 0.8) & (kind < 0.9)]
    inputs[selected & (kind < 0.8)] = mask_id
    return inputs, labels
'''), "writes the corruption into ids itself", hint="your mask_tokens changed ids in place: start from ids.clone()",
          loses=MOST),
    # ------------------------------------------------------------------------------------------- mlm_loss
    Entry("loss_every_position", "mlm_loss", _loss('''
    B, L, V = logits.shape
    return F.cross_entropy(logits.reshape(B * L, V), labels.clamp(min=0).reshape(B * L))
'''), "the -100 labels clamped to 0, so every position counts",
          hint="your loss counts the positions labelled -100 (as token 0); only the selected positions count", loses=MOST),
    Entry("loss_sum", "mlm_loss", _loss('''
    B, L, V = logits.shape
    return F.cross_entropy(logits.reshape(B * L, V), labels.reshape(B * L), reduction="sum")
'''), "summed over the selected positions instead of averaged",
          hint="your loss is the sum over the selected positions; it should be their mean", loses=(0.15, 0.85)),
    Entry("loss_mean_over_all_positions", "mlm_loss", _loss('''
    B, L, V = logits.shape
    total = F.cross_entropy(logits.reshape(B * L, V), labels.reshape(B * L), reduction="sum")
    return total / (B * L)
'''), "the sum over the selected positions divided by all B * L positions",
          hint="your loss divides by every position (B * L); divide by the number of selected positions", loses=MOST),
    Entry("loss_softmax_first", "mlm_loss", _loss('''
    B, L, V = logits.shape
    return F.cross_entropy(logits.softmax(-1).reshape(B * L, V), labels.reshape(B * L))
'''), "softmax before F.cross_entropy (which applies log_softmax itself)",
          hint="your loss applies a softmax before F.cross_entropy, which expects raw logits", loses=MOST),
    # ----------------------------------------------------------------------------------------- BertEncoder
    Entry("bert_no_pad_mask", "BertEncoder", _bert(_EMBED + '''
        mask = None
''' + _BLOCKS), "pads are not masked: real tokens attend to them",
          hint="your encoder lets real tokens attend to the pads: pass a (B, 1, 1, L) mask, True at real "
               "tokens, to every block", loses=(0.35, 1)),
    Entry("bert_mask_inverted", "BertEncoder", _bert(_EMBED + '''
        mask = (ids == self.pad_id)[:, None, None, :]
''' + _BLOCKS), "the mask is True at the pads (PyTorch's convention) instead of at real tokens",
          hint="your mask is True at the pads; the given blocks take True where attention is allowed (real tokens)",
          loses=MOST),
    Entry("bert_mask_queries", "BertEncoder", _bert(_EMBED + '''
        mask = (ids != self.pad_id)[:, None, :, None]
''' + _BLOCKS), "the mask is laid out (B, 1, L, 1): it masks queries, not keys",
          hint="your mask masks the pads as queries (B, 1, L, 1); it should mask them as keys: (B, 1, 1, L)",
          loses=(0.45, 1)),
    Entry("bert_no_embedding_norm", "BertEncoder", _bert('''
        x = self.drop(self.tok_emb(ids) + self.pos_emb(torch.arange(L, device=ids.device)))
        mask = (ids != self.pad_id)[:, None, None, :]
''' + _BLOCKS), "the LayerNorm on the embeddings is left out",
          hint="your encoder does not normalise the embeddings: x = norm(tok_emb(ids) + pos_emb(positions))",
          loses=MOST),
    Entry("bert_norm_at_the_end", "BertEncoder", _bert('''
        x = self.drop(self.tok_emb(ids) + self.pos_emb(torch.arange(L, device=ids.device)))
        mask = (ids != self.pad_id)[:, None, None, :]
        for block in self.blocks:
            x = block(x, mask=mask)
        return self.norm(x)
'''), "norm applied after the blocks (a pre-norm model's final norm) instead of on the embeddings",
          hint="your norm comes after the blocks; in BERT's layout it normalises the embeddings, before the blocks",
          loses=MOST),
    Entry("bert_no_positions", "BertEncoder", _bert('''
        x = self.drop(self.norm(self.tok_emb(ids)))
        mask = (ids != self.pad_id)[:, None, None, :]
''' + _BLOCKS), "pos_emb never added", hint="your encoder does not add pos_emb(positions) to the token embeddings",
          loses=MOST),
    Entry("bert_pre_norm_blocks", "BertEncoder", _bert(_EMBED + '''
        mask = (ids != self.pad_id)[:, None, None, :]
''' + _BLOCKS, norm_first=", norm_first=True"), "pre-norm blocks (norm_first=True) instead of BERT's post-norm",
          hint="your blocks are pre-norm (norm_first=True); BERT's are post-norm, the given block's default", loses=MOST),
    # ---------------------------------------------------------------------------------- SequenceClassifier
    Entry("clf_mean_pool", "SequenceClassifier", _clf(_CLF_INIT, '''
        return self.head(self.encoder(ids).mean(dim=1))
'''), "the mean over positions instead of the [CLS] position",
          hint="your classifier averages the positions; it should read position 0 ([CLS]): encoder(ids)[:, 0]",
          loses=MOST),
    Entry("clf_last_position", "SequenceClassifier", _clf(_CLF_INIT, '''
        return self.head(self.encoder(ids)[:, -1])
'''), "the last position (a pad in a padded batch)",
          hint="your classifier reads the last position (often a pad); [CLS] is position 0", loses=MOST),
    Entry("clf_copies_the_encoder", "SequenceClassifier", _IMPORTS + '''
import copy


class SequenceClassifier(nn.Module):
    def __init__(self, encoder, num_classes):
        super().__init__()
        self.encoder = copy.deepcopy(encoder)
        self.head = nn.Linear(encoder.tok_emb.embedding_dim, num_classes)

    def forward(self, ids):
        return self.head(self.encoder(ids)[:, 0])
''', "keeps a copy of the encoder, so the pretrained object passed in is not the one fine-tuned",
          hint="your classifier keeps a copy of the encoder; keep the encoder it was given (self.encoder = encoder)",
          loses=PART),
    Entry("clf_frozen_encoder", "SequenceClassifier", _clf(_CLF_INIT, '''
        with torch.no_grad():
            features = self.encoder(ids)[:, 0]
        return self.head(features)
'''), "the encoder run under no_grad: only the head is fine-tuned",
          hint="no gradient reaches your encoder (no_grad or detach): fine-tuning trains the encoder too", loses=PART),
    # ---------------------------------------------------------------------------------- load_gpt2_weights
    Entry("gpt2_transpose_only_when_shapes_differ", "load_gpt2_weights",
          _gpt(_gpt_pairs(_PAIRS, "w.t() if conv1d and w.shape[0] != w.shape[1] else w")),
          "transposes a Conv1D weight only when its shape does not fit: the square attention c_proj stays as is",
          hint="your attn.proj weight is not transposed (it is square, so it fits either way): every Conv1D "
               "weight is (in, out), transpose them all", loses=MOST),
    Entry("gpt2_reshape_instead_of_transpose", "load_gpt2_weights",
          _gpt(_gpt_pairs(_PAIRS, "w.reshape(w.shape[1], w.shape[0]) if conv1d else w")),
          "reshape(out, in) instead of a transpose: the right shape, the numbers scrambled",
          hint="your Conv1D weights are reshaped to (out, in), which scrambles them; transpose them (w.t())", loses=MOST),
    Entry("gpt2_layer_norms_swapped", "load_gpt2_weights",
          _gpt(_gpt_pairs(_PAIRS.replace('("ln_1", "ln1"', '("ln_1", "LN2"').replace('("ln_2", "ln2"', '("ln_2", "ln1"')
                          .replace('"LN2"', '"ln2"'))),
          "ln_1 loaded into ln2 and ln_2 into ln1",
          hint="your ln1 and ln2 are swapped: ln_1 (before attention) is ln1, ln_2 (before the MLP) is ln2", loses=MOST),
    Entry("gpt2_biases_not_copied", "load_gpt2_weights", _IMPORTS + '''
def load_gpt2_weights(model, state_dict):
    sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
    pairs = [("ln_1", "ln1", False), ("ln_2", "ln2", False), ("attn.c_attn", "attn.qkv", True),
             ("attn.c_proj", "attn.proj", True), ("mlp.c_fc", "mlp.0", True), ("mlp.c_proj", "mlp.2", True)]
    params = dict(model.named_parameters())
    if params["tok_emb.weight"].shape != sd["wte.weight"].shape:
        raise ValueError(f"tok_emb.weight: {tuple(params['tok_emb.weight'].shape)} != {tuple(sd['wte.weight'].shape)}")
    with torch.no_grad():
        params["tok_emb.weight"].copy_(sd["wte.weight"])
        params["pos_emb.weight"].copy_(sd["wpe.weight"])
        params["ln_f.weight"].copy_(sd["ln_f.weight"])
        for i in range(len(model.blocks)):
            for theirs, ours, conv1d in pairs:
                w = sd[f"h.{i}.{theirs}.weight"]
                params[f"blocks.{i}.{ours}.weight"].copy_(w.t() if conv1d else w)
    return model
''', "the biases (and ln_f.bias) left at their initial values",
          hint="your loader copies the weights but not the biases (.bias of every layer and of ln_f)", loses=MOST),
    Entry("gpt2_prefix_not_handled", "load_gpt2_weights", _gpt(_gpt_pairs(_PAIRS)).replace(
        'sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}', "sd = dict(state_dict)"),
          "assumes names without the 'transformer.' prefix",
          hint="your loader fails on names that start with 'transformer.' (the library's own state_dict): strip "
               "the prefix", loses=SLIP),
    Entry("gpt2_no_shape_check", "load_gpt2_weights", _IMPORTS + '''
def load_gpt2_weights(model, state_dict):
    sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
    new = {"tok_emb.weight": sd["wte.weight"], "pos_emb.weight": sd["wpe.weight"],
           "ln_f.weight": sd["ln_f.weight"], "ln_f.bias": sd["ln_f.bias"], "lm_head.weight": sd["wte.weight"]}
    pairs = [("ln_1", "ln1", False), ("ln_2", "ln2", False), ("attn.c_attn", "attn.qkv", True),
             ("attn.c_proj", "attn.proj", True), ("mlp.c_fc", "mlp.0", True), ("mlp.c_proj", "mlp.2", True)]
    for i in range(len(model.blocks)):
        for theirs, ours, conv1d in pairs:
            w = sd[f"h.{i}.{theirs}.weight"]
            new[f"blocks.{i}.{ours}.weight"] = w.t() if conv1d else w
            new[f"blocks.{i}.{ours}.bias"] = sd[f"h.{i}.{theirs}.bias"]
    model.load_state_dict(new)
    return model
''', "no shape check: load_state_dict's RuntimeError instead of a ValueError naming the parameter",
          hint="a checkpoint of the wrong size should raise a ValueError naming the parameter (tok_emb.weight) "
               "and both shapes; check the shapes before load_state_dict", loses=SLIP),
]

# ----------------------------------------------------------------------------------------------- variants
VARIANTS = [
    Entry("mask_hf_collator", "mask_tokens", _IMPORTS + '''
def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    labels = ids.clone()
    probability = torch.full(ids.shape, p, dtype=torch.float, device=ids.device)
    probability.masked_fill_(ids <= mask_id, 0.0)
    selected = torch.bernoulli(probability, generator=generator).bool()
    labels[~selected] = -100
    inputs = ids.clone()
    replaced = torch.bernoulli(torch.full(ids.shape, 0.8, device=ids.device), generator=generator).bool() & selected
    inputs[replaced] = mask_id
    randomised = torch.bernoulli(torch.full(ids.shape, 0.5, device=ids.device), generator=generator).bool()
    randomised &= selected & ~replaced
    words = torch.randint(mask_id + 1, vocab_size, ids.shape, dtype=torch.long, generator=generator, device=ids.device)
    inputs[randomised] = words[randomised]
    return inputs, labels
''', "Hugging Face's DataCollatorForLanguageModeling: bernoulli draws, 0.8 then 0.5 of the rest"),
    Entry("mask_one_uniform_draw", "mask_tokens", _IMPORTS + '''
def mask_tokens(ids, mask_id, vocab_size, p=0.15, generator=None):
    u = torch.rand(ids.shape, generator=generator).to(ids.device)
    selected = (u < p) & (ids > mask_id)
    fresh = torch.randint(mask_id + 1, vocab_size, ids.shape, generator=generator).to(ids.device)
    inputs = ids.clone()
    inputs[selected & (u < 0.8 * p)] = mask_id
    swap = selected & (u >= 0.8 * p) & (u < 0.9 * p)
    inputs[swap] = fresh[swap]
    return inputs, ids.masked_fill(~selected, -100)
''', "one uniform draw per position: u < 0.8p [MASK], 0.8p <= u < 0.9p random, 0.9p <= u < p kept"),
    Entry("loss_by_hand", "mlm_loss", _loss('''
    selected = labels != -100
    logp = torch.log_softmax(logits, dim=-1)[selected]
    return -logp.gather(1, labels[selected].unsqueeze(1)).mean()
'''), "log_softmax, gather at the selected positions, mean"),
    Entry("loss_transposed", "mlm_loss", _loss('''
    return F.cross_entropy(logits.transpose(1, 2), labels)
'''), "F.cross_entropy on (B, V, L) logits, ignore_index left at its default -100"),
    Entry("bert_expanded_positions", "BertEncoder", _bert('''
        positions = torch.arange(L, device=ids.device).unsqueeze(0).expand(B, L)
        x = self.norm(self.tok_emb(ids) + self.pos_emb(positions))
        x = self.drop(x)
        mask = ids.ne(self.pad_id).unsqueeze(1).unsqueeze(2)
        for layer in self.blocks:
            x = layer(x, mask)
        return x
'''), "positions expanded to (B, L), the mask built with ne/unsqueeze"),
    Entry("clf_width_from_norm", "SequenceClassifier", _clf('''
        self.encoder = encoder
        self.head = nn.Linear(encoder.norm.normalized_shape[0], num_classes)
''', '''
        hidden = self.encoder(ids)
        return self.head(hidden[:, 0, :])
'''), "d read from the encoder's LayerNorm; hidden[:, 0, :]"),
    Entry("gpt2_nanogpt_style", "load_gpt2_weights", _IMPORTS + '''
def load_gpt2_weights(model, state_dict):
    rename = {"wte": "tok_emb", "wpe": "pos_emb", "ln_1": "ln1", "ln_2": "ln2", "c_attn": "qkv", "c_fc": "0",
              "attn.c_proj": "attn.proj", "mlp.c_proj": "mlp.2", "h": "blocks"}
    transposed = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
    sd = model.state_dict()
    for key, value in state_dict.items():
        if key.endswith((".attn.bias", ".attn.masked_bias")) or key.endswith("lm_head.weight"):
            continue
        name = key[len("transformer."):] if key.startswith("transformer.") else key
        ours = name
        for old in ("attn.c_proj", "mlp.c_proj"):
            ours = ours.replace(old, rename[old])
        ours = ".".join(rename.get(part, part) for part in ours.split("."))
        if name.endswith(transposed):
            value = value.t()
        if ours not in sd or sd[ours].shape != value.shape:
            raise ValueError(f"{ours} (from {key}): shape {tuple(value.shape)} does not fit "
                             f"{tuple(sd[ours].shape) if ours in sd else 'no such parameter'}")
        with torch.no_grad():
            sd[ours].copy_(value)
    return model
''', "nanoGPT's from_pretrained: rename, transpose the four Conv1D weights, copy_ into the state dict's tensors"),
]
