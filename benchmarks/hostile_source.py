"""The grader's own memory and time on hostile source: each case graded in a fresh process, its peak resident memory
(``VmHWM`` of /proc/self/status) above the baseline it had after loading the bundle, and its seconds.

    python benchmarks/hostile_source.py [--lab autograder/lab05_self_attention] [CASE ...]

The documented bound (docs/GRADING.md, "Bounded cost per submission") is 160 MiB above the grader's
baseline; ``notebook_code.py``'s limits refuse source the analysis cannot afford before anything is parsed.
``tests/grading/test_hostile_source.py`` runs the same cases through ``measure``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOUND_MIB = 160


def _nb(sources: list[str]) -> dict:
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
              "source": s} for i, s in enumerate(sources)]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _at_the_limits() -> list[str]:
    """The largest source the limits accept: the solution (so that every hidden test runs, and re-reads the source
    where it checks it), then cells of ``x = [a, a, ...]`` up to the syntax nodes allowed."""
    import ast

    from attnlab.grading.source.notebook_code import MAX_AST_NODES, MAX_CELL_CHARS, python_source, tree_size

    cells = _solution() + ["a = 0\n"]
    nodes = sum(tree_size(ast.parse(python_source(c)))[0] for c in cells)
    per_cell = min(MAX_CELL_CHARS // 2 - 20, MAX_AST_NODES // 8)  # each `a` is two nodes: Name and its Load
    while nodes + 2 * per_cell + 6 <= MAX_AST_NODES:
        cells.append(f"x{len(cells)} = [" + "a," * per_cell + "]\n")
        nodes += 2 * per_cell + 5
    return cells


def _solution() -> list[str]:
    """The lab's solution (the reference for the figures: an honest grade)."""
    from attnlab.grading.source.notebook_code import read_cells

    return [c.source for c in read_cells(ROOT / "solutions" / LAB / f"{LAB}.ipynb")]


LAB = "lab05_self_attention"
CASES = {  # name -> the notebook's code cells
    "solution": _solution,
    "5mb_source": lambda: ["x = [" + "a," * (5 * 2**20 // 2) + "]\n"],
    "512k_cell": lambda: ["x = [" + "a," * (2**18) + "]\n"],
    "5mb_in_32k_cells": lambda: ["y = [" + "a," * (2**14 - 8) + "]\n"] * 160,
    "deep_nesting": lambda: ["x = " + "-" * 5000 + "1\n"],
    "long_chain": lambda: ["x = 1" + "+1" * 15000 + "\n"],
    "tiny_cells": lambda: ["a\n"] * 100_000,
    "tiny_cells_at_limit": lambda: ["a\n"] * 1_500,
    "at_the_limits": _at_the_limits,
}

_CHILD = r"""
import json, sys, time
def hwm():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024
from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.runner import grade_submission, warm_up
lab_dir, path = sys.argv[1], sys.argv[2]
warm_up(lab_dir)
load_bundle(lab_dir)
base, start = hwm(), time.monotonic()
result = grade_submission(lab_dir, path, timeout=120)
print(json.dumps({"growth_mib": hwm() - base, "seconds": time.monotonic() - start, "score": result["score"],
                  "problems": result["problems"], "errors": result["errors"][:3]}))
"""


def measure(case: str, lab_dir: str | Path, env: dict | None = None) -> dict:
    """Grade ``case`` in a fresh process; its figures and the result's problems."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{case}.ipynb"
        path.write_text(json.dumps(_nb(CASES[case]())))
        size = path.stat().st_size / 2**20
        proc = subprocess.run([sys.executable, "-c", _CHILD, str(lab_dir), str(path)], capture_output=True,
                              text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{case}: the grading process failed:\n{proc.stderr[-3000:]}")
    return {"case": case, "file_mib": size,
            **json.loads(proc.stdout.strip().splitlines()[-1])}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument("--lab", default=str(ROOT / "autograder" / LAB))
    args = parser.parse_args(argv)
    for case in args.cases:
        r = measure(case, args.lab)
        kinds = ",".join(p["category"] for p in r["problems"]) or "-"
        print(f"{case:22} +{r['growth_mib']:6.1f} MiB (bound {BOUND_MIB}) {r['seconds']:6.1f} s  "
              f"score {r['score']:g}  problems: {kinds}  {r['errors'][0][:100] if r['errors'] else ''}")


if __name__ == "__main__":
    main()
