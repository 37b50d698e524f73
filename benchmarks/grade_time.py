"""Grading speed: one lab's submissions through `attnlab grade`, against a bare `otter run`.

    python benchmarks/grade_time.py [--lab lab05] [--copies 20] [--otter-runs 3]

Makes a batch of at least 20 submissions (the solution, the blank notebook and catalogued mutants,
repeated), grades it with --jobs 1 and --jobs 2, and runs `otter run` on the solution with the lab's
Otter zip. Prints medians per submission and the ratio to Otter.
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
from attnlab.grading.runner import grade_submission


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lab", default="lab05")
    p.add_argument("--copies", type=int, default=20)
    p.add_argument("--otter-runs", type=int, default=3)
    args = p.parse_args()
    lab = load_course(Path(__file__).resolve().parents[1]).lab(args.lab)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; lab {lab.id}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        samples = make_demo_submissions(lab, tmp / "samples", n_buggy=4)
        batch = tmp / "batch"
        batch.mkdir()
        for i in range(args.copies):
            src = samples[i % len(samples)]
            shutil.copy(src, batch / f"s{i:03d}-{src.name}")
        for jobs in (1, 2):
            out = tmp / f"out{jobs}"
            start = time.perf_counter()
            summary = grade_batch(lab.autograder_dir, [str(batch)], out_dir=out, jobs=jobs, progress=False)
            wall = time.perf_counter() - start
            per = [r["elapsed_s"] for r in summary.results]
            print(f"attnlab grade --jobs {jobs}: {len(per)} submissions in {wall:.1f} s "
                  f"({wall / len(per):.1f} s each); per-submission median {statistics.median(per):.1f} s, "
                  f"max {max(per):.1f} s")
        otter_times = []
        sol = tmp / "otter" / "solution.ipynb"
        sol.parent.mkdir()
        shutil.copy(lab.solution_notebook, sol)
        for _ in range(args.otter_runs):
            start = time.perf_counter()
            subprocess.run([str(Path(sys.executable).parent / "otter"), "run", "-a",
                            str(lab.autograder_dir / f"{lab.id}-otter.zip"), str(sol), "-o", str(sol.parent)],
                           check=True, capture_output=True)
            otter_times.append(time.perf_counter() - start)
        ours = []
        for _ in range(args.otter_runs):
            start = time.perf_counter()
            grade_submission(lab.autograder_dir, lab.solution_notebook)
            ours.append(time.perf_counter() - start)
        o, a = statistics.median(otter_times), statistics.median(ours)
        print(f"bare `otter run` of the solution: median {o:.1f} s; attnlab grade of the same file: median "
              f"{a:.1f} s; ratio {a / o:.2f}")


if __name__ == "__main__":
    main()
