"""attnlab.grading.worker.sandbox: each test runs a short probe program in a sandbox, under a timeout and small limits.

Mechanisms that do not work on this machine are skipped with the reason ``sandbox.available`` gives. Probe programs
run with the system Python when there is one (fast to start, runnable by any uid); the torch test uses this
grader's Python, as the real worker does.
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

import pytest

from attnlab.grading.worker import sandbox
from attnlab.grading.worker.sandbox import Limits, probe, run_once, spawn
from attnlab.grading.worker.sandbox.host import others_cannot_run
from attnlab.grading.worker.sandbox.isolation import _availability, _kind

PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
ROOT = os.geteuid() == 0
MIB = 2**20
NAMESPACES = (sandbox.BWRAP, sandbox.UNSHARE)


@pytest.fixture(params=sandbox.MECHANISMS)
def mechanism(request):
    why = sandbox.available(request.param)
    if why:
        pytest.skip(f"{request.param} does not work here: {why}")
    if request.param == sandbox.SETPRIV and others_cannot_run(PY):
        pytest.skip(f"setpriv-only needs a Python other users can run: {others_cannot_run(PY)}")
    return request.param


@pytest.fixture
def workdir():
    path = tempfile.mkdtemp(prefix="attnlab-sandbox-test-")  # not under pytest's 0700 tmp: setpriv needs a path
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fresh_probe():
    """Re-test the mechanisms before and after a test that fakes what is installed."""
    _availability.clear()
    yield
    _availability.clear()


def run(
    code: str, mechanism: str, workdir: str, *args: str, limits: Limits | None = None, timeout: float = 30, **kwargs
) -> tuple[int, str, str, bool]:
    rc, out, err, timed_out = run_once(
        [PY, "-c", textwrap.dedent(code), *args],
        workdir=workdir,
        limits=limits,
        timeout=timeout,
        mechanism=mechanism,
        **kwargs,
    )
    return rc, out.decode(), err.decode(), timed_out


def marked(marker: str) -> list[int]:
    """Live Python processes (in any pid namespace) whose command line holds `marker` (bwrap, unshare and
    setpriv, which start them, are left out)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if argv[0] == PY.encode() and any(marker.encode() in a for a in argv) and int(name) != os.getpid():
                found.append(int(name))
        except (OSError, ValueError):
            pass
    return found


def read_line(box: sandbox.Sandboxed, timeout: float = 20) -> str:
    ready, _, _ = select.select([box.stdout], [], [], timeout)
    assert ready, f"no output within {timeout} s; stderr: {box.stderr_tail().decode(errors='replace')}"
    return box.stdout.readline().decode()


# ---------------------------------------------------------------- reports


def test_probe_is_quick_cached_and_one_line(fresh_probe):
    start = time.monotonic()
    report = probe(refresh=True)
    assert time.monotonic() - start < 2.0
    assert report.mechanism in sandbox.MECHANISMS
    assert probe() == report
    summary = report.summary()
    assert "\n" not in summary and summary.startswith(report.mechanism)
    assert set(report.limits) == {
        "memory_bytes",
        "cpu_seconds",
        "max_processes",
        "file_size_bytes",
        "open_files",
        "disk_bytes",
    }


def test_unknown_mechanism_names_the_value_and_the_choices(monkeypatch):
    monkeypatch.setenv("ATTNLAB_SANDBOX", "chroot")
    with pytest.raises(ValueError, match=r"'chroot'.*bwrap.*ATTNLAB_SANDBOX"):
        probe()


def test_each_mechanism_is_one_class_behind_one_interface():
    kinds = {name: _kind(name) for name in sandbox.MECHANISMS}
    assert [k.name for k in kinds.values()] == list(sandbox.MECHANISMS)  # best first
    for kind in kinds.values():
        assert isinstance(kind, sandbox.Mechanism)
        for method in ("check", "start"):  # no mechanism falls back on the base class
            assert getattr(type(kind), method) is not getattr(sandbox.Mechanism, method), (kind.name, method)
    assert {name for name, k in kinds.items() if k.namespaces} == set(NAMESPACES)
    assert _kind("off") is kinds[sandbox.NONE] and _kind("bwrap") is kinds[sandbox.BWRAP]
    assert sandbox.available("off") == sandbox.available(sandbox.NONE) == ""  # 'off' is the none mechanism
    with pytest.raises(ValueError, match=r"'chroot'.*bwrap"):
        sandbox.available("chroot")


