"""Diagnosis coverage: how often the grader names the right mistake, on mistakes the catalogues were not built from.

    python benchmarks/diagnosis_coverage.py [--labs lab06 lab07] [--seeds 3] [--budget 3.0 | real] [--clock cpu]
                                            [--entries a b]

Each lab's ``instructor/<lab>/heldout.py`` lists held-out mistakes (``mutants.HeldOut``): written apart from the
catalogue, each labelled with the catalogue mutant it should be diagnosed as, or None for a mistake the catalogue
lacks. The matching never sees them. Each entry is graded in process (the reference code with the entry's
definitions run after it, as a catalogue entry is) through the grader's own diagnosis path: ``Recorder`` around
the student, ``run_suite`` at the grading seed, then ``diagnose.name_mistakes`` with the bundle built in
``autograder/<lab>/`` (so run ``attnlab build`` after changing a catalogue), capped at ``--budget`` seconds per
submission. ``--budget real`` grades each entry as ``attnlab grade`` does instead: the solution notebook with the
entry's definitions in a cell after the last graded one (``demo.with_entry``), through ``runner.grade_submission``
at the same seed (worker process, sandbox, notebook load), so that the diagnosis gets the cap the real grader
gives it (``diagnose.diagnosis_budget`` of the grading time it measured; the table reports their mean as ``cap``)
and the hints are read from the feedback's messages. The diagnosis counts its cap in CPU seconds of its thread
(``diagnose._clock``), so the load of the machine changes what it names only through the cap, which the real
grader computes from wall seconds of grading; ``--clock cpu`` (in process) counts that grading time in this
process's CPU seconds instead: a load-free estimate of the cap a quiet machine's grader gives. Each (entry,
seed) pair counts once:

- right: the hint of the labelled mutant, on the entry's question, and no other question named;
- wrong: any other name (a labelled-None entry named, another mutant's hint, a name on another question);
- recall = right / pairs labelled with a mutant; precision = right / pairs named.

A held-out entry that keeps full marks on its question is not a mistake: it is reported ("survived") and counts
as unnamed. Prints one row per lab (``cap``: the mean cap the diagnosis had; ``diag``, ``max``: its mean and
largest wall seconds per submission; ``cpu``: its mean CPU seconds), then every wrong name and every miss; the
last line is the JSON of the table. Exit status 1 on a wrong name or a broken entry.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Grading-sized seeds, fixed, spread (the grader's seed is a 62-bit digest of the secret and the submission).
SEEDS = random.Random(19).sample(range(1 << 62), 8)


@dataclass
class LabCoverage:
    lab: str
    labelled: int = 0  # (entry, seed) pairs labelled with a mutant
    unlabelled: int = 0  # pairs labelled None
    right: int = 0
    named: int = 0
    wrong: list = field(default_factory=list)  # (entry, seed, question, hint)
    missed: list = field(default_factory=list)  # (entry, seed): labelled, no name
    survived: list = field(default_factory=list)  # (entry, seed): full marks on its question
    seconds: float = 0.0
    # per pair: (grading seconds before the diagnosis, its cap, the diagnosis's wall seconds, its CPU seconds)
    timings: list = field(default_factory=list)

    def row(self) -> dict:
        def stat(i: int, how) -> float | None:
            return round(how(t[i] for t in self.timings), 2) if self.timings else None

        return {"lab": self.lab, "labelled": self.labelled, "unlabelled": self.unlabelled, "right": self.right,
                "named": self.named, "wrong": len(self.wrong),
                "recall": round(self.right / self.labelled, 3) if self.labelled else None,
                "precision": round(self.right / self.named, 3) if self.named else None,
                "seconds": round(self.seconds, 1), "grading_s": stat(0, _mean), "cap_s": stat(1, _mean),
                "diagnosis_s": stat(2, _mean), "diagnosis_max_s": stat(2, max), "diagnosis_cpu_s": stat(3, _mean),
                "diagnosis_cpu_max_s": stat(3, max)}


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _timed(name_mistakes, timings: list, grading: list):
    """``name_mistakes`` that appends ``(grading_s, cap, wall, cpu)`` to ``timings`` (``grading`` holds the
    grading seconds the cap was computed from)."""

    def timed(bundle, recorder, questions, *, budget_s):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return name_mistakes(bundle, recorder, questions, budget_s=budget_s)
        finally:
            timings.append((grading[-1] if grading else 0.0, budget_s, time.perf_counter() - wall,
                            time.process_time() - cpu))
    return timed


def diagnosed(bundle, entry, seed: int, budget_s: float | None, timings: list, clock: str = "wall"
              ) -> tuple[dict, dict[str, str]]:
    """``(results, question -> hint)`` of one held-out entry graded at ``seed`` the way the grader does it, in this
    process. ``budget_s`` None: the cap ``diagnose.diagnosis_budget`` gives for the time the grading took, in wall
    seconds or (``clock="cpu"``) in this process's CPU seconds, which the machine's load does not change."""
    from attnlab.grading.core.hidden import run_suite
    from attnlab.grading.core.mutants import Entry, student_with
    from attnlab.grading.diagnosis import diagnose

    catalogue = bundle.catalogue()
    student = student_with(catalogue.reference_code, Entry(entry.name, entry.question, entry.source))
    recorder = diagnose.Recorder(student)
    now = time.process_time if clock == "cpu" else time.perf_counter
    start = now()
    results = run_suite(bundle.suite, recorder, bundle.reference, seed=seed, on_result=recorder.on_result)
    grading_s = now() - start
    budget_s = diagnose.diagnosis_budget(grading_s) if budget_s is None else budget_s
    _timed(diagnose.name_mistakes, timings, [grading_s])(bundle, recorder, results, budget_s=budget_s)
    return results, _hints(results)


def _hints(results: dict) -> dict[str, str]:
    from attnlab.grading.diagnosis.diagnose import HINT_PREFIX

    return {q: m[len(HINT_PREFIX):] for q, v in results.items() for m in v["messages"] if m.startswith(HINT_PREFIX)}


def graded(lab, entry, seed: int, timings: list) -> tuple[dict, dict[str, str]]:
    """``(results, question -> hint)`` of one held-out entry graded by ``runner.grade_submission`` at ``seed``, in a
    notebook. The runner's ``diagnosis_budget`` and the diagnosis's ``name_mistakes`` (which the runner imports when
    it grades) are wrapped, unchanged, to record the grading time, the cap it gave and the time the diagnosis took."""
    import tempfile

    import nbformat

    from attnlab.demo import with_entry
    from attnlab.grading import runner
    from attnlab.grading.diagnosis import diagnose

    budget, name_mistakes, grading = runner.diagnosis_budget, diagnose.name_mistakes, []

    def recorded(grading_s: float) -> float:
        grading.append(grading_s)
        return budget(grading_s)

    with tempfile.TemporaryDirectory(prefix="attnlab-heldout-") as tmp:
        path = Path(tmp) / f"{entry.name}.ipynb"
        nbformat.write(with_entry(lab.solution_notebook, entry), path)
        runner.diagnosis_budget, diagnose.name_mistakes = recorded, _timed(name_mistakes, timings, grading)
        try:
            result = runner.grade_submission(lab.autograder_dir, path, seed=seed)
        finally:
            runner.diagnosis_budget, diagnose.name_mistakes = budget, name_mistakes
    return result["questions"], _hints(result["questions"])


def lab_coverage(lab_id: str, seeds: list[int], budget_s: float | None, only: set[str] | None = None,
                 clock: str = "wall") -> LabCoverage:
    """Grade every held-out entry of ``lab_id`` (or those named in ``only``) at each seed and count. ``budget_s``
    None: at the real grader's cap (with the wall clock: through ``grade_submission``); ``clock``: ``diagnosed``."""
    from attnlab.course import load_course
    from attnlab.grading.core.bundle import load_bundle
    from attnlab.grading.core.mutants import load_heldout

    lab = load_course(ROOT).lab(lab_id)
    bundle = load_bundle(lab.autograder_dir)
    mutants = {m.name: m for m in bundle.catalogue().mutants}
    out = LabCoverage(lab.id)
    start = time.perf_counter()
    for entry in load_heldout(lab.catalogue.with_name("heldout.py")):
        if only is not None and entry.name not in only:
            continue
        if entry.expect is not None and entry.expect not in mutants:
            raise SystemExit(f"{lab.id}: held-out {entry.name} expects {entry.expect!r}, not a mutant of the catalogue")
        expected = mutants[entry.expect] if entry.expect else None
        if expected is not None and expected.question != entry.question:
            raise SystemExit(f"{lab.id}: held-out {entry.name} ({entry.question}) expects {entry.expect}, a "
                             f"mutant of {expected.question}")
        for seed in seeds:
            if budget_s is None and clock == "wall":
                results, hints = graded(lab, entry, seed, out.timings)
            else:
                results, hints = diagnosed(bundle, entry, seed, budget_s, out.timings, clock)
            _count(out, entry, expected, seed, results, hints)
    out.seconds = time.perf_counter() - start
    return out


