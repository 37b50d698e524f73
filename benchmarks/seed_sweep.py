"""Seed sweep: every lab's hidden suite on the reference and on each catalogue variant over many grading seeds.

    python benchmarks/seed_sweep.py [--labs lab07 lab09] [--seeds 500] [--start 0] [--jobs 2] [--mutants]
                                    [--reference-only]

The grading seed comes from the secret and the submission's bytes, so a correct notebook meets random inputs
nobody tried: a correct answer must keep full marks at every seed. This runs the suites in process (LocalStudent,
as tests/test_labs.py does) with ``run_suite(bundle.suite, student, bundle.reference, seed=s)`` for the seeds
``start .. start + seeds - 1``. ``--mutants`` also checks that every catalogue mutant loses points on its
question at every seed. Prints one table row per lab: the reference's failures, the variants' failures (which
variant, which test, which seed), the mutants that survived a seed, tests x seeds run, and "work s" (the seconds
its tasks took, summed over the processes); then every failure and the wall time. Exit status 1 on any failure.

Cost: each student namespace (the reference, each catalogue entry) is built once per process and reused for all
its seeds (the hidden tests only call into it through the narrow interface; the reference code defines functions
and classes, no state the tests change). Work is split into (lab, entry, block of seeds) tasks over ``--jobs``
processes, torch one thread each.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = "(reference)"
BLOCK = 10  # seeds per task: small enough for a live progress bar and an even split over the jobs


@dataclass
class Outcome:
    """What one task found: failures are (lab, kind, entry, seed, test, message)."""
    lab: str
    tests_run: int = 0
    seconds: float = 0.0
    failures: list = field(default_factory=list)


@functools.lru_cache(maxsize=None)
def _lab(lab_id: str):
    from attnlab.course import load_course
    from attnlab.grading.bundle import load_bundle

    bundle = load_bundle(load_course(ROOT).lab(lab_id).autograder_dir)
    catalogue = bundle.catalogue()  # the built copy: what the grader grades with
    mutants, variants = (list(catalogue.mutants), list(catalogue.variants)) if catalogue else ([], [])
    return bundle, bundle.reference_code, mutants, variants


@functools.lru_cache(maxsize=None)
def _student(lab_id: str, kind: str, name: str):
    from attnlab.grading.mutants import student_with

    bundle, ref_code, mutants, variants = _lab(lab_id)
    if kind == "reference":
        return bundle.reference, None
    entry = next(e for e in (mutants if kind == "mutant" else variants) if e.name == name)
    return student_with(ref_code, entry), entry


def run_task(task: tuple) -> Outcome:
    """One (lab, kind, entry name, seeds) block: the failed tests of a correct entry, or the seeds at which a
    mutant kept full marks on its question."""
    from attnlab.grading.hidden import run_suite

    lab_id, kind, name, seeds = task
    bundle = _lab(lab_id)[0]
    student, entry = _student(lab_id, kind, name)
    out = Outcome(lab_id)
    start = time.perf_counter()
    for seed in seeds:
        results = run_suite(bundle.suite, student, bundle.reference, seed=seed)
        out.tests_run += len(bundle.suite.tests)
        if kind == "mutant":
            q = results[entry.question]
            if q["score"] >= q["max_score"]:
                out.failures.append((lab_id, kind, name, seed, entry.question, "survived (full marks)"))
            continue
        for v in results.values():
            for m in v["messages"]:
                if m.startswith("failed: "):
                    test, _, message = m[len("failed: "):].partition(": ")
                    out.failures.append((lab_id, kind, name, seed, test, message[:300]))
    out.seconds = time.perf_counter() - start
    return out


def tasks_for(lab_ids, seeds: list[int], mutants: bool, variants: bool = True) -> list[tuple]:
    tasks = []
    for lab_id in lab_ids:
        _, _, lab_mutants, lab_variants = _lab(lab_id)
        who = [("reference", REFERENCE)] + [("variant", e.name) for e in lab_variants if variants]
        who += [("mutant", e.name) for e in lab_mutants] if mutants else []
        for kind, name in who:
            tasks += [(lab_id, kind, name, tuple(seeds[i:i + BLOCK])) for i in range(0, len(seeds), BLOCK)]
    return tasks


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def sweep(lab_ids, seeds: list[int], *, jobs: int = 1, mutants: bool = False, variants: bool = True,
          progress: bool = True) -> dict:
    """Run the tasks over ``jobs`` processes; ``{lab: Outcome}`` with the tasks' figures summed."""
    from tqdm import tqdm

    tasks = tasks_for(lab_ids, seeds, mutants, variants)
    totals = {lab_id: Outcome(lab_id) for lab_id in lab_ids}
    bar = tqdm(total=len(tasks), disable=not progress, unit="task", file=sys.stderr)
    if jobs <= 1:
        _init_worker()
        outcomes = map(run_task, tasks)
    else:
        pool = get_context("spawn").Pool(jobs, initializer=_init_worker)
        outcomes = pool.imap_unordered(run_task, tasks)
    try:
        for o in outcomes:
            t = totals[o.lab]
            t.tests_run, t.seconds = t.tests_run + o.tests_run, t.seconds + o.seconds
            t.failures += o.failures
            bar.update(1)
    finally:
        bar.close()
        if jobs > 1:
            pool.terminate()
    return totals


def table(totals: dict, n_seeds: int) -> str:
    rows = [f"{'lab':<28} {'ref fail':>8} {'variant fail':>12} {'mutant surv':>11} {'tests x seeds':>13} "
            f"{'work s':>8}"]
    for lab_id, t in totals.items():
        count = {k: sum(1 for f in t.failures if f[1] == k) for k in ("reference", "variant", "mutant")}
        rows.append(f"{lab_id:<28} {count['reference']:>8} {count['variant']:>12} {count['mutant']:>11} "
                    f"{t.tests_run:>13} {t.seconds:>8.1f}")
    details = [f"  {lab} {kind} {name} seed={seed} {test}: {msg}"
               for t in totals.values() for lab, kind, name, seed, test, msg in sorted(t.failures, key=str)]
    return "\n".join(rows + ([f"failures over {n_seeds} seeds:"] + details if details else []))


def main(argv=None) -> int:
    from attnlab.course import load_course

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--labs", nargs="*", help="lab ids or short forms (default: every lab)")
    p.add_argument("--seeds", type=int, default=500, help="how many seeds (default 500)")
    p.add_argument("--start", type=int, default=0, help="the first seed (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes, torch one thread each (default 1)")
    p.add_argument("--mutants", action="store_true", help="also check every mutant loses points at every seed")
    p.add_argument("--reference-only", action="store_true", help="skip the variants (a quick first pass)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        p.error(f"--seeds {args.seeds} and --jobs {args.jobs} must be at least 1")
    course = load_course(ROOT)
    lab_ids = [lab.id for lab in (course.select(args.labs) if args.labs else course.labs) if lab.master.exists()]
    seeds = list(range(args.start, args.start + args.seeds))
    wall = time.perf_counter()
    totals = sweep(lab_ids, seeds, jobs=args.jobs, mutants=args.mutants,
                   variants=not args.reference_only, progress=not args.no_progress)
    print(table(totals, len(seeds)))
    print(f"seeds {args.start}..{args.start + args.seeds - 1}, jobs {args.jobs}, "
          f"wall {time.perf_counter() - wall:.1f} s")
    return 1 if any(t.failures for t in totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