def test_without_bwrap_it_degrades_and_says_why(monkeypatch, fresh_probe):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "bwrap" else real_which(tool))
    with pytest.raises(RuntimeError, match="bwrap not found.*apt-get install bubblewrap"):
        probe(refresh=True, mechanism="bwrap")
    report = probe(refresh=True)
    assert report.mechanism != sandbox.BWRAP
    assert any(note.startswith("bubblewrap unavailable: bwrap not found") for note in report.notes)


def test_limits_and_arguments_are_checked(workdir):
    with pytest.raises(ValueError, match=r"Limits.memory_bytes=0"):
        Limits(memory_bytes=0)
    with pytest.raises(NotADirectoryError, match="create it"):
        spawn([PY, "-c", "pass"], workdir=os.path.join(workdir, "missing"))
    if probe().mechanism in NAMESPACES:
        with pytest.raises(ValueError, match="Python needs"):
            spawn([PY, "-c", "pass"], workdir=workdir, hide=[sys.prefix])
        with pytest.raises(FileNotFoundError, match="readable="):
            spawn([PY, "-c", "pass"], workdir=workdir, readable=[os.path.join(workdir, "missing")])


def test_reports_say_what_each_mechanism_enforces(mechanism):
    report = probe(mechanism=mechanism)
    namespaces = mechanism in NAMESPACES
    assert report.mechanism == mechanism
    assert report.network_isolated == report.filesystem_hidden == report.pid_namespace == namespaces
    assert report.limits["disk_bytes"] == namespaces
    assert report.limits["max_processes"] == (not (ROOT and mechanism == sandbox.NONE))
    if not namespaces:
        assert any("disk_bytes not enforced" in note for note in report.notes)


# ---------------------------------------------------------------- what the worker can see


def test_hidden_files_root_and_grader_env_are_out_of_reach(mechanism, workdir, monkeypatch):
    secret_dir = tempfile.mkdtemp(prefix="attnlab-sandbox-secret-")
    os.chmod(secret_dir, 0o755)  # readable by anyone: only the sandbox can hide it
    secret = os.path.join(secret_dir, "reference.py")
    with open(secret, "w") as f:
        f.write("ANSWER = 42\n")
    os.chmod(secret, 0o644)
    monkeypatch.setenv("ATTNLAB_TEST_SECRET", "s3cr3t-" + uuid.uuid4().hex)
    private = [p for p in sandbox.private_paths() if p.endswith("/autograder") and os.path.isdir(p)]
    needed_under_root = {p.split("/")[2] for p in sandbox.python_paths() if p.startswith("/root/")}
    root_entries = [os.path.join("/root", e) for e in os.listdir("/root") if e not in needed_under_root] if ROOT else []
    code = """
        import os, sys
        secret, value = sys.argv[1], sys.argv[2]
        try:
            print("secret", open(secret).read().strip())
        except OSError as e:
            print("secret unreadable", type(e).__name__)
        for path in sys.argv[3].split(":") if sys.argv[3] else []:
            print("visible", path) if os.path.exists(path) else None
        print("env has secret", any(value in v for v in os.environ.values()))
        leaks = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                leaks += [pid] if value.encode() in open(f"/proc/{pid}/environ", "rb").read() else []
            except OSError:
                pass
        print("proc environ leaks", len(leaks))
    """
    try:
        rc, out, err, _ = run(
            code,
            mechanism,
            workdir,
            secret,
            os.environ["ATTNLAB_TEST_SECRET"],
            ":".join(private + root_entries),
            hide=[secret_dir],
        )
    finally:
        shutil.rmtree(secret_dir)
    assert rc == 0, err
    report = probe(mechanism=mechanism)
    assert "env has secret False" in out  # every mechanism passes a minimal environment
    grader_files_visible = "secret ANSWER = 42" in out or any(f"visible {p}" in out for p in private)
    assert report.filesystem_hidden == (not grader_files_visible), out
    if report.filesystem_hidden:
        assert "visible /root" not in out, out
    if mechanism != sandbox.NONE:  # other uid or other pid namespace: the grader's /proc/PID/environ is closed
        assert "proc environ leaks 0" in out, out


