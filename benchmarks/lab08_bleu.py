"""Lab 08 at full size: train the lab's reference Seq2SeqTransformer on Multi30k de->en, print BLEU against time.

    python benchmarks/lab08_bleu.py [--budget-min 10] [--epochs 10] [--eval-every-min 2.5] [--device cpu|cuda]

The model, loss and greedy decoding are the lab's reference code (autograder/lab08_translation/reference.py,
built by `attnlab build lab08`); the data pipeline is the lab's section 6 (lowercase regex tokens, vocabularies
from the training split only, min_freq 2, length-sorted batches). Full size: 256 dims, 8 heads, 3 + 3 post-norm
layers, d_ff 512, dropout 0.1, label smoothing 0.1, Adam (0.9, 0.98) with a linear warm-up, gradients clipped
at 1.

Training stops after `--epochs` epochs or `--budget-min` minutes of training, whichever comes first. At every
`--eval-every-min` minutes of training and at the end, the test set (test_2016_flickr, 1,000 sentences) is
translated greedily and scored with sacreBLEU (detokenized output against the raw references); evaluation time
is not counted as training time. One line per evaluation, then one JSON line with the final figures.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import time
from collections import Counter
from pathlib import Path

import sacrebleu
import torch

from attnlab.kit.datasets.multi30k import load_multi30k
from attnlab.kit.device import pick_device

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"  # the real data copies beside the repository (no internet here)
SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]
PAD, BOS, EOS, UNK = 0, 1, 2, 3
TOKEN = re.compile(r"\w+(?:['\-]\w+)*|[^\w\s]")


def reference_namespace() -> dict:
    """The lab's reference code (model, loss, greedy_decode), as the build wrote it."""
    path = ROOT / "autograder" / "lab08_translation" / "reference.py"
    if not path.exists():
        raise SystemExit(f"{path} is missing: run `attnlab build lab08` first")
    namespace: dict = {"__name__": "lab08_reference"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the kit's own reference
    return namespace


def tokenize(sentence: str) -> list[str]:
    return TOKEN.findall(sentence.lower())


def build_vocab(token_lists, min_freq: int) -> dict[str, int]:
    counts = Counter(t for tokens in token_lists for t in tokens)
    words = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    return {t: i for i, t in enumerate(SPECIALS + words)}


def encode_ids(sentence: str, vocab: dict) -> list[int]:
    return [BOS] + [vocab.get(t, UNK) for t in tokenize(sentence)] + [EOS]


def pad_rows(rows) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])


def length_batches(ids, batch_tokens: int):
    """Lists of (src (B, S), tgt (B, T)) of about batch_tokens tokens, sentences of similar length together."""
    order = sorted(range(len(ids)), key=lambda i: (len(ids[i][0]), len(ids[i][1])))
    batches, group, width = [], [], 0
    for i in order:
        w = max(width, len(ids[i][0]), len(ids[i][1]))
        if group and w * (len(group) + 1) > batch_tokens:
            batches.append(group)
            group, w = [], max(len(ids[i][0]), len(ids[i][1]))
        group.append(i)
        width = w
    batches.append(group)
    return [(pad_rows([ids[i][0] for i in g]), pad_rows([ids[i][1] for i in g])) for g in batches]