def _count(out: LabCoverage, entry, expected, seed: int, results: dict, hints: dict[str, str]) -> None:
    q = results[entry.question]
    if expected is None:
        out.unlabelled += 1
    else:
        out.labelled += 1
    if q["score"] >= q["max_score"]:
        out.survived.append((entry.name, seed))
    out.named += bool(hints)
    if expected is not None and hints == {entry.question: expected.hint}:
        out.right += 1
    elif hints:
        out.wrong.extend((entry.name, seed, question, hint) for question, hint in hints.items())
    elif expected is not None:
        out.missed.append((entry.name, seed))


def _lab_ids(labs: list[str] | None) -> list[str]:
    from attnlab.course import load_course

    course = load_course(ROOT)
    chosen = [course.lab(x) for x in labs] if labs else course.labs
    return [lab.id for lab in chosen if (lab.catalogue.with_name("heldout.py")).exists()]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labs", nargs="*", help="lab ids or short forms (default: every lab with a heldout.py)")
    parser.add_argument("--seeds", type=int, default=3, help="how many of the fixed grading seeds")
    parser.add_argument("--budget", default="3.0", help="diagnosis time cap per submission, seconds, or 'real': "
                        "each entry graded by grade_submission, at the cap the grader gives")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu, with --budget real: the grading time the cap is computed from in CPU seconds (in "
                        "process; load-free)")
    parser.add_argument("--entries", nargs="*", help="only these held-out entries (by name)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # as the grader does (runner._one_thread)
    only = set(args.entries) if args.entries else None
    budget = None if args.budget == "real" else float(args.budget)
    rows = []
    print(f"{'lab':30} {'labelled':>8} {'None':>5} {'right':>5} {'named':>5} {'wrong':>5} {'recall':>7} "
          f"{'precision':>9} {'s':>6} {'cap':>5} {'diag':>5} {'max':>5} {'cpu':>5}")
    for lab_id in _lab_ids(args.labs):
        cov = lab_coverage(lab_id, SEEDS[:args.seeds], budget, only, args.clock)
        row = cov.row()
        rows.append((cov, row))
        fmt = lambda v: "-" if v is None else f"{v:.0%}"  # noqa: E731
        secs = " ".join("    -" if row[k] is None else f"{row[k]:5.2f}"
                        for k in ("cap_s", "diagnosis_s", "diagnosis_max_s", "diagnosis_cpu_s"))
        print(f"{cov.lab:30} {cov.labelled:8} {cov.unlabelled:5} {cov.right:5} {cov.named:5} {len(cov.wrong):5} "
              f"{fmt(row['recall']):>7} {fmt(row['precision']):>9} {cov.seconds:6.1f} {secs}", flush=True)
    for cov, _ in rows:
        for name, seed, question, hint in cov.wrong:
            print(f"WRONG {cov.lab} {name} seed {seed}: {question}: {hint}")
        for name, seed in cov.missed:
            print(f"missed {cov.lab} {name} seed {seed}")
        for name, seed in cov.survived:
            print(f"survived {cov.lab} {name} seed {seed} (keeps full marks: not a mistake)")
    table = {"seeds": args.seeds, "budget_s": args.budget if budget is None else budget, "clock": args.clock,
             "labs": [row for _, row in rows]}
    print(json.dumps(table))
    return table


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    table = main()
    sys.exit(1 if any(row["wrong"] for row in table["labs"]) else 0)
