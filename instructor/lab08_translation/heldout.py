"""Lab 08 held-out mistakes: written apart from catalogue.py (other names, other correct code around the bug), each
labelled with the catalogue mutant the grader should name, or None for a mistake the catalogue lacks (no name).
Never used by the matching: ``benchmarks/diagnosis_coverage.py`` measures the diagnosis with them."""

from attnlab.grading.core.mutants import HeldOut

HELDOUT = [
    HeldOut("io_same_columns", "decoder_io", '''
def decoder_io(tgt):
    return tgt[:, :-1].clone(), tgt[:, :-1].clone()
''', "io_labels_not_shifted", why="labels not shifted"),
    HeldOut("io_reversed", "decoder_io", '''
def decoder_io(tgt):
    n = tgt.shape[1]
    return tgt.narrow(1, 1, n - 1), tgt.narrow(1, 0, n - 1)
''', "io_swapped", why="input and labels swapped"),
    HeldOut("loss_pads_counted", "sequence_loss", '''
import torch.nn.functional as F

def sequence_loss(logits, labels, label_smoothing=0.0, pad_id=0):
    return F.cross_entropy(logits.flatten(0, 1), labels.flatten(), label_smoothing=label_smoothing)
''', "loss_averaged_over_pads", why="pads not ignored"),
    HeldOut("loss_no_smoothing", "sequence_loss", '''
import torch.nn.functional as F

def sequence_loss(logits, labels, label_smoothing=0.0, pad_id=0):
    V = logits.size(-1)
    return F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=pad_id)
''', "loss_smoothing_ignored", why="label_smoothing ignored"),
    HeldOut("loss_pad_zero", "sequence_loss", '''
import torch.nn.functional as F

def sequence_loss(logits, labels, label_smoothing=0.0, pad_id=0):
    flat = logits.reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat, labels.reshape(-1), ignore_index=0, label_smoothing=label_smoothing)
''', "loss_pad_id_hardcoded", why="pad id 0 hard-coded"),
    HeldOut("loss_summed_tokens", "sequence_loss", '''
import torch.nn.functional as F

def sequence_loss(logits, labels, label_smoothing=0.0, pad_id=0):
    flat = logits.reshape(-1, logits.shape[-1])
    return F.cross_entropy(flat, labels.reshape(-1), ignore_index=pad_id, label_smoothing=label_smoothing,
                           reduction="sum") / labels.shape[0]
''', None, why="summed, divided by the batch size"),
]
