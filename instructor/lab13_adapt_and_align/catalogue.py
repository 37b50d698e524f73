"""Lab 13 catalogue: the mistakes students make (MUTANTS) and correct alternatives (VARIANTS).

Each entry's ``source`` runs after the reference code and redefines one graded name; the rest of the reference picks
the new definition up (``apply_lora`` builds whatever ``LoRALinear`` is defined). A mutant must lose points on
``question``; a variant must keep full marks.
"""

from attnlab.grading.core.mutants import MOST, PART, SLIP, Entry

_IMPORTS = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
'''

_LORA_INIT = '''
class LoRALinear(nn.Module):
    def __init__(self, base, r=4, alpha=8.0):
        super().__init__()
        if r < 1:
            raise ValueError(f"LoRALinear needs a rank r >= 1, got r={r}")
        self.base, self.r, self.alpha, self.scale = base, r, alpha, SCALE
        for p in self.base.parameters():
            p.requires_grad_(FROZEN)
        w = base.weight
        self.A = nn.Parameter(torch.empty(r, base.in_features, dtype=w.dtype, device=w.device))
        self.B = nn.Parameter(torch.B_INIT(base.out_features, r, dtype=w.dtype, device=w.device))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
'''

_LORA_FORWARD = '''
    def forward(self, x):
        return self.base(x) + self.scale * ((x @ self.A.T) @ self.B.T)
'''

_LORA_MERGE = '''
    def merge(self):
        w = self.base.weight
        merged = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None,
                           dtype=w.dtype, device=w.device)
        with torch.no_grad():
            merged.weight.copy_(w + DELTA)
            if self.base.bias is not None:
                merged.bias.copy_(self.base.bias)
        return merged
'''


def _lora(scale="alpha / r", frozen="False", b_init="zeros", forward=_LORA_FORWARD,
          delta="self.scale * (self.B @ self.A)", merge=None) -> str:
    init = _LORA_INIT.replace("SCALE", scale).replace("FROZEN", frozen).replace("B_INIT", b_init)
    return _IMPORTS + init + forward + (merge if merge is not None else _LORA_MERGE.replace("DELTA", delta))


def _apply(body: str) -> str:
    return _IMPORTS + '''
def apply_lora(model, target_names, r=4, alpha=8.0):
''' + body


_APPLY_CHECK = '''
    missing = sorted(set(target_names) - {name for _, name, _ in found})
    if missing:
        raise ValueError(f"apply_lora: no nn.Linear named {missing}")
    for parent, name, child in found:
        parent.add_module(name, LoRALinear(child, r=r, alpha=alpha))
    return model
'''

_FOUND = '''    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if name in target_names and isinstance(child, nn.Linear)]
'''


def _sft(body: str) -> str:
    return _IMPORTS + '''
def sft_loss(logits, tokens, response_mask):
    if not bool(response_mask[:, 1:].any()):
        raise ValueError("sft_loss: response_mask marks no token after position 0")
''' + body


def _seq(body: str) -> str:
    return _IMPORTS + '''
def sequence_logprob(logits, tokens, response_mask):
''' + body


def _dpo(body: str) -> str:
    return _IMPORTS + '''
def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
''' + body


MUTANTS = [
    # ---------------------------------------------------------------------------------------------- LoRALinear
    Entry("lora_b_random", "LoRALinear", _lora(b_init="randn"), "B starts random, so the adapted model starts "
          "changed", hint="B must start at zero (torch.zeros), so that B A = 0 and the adapted layer starts equal to "
                          "its base; A is the random one", loses=(0.2, 0.3)),
    Entry("lora_scale_alpha", "LoRALinear", _lora(scale="alpha"), "scale alpha instead of alpha / r",
          hint="the correction is scaled by alpha / r, not alpha: with r = 4 and alpha = 8 the scale is 2",
          loses=MOST),
    Entry("lora_base_trains", "LoRALinear", _lora(frozen="True"), "the base layer is not frozen",
          hint="freeze the wrapped layer: requires_grad_(False) on base.weight and base.bias; only A and B train",
          loses=(0.2, 0.3)),
    Entry("lora_no_scale", "LoRALinear", _lora(forward='''
    def forward(self, x):
        return self.base(x) + (x @ self.A.T) @ self.B.T
'''), "forgets the scale alpha / r in forward", hint="multiply the low-rank term x A^T B^T by self.scale = alpha / r",
          loses=MOST),
    Entry("lora_merge_unscaled", "LoRALinear", _lora(delta="self.B @ self.A"),
          "merge() adds B A without the scale", hint="the merged weight is W + (alpha / r) B A: the same scale as "
                                                     "forward", loses=(0.2, 0.3)),
    Entry("lora_merge_in_place", "LoRALinear", _lora(merge='''
    def merge(self):
        with torch.no_grad():
            self.base.weight += self.scale * (self.B @ self.A)
        return self.base
