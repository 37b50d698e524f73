"""Lab 13 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("sft_every_token", "sft_loss", '''
import torch.nn.functional as F

def sft_loss(logits, tokens, response_mask):
    if not bool(response_mask[:, 1:].any()):
        raise ValueError("no response")
    keep = tokens[:, 1:] > 0
    return F.cross_entropy(logits[:, :-1][keep], tokens[:, 1:][keep])
''', "sft_prompt_counted", why="masks the padding by token id, not the prompt"),
    HeldOut("dpo_reversed_margin", "dpo_loss", '''
import torch.nn.functional as F

def dpo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):
    win = beta * (policy_chosen - ref_chosen)
    lose = beta * (policy_rejected - ref_rejected)
    return F.softplus(win - lose).mean(), win.detach(), lose.detach()
''', "dpo_swapped", why="softplus(z) instead of softplus(-z)"),
    HeldOut("seq_average", "sequence_logprob", '''
def sequence_logprob(logits, tokens, response_mask):
    lp = logits.log_softmax(-1)[:, :-1].gather(2, tokens[:, 1:].unsqueeze(2))[..., 0]
    m = response_mask[:, 1:].float().to(lp.dtype)
    return (lp * m).sum(1) / m.sum(1).clamp_min(1.0)
''', "seq_mean", why="averages over the response"),
]
