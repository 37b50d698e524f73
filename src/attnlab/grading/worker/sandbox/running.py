"""What every running worker shares, however it was started (:class:`~.sandboxed.Sandboxed`: the mechanism's own
command; :class:`~.forked.Forked`: forked from the zygote): its pipes, the drained tail of its stderr, its exit
status as Popen reports it, and the end of its life: ``kill_tree`` kills once, then releases what the sandbox held
(stdin, the subclass's own resources, its empty folders, the claimed uid's lock), and ``__exit__`` closes the rest.

A subclass says how to kill (``_kill``), what else it holds (``_release_own``) and which pipes it reads
(``_read_pipes``).
"""

from __future__ import annotations

import os
import signal
import threading
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from attnlab.grading.worker.sandbox.isolation import IsolationReport

KILL_DEADLINE_S = 10.0
_TAIL_BYTES = 64 * 1024


class RunningWorker:
    """A worker in its sandbox: ``stdin``/``stdout`` to talk to it, ``report`` (its isolation), ``mechanism``,
    ``uid``. As with Popen, ``wait()`` returns -N when the worker died of signal N."""

    def __init__(self, report: IsolationReport, *, mechanism: str, namespaces: bool, uid: int | None,
                 lock_fd: int | None, cleanup_dirs=()):
        self.report, self.mechanism, self.uid = report, mechanism, uid
        self._namespaces = namespaces
        self._lock_fd, self._cleanup_dirs = lock_fd, list(cleanup_dirs)
        self._killed, self._kill_lock = False, threading.Lock()
        self.stdin: IO[bytes] | None = None
        self.stdout: IO[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._stderr_tail = bytearray()
        self._stderr_thread: threading.Thread | None = None

    def _take_pipes(self, stdin: IO[bytes], stdout: IO[bytes], stderr: IO[bytes]) -> None:
        """Keep the worker's pipes and start draining its stderr, so that the worker never blocks on it."""
        self.stdin, self.stdout, self._stderr = stdin, stdout, stderr
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True)
        self._stderr_thread.start()

    def _drain_stderr(self) -> None:
        try:
            for chunk in iter(lambda: self._stderr.read1(65536), b""):
                self._stderr_tail += chunk
                del self._stderr_tail[:-_TAIL_BYTES]
        except (OSError, ValueError):  # closed by __exit__
            pass

    def stderr_tail(self) -> bytes:
        """The last 64 KiB the worker wrote to stderr."""
        return bytes(self._stderr_tail)

    def _exit_status(self, code: int | None) -> int | None:
        # pid 1 of a pid namespace (bwrap, the unshare script, the zygote's) reports a worker killed by signal N as
        # 128 + N
        if code is not None and self._namespaces and 128 < code < 128 + signal.NSIG:
            return -(code - 128)
        return code

    def kill_tree(self) -> None:
        """Kill the worker and everything it started, detached children included, then release what the sandbox
        held. Idempotent."""
        with self._kill_lock:
            if self._killed:
                return
            self._kill()
            self._killed = True
            self._release()

    def _kill(self) -> None:
        """Kill the worker and everything it started; return once they are gone (or after the kill deadline)."""
        raise NotImplementedError

    def _release(self) -> None:
        if self.stdin is not None and not self.stdin.closed:
            try:
                self.stdin.close()
            except OSError:
                pass
        self._release_own()
        for d in self._cleanup_dirs:
            try:
                os.rmdir(d)
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _release_own(self) -> None:
        """What this kind of worker holds besides its stdin, folders and lock (after stdin, before the folders)."""

    def _read_pipes(self) -> tuple[IO[bytes] | None, ...]:
        """The pipes the grader reads from, closed by ``__exit__``."""
        return self.stdout, self._stderr

    def __enter__(self) -> RunningWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.kill_tree()
        if self._stderr_thread is not None:
            self._stderr_thread.join(1)
        for pipe in self._read_pipes():
            if pipe is not None and not pipe.closed:
                pipe.close()