'''), "merge() adds the correction to the base layer in place and returns it",
          hint="merge() should build a new nn.Linear: changing the base in place makes the LoRA layer count its "
               "correction twice", loses=(0.2, 0.3)),
    # ---------------------------------------------------------------------------------------------- apply_lora
    Entry("apply_no_freeze", "apply_lora", _apply(_FOUND + _APPLY_CHECK),
          "never freezes the rest of the model", hint="freeze every parameter of the model first "
                                                      "(requires_grad_(False)); only the adapters' A and B train",
          loses=PART),
    Entry("apply_substring_match", "apply_lora", _apply('''    for p in model.parameters():
        p.requires_grad_(False)
    found = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if any(t in name for t in target_names) and isinstance(child, nn.Linear)]
    for parent, name, child in found:
        parent.add_module(name, LoRALinear(child, r=r, alpha=alpha))
    return model
'''), "matches names by substring and never reports a name it did not find",
          hint="a name of target_names that matches no nn.Linear should raise ValueError naming it", loses=PART),
    Entry("apply_first_only", "apply_lora", _apply('''    for p in model.parameters():
        p.requires_grad_(False)
''' + _FOUND + '''    found = [f for i, f in enumerate(found) if f[1] not in {g[1] for g in found[:i]}]
''' + _APPLY_CHECK), "wraps only the first layer of each name (blocks.0 but not blocks.1)",
          hint="every nn.Linear with that name, in every block, should be wrapped", loses=MOST),
    Entry("apply_full_name", "apply_lora", _apply('''    for p in model.parameters():
        p.requires_grad_(False)
    found = [(parent, name, child) for pname, parent in model.named_modules() for name, child in parent.named_children()
             if f"{pname}.{name}".lstrip(".") in target_names and isinstance(child, nn.Linear)]
''' + _APPLY_CHECK), "matches the whole dotted name, so q_proj finds nothing below the top level",
          hint="match a layer by its own name, the last part of its dotted name (q_proj in blocks.0.attn.q_proj)",
          loses=MOST),
    # ------------------------------------------------------------------------------------------------ sft_loss
    Entry("sft_no_shift", "sft_loss", _sft('''
    per = F.cross_entropy(logits.flatten(0, 1), tokens.flatten(), reduction="none")
    m = response_mask.flatten().to(per.dtype)
    return (per * m).sum() / m.sum()
'''), "compares logits[t] with tokens[t] (no shift)",
          hint="the logits at position t - 1 predict the token at t: each prediction is scored against the next token, "
               "not the one it was computed from", loses=MOST),
    Entry("sft_prompt_counted", "sft_loss", _sft('''
    per = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    m = (tokens[:, 1:] != 0).flatten().to(per.dtype)
    return (per * m).sum() / m.sum()
'''), "masks only the padding: the prompt is counted too",
          hint="count only the response tokens (response_mask): the prompt's tokens are not the model's to learn",
          loses=MOST),
    Entry("sft_mean_of_sequences", "sft_loss", _sft('''
    per = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    m = response_mask[:, 1:].to(per.dtype)
    per = per.view_as(m)
    rows = m.sum(dim=1) > 0
    return ((per * m).sum(dim=1)[rows] / m.sum(dim=1)[rows]).mean()
'''), "the mean of each sequence's mean (a short response weighs as much as a long one)",
          hint="average over all the response tokens of the batch at once: sum of the losses / number of tokens",
          loses=MOST),
    Entry("sft_mask_unshifted", "sft_loss", _sft('''
    per = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    m = response_mask[:, :-1].flatten().to(per.dtype)
    return (per * m).sum() / m.sum()
'''), "shifts the tokens but not the mask", hint="the prediction of token t counts when the mask at t (the "
                                                  "token predicted) is True: shift the mask with the tokens", loses=MOST),
    # ---------------------------------------------------------------------------------------- sequence_logprob
    Entry("seq_mean", "sequence_logprob", _seq('''
    logp = logits[:, :-1].log_softmax(dim=-1).gather(-1, tokens[:, 1:, None]).squeeze(-1)
    m = response_mask[:, 1:].to(logp.dtype)
    return (logp * m).sum(dim=-1) / m.sum(dim=-1).clamp(min=1)
'''), "the mean over the response tokens, not the sum",
          hint="the log-probability of a sequence is the sum of its tokens' log-probabilities, not their mean",
          loses=MOST),
    Entry("seq_no_shift", "sequence_logprob", _seq('''
    logp = logits.log_softmax(dim=-1).gather(-1, tokens[..., None]).squeeze(-1)
    return (logp * response_mask.to(logp.dtype)).sum(dim=-1)
'''), "no shift", hint="the logits at position t - 1 predict the token at t: score each response token by the "
               "prediction made one position before it", loses=MOST),
    Entry("seq_raw_logits", "sequence_logprob", _seq('''
    picked = logits[:, :-1].gather(-1, tokens[:, 1:, None]).squeeze(-1)
    return (picked * response_mask[:, 1:].to(picked.dtype)).sum(dim=-1)
