"""Seed sweep: every lab's hidden suite on the reference and on each catalogue variant over many grading seeds.

    python benchmarks/seed_sweep.py [--labs lab07 lab09] [--seeds 500] [--start 0] [--jobs 2] [--mutants]
                                    [--reference-only] [--ledger] [--resume] [--status]

The grading seed comes from the secret and the submission's bytes, so a correct notebook meets random inputs
nobody tried: a correct answer must keep full marks at every seed. This runs the suites in process (LocalStudent,
as tests/test_labs.py does) with ``run_suite(bundle.suite, student, bundle.reference, seed=s)`` for the seeds
``start .. start + seeds - 1``. ``--mutants`` also checks that every catalogue mutant loses, at every seed, the
share of its question that its catalogue entry states (``loses``). Prints one table row per lab: the reference's
failures, the variants' failures (which variant, which test, which seed), the mutants whose loss was not the stated
one at a seed ("mutant off"), tests x seeds run, and "work s" (the seconds its tasks took, summed over the
processes); then every failure and the wall time. Exit status 1 on any failure.

``--ledger`` appends each lab's result to ``benchmarks/records/seed_sweep.jsonl`` with the digests of the files its
verdicts depend on (``sweep_ledger.py``), so that a sweep longer than one sitting adds up; ``--resume`` skips the
seeds that the ledger already holds for today's code; ``--status`` prints, per lab, how many seeds count today.

Cost: each student namespace (the reference, each catalogue entry) is built once per process and reused for all
its seeds (the hidden tests only call into it through the narrow interface; the reference code defines functions
and classes, no state the tests change). Work is split into (lab, entry, block of seeds) tasks over ``--jobs``
processes, torch one thread each, a block's tasks (reference, variants, mutants) one after the other. Two savings,
neither changing a verdict:

- a mutant runs only its question's tests (all of them: its loss is checked against the stated one);
- the reference's answers are recorded per (seed, test) (``ReplayReference``) and replayed for the next entries:
  at a given seed a test asks the reference the same questions whatever the student answered, until a student's
  answer changes the test's path; then the requests differ from the recording (checked request by request, by
  digest): that test is recorded anew and the seed's suite runs again. Profiled (a variant's suite, the
  reference's ``_op`` timed): the reference's operations were 36-53% of the time in lab01, lab05 and lab08, the
  student's 25-37%, the tests' own work (inputs, torch references, comparisons) the rest.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import sys
import time
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import sweep_ledger  # noqa: E402  (a sibling script module, also in spawned workers)

REFERENCE = "(reference)"
BLOCK = 10  # seeds per task: small enough for a live progress bar and an even split over the jobs
KEPT_BLOCKS = 4  # blocks of seeds whose reference recordings a process keeps (the tasks go block by block)


@dataclass
class Outcome:
    """What one task found: failures are (lab, kind, entry, seed, test, message)."""
    lab: str
    tests_run: int = 0
    seconds: float = 0.0
    failures: list = field(default_factory=list)
    modules: set = field(default_factory=set)  # the attnlab modules loaded where it ran (sweep_ledger)


@functools.lru_cache(maxsize=None)
def _lab(lab_id: str):
    from attnlab.course import load_course
    from attnlab.grading.core.bundle import load_bundle

    bundle = load_bundle(load_course(ROOT).lab(lab_id).autograder_dir)
    catalogue = bundle.catalogue()  # the built copy: what the grader grades with
    mutants, variants = (list(catalogue.mutants), list(catalogue.variants)) if catalogue else ([], [])
    return bundle, bundle.reference_code, mutants, variants


@functools.lru_cache(maxsize=None)
def _student(lab_id: str, kind: str, name: str):
    from attnlab.grading.core.mutants import student_with

    bundle, ref_code, mutants, variants = _lab(lab_id)
    if kind == "reference":
        return bundle.reference, None
    entry = next(e for e in (mutants if kind == "mutant" else variants) if e.name == name)
    return student_with(ref_code, entry), entry


class Diverged(BaseException):
    """The test asked the reference something its recording does not hold (a BaseException: run_suite lets it
    through, where it would turn an Exception into the test's failure)."""


class ReplayReference:
    """The reference behind the narrow interface (``StudentAPI``'s ``_op``), answering from a recording where one
    exists. ``begin(seed, record)`` before a suite, ``next_test`` (run_suite's ``on_result``) after each test:
    the recordings are per (seed, test index). A request is answered from the recording when its digest (the wire
    frame of the operation and its payload) is the one recorded at that position, else ``Diverged``; a test whose
    (seed, index) is in ``record``, or has no recording yet, runs the real reference and records its answers."""

    def __init__(self, real):
        self.real, self.recordings, self.log, self.pos, self.replaying = real, {}, [], 0, False
        self.seed, self.index, self.record = None, 0, set()
        self.replayed = self.computed = 0  # operations answered from recordings / run on the real reference

    def begin(self, seed: int, record=frozenset()) -> None:
        self.seed, self.index, self.record = seed, -1, record
        self.next_test()

    def next_test(self, *_) -> None:
        self.index += 1
        key = (self.seed, self.index)
        self.replaying, self.pos = key in self.recordings and key not in self.record, 0
        if not self.replaying:
            self.recordings[key] = []
        self.log = self.recordings[key]

    def forget(self, keep) -> None:
        """Drop the recordings of seeds outside ``keep``."""
        self.recordings = {k: v for k, v in self.recordings.items() if k[0] in keep}

    def source(self, name=None):
        return self.real.source(name)

    def function(self, name: str):
        """The real reference's function, for a question graded on it (``StudentAPI.graded_on_reference``): the
        student's code calls it back directly, outside the recordings."""
        return self.real.function(name)

    def _op(self, op: str, **payload):
        from attnlab.grading.worker import wire

        digest = hashlib.sha256(wire.pack({"op": op, "payload": payload})).digest()
        if self.replaying:
            if self.pos >= len(self.log) or self.log[self.pos][0] != digest:
                raise Diverged
            _, answer, error = self.log[self.pos]
            self.pos, self.replayed = self.pos + 1, self.replayed + 1
            if error is not None:
                raise error
            return wire.roundtrip(answer)  # a fresh copy: the test may change what it got
        self.computed += 1
        try:
            answer = self.real._op(op, **payload)
        except Exception as exc:
            self.log.append((digest, None, exc))
            raise
        self.log.append((digest, wire.roundtrip(answer), None))
        return answer


@functools.lru_cache(maxsize=None)
def _replay(lab_id: str):
    """The lab's reference behind a ``ReplayReference`` (with ``StudentAPI``'s methods over its ``_op``)."""
    from attnlab.grading.worker.api import StudentAPI

    class Replayed(ReplayReference, StudentAPI):
        pass

    return Replayed(_lab(lab_id)[0].reference)


def replayed_suite(lab_id: str, student, seed: int) -> dict:
    """run_suite's results for ``student`` at ``seed``, the reference's answers replayed where the recordings
    allow: a test that diverges from its recording is recorded anew and the suite runs again (the tests before
    it replay as they did)."""
    from attnlab.grading.core.hidden import run_suite

    ref, record = _replay(lab_id), set()
    while True:
        ref.begin(seed, record)
        try:
            return run_suite(_lab(lab_id)[0].suite, student, ref, seed=seed, on_result=ref.next_test)
        except Diverged:
            record.add((seed, ref.index))


def mutant_as_stated(lab_id: str, student, entry, seed: int) -> tuple[bool, int, float]:
    """Whether the mutant loses what its entry states of its question at ``seed`` (``Bundle.verdict``: it loses points
    and its loss lies in ``entry.loses``); its question's tests all run, the course rules after them (which may zero
    the question); how many tests ran and the share of the question it lost."""
    from attnlab.grading.core.bundle import Bundle
    from attnlab.grading.core.hidden import run_suite
    from attnlab.grading.core.mutants import real_loss

    ran = []
    bundle = _lab(lab_id)[0]
    results = run_suite(bundle.suite, student, bundle.reference, seed=seed, questions=[entry.question],
                        on_result=lambda test, *_: ran.append(test))
    return Bundle.verdict("mutant", entry, results), len(ran), real_loss(results[entry.question])


def run_task(task: tuple) -> Outcome:
    """One (lab, kind, entry name, seeds) block: the failed tests of a correct entry, or the seeds at which a
    mutant's loss on its question was not the one its entry states."""
    from attnlab.grading.core.mutants import stated

    lab_id, kind, name, seeds = task
    student, entry = _student(lab_id, kind, name)
    _replay(lab_id).forget(range(min(seeds) - (KEPT_BLOCKS - 1) * BLOCK, max(seeds) + 1))
    out = Outcome(lab_id)
    start = time.perf_counter()
    for seed in seeds:
        if kind == "mutant":
            as_stated, ran, loss = mutant_as_stated(lab_id, student, entry, seed)
            out.tests_run += ran
            if not as_stated:
                out.failures.append((lab_id, kind, name, seed, entry.question,
                                     f"lost {loss:.0%} of the question, stated: {stated(entry)}"))
            continue
        out.tests_run += len(_lab(lab_id)[0].suite.tests)
        for v in replayed_suite(lab_id, student, seed).values():
            for m in v["messages"]:
                if m.startswith("failed: "):
                    test, _, message = m[len("failed: "):].partition(": ")
                    out.failures.append((lab_id, kind, name, seed, test, message[:300]))
    out.seconds = time.perf_counter() - start
    out.modules = sweep_ledger.loaded_modules(ROOT)
    return out


def tasks_for(lab_ids, seeds: list[int] | dict, mutants: bool, variants: bool = True) -> list[tuple]:
    """The (lab, kind, entry, seeds) tasks; ``seeds`` is one list for every lab, or {lab: its seeds}."""
    tasks = []
    for lab_id in lab_ids:
        _, _, lab_mutants, lab_variants = _lab(lab_id)
        lab_seeds = seeds[lab_id] if isinstance(seeds, dict) else seeds
        who = [("reference", REFERENCE)] + [("variant", e.name) for e in lab_variants if variants]
        who += [("mutant", e.name) for e in lab_mutants] if mutants else []
        for i in range(0, len(lab_seeds), BLOCK):  # block by block: a block's entries replay the reference's answers
            tasks += [(lab_id, kind, name, tuple(lab_seeds[i:i + BLOCK])) for kind, name in who]
    return tasks


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def sweep(lab_ids, seeds: list[int] | dict, *, jobs: int = 1, mutants: bool = False, variants: bool = True,
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
            t.modules |= o.modules
            bar.update(1)
    finally:
        bar.close()
        if jobs > 1:
            pool.terminate()
    return totals


def table(totals: dict, n_seeds: int) -> str:
    rows = [f"{'lab':<28} {'ref fail':>8} {'variant fail':>12} {'mutant off':>11} {'tests x seeds':>13} "
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
    p.add_argument("--mutants", action="store_true", help="also check every mutant loses what it states at every seed")
    p.add_argument("--reference-only", action="store_true", help="skip the variants (a quick first pass)")
    p.add_argument("--ledger", action="store_true", help=f"append each lab's result to {sweep_ledger.LEDGER}")
    p.add_argument("--resume", action="store_true", help="skip the seeds the ledger holds for today's code")
    p.add_argument("--status", action="store_true", help="print the ledger's seeds per lab for today's code")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.jobs < 1:
        p.error(f"--seeds {args.seeds} and --jobs {args.jobs} must be at least 1")
    course = load_course(ROOT)
    lab_ids = [lab.id for lab in (course.select(args.labs) if args.labs else course.labs) if lab.master.exists()]
    if args.status:
        print(sweep_ledger.status(ROOT, lab_ids))
        return 0
    kinds = ["reference"] + ([] if args.reference_only else ["variant"]) + (["mutant"] if args.mutants else [])
    wanted = list(range(args.start, args.start + args.seeds))
    done = {lab_id: sweep_ledger.covered(ROOT, lab_id, kinds) if args.resume else set() for lab_id in lab_ids}
    seeds = {lab_id: [s for s in wanted if s not in done[lab_id]] for lab_id in lab_ids}
    lab_ids = [lab_id for lab_id in lab_ids if seeds[lab_id]]
    wall = time.perf_counter()
    totals = sweep(lab_ids, seeds, jobs=args.jobs, mutants=args.mutants,
                   variants=not args.reference_only, progress=not args.no_progress)
    print(table(totals, len(wanted)))
    print(f"seeds {args.start}..{args.start + args.seeds - 1}"
          + (f" (skipped those in the ledger: {', '.join(f'{k} {len(wanted) - len(v)}' for k, v in seeds.items())})"
             if args.resume else "") + f", jobs {args.jobs}, wall {time.perf_counter() - wall:.1f} s")
    if args.ledger:
        for lab_id, t in totals.items():
            sweep_ledger.record(ROOT, lab_id, seeds[lab_id], kinds=kinds, failures=t.failures,
                                tests_run=t.tests_run, seconds=t.seconds, modules=t.modules)
    return 1 if any(t.failures for t in totals.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
