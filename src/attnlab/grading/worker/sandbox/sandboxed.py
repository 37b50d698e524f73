"""A worker started by its mechanism's own command (:class:`Sandboxed`, Popen-like; what every running worker shares
is :class:`~.running.RunningWorker`): its process, its exit status, and ``_kill``, which ends it and everything it
started, found by namespace, process group, uid or token."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import TYPE_CHECKING

from attnlab.grading.worker.sandbox.proctable import descendants_of, has_token, process_table
from attnlab.grading.worker.sandbox.running import KILL_DEADLINE_S, RunningWorker

if TYPE_CHECKING:
    from attnlab.grading.worker.sandbox.isolation import IsolationReport
    from attnlab.grading.worker.sandbox.mechanisms import Mechanism


class Sandboxed(RunningWorker):
    """A worker in its sandbox; Popen-like. ``pid`` is the process the grader started (bwrap or unshare in the
    namespace mechanisms). As with Popen, ``wait()`` returns -N when the worker died of signal N."""

    def __init__(self, argv, *, kind: Mechanism, report: IsolationReport, cwd: str | None, env: dict,
                 pass_fds=(), preexec_fn=None, uid: int | None = None, lock_fd: int | None = None,
                 token: bytes | None = None, cleanup_dirs=(), restore_owner: str | None = None):
        super().__init__(report, mechanism=kind.name, namespaces=kind.namespaces, uid=uid, lock_fd=lock_fd,
                         cleanup_dirs=cleanup_dirs)
        self._token, self._restore_owner = token, restore_owner
        self._popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       cwd=cwd, env=env, pass_fds=tuple(pass_fds), start_new_session=True,
                                       preexec_fn=preexec_fn)
        self.pid = self._popen.pid
        self._take_pipes(self._popen.stdin, self._popen.stdout, self._popen.stderr)

    @property
    def returncode(self) -> int | None:
        return self._exit_status(self._popen.returncode)

    def poll(self) -> int | None:
        return self._exit_status(self._popen.poll())

    def wait(self, timeout: float | None = None) -> int:
        """The exit status; raises subprocess.TimeoutExpired after `timeout` seconds (then call kill_tree)."""
        return self._exit_status(self._popen.wait(timeout))

    def _members(self, started: bool) -> set[int]:
        """Live processes of this sandbox, the started process itself excluded. `started`: it is still unreaped,
        so its descendants are the sandbox's (in a pid namespace, orphans are adopted by the namespace's init)."""
        # without namespaces, a uid claimed for this sandbox is used by this sandbox only
        by_uid = not self._namespaces and self.uid is not None and self.uid != os.getuid()
        procs = process_table(with_uid=by_uid)
        members = descendants_of(self.pid, procs) if started else set()
        if not self._namespaces and started:
            members |= {p.pid for p in procs.values() if self.pid in (p.pgid, p.sid)}
        if by_uid:
            members |= {p.pid for p in procs.values() if p.uid == self.uid}
        if self._token is not None:
            members |= {pid for pid in procs if has_token(pid, self._token)}
        members -= {self.pid, os.getpid(), 1}
        return {pid for pid in members if not procs[pid].zombie}

    def _sweep(self, started: bool) -> None:
        deadline = time.monotonic() + KILL_DEADLINE_S
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

    def _kill(self) -> None:
        # bwrap and unshare exit only after the namespace's init, whose death kills the whole namespace: once they
        # are gone nothing is left. Without a pid namespace, orphans are found by uid or token.
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

    def _release_own(self) -> None:
        if self._restore_owner is not None:  # setpriv-only: give the workdir back to the grader
            os.chown(self._restore_owner, os.getuid(), os.getgid())
