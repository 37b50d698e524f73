"""What each sandbox mechanism isolates and enforces on this machine, measured, and what it costs to start.

    .venv/bin/python benchmarks/sandbox_report.py          # as root it also re-runs itself as uid 65534

For each mechanism that works here: the isolation report, then a table of small attacks (each bounded by small
limits and a timeout) saying whether the limit held and whether the report claimed it, then the start-up
overhead of ``spawn`` over a plain ``subprocess`` (median of 10 runs of ``/bin/true`` and of ``python -c pass``).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

from attnlab.grading.worker import sandbox
from attnlab.grading.worker.sandbox import Limits
from attnlab.grading.worker.sandbox.host import others_cannot_run

# The system Python starts fast and any uid can run it; the grader's own may live under /root (mode 700).
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
MIB = 2**20

ATTACKS = {  # name -> (limits, program, the Limits/report field it tests)
    "memory 100 GB": (Limits(memory_bytes=256 * MIB), """
        chunks = []
        for _ in range(1600):
            chunks.append(bytearray(64 * 2**20))
    """, "memory_bytes"),
    "cpu loop": (Limits(cpu_seconds=1), "while True: pass", "cpu_seconds"),
    "fork 50": (Limits(max_processes=8), """
        import os, time
        for _ in range(50):
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
    """, "max_processes"),
    "file 1 GB": (Limits(file_size_bytes=8 * MIB), """
        with open("big", "wb") as f:
            for _ in range(256):
                f.write(bytes(4 * 2**20))
    """, "file_size_bytes"),
    "open 1000 files": (Limits(open_files=16), "files = [open('/dev/null') for _ in range(1000)]", "open_files"),
    "disk 1 GB": (Limits(disk_bytes=8 * MIB, file_size_bytes=2**30), """
        with open("big", "wb") as f:
            for _ in range(256):
                f.write(bytes(4 * 2**20))
    """, "disk_bytes"),
}


def attack(mechanism: str, limits: Limits, program: str) -> bool:
    """True when the attack was stopped (the program failed before finishing)."""
    workdir = tempfile.mkdtemp(prefix="attnlab-bench-")
    try:
        rc, _, _, timed_out = sandbox.run_once([PY, "-c", textwrap.dedent(program)], workdir=workdir,
                                               limits=limits, timeout=20, mechanism=mechanism)
        return rc != 0 and not timed_out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def isolation_checks(mechanism: str) -> dict[str, bool]:
    """network_isolated, filesystem_hidden, pid_namespace (the worker sees only its own processes) and whether
    kill_tree killed a detached grandchild, measured."""
    workdir = tempfile.mkdtemp(prefix="attnlab-bench-")
    secret_dir = tempfile.mkdtemp(prefix="attnlab-bench-secret-")
    os.chmod(secret_dir, 0o755)
    with open(os.path.join(secret_dir, "answer"), "w") as f:
        f.write("42")
    os.chmod(os.path.join(secret_dir, "answer"), 0o644)
    marker = f"attnlab-bench-{uuid.uuid4().hex}"
    try:
        with socket.socket() as server:
            server.bind(("127.0.0.1", 0))
            server.listen()
            program = f"""
                import os, socket, sys, time
                try:
                    socket.create_connection(("127.0.0.1", {server.getsockname()[1]}), timeout=2)
                    print("net-open")
                except OSError:
                    pass
                try:
                    open({os.path.join(secret_dir, "answer")!r}).read()
                    print("file-visible")
                except OSError:
                    pass
                print("processes", sum(p.isdigit() for p in os.listdir("/proc")))
                if os.fork() == 0:
                    os.setsid()
                    if os.fork() == 0:
                        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
                    os._exit(0)
                time.sleep(0.5)
            """
            rc, out, _, _ = sandbox.run_once([PY, "-c", textwrap.dedent(program)], workdir=workdir, timeout=20,
                                             hide=[secret_dir], mechanism=mechanism)
        time.sleep(0.2)
        survivors = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline_has(p, marker)]
        seen = int(out.split(b"processes")[1].split()[0])
        return {"network_isolated": b"net-open" not in out, "filesystem_hidden": b"file-visible" not in out,
                "pid_namespace": seen < 10, "detached child killed": not survivors}
    finally:
        for p in os.listdir("/proc"):  # never leave a survivor behind, whatever the mechanism
            if p.isdigit() and _cmdline_has(p, marker):
                os.kill(int(p), 9)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(secret_dir, ignore_errors=True)


def _cmdline_has(pid: str, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def startup_ms(mechanism: str | None, argv: list[str], runs: int = 10) -> float:
    """Median milliseconds from start to exit; mechanism None: a plain subprocess."""
    workdir = tempfile.mkdtemp(prefix="attnlab-bench-")
    times = []
    try:
        for _ in range(runs):
            start = time.perf_counter()
            if mechanism is None:
                subprocess.run(argv, cwd=workdir, stdin=subprocess.DEVNULL, capture_output=True, check=True)
            else:
                with sandbox.spawn(argv, workdir=workdir, mechanism=mechanism) as box:
                    box.stdin.close()
                    if box.wait(30) != 0:
                        raise RuntimeError(f"{mechanism}: {argv} failed: {box.stderr_tail().decode()[-300:]}")
            times.append((time.perf_counter() - start) * 1000)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return statistics.median(times)


def report_for_this_user() -> None:
    who = f"uid {os.getuid()}" + (" (root)" if os.geteuid() == 0 else "")
    print(f"\n## As {who}; probe programs run with {PY}\n")
    working = [m for m in sandbox.MECHANISMS if not sandbox.available(m)]
    for m in sandbox.MECHANISMS:
        if m not in working:
            print(f"- {m}: does not work here: {sandbox.available(m)}")
    if sandbox.SETPRIV in working and others_cannot_run(PY):
        working.remove(sandbox.SETPRIV)
        print(f"- {sandbox.SETPRIV}: skipped: {others_cannot_run(PY)}")
    print(f"- chosen by default: {sandbox.probe().mechanism}\n")
    for m in working:
        report = sandbox.probe(mechanism=m)
        print(f"{m}: {report.summary()}")
        for note in report.notes:
            print(f"    note: {note}")
    print("\nHeld? measured (claimed by the report; ! marks a mismatch):\n")
    print(f"| {'attack':<22} | " + " | ".join(f"{m:<14}" for m in working) + " |")
    print(f"|{'-' * 24}|" + "|".join("-" * 16 for _ in working) + "|")
    rows: dict[str, list[str]] = {}
    for m in working:
        report = sandbox.probe(mechanism=m)
        measured = {name: attack(m, limits, program) for name, (limits, program, _) in ATTACKS.items()}
        claimed = {name: report.limits[field] for name, (_, _, field) in ATTACKS.items()}
        for name, held in isolation_checks(m).items():
            measured[name], claimed[name] = held, getattr(report, name, None)
        for name, held in measured.items():
            claim = {True: " (yes)", False: " (no)", None: ""}[claimed[name]]
            mismatch = claimed[name] is not None and held != claimed[name]
            rows.setdefault(name, []).append(f"{'yes' if held else 'no'}{claim}{' !' if mismatch else ''}")
    for name, cells in rows.items():
        print(f"| {name:<22} | " + " | ".join(f"{c:<14}" for c in cells) + " |")
    print("\nStart-up to exit, median of 10 (ms):\n")
    for argv in (["/bin/true"], [PY, "-c", "pass"]):
        base = startup_ms(None, argv)
        print(f"- {' '.join(argv)}: plain subprocess {base:.1f}")
        for m in working:
            t = startup_ms(m, argv)
            print(f"    {m:<14} {t:7.1f}  (+{t - base:.1f})")


def rerun_as_nobody() -> None:
    """Run this script as uid 65534 in a private mount namespace where this Python's folders under /root (often
    mode 700) are reachable, as on a machine with Python in /usr or /opt."""
    stage = tempfile.mkdtemp(prefix="attnlab-bench-root-")
    binds = [p for p in sandbox.python_paths() if p.startswith("/root/")]
    script = ["set -e", f"mount -t tmpfs -o mode=0755,size=1m attnlab-bench {stage}"]
    for p in binds:
        script += [f"mkdir -p {stage}{p[5:]}", f"mount --rbind {p} {stage}{p[5:]}"]
    script += [f"mount --move {stage} /root" if binds else "true",
               'exec setpriv --reuid 65534 --regid 65534 --clear-groups -- "$@"']
    try:
        done = subprocess.run(["unshare", "--mount", "sh", "-c", "\n".join(script), "sh", sys.executable,
                               os.path.abspath(__file__), "--this-user-only"], cwd="/tmp", timeout=600,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"})
        if done.returncode:
            print(f"(the run as uid 65534 failed with exit status {done.returncode})")
    finally:
        os.rmdir(stage)


def main() -> None:
    print("# attnlab sandbox report")
    report_for_this_user()
    sys.stdout.flush()
    if "--this-user-only" not in sys.argv and os.geteuid() == 0:
        if sandbox.available(sandbox.UNSHARE):
            print(f"\n(not re-run as a normal user: {sandbox.available(sandbox.UNSHARE)})")
        else:
            rerun_as_nobody()


if __name__ == "__main__":
    main()
