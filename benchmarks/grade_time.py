"""Grading speed per lab: each lab's submissions through `attnlab grade`, against a bare `otter run`.

    python benchmarks/grade_time.py [--labs all|lab05,lab09] [--copies 20] [--otter-runs 3]

For each lab: a batch of at least 20 submissions (the solution, the blank notebook and catalogued mutants,
repeated), graded with --jobs 1 and --jobs 2; `otter run` of the solution with the lab's Otter zip, and single
`attnlab grade`s of the same file. Prints, per lab, one row of the table in benchmarks/README.md: wall per
submission at --jobs 1 and 2, the median and slowest single submission (at --jobs 2), the peak resident memory of
a grader process over the --jobs 2 batch (the largest of its grader processes, forks of this one: grading/pool.py)
and how much of it the batch added, the single grade and the ratio to Otter. The worker's start (fork from the
zygote, or cold) is printed once: ATTNLAB_WORKER_START=cold gives the cold figures; ATTNLAB_GRADER_POOL=threads
the --jobs 2 figures with the jobs as threads of one grader (as before grading/pool.py).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attnlab.course import load_course
from attnlab.demo import make_demo_submissions
from attnlab.grading.batch import grade_batch
from attnlab.grading.pool import resident_mib, start_method
from attnlab.grading.runner import grade_submission

HEADER = ("| lab | s/submission --jobs 1 | s/submission --jobs 2 | median | slowest | grader peak MiB (+batch) "
          "| one grade s | otter run s | ratio |\n|---|---|---|---|---|---|---|---|---|")


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident set
    except OSError:
        pass


def _batch(lab, batch: Path, out: Path, jobs: int) -> tuple[float, list[float], float, float]:
    """(wall per submission, each submission's time, the grader's peak resident MiB, the part above its start)."""
    _reset_peak()
    base = resident_mib("VmRSS")
    start = time.perf_counter()
    summary = grade_batch(lab.autograder_dir, [str(batch)], out_dir=out, jobs=jobs, progress=False)
    wall = time.perf_counter() - start
    per = [r["elapsed_s"] for r in summary.results]
    peak = max([resident_mib("VmHWM"), *summary.process_peaks_mib])  # grader processes are forks of this one
    return wall / len(per), per, peak, peak - base


def _otter(lab, tmp: Path, runs: int) -> float:
    sol = tmp / "otter" / "solution.ipynb"
    sol.parent.mkdir()
    shutil.copy(lab.solution_notebook, sol)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "otter"), "run", "-a",
                        str(lab.autograder_dir / f"{lab.id}-otter.zip"), str(sol), "-o", str(sol.parent)],
                       check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def lab_row(lab, copies: int, otter_runs: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        samples = make_demo_submissions(lab, tmp / "samples", n_buggy=4)
        batch = tmp / "batch"
        batch.mkdir()
        for i in range(copies):
            src = samples[i % len(samples)]
            shutil.copy(src, batch / f"s{i:03d}-{src.name}")
        one, _, _, _ = _batch(lab, batch, tmp / "out1", 1)
        two, per, peak, grown = _batch(lab, batch, tmp / "out2", 2)
        ours = []
        for _ in range(otter_runs):
            start = time.perf_counter()
            result = grade_submission(lab.autograder_dir, lab.solution_notebook)
            ours.append(time.perf_counter() - start)
        o, a = _otter(lab, tmp, otter_runs), statistics.median(ours)
    print(f"  ({lab.id}: {result['isolation']})", file=sys.stderr)
    return (f"| {lab.id[:5]} | {one:.2f} | {two:.2f} | {statistics.median(per):.2f} | {max(per):.2f} "
            f"| {peak:.0f} (+{grown:.0f}) | {a:.2f} | {o:.1f} | {a / o:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--labs", default="all", help="all, or lab ids separated by commas")
    p.add_argument("--copies", type=int, default=20)
    p.add_argument("--otter-runs", type=int, default=3)
    args = p.parse_args()
    course = load_course(Path(__file__).resolve().parents[1])
    labs = course.select(None if args.labs == "all" else args.labs.split(","))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, load average {load:.1f} at "
          f"the start; worker start: {os.environ.get('ATTNLAB_WORKER_START', 'auto')}; --jobs 2 as "
          f"{'grader processes' if start_method() == 'processes' else 'threads'}")
    print(HEADER, flush=True)
    for lab in labs:
        print(lab_row(lab, args.copies, args.otter_runs), flush=True)


if __name__ == "__main__":
    main()
