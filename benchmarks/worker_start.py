"""What the zygote saves: a worker's start, the load of a three-line cell and one call, forked and cold.

    python benchmarks/worker_start.py [--runs 5]

Prints the zygote's own start (once per grader process: imports and warm-up), then the median of `--runs`
starts from the zygote (ATTNLAB_WORKER_START=fork) and cold (ATTNLAB_WORKER_START=cold), twice, alternating.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from attnlab.grading import runner
from attnlab.grading.worker.remote import RemoteStudent
from attnlab.grading.worker.sandbox import forked

CODE = "import torch\nimport matplotlib.pyplot as plt\ndef f(x):\n    return torch.softmax(x, -1)\n"


def one_start() -> float:
    workdir = tempfile.mkdtemp(prefix="attnlab-start-")
    os.chmod(workdir, 0o777)
    student = RemoteStudent(lambda: runner._start_worker(Path(workdir), [])[0],
                            [{"index": 0, "source": CODE, "where": "c"}], CODE, cell_timeout=60, load_timeout=120,
                            call_timeout=60)
    start = time.perf_counter()
    student.start()
    student.call("f", torch.randn(4, 8))
    took = time.perf_counter() - start
    student.close()
    os.rmdir(workdir)
    return took


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f}")
    start = time.perf_counter()
    forked.zygote_for(runner._worker_env())
    print(f"zygote start (imports and warm-up, once per grader process): {time.perf_counter() - start:.2f} s")
    for mode in ("fork", "cold", "fork", "cold"):
        os.environ[forked.ENV_START] = mode
        times = [one_start() for _ in range(args.runs)]
        print(f"{mode}: start + load + first call, median {statistics.median(times):.2f} s "
              f"({', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    main()
