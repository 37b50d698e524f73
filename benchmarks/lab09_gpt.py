"""Lab 09's mini-GPT trained with the kit's loop at nanoGPT's settings; prints one JSON line.

    python benchmarks/lab09_gpt.py                       # nanoGPT's CPU recipe (the defaults below)
    python benchmarks/lab09_gpt.py --device cuda --layers 6 --heads 6 --d-model 384 --block-size 256 \\
        --batch-size 64 --iters 5000 --dropout 0.2       # nanoGPT's GPU config (train_shakespeare_char.py)

The model, the tokenizer and ``get_batch`` are the lab's reference (``autograder/lab09_mini_gpt/reference.py``,
written by ``attnlab build lab09``); the loop is ``attnlab.kit.training.fit`` over a loader of ``--iters`` random
batches. The optimisation is nanoGPT's ``train.py``: AdamW (betas 0.9, 0.99; weight decay 0.1 on the matrices
and embeddings only), linear warm-up for 100 steps then a cosine from ``--lr`` to ``--min-lr`` over the run,
gradients clipped to norm 1. Data: tiny Shakespeare, one id per character, the first 90% to train and the last
10% to validate, as nanoGPT's ``prepare.py``. ``val_loss`` is the mean loss over ``--eval-batches`` random
validation batches of ``--batch-size`` windows: 200 by default, nanoGPT's ``eval_iters`` default (its CPU recipe
takes 20, a noisier mean).

nanoGPT's figures to compare with: CPU recipe, val loss 1.88 after 2,000 steps (measured on the machine this
kit is developed on: 1.8857 in 90 s, about 38 ms per step, torch's default number of threads); GPU config,
1.4697. Threads: torch's default unless ``--threads`` is given, as nanoGPT (which never sets it).

Output (one line): {"val_loss", "train_loss", "ms_per_iter", "params", "seconds", "device", "threads", "config"}.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "autograder" / "lab09_mini_gpt" / "reference.py"
SHARED_DATA = ROOT.parent / "shared" / "data"


def load_reference():
    """The lab's reference code as a module (MiniGPT, CharTokenizer, get_batch)."""
    if not REFERENCE.exists():
        raise SystemExit(f"{REFERENCE} is missing: run `attnlab build lab09` first")
    spec = importlib.util.spec_from_file_location("lab09_reference", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Batches:
    """``steps`` random batches ``(x, y, y)`` of the lab's get_batch, on ``device`` (fit's batch layout for a
    model that computes its own loss from ``forward(x, y)``)."""

    def __init__(self, get_batch, data, block_size, batch_size, steps, generator, device):
        self.args = (get_batch, data, block_size, batch_size, generator)
        self.steps, self.device = steps, device

    def __len__(self):
        return self.steps

    def __iter__(self):
        get_batch, data, block_size, batch_size, generator = self.args
        for _ in range(self.steps):
            x, y = get_batch(data, block_size, batch_size, generator=generator)
            y = y.to(self.device, non_blocking=True)
            yield x.to(self.device, non_blocking=True), y, y


def optimizer_for(model, lr, weight_decay, beta2):
    """nanoGPT's AdamW: weight decay on parameters with 2 or more dimensions only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, beta2))


def warmup_cosine(optimizer, warmup, total, lr, min_lr):
    """Linear warm-up over ``warmup`` steps, then a cosine from lr to min_lr at step ``total`` (nanoGPT's get_lr)."""
    def factor(step):
        if step < warmup:
            return (step + 1) / (warmup + 1)
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        return (min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (lr - min_lr)) / lr
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=12)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--eval-batches", type=int, default=200,
                   help="random validation batches (at least 20; nanoGPT's eval_iters default, 200)")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's choice)")
    p.add_argument("--device", default=None, help="cpu, cuda, ... (default: attnlab.kit.device.pick_device)")
    p.add_argument("--progress", action="store_true", help="show fit's progress bar")
    args = p.parse_args(argv)
    if args.eval_batches < 20:
        p.error(f"--eval-batches={args.eval_batches}: take at least 20 batches for a stable validation loss")

    if SHARED_DATA.is_dir() and "ATTNLAB_DATA_MIRROR" not in os.environ:
        os.environ["ATTNLAB_DATA_MIRROR"] = SHARED_DATA.as_uri()  # the real data copy beside the repository
    from attnlab.kit.datasets.shakespeare import load_tiny_shakespeare
    from attnlab.kit.device import pick_device
    from attnlab.kit.training import evaluate, fit

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    ref = load_reference()

    text = load_tiny_shakespeare(progress=False)
    tokenizer = ref.CharTokenizer(text)
    data = torch.tensor(tokenizer.encode(text), dtype=torch.long)  # (N,)
    n_train = int(0.9 * len(data))
    train_data, val_data = data[:n_train], data[n_train:]

    torch.manual_seed(args.seed)
    model = ref.MiniGPT(tokenizer.vocab_size, args.block_size, args.d_model, args.heads, args.layers,
                        dropout=args.dropout).to(device)
    params = sum(p.numel() for p in model.parameters())
    optimizer = optimizer_for(model, args.lr, args.weight_decay, args.beta2)
    scheduler = warmup_cosine(optimizer, args.warmup, args.iters, args.lr, args.min_lr)
    generator = torch.Generator().manual_seed(args.seed)
    train = Batches(ref.get_batch, train_data, args.block_size, args.batch_size, args.iters, generator, device)

    history = fit(model, train, epochs=1, optimizer=optimizer, scheduler=scheduler, clip_grad_norm=args.grad_clip,
                  metric=None, pad_id=None, device=device, progress=args.progress, live_plot=False,
                  desc="lab09 mini-GPT")
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = history.seconds

    val = Batches(ref.get_batch, val_data, args.block_size, args.batch_size, args.eval_batches,
                  torch.Generator().manual_seed(args.seed + 1), device)
    val_loss, _ = evaluate(model, val, metric=None, pad_id=None, device=device)
    result = {
        "val_loss": round(val_loss, 4),
        "train_loss": round(sum(history.step_loss[-50:]) / len(history.step_loss[-50:]), 4),
        "ms_per_iter": round(1000 * seconds / args.iters, 2),
        "params": params,
        "seconds": round(seconds, 1),
        "device": str(device) if device.type != "cuda" else torch.cuda.get_device_name(device),
        "threads": torch.get_num_threads(),
        "config": {k: v for k, v in vars(args).items() if k != "progress"},
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
