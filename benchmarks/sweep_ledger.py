"""The seed sweep's ledger: which seeds each lab's suite has been swept at, for exactly which code.

A sweep of 500 seeds over every lab takes hours on a 2-core machine, more than one sitting, so its results are
kept as they come: one JSON line per (lab, run) in ``benchmarks/records/seed_sweep.jsonl``. A line holds the seeds
swept, what ran (reference, variants, mutants), the failures, and the SHA-256 of every file the verdicts could
depend on:

- the lab's built bundle, ``autograder/<lab>/`` (hidden tests, reference, catalogue, manifest; not the Otter zip,
  which repeats them);
- every ``attnlab`` module the sweep's processes had loaded when they finished (the grading modules, and what the
  reference's given code imports: datasets, training, plotting...).

A seed counts for a lab only while every one of those files still has the recorded digest: change a hidden test,
a tolerance rule or a given module and that lab's earlier seeds stop counting (``status`` names the files that
changed). A Python file's digest is that of its syntax tree without docstrings (comments and layout are not in
the tree), so editing documentation keeps the count; any change to code, a constant or a message resets it.
"""

from __future__ import annotations

import ast
import datetime
import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

LEDGER = Path("benchmarks") / "records" / "seed_sweep.jsonl"  # relative to the repository root


_DIGESTS: dict[bytes, str] = {}  # raw SHA-256 -> digest: a ledger of many lines names the same files


def _sha256(path: Path) -> str:
    """The SHA-256 of the file, or for Python source of its syntax tree without docstrings (the tree is parsed once
    per content in this process)."""
    data = path.read_bytes()
    raw = hashlib.sha256(data).digest()
    if raw not in _DIGESTS:
        _DIGESTS[raw] = _digest(data, path.suffix == ".py")
    return _DIGESTS[raw]


def _digest(data: bytes, python: bool) -> str:
    if python:
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError):
            return hashlib.sha256(data).hexdigest()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                    and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]
        data = ast.dump(tree, include_attributes=False).encode()
    return hashlib.sha256(data).hexdigest()


def loaded_modules(root: Path) -> set[str]:
    """The repository-relative paths of the ``attnlab`` modules this process has loaded from ``root/src``."""
    src = (root / "src").resolve()
    paths = set()
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if (name == "attnlab" or name.startswith("attnlab.")) and file:
            path = Path(file).resolve()
            if path.is_relative_to(src):
                paths.add(path.relative_to(root.resolve()).as_posix())
    return paths


def lab_files(root: Path, lab_id: str, modules: set[str]) -> dict[str, str]:
    """{repository-relative path: sha256} of the lab's bundle and of ``modules``."""
    bundle = root / "autograder" / lab_id
    paths = {p.relative_to(root).as_posix() for p in bundle.rglob("*") if p.is_file() and p.suffix != ".zip"
             and "__pycache__" not in p.parts}
    return {path: _sha256(root / path) for path in sorted(paths | modules) if (root / path).is_file()}


def _commit(root: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def record(root: Path, lab_id: str, seeds: list[int], *, kinds: list[str], failures: list, tests_run: int,
           seconds: float, modules: set[str], ledger: Path | None = None, note: str = "") -> dict:
    """Append one line for ``lab_id`` swept at ``seeds``; returns it."""
    entry = {
        "lab": lab_id, "seeds": _ranges(seeds), "kinds": kinds,
        "failures": [list(f) for f in failures], "tests_run": tests_run, "work_s": round(seconds, 1),
        "commit": _commit(root), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()}", "note": note,
        "files": lab_files(root, lab_id, modules),
    }
    path = root / (ledger or LEDGER)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
    return entry


def _ranges(seeds: list[int]) -> list[list[int]]:
    """Sorted seeds as [first, last] runs: [0, 1, 2, 7] -> [[0, 2], [7, 7]]."""
    runs: list[list[int]] = []
    for s in sorted(set(seeds)):
        if runs and s == runs[-1][1] + 1:
            runs[-1][1] = s
        else:
            runs.append([s, s])
    return runs


def entries(root: Path, ledger: Path | None = None) -> list[dict]:
    path = root / (ledger or LEDGER)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def changed_files(root: Path, entry: dict) -> list[str]:
    """The files of ``entry`` whose content is not the recorded one now (missing files included)."""
    return [p for p, digest in entry["files"].items()
            if not (root / p).is_file() or _sha256(root / p) != digest]


def covered(root: Path, lab_id: str, kinds: list[str], ledger: Path | None = None) -> set[int]:
    """The seeds at which ``lab_id`` was swept with at least ``kinds``, by code identical to today's."""
    seeds: set[int] = set()
    for entry in entries(root, ledger):
        if entry["lab"] == lab_id and set(kinds) <= set(entry["kinds"]) and not changed_files(root, entry):
            seeds |= {s for first, last in entry["seeds"] for s in range(first, last + 1)}
    return seeds


def status(root: Path, lab_ids: list[str], ledger: Path | None = None) -> str:
    """One row per lab: seeds covered today (reference+variants; with mutants), failures among them, and the
    files that changed since lines that no longer count."""
    rows = [f"{'lab':<30} {'seeds (ref+variants)':>20} {'with mutants':>12} {'failures':>8}  stale because of"]
    all_entries = entries(root, ledger)
    for lab_id in lab_ids:
        mine = [e for e in all_entries if e["lab"] == lab_id]
        current = [e for e in mine if not changed_files(root, e)]
        stale = sorted({p for e in mine for p in changed_files(root, e)})
        n_var = len(covered(root, lab_id, ["reference", "variant"], ledger))
        n_mut = len(covered(root, lab_id, ["reference", "variant", "mutant"], ledger))
        fails = sum(len(e["failures"]) for e in current)
        rows.append(f"{lab_id:<30} {n_var:>20} {n_mut:>12} {fails:>8}  "
                    + (", ".join(stale[:4]) + (f" (+{len(stale) - 4})" if len(stale) > 4 else "")))
    return "\n".join(rows)