def test_worker_runs_unprivileged_as_reported(mechanism, workdir):
    if mechanism == sandbox.NONE:
        pytest.skip("none keeps the grader's user by design")
    with spawn([PY, "-c", "print(open('/proc/self/status').read())"], workdir=workdir, mechanism=mechanism) as box:
        status = box.stdout.read().decode()
        assert box.wait(20) == 0
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert int(fields["CapEff"], 16) == 0 and int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    if ROOT:  # a dedicated uid, the same in every column of Uid: (real, effective, saved, filesystem)
        assert fields["Uid"].split() == [str(box.uid)] * 4 and f"uid {box.uid}" in box.report.user
    else:
        assert "the grader's own user" in box.report.user


def test_workdir_is_writable_and_seeded(mechanism, workdir):
    with open(os.path.join(workdir, "notebook.ipynb"), "w") as f:
        f.write("{}")
    code = """
        import os, tempfile
        print(open("notebook.ipynb").read(), os.getcwd() == os.environ["HOME"])
        open("model.pt", "wb").write(b"x" * 1000)
        with tempfile.NamedTemporaryFile() as t:
            t.write(b"tmp")
        print("wrote")
    """
    rc, out, err, _ = run(code, mechanism, workdir)
    assert rc == 0 and out.split() == ["{}", "True", "wrote"], err
    copied_back = os.path.exists(os.path.join(workdir, "model.pt"))
    assert copied_back == (mechanism not in NAMESPACES)  # namespace workdirs are private copies


def test_pipes_carry_binary_frames_both_ways(mechanism, workdir):
    code = """
        import sys
        while True:
            head = sys.stdin.buffer.read(4)
            if not head:
                break
            body = sys.stdin.buffer.read(int.from_bytes(head, "little"))
            sys.stdout.buffer.write(head + body[::-1])
            sys.stdout.buffer.flush()
    """
    frame = bytes(range(256)) * 300  # every byte value, larger than a pipe buffer
    with spawn([PY, "-c", textwrap.dedent(code)], workdir=workdir, mechanism=mechanism) as box:
        for _ in range(2):
            box.stdin.write(len(frame).to_bytes(4, "little") + frame)
            box.stdin.flush()
            assert box.stdout.read(4 + len(frame)) == len(frame).to_bytes(4, "little") + frame[::-1]
        box.stdin.close()
        assert box.wait(20) == 0, box.stderr_tail()
    rc, out, _, _ = run_once([PY, "-c", "import sys; sys.stdout.write(sys.stdin.read().upper())"], workdir=workdir,
                             timeout=20, input=b"abc", mechanism=mechanism)
    assert (rc, out) == (0, b"ABC")


def test_readable_paths_are_read_only(mechanism, workdir):
    if mechanism not in NAMESPACES:
        pytest.skip("without a private file system every world-readable path is readable anyway")
    data = tempfile.mkdtemp(prefix="attnlab-sandbox-data-")
    os.chmod(data, 0o755)
    with open(os.path.join(data, "corpus.txt"), "w") as f:
        f.write("to be or not to be")
    code = """
        import sys
        print(open(sys.argv[1] + "/corpus.txt").read())
        try:
            open(sys.argv[1] + "/new.txt", "w")
            print("wrote")
        except OSError as e:
            print("write refused", e.errno)
    """
    try:
        rc, out, err, _ = run(code, mechanism, workdir, data, readable=[data])
        rc_hidden, _, _, _ = run(code, mechanism, workdir, data)
    finally:
        shutil.rmtree(data)
    assert rc == 0 and "to be or not to be" in out and "write refused" in out, err
    assert rc_hidden != 0  # not passed in readable=: not there


def test_python_and_torch_import_inside(workdir):
    report = probe()
    if report.mechanism == sandbox.SETPRIV and others_cannot_run(sys.executable):
        pytest.skip(others_cannot_run(sys.executable))
    code = "import torch, attnlab.grading.worker.process; print(torch.ones(2).sum().item())"
    rc, out, err, timed_out = run_once([sys.executable, "-c", code], workdir=workdir, timeout=120)
    assert (rc, out.strip(), timed_out) == (0, b"2.0", False), err.decode()


@pytest.mark.parametrize("other", [sandbox.UNSHARE])
def test_other_namespace_mechanism_runs_this_python(other, workdir):
    if sandbox.available(other) or other == probe().mechanism:
        pytest.skip(f"{other} is unavailable or already covered by the torch test")
    code = "import numpy, attnlab.grading.worker.process; print('ok')"
    rc, out, err, _ = run_once([sys.executable, "-c", code], workdir=workdir, timeout=60, mechanism=other)
    assert (rc, out.strip()) == (0, b"ok"), err.decode()


