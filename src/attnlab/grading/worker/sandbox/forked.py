"""Starting a worker by fork from a warm zygote (``zygote.py``), the grader's side: when the fork path applies
(``fork_unusable``), the zygote for this Python and environment (one per grader process, started once, restarted
when it died; a batch's grader processes, forks of one grader, share it: ``grading/scale/pool.py``), and
:class:`Forked`, the running worker with the same interface as :class:`Sandboxed`.

``ATTNLAB_WORKER_START``: ``auto`` (default: fork where possible, else a cold start, and the report says why),
``fork`` (fork or fail) or ``cold`` (always the mechanism's own command, as before the zygote).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING

from attnlab import settings
from attnlab.grading.worker.sandbox.limits import rlimit_values
from attnlab.grading.worker.sandbox.mechanisms import BWRAP, UNSHARE, minimal_env
from attnlab.grading.worker.sandbox.mounts import mount_plan, with_parents
from attnlab.grading.worker.sandbox.running import KILL_DEADLINE_S, RunningWorker

if TYPE_CHECKING:
    from attnlab.grading.worker.sandbox.mechanisms import Job, Mechanism

ENV_START = settings.WORKER_START
_STARTS = ("auto", "fork", "cold")
_READY_TIMEOUT_S = 30.0  # the sandbox's set-up in the child (mounts, a copy of the workdir)
_ZYGOTE_START_TIMEOUT_S = 120.0  # importing torch on a loaded machine


class ZygoteUnavailable(RuntimeError):
    """The fork path cannot start this worker; the message says why (the cold path is used instead)."""


def start_mode() -> str:
    mode = settings.get(ENV_START).strip().lower() or "auto"
    if mode not in _STARTS:
        raise ValueError(f"{ENV_START}={mode!r}: expected one of {', '.join(_STARTS)}")
    return mode


def fork_unusable(kind: Mechanism, job: Job) -> str:
    """'' when ``job`` can start by fork from a zygote, else why not."""
    if kind.name not in (BWRAP, UNSHARE):
        return f"the {kind.name} mechanism starts its own command (the zygote builds namespaces)"
    if job.uid is None:
        return "not root: the zygote needs root to build namespaces and switch uid"
    argv = job.argv
    if len(argv) < 3 or argv[0] != sys.executable or argv[1] not in ("-c", "-m"):
        return "the command is not `python -c` or `python -m` of this Python"
    from attnlab.grading.worker.sandbox import syscalls

    return syscalls.supported()


# ------------------------------------------------------------------------------------------------ the zygote
# The zygote imports this attnlab (its folder first on sys.path while it preloads, then removed).
_BOOT = ("import sys; sys.path.insert(0, sys.argv[2]); from attnlab.grading.worker.sandbox.zygote import main; "
         "sys.exit(main(sys.argv))")


def _package_root() -> str:
    import attnlab

    return os.path.dirname(os.path.dirname(os.path.abspath(attnlab.__file__)))


def _config_dir() -> str:
    """The zygote's HOME and matplotlib's cache (its font list, built once per machine): a folder of this user's
    own in the temp folder, or a new one when that name is taken by anything else."""
    path = os.path.join(tempfile.gettempdir(), f"attnlab-zygote-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077:
        return path
    return tempfile.mkdtemp(prefix="attnlab-zygote-")


def _shared_lock():
    """A lock that holds across this process's threads and its forks (a semaphore in shared memory), or None where
    there is none to be had (no ``/dev/shm``): the zygote then serves this process only."""
    try:
        return multiprocessing.get_context("fork").Lock()
    except (OSError, ValueError, ImportError):
        return None


class _Zygote:
    """One zygote process and the socket to it; ``request`` is safe from threads and, where ``shared``, from forks of
    the process that started it (a request and its reply are one step under the lock, whoever sends it)."""

    def __init__(self, env: dict[str, str]):
        env = minimal_env("/", "/tmp", env)
        self.config_dir = _config_dir()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.shared = _shared_lock()
        self.sock, self.lock, self.owner = ours, self.shared or threading.Lock(), os.getpid()
        # one thread: OpenBLAS would otherwise start its pool when numpy is imported (forked workers share the
        # zygote's libraries as loaded, so they compute single-threaded, as the grader's worker asks anyway)
        zygote_env = {**env, "MPLBACKEND": "Agg", "MPLCONFIGDIR": self.config_dir, "HOME": self.config_dir,
                      **dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"), "1")}
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - read when the zygote fails to start
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, str(theirs.fileno()), _package_root()],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.stderr, cwd="/",
                env=zygote_env, pass_fds=[theirs.fileno()], start_new_session=True)
        finally:
            theirs.close()
        self.ready = self._receive(_ZYGOTE_START_TIMEOUT_S)

    def _receive(self, timeout: float) -> dict:
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 16)
        except OSError as exc:
            data, why = b"", str(exc)
        else:
            why = "it exited"
        if not data:
            self.stderr.seek(0)
            tail = self.stderr.read().decode(errors="replace").strip().splitlines()[-1:]
            raise ZygoteUnavailable(f"the zygote did not answer ({why}{': ' + tail[0] if tail else ''})")
        return json.loads(data)

    def alive(self) -> bool:
        if os.getpid() == self.owner:
            return self.proc.poll() is None
        # a fork of the owner (pool.py): the zygote is not our child; it has exited when its end of the socket hung up
        poller = select.poll()
        poller.register(self.sock, select.POLLHUP | select.POLLERR)
        try:
            os.kill(self.proc.pid, 0)
        except OSError:
            return False
        return not poller.poll(0)

    def request(self, spec: dict, fds: list[int]) -> int:
        """Ask for one sandboxed worker; the monitor's pid."""
        with self.lock:
            try:
                socket.send_fds(self.sock, [json.dumps(spec).encode()], fds)
                reply = self._receive(_READY_TIMEOUT_S)
            except (OSError, ValueError) as exc:
                raise ZygoteUnavailable(f"the zygote failed: {exc}") from exc
        if not reply.get("ok"):
            raise ZygoteUnavailable(f"the zygote could not fork: {reply.get('error')}")
        return int(reply["pid"])

    def close(self) -> None:
        self.sock.close()  # the zygote exits on EOF (from every process that holds the socket)
        if os.getpid() != self.owner:
            return  # the owner waits for it
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.stderr.close()


