"""Grading speed per lab, as users meet it: whole `attnlab grade` processes beside a whole `otter run`.

    python benchmarks/grade_time.py [--labs all|lab05,lab09] [--copies 20] [--runs 3] [--otter-runs 3]
                                    [--gradescope-runs 3] [--in-process]

Every figure but the last column is the wall time of a whole process, its start included (importing torch, loading
the bundle, starting the worker's zygote), as a student, an instructor or a Gradescope container pays it:

- one grade: `attnlab grade LAB solution.ipynb --json` (the median of --runs);
- otter run: `otter run -a autograder/<lab>/<lab>-otter.zip solution.ipynb` of the same file, its runs interleaved
  with ours so that the load falls on both alike; the ratio of the two medians (--otter-runs 0 leaves Otter out);
- batch: `attnlab grade LAB FOLDER --out OUT --jobs 2` of --copies submissions (the solution, the blank notebook and
  four catalogued mutants, repeated), the process's wall per submission;
- Gradescope: the zip's `run_autograder` in a simulated container (Gradescope's /autograder laid out in a temp
  folder: source/bundle, submission/, results/; one fresh process per submission, as Gradescope runs it), the
  median of --gradescope-runs of the solution;
- in process (second column, only with --in-process): `grade_submission` of the solution inside this process after
  it graded once (torch imported, bundle loaded, zygote warm): what the grading itself costs, not what users wait.

The machine's load average is printed at the start and the end: ratios taken in one run are what count.
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

from attnlab.buildchain.transforms.gradescope_zip import run_autograder
from attnlab.course import load_course
from attnlab.demo import make_demo_submissions
from attnlab.records.bundle_names import FILES

BIN = Path(sys.executable).parent
HEADER = ("| lab | one grade s (whole process) | otter run s | ratio | batch of {n} --jobs 2, s/submission (whole process) "
          "| Gradescope run_autograder s | in process: one grade s |\n|---|---|---|---|---|---|---|")


def _attnlab() -> list[str]:
    script = BIN / "attnlab"
    return [str(script)] if script.exists() else [sys.executable, "-m", "attnlab.cli"]


def _timed(argv: list[str], **kwargs) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall


def _one_and_otter(lab, tmp: Path, runs: int, otter_runs: int) -> tuple[list[float], list[float]]:
    """Whole `attnlab grade --json` and `otter run` processes of the solution, interleaved."""
    sol = tmp / "otter" / "solution.ipynb"
    sol.parent.mkdir()
    shutil.copy(lab.solution_notebook, sol)
    ours, otter = [], []
    if otter_runs and not (lab.autograder_dir / f"{lab.id}-otter.zip").exists():  # git does not keep the zips
        subprocess.run([*_attnlab(), "build", lab.id], check=True, capture_output=True)
    for i in range(max(runs, otter_runs)):
        if i < runs:
            ours.append(_timed([*_attnlab(), "grade", lab.id, str(lab.solution_notebook), "--json"]))
        if i < otter_runs:
            otter.append(_timed([str(BIN / "otter"), "run", "-a", str(lab.autograder_dir / f"{lab.id}-otter.zip"),
                                 str(sol), "-o", str(sol.parent)]))
    return ours, otter


def _batch(lab, tmp: Path, copies: int) -> float:
    """A whole `attnlab grade LAB FOLDER --out OUT --jobs 2` of ``copies`` submissions: wall per submission."""
    samples = make_demo_submissions(lab, tmp / "samples", n_buggy=4)
    batch = tmp / "batch"
    batch.mkdir()
    for i in range(copies):
        src = samples[i % len(samples)]
        shutil.copy(src, batch / f"s{i:03d}-{src.name}")
    return _timed([*_attnlab(), "grade", lab.id, str(batch), "--out", str(tmp / "batch-out"), "--jobs", "2"]) / copies


def _gradescope(lab, tmp: Path, runs: int) -> list[float]:
    """The Gradescope zip's run_autograder on the solution, each time in a fresh simulated container."""
    times = []
    for i in range(runs):
        root = tmp / f"gradescope{i}"
        for sub in ("source/bundle", "submission", "results"):
            (root / sub).mkdir(parents=True)
        for name in FILES:
            if (lab.autograder_dir / name).exists():
                shutil.copy(lab.autograder_dir / name, root / "source" / "bundle" / name)
        script = root / "source" / "run_autograder"
        script.write_text(run_autograder(lab.id))
        script.chmod(0o755)
        shutil.copy(lab.solution_notebook, root / "submission" / "mine.ipynb")
        times.append(_timed([str(script)], env=dict(os.environ, AUTOGRADER_ROOT=str(root),
                                                    ATTNLAB_PYTHON=sys.executable)))
    return times


def _in_process(lab) -> float:
    from attnlab.grading.runner import grade_submission

    grade_submission(lab.autograder_dir, lab.solution_notebook)  # imports, bundle, zygote
    start = time.perf_counter()
    grade_submission(lab.autograder_dir, lab.solution_notebook)
    return time.perf_counter() - start


def _s(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def lab_row(lab, args) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        ours, otter = _one_and_otter(lab, tmp, args.runs, args.otter_runs)
        per = _batch(lab, tmp, args.copies) if args.copies else None
        gradescope = _gradescope(lab, tmp, args.gradescope_runs)
    ratio = f"{statistics.median(ours) / statistics.median(otter):.2f}" if ours and otter else "-"
    inside = f"{_in_process(lab):.2f}" if args.in_process else "-"
    return (f"| {lab.id[:5]} | {_s(ours)} | {_s(otter)} | {ratio} | {'-' if per is None else f'{per:.2f}'} "
            f"| {_s(gradescope)} | {inside} |")


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--labs", default="all", help="all, or lab ids separated by commas")
    p.add_argument("--copies", type=int, default=20, help="submissions in the batch (0: no batch)")
    p.add_argument("--runs", type=int, default=3, help="whole `attnlab grade` processes of the solution")
    p.add_argument("--otter-runs", type=int, default=3, help="whole `otter run` processes of the solution (0: none)")
    p.add_argument("--gradescope-runs", type=int, default=3, help="run_autograder in a simulated container (0: none)")
    p.add_argument("--in-process", action="store_true", help="also one grade_submission in this warm process")
    args = p.parse_args()
    course = load_course(Path(__file__).resolve().parents[1])
    labs = course.select(None if args.labs == "all" else args.labs.split(","))
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, load average {_load():.1f} at "
          f"the start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; worker start: "
          f"{os.environ.get('ATTNLAB_WORKER_START', 'auto')}; seconds of wall, median (min-max) of the runs")
    print(HEADER.format(n=args.copies), flush=True)
    for lab in labs:
        print(lab_row(lab, args), flush=True)
    print(f"load average {_load():.1f} at the end, {time.strftime('%H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