def test_network_is_isolated_when_reported(mechanism, workdir):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        code = """
            import socket, sys
            try:
                socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3).close()
                print("connected")
            except OSError as e:
                print("failed", e)
        """
        _, out, err, _ = run(code, mechanism, workdir, str(server.getsockname()[1]))
    assert ("connected" in out) == (not probe(mechanism=mechanism).network_isolated), out + err


def test_network_can_be_allowed(workdir):
    if probe().mechanism not in NAMESPACES:
        pytest.skip("without namespaces the network is always open")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        code = f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=3)"
        with spawn([PY, "-c", code], workdir=workdir, limits=Limits(network=True)) as box:
            assert box.wait(20) == 0, box.stderr_tail()
            assert not box.report.network_isolated


# ---------------------------------------------------------------- limits and kill


def test_memory_bomb_is_stopped(mechanism, workdir):
    code = """
        chunks = []
        try:
            for _ in range(1600):  # 100 GB in 64 MB steps
                chunks.append(bytearray(64 * 2**20))
        except MemoryError:
            print(len(chunks) * 64)
            raise SystemExit(3)
    """
    rc, out, err, timed_out = run(code, mechanism, workdir, limits=Limits(memory_bytes=512 * MIB), timeout=30)
    assert (rc, timed_out) == (3, False), err
    assert int(out) < 512


def test_cpu_limit_kills_and_exit_status_says_which_signal(mechanism, workdir):
    rc, _, _, timed_out = run("while True: pass", mechanism, workdir, limits=Limits(cpu_seconds=1), timeout=20)
    assert not timed_out
    assert rc in (-signal.SIGXCPU, -signal.SIGKILL)


def test_open_files_limit_holds(mechanism, workdir):
    code = """
        files = []
        try:
            while len(files) < 1000:
                files.append(open("/dev/null"))
        except OSError as e:
            print(len(files), e.errno)
    """
    rc, out, err, _ = run(code, mechanism, workdir, limits=Limits(open_files=32))
    opened, error = map(int, out.split())
    assert (rc, error) == (0, errno.EMFILE) and opened < 32, err


WRITE_1GB = """
    n = 0
    try:
        with open("big", "wb") as f:
            for _ in range(256):  # 1 GB in 4 MB steps
                f.write(bytes(4 * 2**20))
                n += 4
    except OSError as e:
        print(n, e.errno)
        raise SystemExit(3)
    print(n, 0)
"""


def test_big_file_is_stopped_by_the_file_size_limit(mechanism, workdir):
    rc, out, err, _ = run(WRITE_1GB, mechanism, workdir, limits=Limits(file_size_bytes=16 * MIB))
    written, error = map(int, out.split())
    assert (rc, error) == (3, errno.EFBIG) and written <= 16, err


def test_big_file_is_stopped_by_the_disk_limit(mechanism, workdir):
    if not probe(mechanism=mechanism).limits["disk_bytes"]:
        pytest.skip(f"{mechanism} reports disk_bytes as not enforced")
    limits = Limits(file_size_bytes=2**30, disk_bytes=16 * MIB)
    rc, out, err, _ = run(WRITE_1GB, mechanism, workdir, limits=limits)
    written, error = map(int, out.split())
    assert (rc, error) == (3, errno.ENOSPC) and written <= 16, err


def test_fork_bomb_is_bounded_and_killed(mechanism, workdir):
    if not probe(mechanism=mechanism).limits["max_processes"]:
        pytest.skip(f"{mechanism} reports max_processes as not enforced here")
    marker = f"attnlab-forkbomb-{uuid.uuid4().hex}"
    code = """
        import os, time
        forks = 0
        for _ in range(200):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
            except OSError as e:
                print(forks, e.errno, flush=True)
                break
            forks += 1
        else:
            print(forks, 0, flush=True)
        time.sleep(60)
    """
    with spawn(
        [PY, "-c", textwrap.dedent(code), marker], workdir=workdir, limits=Limits(max_processes=16), mechanism=mechanism
    ) as box:
        forks, error = map(int, read_line(box).split())
        assert error == errno.EAGAIN and forks < 16
        assert 0 < len(marked(marker)) <= 16
        box.kill_tree()
        assert marked(marker) == []


