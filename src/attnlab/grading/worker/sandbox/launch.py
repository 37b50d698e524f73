"""Starting a worker: ``spawn`` chooses the mechanism, claims a dedicated uid as root, and starts the worker in it;
``run_once`` runs a program to the end with bounded output and a timeout."""

from __future__ import annotations

import os
import subprocess
import threading

from attnlab.grading.worker.sandbox.forked import ZygoteUnavailable, fork_unusable, start_forked, start_mode
from attnlab.grading.worker.sandbox.isolation import choose, isolation_report
from attnlab.grading.worker.sandbox.limits import Limits
from attnlab.grading.worker.sandbox.mechanisms import Job
from attnlab.grading.worker.sandbox.sandboxed import Sandboxed
from attnlab.grading.worker.sandbox.uids import claim_uid


def spawn(argv, *, workdir, limits: Limits | None = None, env=None, hide=(), readable=(),
          mechanism: str | None = None) -> Sandboxed:
    """Start `argv` in the best sandbox that works here (or `mechanism`, or $ATTNLAB_SANDBOX).

    `workdir`: an existing folder, the worker's cwd and HOME (see the package docstring for what it sees).
    `env`: variables added to a minimal environment; nothing of the grader's environment is passed.
    `hide`: more paths the worker must not read (grader temp dirs, other submissions); the repository's
    autograder/, instructor/, solutions/, /root and /home are always hidden.
    `readable`: more paths the worker may read (read-only), e.g. a data set cache.
    """
    limits = limits or Limits()
    argv = [str(a) for a in argv]
    workdir = os.path.abspath(workdir)
    if not os.path.isdir(workdir):
        raise NotADirectoryError(f"workdir={workdir!r}: not a folder; create it before spawn()")
    kind, notes = choose(mechanism)
    uid, lock_fd = claim_uid() if os.geteuid() == 0 and kind.dedicated_uid else (None, None)
    report = isolation_report(kind, limits, uid=uid if uid is not None else os.getuid(), notes=notes)
    job = Job(argv, workdir, limits, env, tuple(hide), tuple(readable), uid, lock_fd, report)
    try:
        return _forked_or_cold(kind, job)
    except BaseException:
        if lock_fd is not None:
            os.close(lock_fd)
        raise


def _forked_or_cold(kind, job: Job):
    """The worker forked from a warm zygote where that works (``forked.py``; ``ATTNLAB_WORKER_START``), else the
    mechanism's own cold start; the report says which, and why not forked."""
    mode = start_mode()
    why = "ATTNLAB_WORKER_START=cold" if mode == "cold" else fork_unusable(kind, job)
    if not why:
        try:
            job.report.start = "by fork from a warm zygote (its own unshare, mounts, pivot_root, uid and limits)"
            return start_forked(job)
        except ZygoteUnavailable as exc:
            why = str(exc)
    if mode == "fork":
        raise RuntimeError(f"ATTNLAB_WORKER_START=fork, but this worker cannot be forked: {why}. Unset it (or set "
                           "it to auto) to start workers cold where forking is not possible.")
    job.report.start = f"cold ({why})"
    return kind.start(job)


def _read_bounded(pipe, out: bytearray, limit: int) -> None:
    for chunk in iter(lambda: pipe.read1(65536), b""):
        out += chunk[: max(0, limit - len(out))]  # keep reading past the limit so the writer never blocks


def run_once(argv, *, workdir, limits: Limits | None = None, timeout: float, input: bytes = b"", env=None,
             hide=(), readable=(), mechanism: str | None = None,
             max_output: int = 2**20) -> tuple[int, bytes, bytes, bool]:
    """Run `argv` once in a sandbox: (returncode, stdout, stderr tail, timed_out). Output is cut at `max_output`
    bytes; after the worker exits (or `timeout` seconds), everything it started is killed."""
    with spawn(argv, workdir=workdir, limits=limits, env=env, hide=hide, readable=readable,
               mechanism=mechanism) as box:
        out = bytearray()
        reader = threading.Thread(target=_read_bounded, args=(box.stdout, out, max_output), daemon=True)
        reader.start()

        def feed():
            try:
                box.stdin.write(input)
                box.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass

        threading.Thread(target=feed, daemon=True).start()
        try:
            rc, timed_out = box.wait(timeout), False
        except subprocess.TimeoutExpired:
            rc, timed_out = None, True
        box.kill_tree()  # also ends detached children holding stdout open
        rc = box.wait() if rc is None else rc
        reader.join(5)
        box._stderr_thread.join(5)
        return rc, bytes(out), box.stderr_tail(), timed_out