def detokenize(ids, words: dict) -> str:
    out = []
    for i in ids[1:]:
        if i in (EOS, PAD):
            break
        out.append(words[i])
    text = re.sub(r" ([.,!?;:)])", r"\1", " ".join(out)).replace("( ", "(")
    return text[:1].upper() + text[1:]


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget-min", type=float, default=10.0, help="minutes of training at most")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--eval-every-min", type=float, default=2.5, help="minutes of training between BLEU evaluations")
    p.add_argument("--device", default=None)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=3, help="encoder and decoder layers each")
    p.add_argument("--d-ff", type=int, default=512)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--min-freq", type=int, default=2)
    p.add_argument("--batch-tokens", type=int, default=6000)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=400, help="steps of linear learning-rate warm-up")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    if "ATTNLAB_DATA_MIRROR" not in os.environ and SHARED.is_dir():
        os.environ["ATTNLAB_DATA_MIRROR"] = SHARED.as_uri()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    ref = reference_namespace()
    torch.manual_seed(args.seed)

    pairs = {s: load_multi30k(s, "de", "en", progress=False) for s in ("train", "val", "test_2016_flickr")}
    src_vocab = build_vocab([tokenize(de) for de, _ in pairs["train"]], args.min_freq)
    tgt_vocab = build_vocab([tokenize(en) for _, en in pairs["train"]], args.min_freq)
    words = {i: w for w, i in tgt_vocab.items()}
    ids = {s: [(encode_ids(de, src_vocab), encode_ids(en, tgt_vocab)) for de, en in p_] for s, p_ in pairs.items()}
    train = length_batches(ids["train"], args.batch_tokens)
    val = length_batches(ids["val"], 8000)

    model = ref["Seq2SeqTransformer"](len(src_vocab), len(tgt_vocab), d_model=args.d_model, num_heads=args.heads,
                                      num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                                      d_ff=args.d_ff, max_len=128, dropout=args.dropout).to(device)
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / args.warmup))
    loss_fn, decoder_io, greedy = ref["sequence_loss"], ref["decoder_io"], ref["greedy_decode"]
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, device {device}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"vocabularies (min_freq {args.min_freq}): de {len(src_vocab)}, en {len(tgt_vocab)}; {params:,} parameters; "
          f"{len(train)} batches of about {args.batch_tokens} tokens per epoch")

    def val_loss() -> float:
        model.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for src, tgt in val:
                dec_in, labels = decoder_io(tgt.to(device))
                n = int((labels != PAD).sum())
                total += loss_fn(model(src.to(device), dec_in), labels).item() * n
                count += n
        return total / count

    def test_bleu():
        model.eval()
        test = ids["test_2016_flickr"]
        order = sorted(range(len(test)), key=lambda i: len(test[i][0]))
        hyps = [""] * len(test)
        for k in range(0, len(order), 100):
            chunk = order[k:k + 100]
            src = pad_rows([test[i][0] for i in chunk]).to(device)
            out = greedy(model, src, max_len=src.shape[1] + 10, bos_id=BOS, eos_id=EOS)
            for i, row in zip(chunk, out.tolist()):
                hyps[i] = detokenize(row, words)
        bleu = sacrebleu.metrics.BLEU()
        score = bleu.corpus_score(hyps, [[en for _, en in pairs["test_2016_flickr"]]])
        return score, bleu.get_signature(), hyps

    budget, every = args.budget_min * 60, args.eval_every_min * 60
    trained, steps, next_eval, results = 0.0, 0, every, []
    generator = torch.Generator().manual_seed(args.seed)

    def evaluate(epoch_float: float):
        started = time.perf_counter()
        vl = val_loss()
        score, signature, hyps = test_bleu()
        results.append({"train_s": round(trained, 1), "steps": steps, "epochs": round(epoch_float, 2),
                        "val_loss": round(vl, 4), "bleu": round(score.score, 2)})
        print(f"train {trained:7.0f} s  step {steps:6d}  epoch {epoch_float:5.2f}  val loss (smoothed) {vl:.3f}  "
              f"test BLEU {score.score:5.2f}  ({time.perf_counter() - started:.0f} s to evaluate)", flush=True)
        return score, signature, hyps

    done = False
    for epoch in range(args.epochs):
        for b, j in enumerate(torch.randperm(len(train), generator=generator).tolist()):
            model.train()
            t0 = time.perf_counter()
            src, tgt = (t.to(device) for t in train[j])
            dec_in, labels = decoder_io(tgt)
            loss = loss_fn(model(src, dec_in), labels, label_smoothing=args.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            if device.type == "cuda" and steps % 50 == 0:
                torch.cuda.synchronize()
            if not math.isfinite(loss.item() if steps % 50 == 0 else 0.0):
                raise SystemExit(f"the loss became {loss.item()} at step {steps}")
            trained += time.perf_counter() - t0
            steps += 1
            if trained >= budget:
                done = True
                break
            if trained >= next_eval:
                evaluate(epoch + (b + 1) / len(train))
                next_eval += every
        if done:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    score, signature, hyps = evaluate(steps / len(train))
    print("signature:", signature)
    for (de, en), h in list(zip(pairs["test_2016_flickr"], hyps))[:3]:
        print(f"  {de}\n    ref: {en}\n    out: {h}")
    result = {"device": str(device), "params": params, "train_s": round(trained, 1), "steps": steps,
              "epochs": round(steps / len(train), 2), "test_bleu": round(score.score, 2),
              "signature": str(signature), "curve": results}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