def test_detached_grandchild_dies_with_kill_tree(mechanism, workdir):
    marker = f"attnlab-orphan-{uuid.uuid4().hex}"
    code = """
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1] + "-x"])
            os._exit(0)
        os.wait()
        time.sleep(0.5)
        print("ready", flush=True)
        time.sleep(60)
    """
    with spawn([PY, "-c", textwrap.dedent(code), marker], workdir=workdir, mechanism=mechanism) as box:
        assert read_line(box).strip() == "ready"
        assert len(marked(marker + "-x")) == 1  # it runs, outside the worker's session
        box.kill_tree()
        assert marked(marker) == []
        box.kill_tree()  # idempotent
        assert box.returncode is not None


def test_run_once_returns_when_the_worker_exits_and_leaves_nothing(mechanism, workdir):
    marker = f"attnlab-leftover-{uuid.uuid4().hex}"
    code = """
        import os, sys
        if os.fork() == 0:
            os.setsid()
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", sys.argv[1]])
        print("bye")
    """
    start = time.monotonic()
    rc, out, err, timed_out = run(code, mechanism, workdir, marker, timeout=30)
    assert (rc, out.strip(), timed_out) == (0, "bye", False), err
    assert time.monotonic() - start < 15
    assert marked(marker) == []


def test_endless_loop_is_killed_by_the_callers_timeout(mechanism, workdir):
    marker = f"attnlab-loop-{uuid.uuid4().hex}"
    start = time.monotonic()
    rc, _, _, timed_out = run("while True: pass", mechanism, workdir, marker, timeout=1)
    assert timed_out and rc is not None
    assert time.monotonic() - start < 10
    assert marked(marker) == []


# ---------------------------------------------------------------- as a normal user


@pytest.mark.skipif(not ROOT, reason="switching to another user needs root")
def test_as_a_normal_user_the_best_mechanism_still_hides_and_reports_honestly():
    if sandbox.available(sandbox.UNSHARE):
        pytest.skip(f"needs unshare to give the normal user a Python: {sandbox.available(sandbox.UNSHARE)}")
    secret_dir = tempfile.mkdtemp(prefix="attnlab-sandbox-secret-")
    os.chmod(secret_dir, 0o755)
    with open(os.path.join(secret_dir, "answer.txt"), "w") as f:
        f.write("42")
    os.chmod(os.path.join(secret_dir, "answer.txt"), 0o644)
    code = textwrap.dedent("""
        import os, sys, tempfile
        from attnlab.grading.worker import sandbox
        wd = tempfile.mkdtemp()
        rc, out, err, _ = sandbox.run_once([sys.executable, "-c", "print(open(sys.argv[1]).read())", sys.argv[1]],
                                           workdir=wd, timeout=60, hide=[os.path.dirname(sys.argv[1])])
        with sandbox.spawn(["true"], workdir=wd) as box:
            report = box.report
        print(os.getuid(), report.mechanism, report.filesystem_hidden, rc, out.decode().strip(), sep="|")
        print(report.user)
        print(err.decode()[-300:])
    """)
    try:
        done = run_as_nobody([sys.executable, "-c", code, os.path.join(secret_dir, "answer.txt")])
    finally:
        shutil.rmtree(secret_dir)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) >= 2, done.stderr[-2000:]
    uid, mechanism, hidden, rc, out = lines[0].split("|")
    assert uid == "65534" and "uid 65534" in lines[1] and "grader's own user" in lines[1]
    assert (hidden == "True") == (out != "42")
    if mechanism in NAMESPACES:
        assert hidden == "True" and rc != "0"


def run_as_nobody(argv: list[str]) -> subprocess.CompletedProcess:
    """Run argv as uid 65534 in a private mount namespace where the folders of this Python under /root (mode 700
    on many machines) are reachable, as they would be on a machine with Python in /usr or /opt."""
    stage = tempfile.mkdtemp(prefix="attnlab-sandbox-root-")
    binds = [p for p in sandbox.python_paths() if p.startswith("/root/")]
    script = ["set -e", f"mount -t tmpfs -o mode=0755,size=1m attnlab-test {stage}"]
    for p in binds:
        script += [f"mkdir -p {stage}{p[len('/root') :]}", f"mount --rbind {p} {stage}{p[len('/root') :]}"]
    script += [
        f"mount --move {stage} /root" if binds else "true",
        'exec setpriv --reuid 65534 --regid 65534 --clear-groups -- "$@"',
    ]
    try:
        return subprocess.run(
            ["unshare", "--mount", "sh", "-c", "\n".join(script), "sh", *argv],
            text=True,
            capture_output=True,
            timeout=120,
            cwd="/tmp",
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp"},
        )
    finally:
        os.rmdir(stage)
