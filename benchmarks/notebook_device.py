"""Run solution notebooks top to bottom without Jupyter, on whatever device torch picks (CUDA where present).

For machines that have torch but no Jupyter or Otter (a lent GPU box): the code cells run in one namespace, the
set-up cell is replaced by ``device = pick_device()``, shell and magic lines are dropped, and each
``grader.check("name")`` runs that question's packaged public checks (the ``test_case`` functions of
``attnlab/kit/generated/public_tests/<lab>/<name>.py``, loaded with a minimal stand-in for ``otter.test_files``).

    PYTHONPATH=src python benchmarks/notebook_device.py solutions/lab05_self_attention/lab05_self_attention.ipynb

Prints one JSON line per notebook: device, fast mode, wall seconds, the slowest cells, and failing checks.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import time
import traceback
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")


def _install_otter_stand_in() -> None:
    """``from otter.test_files import test_case`` records the decorated checks (Otter itself is not needed here)."""
    otter = types.ModuleType("otter")
    test_files = types.ModuleType("otter.test_files")

    def test_case(name=None, points=None, hidden=False, **_):
        def mark(fn):
            fn._check_name = name or fn.__name__
            return fn
        return mark

    test_files.test_case = test_case
    otter.test_files = test_files
    sys.modules.update({"otter": otter, "otter.test_files": test_files})


class Checks:
    """``grader.check(name)``: run the question's public checks against the notebook's namespace."""

    def __init__(self, lab_id: str, env: dict):
        import attnlab.labkit as labkit
        self.folder, self.env, self.failures = labkit.public_tests_dir(lab_id), env, []

    def check(self, name: str):
        spec = importlib.util.spec_from_file_location(f"_checks_{name}", self.folder / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found = [v for v in vars(module).values() if callable(v) and hasattr(v, "_check_name")]
        if not found:
            self.failures.append(f"{name}: no check found in {self.folder / (name + '.py')}")
        for fn in found:
            try:
                fn(self.env)
            except Exception as exc:  # noqa: BLE001 - every failing check is reported, the run goes on
                self.failures.append(f"{name} / {fn._check_name}: {type(exc).__name__}: {str(exc)[:200]}")


def _code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"] if c["cell_type"] == "code"]


def run_notebook(path: Path) -> dict:
    import torch

    from attnlab.kit.device import is_fast_mode, pick_device
    lab_id = path.stem
    env: dict = {"__name__": "__main__"}
    grader = Checks(lab_id, env)
    env.update(grader=grader, device=pick_device())
    cells, start, errors = [], time.perf_counter(), []
    for i, source in enumerate(_code_cells(path)):
        if "start_lab(" in source:
            continue  # the set-up cell: its job (device, grader) is done above
        code = "\n".join(line for line in source.splitlines() if not re.match(r"\s*[%!]", line))
        t0 = time.perf_counter()
        try:
            exec(compile(code, f"<{lab_id} cell {i}>", "exec"), env)
        except Exception:  # noqa: BLE001 - report and go on, like a notebook run with errors allowed
            errors.append(f"cell {i}: " + traceback.format_exc(limit=3)[-600:])
        cells.append((time.perf_counter() - t0, i))
    return {"notebook": str(path), "device": str(env["device"]),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "fast_mode": is_fast_mode(), "wall_s": round(time.perf_counter() - start, 1),
            "slowest_cells": [[i, round(t, 1)] for t, i in sorted(cells, reverse=True)[:4]],
            "failed_checks": grader.failures, "cell_errors": errors}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    _install_otter_stand_in()
    bad = 0
    for path in args.notebooks:
        result = run_notebook(path)
        bad += bool(result["failed_checks"] or result["cell_errors"])
        print(json.dumps(result), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
