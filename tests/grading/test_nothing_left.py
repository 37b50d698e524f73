"""Nothing of a grading task outlives it: its main process killed with SIGKILL (the OOM killer, ``kill -9``, a node
agent), its forked grader processes, the workers' zygote, the monitors and the sandboxed workers all end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab.grading.scale import pool

LAB = "lab99_demo"
SLEEPY = "import time as _time\n_time.sleep(120)\n"  # a cell that keeps its worker busy while the task is killed


def _processes() -> dict[int, tuple[int, str, int]]:
    """pid -> (parent pid, state, uid) of every process this machine shows."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            uid = (entry / "status").read_text().split("\nUid:")[1].split()[0]
        except (OSError, IndexError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        found[int(entry.name)] = (int(fields[1]), fields[0], int(uid))
    return found


def _descendants(root: int) -> dict[int, tuple[int, str, int]]:
    table = _processes()
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, (parent, _, _) in table.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    return {pid: table[pid] for pid in tree - {root} if pid in table}


def _alive(pids) -> list[int]:
    table = _processes()
    return sorted(p for p in pids if p in table and table[p][1] != "Z")


def _workers(tree: dict, cmdlines: bool = True) -> int:
    """Workers running in the tree: a sandbox uid (not ours) or the worker module on the command line."""
    count = 0
    for pid, (_, _, uid) in tree.items():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        count += uid != os.getuid() or (cmdlines and b"attnlab.grading.worker.process" in cmd)
    return count


@pytest.mark.skipif(not Path("/proc/self/stat").exists() or pool.start_method() != "processes",
                    reason="reads /proc; grader processes need Linux fork")
def test_killing_the_tasks_main_process_leaves_nothing_running(built_course, tmp_path):
    import nbformat

    subs = tmp_path / "subs"
    subs.mkdir()
    nb = nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(SLEEPY))
    for name in ("a", "b"):
        nbformat.write(nb, subs / f"{name}.ipynb")
    task = subprocess.Popen([sys.executable, "-c", "import sys; from attnlab.cli import main; sys.exit(main())",
                             "--root", str(built_course), "grade", LAB, str(subs), "--out", str(tmp_path / "out"),
                             "--jobs", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while _workers(_descendants(task.pid)) < 2:
            assert task.poll() is None and time.monotonic() < deadline, task.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        time.sleep(1)
        tree = _descendants(task.pid)
        assert len(tree) >= 4  # two grader processes and their workers at least (and the zygote, where forked)
        task.send_signal(signal.SIGKILL)
        task.wait(10)
        deadline = time.monotonic() + 30
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = _alive(tree)
        assert left == [], [(p, Path(f"/proc/{p}/cmdline").read_bytes()[:120]) for p in left]
    finally:
        for pid in _alive(_descendants(task.pid)) if task.poll() is None else []:
            os.kill(pid, signal.SIGKILL)
        if task.poll() is None:
            task.kill()