_ZYGOTES: dict[tuple, _Zygote | ZygoteUnavailable] = {}
_ZYGOTES_LOCK = threading.Lock()


def zygote_for(env: dict[str, str] | None) -> _Zygote:
    """The zygote for this Python and the variables ``env`` adds to the worker's minimal environment (``spawn``'s
    ``env``), started on first use and restarted when it died. Raises ``ZygoteUnavailable`` when it cannot serve
    (remembered: the process then starts workers cold)."""
    env = dict(env or {})
    key = (sys.executable, tuple(sorted(env.items())))
    with _ZYGOTES_LOCK:
        zygote = _ZYGOTES.get(key)
        if isinstance(zygote, _Zygote) and not zygote.alive():
            zygote.close()
            zygote = None
        if zygote is None:
            try:
                zygote = _Zygote(env)
                if not zygote.ready.get("ok"):
                    zygote.close()
                    zygote = ZygoteUnavailable(f"the zygote cannot serve: {zygote.ready.get('error')}")
            except ZygoteUnavailable as exc:
                zygote = exc
            _ZYGOTES[key] = zygote
    if isinstance(zygote, ZygoteUnavailable):
        raise zygote
    return zygote


def _after_fork_in_child() -> None:
    """In a forked child (a batch's grader process, ``grading/scale/pool.py``): keep the parent's zygotes whose lock is
    shared, forget the others (their socket would carry two processes' requests at once; only this process's copy
    of it is closed), and take a new registry lock (a parent thread may have held the old one at the fork)."""
    global _ZYGOTES_LOCK
    _ZYGOTES_LOCK = threading.Lock()
    for key, zygote in list(_ZYGOTES.items()):
        if isinstance(zygote, _Zygote) and zygote.shared is None:
            try:
                zygote.sock.close()
            except OSError:
                pass
            del _ZYGOTES[key]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def prestart(env: dict[str, str] | None, *, wait: bool = False) -> None:
    """Start the zygote for ``env`` (as ``spawn`` gets it) in the background: it imports torch while the grader
    loads its bundle. ``wait``: here and now (a batch, before it forks the grader processes that share it)."""
    if start_mode() != "cold" and os.geteuid() == 0 and sys.platform.startswith("linux"):
        if wait:
            _quietly(zygote_for, env)
        else:
            threading.Thread(target=lambda: _quietly(zygote_for, env), daemon=True, name="attnlab-zygote").start()