'''), "sums the logits, not the log-probabilities", hint="take log_softmax over the vocabulary before picking",
          loses=MOST),
    # ------------------------------------------------------------------------------------------------ dpo_loss
    Entry("dpo_swapped", "dpo_loss", _dpo('''
    c, r = policy_chosen - ref_chosen, policy_rejected - ref_rejected
    return -F.logsigmoid(beta * (r - c)).mean(), (beta * c).detach(), (beta * r).detach()
'''), "prefers the rejected response", hint="the margin is the chosen log-ratio minus the rejected one",
          loses=MOST),
    Entry("dpo_no_reference", "dpo_loss", _dpo('''
    loss = -F.logsigmoid(beta * (policy_chosen - policy_rejected)).mean()
    return loss, (beta * (policy_chosen - ref_chosen)).detach(), (beta * (policy_rejected - ref_rejected)).detach()
'''), "drops the reference model from the margin",
          hint="the margin uses log-ratios against the reference: (pi_c - ref_c) - (pi_r - ref_r)", loses=MOST),
    Entry("dpo_beta_outside", "dpo_loss", _dpo('''
    c, r = policy_chosen - ref_chosen, policy_rejected - ref_rejected
    return -beta * F.logsigmoid(c - r).mean(), (beta * c).detach(), (beta * r).detach()
'''), "beta multiplies the loss instead of the margin", hint="beta goes inside the sigmoid: -log sigmoid(beta * "
                                                             "margin)", loses=MOST),
    Entry("dpo_log_sigmoid", "dpo_loss", _dpo('''
    c, r = policy_chosen - ref_chosen, policy_rejected - ref_rejected
    return -torch.log(torch.sigmoid(beta * (c - r))).mean(), (beta * c).detach(), (beta * r).detach()
'''), "log(sigmoid(z)): -inf for a large negative margin in float32",
          hint="use F.logsigmoid(z): log(sigmoid(z)) underflows to -inf when z is large and negative", loses=SLIP),
    Entry("dpo_rewards_attached", "dpo_loss", _dpo('''
    c, r = policy_chosen - ref_chosen, policy_rejected - ref_rejected
    return -F.logsigmoid(beta * (c - r)).mean(), beta * c, beta * r
'''), "returns the rewards attached to the graph",
          hint="detach the rewards (.detach()): they are for watching the training, and gradients must come from the "
               "loss only", loses=(0.2, 0.5)),
    Entry("dpo_rewards_unscaled", "dpo_loss", _dpo('''
    c, r = policy_chosen - ref_chosen, policy_rejected - ref_rejected
    return -F.logsigmoid(beta * (c - r)).mean(), c.detach(), r.detach()
'''), "the rewards without beta", hint="the implied reward is beta * (log pi - log pi_ref)", loses=MOST),
]

VARIANTS = [
    Entry("lora_merged_weight_forward", "LoRALinear", _lora(forward='''
    def forward(self, x):
        return F.linear(x, self.base.weight + self.scale * self.B @ self.A, self.base.bias)
'''), "forward through the merged weight (F.linear)"),
    Entry("apply_recursive", "apply_lora", _IMPORTS + '''
def _wrap(module, target_names, r, alpha, found):
    for name, child in list(module.named_children()):
        if name in target_names and isinstance(child, nn.Linear):
            module.add_module(name, LoRALinear(child, r=r, alpha=alpha))
            found.add(name)
        else:
            _wrap(child, target_names, r, alpha, found)


def apply_lora(model, target_names, r=4, alpha=8.0):
    model.requires_grad_(False)
    found = set()
    _wrap(model, target_names, r, alpha, found)
    if set(target_names) - found:
        raise ValueError(f"apply_lora: nothing named {sorted(set(target_names) - found)}")
    return model
''', "a recursive walk over named_children, model.requires_grad_(False)"),
    Entry("sft_ignore_index", "sft_loss", _sft('''
    labels = tokens[:, 1:].masked_fill(~response_mask[:, 1:], -100)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), labels, ignore_index=-100)
'''), "labels with ignore_index=-100 (Hugging Face's convention)"),
    Entry("seq_cross_entropy", "sequence_logprob", _seq('''
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none")
    return -(nll * response_mask[:, 1:]).sum(dim=1)
'''), "minus the cross-entropy per token"),
    Entry("dpo_softplus", "dpo_loss", _dpo('''
    logits = (policy_chosen - policy_rejected) - (ref_chosen - ref_rejected)
    loss = F.softplus(-beta * logits).mean()
    with torch.no_grad():
        return loss, beta * (policy_chosen - ref_chosen), beta * (policy_rejected - ref_rejected)
'''), "softplus(-z) = -log sigmoid(z), the margin grouped as TRL does, rewards under no_grad"),
]
