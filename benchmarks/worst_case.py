"""The longest one submission can hold a grading slot, measured with a notebook built to stretch it.

    python benchmarks/worst_case.py [--lab lab05_self_attention] [--scale 1.0] [--notebook stretch|swallowers]

The notebook is the lab's solution with, after it:

- cells that each sleep just under the cell limit, as many as fit just under the load limit (every load pays them);
- five cells that outlive the worker's own timer (``except BaseException`` around a sleep, a bare ``except:``
  around a loop, a replaced SIGALRM handler, a thread that keeps running, a masked SIGALRM), each stopped from
  outside at the cell limit (or the load limit) and skipped on the next start;
- the lab's first question redefined as a function that swallows everything, so that each call runs to the call
  limit and the next one restarts the worker, which loads the sleeping cells again.

``--notebook swallowers``: the solution and five cells of ``while True: try: time.sleep(1000) except BaseException:
pass`` instead (each stopped at the cell limit and skipped; the solution still graded).

It is graded in this process by ``grade_submission`` with every limit (cell, load, call, test, submission) at
``--scale`` times its default. The figure is the wall time of that grade beside ``runner.worst_case_s``, the
stated bound: the submission limit, then the kill of its worker and the diagnosis at its wall backstop.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from attnlab.course import load_course
from attnlab.grading import runner
from attnlab.grading.core.bundle import load_bundle

SWALLOWERS = [
    "import time\nwhile True:\n    try:\n        time.sleep(1000)\n    except BaseException:\n        pass\n",
    "while True:\n    try:\n        while True:\n            pass\n    except:\n        pass\n",
    "import signal, time\nsignal.signal(signal.SIGALRM, lambda *a: None)\nwhile True:\n    time.sleep(0.01)\n",
    "import threading\ndef _spin():\n    while True:\n        sum(range(1000))\nt = threading.Thread(target=_spin)\n"
    "t.start()\nwhile True:\n    try:\n        t.join()\n    except BaseException:\n        pass\n",
    "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\nwhile True:\n"
    "    time.sleep(0.05)\n",
]


def stretching_notebook(solution: Path, question: str, limits: dict, path: Path) -> Path:
    """``solution`` with the cells that stretch its grade (the module's docstring), written to ``path``."""
    nb = nbformat.read(solution, as_version=4)
    sleep = 0.9 * limits["cell_timeout"]
    sleepers = max(1, int(0.95 * limits["load_timeout"] // sleep))
    cells = [f"import time\ntime.sleep({sleep:.3f})\n"] * sleepers + SWALLOWERS
    cells.append(f"def {question}(*args, **kwargs):\n    while True:\n        try:\n            time.sleep(1000)\n"
                 "        except BaseException:\n            pass\n")
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)
    return path


def swallowing_notebook(solution: Path, path: Path) -> Path:
    """``solution`` with five cells that catch the worker's timer (the module's docstring), written to ``path``."""
    nb = nbformat.read(solution, as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(SWALLOWERS[0]) for _ in range(5)]
    nbformat.write(nb, path)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lab", default="lab05_self_attention")
    parser.add_argument("--scale", type=float, default=1.0, help="every limit at this times its default")
    parser.add_argument("--notebook", choices=("stretch", "swallowers"), default="stretch")
    args = parser.parse_args()
    course = load_course()
    lab_dir = course.root / "autograder" / args.lab
    solution = course.root / "solutions" / args.lab / f"{args.lab}.ipynb"
    limits = {"cell_timeout": runner.DEFAULT_CELL_TIMEOUT, "load_timeout": runner.DEFAULT_LOAD_TIMEOUT,
              "call_timeout": runner.DEFAULT_CALL_TIMEOUT, "test_timeout": runner.DEFAULT_TEST_TIMEOUT,
              "timeout": runner.DEFAULT_SUBMISSION_TIMEOUT}
    limits = {k: v * args.scale for k, v in limits.items()}
    question = next(iter(load_bundle(lab_dir).questions))
    print(f"load average {os.getloadavg()[0]:.2f}; limits {limits}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{args.notebook}.ipynb"
        if args.notebook == "stretch":
            stretching_notebook(solution, question, limits, path)
        else:
            swallowing_notebook(solution, path)
        started = time.monotonic()
        res = runner.grade_submission(lab_dir, path, **limits)
        took = time.monotonic() - started
    print(f"load average {os.getloadavg()[0]:.2f}")
    for line in res["errors"]:
        print("  error:", line[:160])
    bound = runner.worst_case_s(limits["timeout"])
    print(f"| {args.lab} | {args.notebook} | x{args.scale:g} | {limits['timeout']:g} s | {bound:g} s | {took:.1f} s "
          f"| {res['score']:g} / {res['max_score']:g} | {res['isolation'].split(';')[0]} |")
    return 0 if took <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
