"""Workers started by fork from the warm zygote (sandbox/zygote.py, forked.py): the same isolation as the cold
start, nothing handed from one child to the next, and the start in force named in every report.

test_sandbox.py probes with the system Python, which the zygote (this grader's Python) cannot fork, so those
tests exercise the cold start; the probes here use this Python, and ATTNLAB_WORKER_START=fork makes a fork that
is not possible an error rather than a silent cold start. The attack and batch tests grade through the runner,
whose worker is forked wherever this is possible (run them with ATTNLAB_WORKER_START=cold for the cold path).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import socket
import sys
import tempfile
import textwrap
import time

import pytest

from attnlab.grading.worker import sandbox
from attnlab.grading.worker.sandbox import Limits, run_once, spawn
from attnlab.grading.worker.sandbox.proctable import process_table

PY = sys.executable
MIB = 2**20


@pytest.fixture
def workdir():
    path = tempfile.mkdtemp(prefix="attnlab-zygote-test-")
    os.chmod(path, 0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def forked(monkeypatch, workdir):
    """Every spawn below must fork (skipped where forking is not possible here, with the reason)."""
    monkeypatch.setenv(sandbox.ENV_START, "fork")
    try:
        with spawn([PY, "-c", "pass"], workdir=workdir) as box:
            box.wait(60)
    except RuntimeError as exc:
        pytest.skip(str(exc))
    assert box.report.start.startswith("by fork from a warm zygote"), box.report.start


def run(code: str, workdir: str, *args: str, limits: Limits | None = None, timeout: float = 60):
    rc, out, err, timed_out = run_once([PY, "-c", textwrap.dedent(code), *args], workdir=workdir, limits=limits,
                                       timeout=timeout)
    return rc, out.decode(), err.decode(), timed_out


def by_uid(uid: int) -> list[int]:
    return [p.pid for p in process_table(with_uid=True).values() if p.uid == uid and not p.zombie]


def test_the_start_in_force_is_reported(workdir, monkeypatch):
    monkeypatch.setenv(sandbox.ENV_START, "cold")
    with spawn([PY, "-c", "pass"], workdir=workdir) as box:
        assert box.wait(60) == 0
    assert box.report.start == "cold (ATTNLAB_WORKER_START=cold)"
    assert "started cold (ATTNLAB_WORKER_START=cold)" in box.report.summary()
    monkeypatch.setenv(sandbox.ENV_START, "auto")
    with spawn(["/bin/sh", "-c", "true"], workdir=workdir) as box:  # not this Python: never forked
        assert box.wait(60) == 0
    assert box.report.start.startswith("cold (")
    monkeypatch.setenv(sandbox.ENV_START, "fork")
    with pytest.raises(RuntimeError, match="ATTNLAB_WORKER_START=fork.*cannot be forked.*none"):
        spawn([PY, "-c", "pass"], workdir=workdir, mechanism="none")
    monkeypatch.setenv(sandbox.ENV_START, "warm")
    with pytest.raises(ValueError, match="'warm'.*auto, fork, cold"):
        spawn([PY, "-c", "pass"], workdir=workdir)


def test_a_forked_worker_sees_and_holds_what_a_cold_one_does(forked, workdir, monkeypatch):
    monkeypatch.setenv("ATTNLAB_GRADING_SECRET", "s3cret-zygote-test")
    secret_dir = tempfile.mkdtemp(prefix="attnlab-zygote-secret-")
    os.chmod(secret_dir, 0o755)
    with open(os.path.join(secret_dir, "reference.py"), "w") as f:
        f.write("ANSWER = 42\n")
    os.chmod(os.path.join(secret_dir, "reference.py"), 0o644)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    code = """
        import os, socket, sys
        def can(fn):
            try:
                fn()
                return True
            except OSError:
                return False
        status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
        print("uid", status["Uid"].split(), "caps", status["CapEff"].strip(), status["CapBnd"].strip(),
              "nnp", status["NoNewPrivs"].strip())
        print("secret", can(lambda: open(sys.argv[1]).read()), "/root",
              os.listdir("/root") if os.path.isdir("/root") else None)
        def environ(pid):
            try:
                return open(f"/proc/{pid}/environ").read()
            except OSError:
                return ""
        print("env", sorted(os.environ), "leak", any("s3cret" in environ(p) for p in os.listdir("/proc") if p.isdigit()))
        print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), socket.gethostname())
        print("net", can(lambda: socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=2)))
        print("write", can(lambda: open(sys.prefix + "/attnlab-zygote-probe", "w")), os.getcwd() == sys.argv[3])
    """
    try:
        rc, out, err, _ = run(code, workdir, os.path.join(secret_dir, "reference.py"),
                              str(server.getsockname()[1]), workdir)
    finally:
        server.close()
        shutil.rmtree(secret_dir)
    assert rc == 0, err
    lines = dict(line.split(" ", 1) for line in out.splitlines())
    uid = eval(lines["uid"].split(" caps")[0])  # noqa: S307 - our own probe's list of four uids
    assert len(set(uid)) == 1 and int(uid[0]) != 0 and lines["uid"].endswith("caps 0000000000000000 "
                                                                                 "0000000000000000 nnp 1")
    needed_under_root = {p.split("/")[2] for p in sandbox.python_paths() if p.startswith("/root/")}
    readable, _, root_entries = lines["secret"].partition(" /root ")
    assert readable == "False" and set(eval(root_entries) or []) <= needed_under_root  # noqa: S307
    assert "leak False" in lines["env"] and "ATTNLAB_GRADING_SECRET" not in lines["env"]
    assert lines["pids"].split("] ")[1] == "sandbox" and max(eval(lines["pids"].split("] ")[0] + "]")) < 10  # noqa: S307
    assert lines["net"] == "False" and lines["write"] == "False True"


def test_limits_hold_in_a_forked_worker(forked, workdir):
    bomb = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))"
    rc, _, err, _ = run(bomb, workdir, limits=Limits(memory_bytes=1024 * MIB))
    assert rc == 1 and "MemoryError" in err
    rc, _, _, timed_out = run("while True: pass", workdir, limits=Limits(cpu_seconds=1), timeout=30)
    assert not timed_out and rc in (-signal.SIGXCPU, -signal.SIGKILL)
    write = """
        import errno
        try:
            with open("big.bin", "wb") as f:
                for _ in range(64):
                    f.write(b"x" * 2**20)
                    f.flush()
        except OSError as e:
            print(e.errno)
    """
    rc, out, err, _ = run(write, workdir, limits=Limits(disk_bytes=8 * MIB))
    assert out.strip() == str(errno.ENOSPC), out + err
    files = "import os\nfor i in range(100):\n    try:\n        os.open('/dev/null', 0)\n    except OSError as e:\n" \
            "        print(i, e.errno)\n        break"
    rc, out, _, _ = run(files, workdir, limits=Limits(open_files=32))
    assert int(out.split()[0]) < 32 and int(out.split()[1]) == errno.EMFILE


def test_a_fork_bomb_and_a_detached_grandchild_die_with_kill_tree(forked, workdir):
    code = """
        import os, time
        for n in range(100):
            try:
                if os.fork() == 0:
                    os.setsid()
                    time.sleep(120)
                    os._exit(0)
            except OSError as e:
                print(n, e.errno, flush=True)
                break
        time.sleep(120)
    """
    with spawn([PY, "-c", textwrap.dedent(code)], workdir=workdir, limits=Limits(max_processes=16)) as box:
        forks, error = map(int, box.stdout.readline().split())
        assert error == errno.EAGAIN and forks < 16
        assert 1 < len(by_uid(box.uid)) <= 16
        box.kill_tree()
        assert by_uid(box.uid) == [] and box.returncode == -signal.SIGKILL


def test_a_child_inherits_nothing_from_an_earlier_child(forked, workdir):
    leave = """
        import os, torch, random
        for path in ("/tmp/left", "/dev/shm/left", "left"):
            open(path, "w").write("x")
        torch.LEFT_BEHIND = True
        torch.nn.functional.softmax = None
        print(torch.rand(1).item(), random.random())
    """
    look = """
        import os, torch, random
        print([p for p in ("/tmp/left", "/dev/shm/left", "left") if os.path.exists(p)],
              hasattr(torch, "LEFT_BEHIND"), torch.nn.functional.softmax is None, torch.rand(1).item(), random.random())
    """
    rc, first, err, _ = run(leave, workdir)
    assert rc == 0, err
    rc, second, err, _ = run(look, workdir)
    assert rc == 0, err
    assert second.split()[:3] == ["[]", "False", "False"], second
    assert second.split()[3:] != first.split()  # fresh random states, as a new process draws
    assert os.listdir(workdir) == []  # the workdir is a copy: nothing comes back


def test_a_submission_grades_the_same_forked_and_cold(built_course, monkeypatch):
    from attnlab.grading.runner import grade_submission

    lab = built_course / "autograder" / "lab99_demo"
    solution = built_course / "solutions" / "lab99_demo" / "lab99_demo.ipynb"
    results = {}
    for start in ("cold", "auto"):
        monkeypatch.setenv(sandbox.ENV_START, start)
        began = time.monotonic()
        results[start] = grade_submission(lab, solution)
        results[start]["took"] = time.monotonic() - began
    cold, auto = results["cold"], results["auto"]
    assert "started cold (ATTNLAB_WORKER_START=cold)" in cold["isolation"]
    assert "started " in auto["isolation"]
    for key in ("score", "max_score", "questions", "errors", "review"):
        assert auto[key] == cold[key], key
    assert auto["score"] == auto["max_score"]


def test_the_zygote_serves_before_its_idle_imports_and_finishes_them_when_idle(forked, workdir):
    """The zygote says it is ready after PRELOAD (torch and the worker); WHEN_IDLE's imports and the warm-up run one
    step at a time while no request waits, so a grader never waits for them, and later children inherit them."""
    from attnlab.grading.worker.sandbox import zygote

    assert "tqdm.auto" in zygote.WHEN_IDLE and "tqdm.auto" not in zygote.PRELOAD
    assert not any(name.startswith("matplotlib") for name in zygote.PRELOAD + zygote.WHEN_IDLE)  # deferred instead
    look = "import sys; print(all(m in sys.modules for m in sys.argv[1:]))"
    deadline = time.monotonic() + 120
    while True:  # the idle steps take a few seconds on a loaded machine: a child forked after them has them all
        rc, out, err, _ = run(look, workdir, *zygote.WHEN_IDLE)
        assert rc == 0, err
        if out.split() == ["True"] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert out.split() == ["True"], "the zygote never imported WHEN_IDLE while idle"