def _quietly(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - remembered by zygote_for; spawn reports it
        pass


def shutdown() -> None:
    """Stop every zygote of this process (tests; the zygotes also exit when this process does)."""
    with _ZYGOTES_LOCK:
        for zygote in _ZYGOTES.values():
            if isinstance(zygote, _Zygote):
                zygote.close()
        _ZYGOTES.clear()


# ------------------------------------------------------------------------------------------------ one worker
def start_forked(job: Job) -> Forked:
    """``job``'s worker, forked from the zygote for its environment into the sandbox ``job`` describes."""
    zygote = zygote_for(job.env)
    mounts = with_parents(mount_plan(job.workdir, job.limits, job.hide, job.readable, dedicated_uid=True))
    newroot = tempfile.mkdtemp(prefix="attnlab-sandbox-root-")  # empty: mounted on only inside
    spec = {"argv": job.argv, "workdir": job.workdir, "env": minimal_env(job.workdir, "/tmp", job.env),
            "mounts": [[m.dest, m.kind, m.source, m.mode] for m in mounts], "newroot": newroot, "uid": job.uid,
            "disk_bytes": job.limits.disk_bytes, "network": job.limits.network,
            "rlimits": [list(values) for values in rlimit_values(job.limits)]}
    pipes = [os.pipe() for _ in range(4)]  # stdin, stdout, stderr, status
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1]]
    try:
        zygote.request(spec, theirs)
    except BaseException:
        for r, w in pipes:
            os.close(r)
            os.close(w)
        os.rmdir(newroot)
        raise
    for fd in theirs:
        os.close(fd)
    return Forked(job, stdin=pipes[0][1], stdout=pipes[1][0], stderr=pipes[2][0], status=pipes[3][0],
                  newroot=newroot)


class Forked(RunningWorker):
    """A worker forked from the zygote into its sandbox; the interface of :class:`Sandboxed` (``pid`` is the pid
    1 of its namespace, as seen from here). The status pipe says ``pid``, ``ready`` (or ``error``) and ``exit``."""

    def __init__(self, job: Job, *, stdin: int, stdout: int, stderr: int, status: int, newroot: str):
        super().__init__(job.report, mechanism=job.report.mechanism, namespaces=True, uid=job.uid,
                         lock_fd=job.lock_fd, cleanup_dirs=[newroot])
        self._status = os.fdopen(status, "rb")
        self.pid, self._pidfd, self._code, self._error = None, None, None, ""
        self._ready, self._exited = threading.Event(), threading.Event()
        self._take_pipes(os.fdopen(stdin, "wb"), os.fdopen(stdout, "rb"), os.fdopen(stderr, "rb"))
        threading.Thread(target=self._read_status, daemon=True).start()
        if not self._ready.wait(_READY_TIMEOUT_S) or self._error:
            why = self._error or f"no answer from the sandbox's set-up within {_READY_TIMEOUT_S:g} s"
            self._lock_fd = None  # the uid stays claimed for the cold start that follows
            self.__exit__()
            raise ZygoteUnavailable(why)

    def _read_status(self) -> None:
        for raw in iter(self._status.readline, b""):
            word, _, rest = raw.decode(errors="replace").strip().partition(" ")
            if word == "pid" and self.pid is None:
                self.pid = int(rest)
                try:
                    self._pidfd = os.pidfd_open(self.pid)
                except OSError:
                    pass
            elif word == "ready":
                self._ready.set()
            elif word == "error":
                self._error = rest or "the sandbox's set-up failed"
                self._ready.set()
            elif word == "exit":
                self._code = int(rest)
        if self._code is None:
            self._code = -signal.SIGKILL  # the monitor was killed (the zygote died)
        self._ready.set()
        self._exited.set()

    @property
    def returncode(self) -> int | None:
        return self._exit_status(self._code) if self._exited.is_set() else None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired("attnlab worker", timeout)
        return self._exit_status(self._code)

    def _kill(self) -> None:
        """Kill pid 1 of the namespace: the kernel kills everything in it."""
        deadline = time.monotonic() + KILL_DEADLINE_S
        while not self._exited.is_set() and time.monotonic() < deadline:
            if self._pidfd is not None:
                try:
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                except OSError:
                    pass
            self._exited.wait(0.05)

    def _release_own(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def _read_pipes(self) -> tuple:
        return (*super()._read_pipes(), self._status)
