"""A worker running in its sandbox (:class:`Sandboxed`, Popen-like): its pipes, the tail of its stderr, its exit
status, and ``kill_tree``, which ends it and everything it started, then releases what the sandbox held."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import TYPE_CHECKING

from .proctable import _descendants, _has_token, _processes

if TYPE_CHECKING:
    from .isolation import IsolationReport
    from .mechanisms import Mechanism

_KILL_DEADLINE_S = 10.0
_TAIL_BYTES = 64 * 1024


class Sandboxed:
    """A worker in its sandbox; Popen-like. ``pid`` is the process the grader started (bwrap or unshare in the
    namespace mechanisms). As with Popen, ``wait()`` returns -N when the worker died of signal N."""

    def __init__(self, argv, *, kind: Mechanism, report: IsolationReport, cwd: str | None, env: dict,
                 pass_fds=(), preexec_fn=None, uid: int | None = None, lock_fd: int | None = None,
                 token: bytes | None = None, cleanup_dirs=(), restore_owner: str | None = None):
        self.report = report
        self.mechanism = kind.name
        self._namespaces = kind.namespaces
        self.uid = uid
        self._lock_fd, self._token = lock_fd, token
        self._cleanup_dirs, self._restore_owner = list(cleanup_dirs), restore_owner
        self._killed = False
        self._kill_lock = threading.Lock()
        self._popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       cwd=cwd, env=env, pass_fds=tuple(pass_fds), start_new_session=True,
                                       preexec_fn=preexec_fn)
        self.pid = self._popen.pid
        self.stdin, self.stdout = self._popen.stdin, self._popen.stdout
        self._stderr_tail = bytearray()
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    def _drain_stderr(self) -> None:
        try:
            for chunk in iter(lambda: self._popen.stderr.read1(65536), b""):
                self._stderr_tail += chunk
                del self._stderr_tail[:-_TAIL_BYTES]
        except (OSError, ValueError):  # closed by __exit__
            pass

    def stderr_tail(self) -> bytes:
        """The last 64 KiB the worker wrote to stderr (stderr is drained so that the worker never blocks on it)."""
        return bytes(self._stderr_tail)

    def _status(self, code: int | None) -> int | None:
        # bwrap and the unshare script report a worker killed by signal N as 128 + N
        if code is not None and self._namespaces and 128 < code < 128 + signal.NSIG:
            return -(code - 128)
        return code

    @property
    def returncode(self) -> int | None:
        return self._status(self._popen.returncode)

    def poll(self) -> int | None:
        return self._status(self._popen.poll())

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises subprocess.TimeoutExpired after `timeout` seconds (then call kill_tree)."""
        return self._status(self._popen.wait(timeout))

    def _members(self, started: bool) -> set[int]:
        """Live processes of this sandbox, the started process itself excluded. `started`: it is still unreaped,
        so its descendants are the sandbox's (in a pid namespace, orphans are adopted by the namespace's init)."""
        # without namespaces, a uid claimed for this sandbox is used by this sandbox only
        by_uid = not self._namespaces and self.uid is not None and self.uid != os.getuid()
        procs = _processes(with_uid=by_uid)
        members = _descendants(self.pid, procs) if started else set()
        if not self._namespaces and started:
            members |= {p.pid for p in procs.values() if self.pid in (p.pgid, p.sid)}
        if by_uid:
            members |= {p.pid for p in procs.values() if p.uid == self.uid}
        if self._token is not None:
            members |= {pid for pid in procs if _has_token(pid, self._token)}
        members -= {self.pid, os.getpid(), 1}
        return {pid for pid in members if not procs[pid].zombie}

    def _sweep(self, started: bool) -> None:
        deadline = time.monotonic() + _KILL_DEADLINE_S
        while time.monotonic() < deadline:
            victims = self._members(started)
            if not victims:
                return
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def kill_tree(self) -> None:
        """Kill the worker and everything it started, detached children included. Idempotent."""
        with self._kill_lock:
            if self._killed:
                return
            # bwrap and unshare exit only after the namespace's init, whose death kills the whole namespace: once
            # they are gone nothing is left. Without a pid namespace, orphans are found by uid or token.
            running = self._popen.poll() is None
            if running:
                self._sweep(started=True)
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self._popen.poll() is None:
                self._popen.kill()
            self._popen.wait()
            if not self._namespaces:
                self._sweep(started=False)
            self._killed = True
            self._release()

    def _release(self) -> None:
        if self.stdin and not self.stdin.closed:
            try:
                self.stdin.close()
            except OSError:
                pass
        if self._restore_owner is not None:  # setpriv-only: give the workdir back to the grader
            os.chown(self._restore_owner, os.getuid(), os.getgid())
        for d in self._cleanup_dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Sandboxed:
        return self

    def __exit__(self, *exc) -> None:
        self.kill_tree()
        self._stderr_thread.join(1)
        for pipe in (self.stdout, self._popen.stderr):
            if pipe and not pipe.closed:
                pipe.close()
