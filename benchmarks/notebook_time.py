"""Wall time of each lab's solution notebook, executed top to bottom in a fresh kernel.

    python benchmarks/notebook_time.py [LAB ...] [--fast|--full] [--device cpu|cuda]

Default: the size the kit picks by itself (fast without a GPU). The figure reported in release notes is
the one printed here, with the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from attnlab.course import load_course


def run(path: Path, env: dict[str, str]) -> float:
    nb = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        with tempfile.TemporaryDirectory() as cwd:  # Otter writes .OTTER_LOG into the kernel's folder
            start = time.perf_counter()
            NotebookClient(nb, timeout=1800, kernel_name="python3",
                           resources={"metadata": {"path": cwd}}).execute()
            return time.perf_counter() - start
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("labs", nargs="*")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--fast", action="store_true")
    size.add_argument("--full", action="store_true")
    p.add_argument("--device")
    args = p.parse_args()
    env = {"MPLBACKEND": "Agg"}
    if args.fast or args.full:
        env["ATTNLAB_FAST"] = "1" if args.fast else "0"
    if args.device:
        env["ATTNLAB_DEVICE"] = args.device
    root = Path(__file__).resolve().parents[1]
    shared = root.parent / "shared" / "data"  # the real data copies beside the repository (no internet here)
    if "ATTNLAB_DATA_MIRROR" not in os.environ and shared.is_dir():
        env["ATTNLAB_DATA_MIRROR"] = shared.as_uri()
    course = load_course(root)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; env {env}")
    for lab in course.select(args.labs):
        seconds = run(lab.solution_notebook, env)
        print(f"{lab.id:32} {seconds:7.1f} s")


if __name__ == "__main__":
    main()
