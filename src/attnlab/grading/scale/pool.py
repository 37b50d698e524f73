"""Grader processes for a batch: ``jobs`` forked copies of the grader, each grading one submission at a time.

Why processes, not threads: a batch's jobs as threads share one interpreter lock, and the grader's own Python
work (the reference's side of each hidden test, the comparisons, the diagnosis) then runs one job at a time; forked
graders each have their own lock (the figures: ``benchmarks/README.md``, "Grader processes").

Each child is a fork of the batch's process, taken before any grading, after ``runner.warm_up`` loaded the lab's
bundle and started the workers' zygote: the children share both (``sandbox/forked.py``: the zygote's lock is a
semaphore that holds across the forks, and a request and its reply are one step under it). A child gets one item at
a time through a pipe and sends back ``work(item)``'s outcome: trusted grader code's result; the student's code
still runs in its own sandboxed worker, one per submission, as with threads. A child that dies mid-grade (killed
for memory, a crash in a library) loses no row: its item gets ``lost(item, why)``'s outcome (a grader error,
retried next run) and a new child takes its place. Ctrl-C (or an error in ``finish``) stops the children with
SIGTERM, which ends a grade in progress through its ``finally`` blocks (its worker is killed); their in-flight
results are dropped, as with threads. A batch process that dies without a word (SIGKILL) takes its children with
it: each gets SIGTERM as its parent dies (``PR_SET_PDEATHSIG``), and the zygote watches that process too.

Linux only (``fork`` after torch is imported is not safe on macOS), and ``ATTNLAB_GRADER_POOL=threads`` keeps
threads (``start_method`` says which is in force).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import sys
from multiprocessing.connection import wait as wait_ready
from typing import Any, Callable

from attnlab import settings

POOL_ENV = settings.GRADER_POOL  # "threads": a batch's jobs as threads of one grader process
STOP_TIMEOUT_S = 10.0  # what a child gets to end its grade after SIGTERM before SIGKILL


def start_method() -> str:
    """``"processes"`` where forked grader processes can serve a batch, else ``"threads"``."""
    if settings.get(POOL_ENV).strip().lower() == "threads":
        return "threads"
    if not sys.platform.startswith("linux") or "fork" not in multiprocessing.get_all_start_methods():
        return "threads"
    return "processes"


def resident_mib(field: str = "VmHWM") -> float:
    """This process's resident memory in MiB as ``/proc/self/status`` gives it: ``VmHWM``, its peak (the kernel's
    high-water mark), or ``VmRSS``, now; 0 where /proc lacks it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _end_grade(signum, frame) -> None:
    raise SystemExit(128 + signum)  # through the grade's finally blocks: its worker is stopped


def _die_with(parent: int) -> None:
    """SIGTERM to this process when ``parent`` dies (killed with SIGKILL, the OOM killer): its grade ends through
    its finally blocks (its worker killed), never left running for good. The thread that forked this child is the
    batch's own, which lives as long as the pool does."""
    from attnlab.grading.worker.sandbox import syscalls

    try:
        syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the pipe's end still stops an idle child
        return
    if os.getppid() != parent:  # died before the prctl
        raise SystemExit(128 + signal.SIGTERM)


def _serve(conn, work: Callable[[Any], Any], parent: int) -> None:
    """A child's loop: ``item`` in, ``(outcome, peak MiB)`` out, until ``None`` or the pipe closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    signal.signal(signal.SIGTERM, _end_grade)
    _die_with(parent)
    while True:
        try:
            item = conn.recv()
        except (EOFError, OSError):
            return
        if item is None:
            return
        outcome = work(item)
        conn.send((outcome, resident_mib()))


class _Child:
    """One grader process and the item it is grading (``None``: idle)."""

    def __init__(self, context, work):
        ours, theirs = context.Pipe()
        self.proc = context.Process(target=_serve, args=(theirs, work, os.getpid()), daemon=True,
                                    name="attnlab-grader")
        self.proc.start()
        theirs.close()
        self.conn, self.item, self.peak_mib = ours, None, 0.0

    def give(self, item) -> None:
        self.item = item
        if item is not None:
            try:
                self.conn.send(item)
            except OSError:  # the child is gone: its sentinel says so, and the item is reported lost
                pass

    def receive(self) -> tuple[Any, str | None]:
        """(outcome, None), or (None, why it has none): the child died."""
        try:
            outcome, peak = self.conn.recv()
        except (EOFError, OSError, ValueError, TypeError) as exc:
            self.proc.join(STOP_TIMEOUT_S)
            code = self.proc.exitcode
            how = (f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}")
            return None, f"the grader process died while grading this submission ({how}; {type(exc).__name__})"
        self.peak_mib = max(self.peak_mib, float(peak))
        return outcome, None

    def stop(self) -> None:
        """End the child: politely when idle, with SIGTERM (then SIGKILL) when it is grading."""
        if self.proc.is_alive():
            if self.item is None:
                try:
                    self.conn.send(None)
                except OSError:
                    pass
            else:
                self.proc.terminate()
            self.proc.join(STOP_TIMEOUT_S)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(STOP_TIMEOUT_S)
        self.conn.close()


def run_in_processes(todo, jobs: int, work, finish, lost, started=None) -> list[float]:
    """``work(item)`` for each item of ``todo`` in ``jobs`` forked processes, and ``finish(item, outcome)`` for
    each in this process as it comes back. An item whose process died gets ``lost(item, why)`` as its outcome.
    ``started(item)``, in this process, as each item is handed to a grader process (the progress line names the
    files running). Returns each grader process's peak resident memory in MiB (the replacements of dead ones
    included)."""
    context = multiprocessing.get_context("fork")
    waiting = iter(todo)
    children: list[_Child] = []
    peaks: list[float] = []

    def give(child: _Child, item) -> None:
        if started is not None:
            started(item)
        child.give(item)

    def start(item) -> None:
        child = _Child(context, work)
        children.append(child)
        give(child, item)

    try:
        for item in itertools.islice(waiting, jobs):
            start(item)
        while any(c.item is not None for c in children):
            busy = [c for c in children if c.item is not None]
            ready = set(wait_ready([c.conn for c in busy] + [c.proc.sentinel for c in busy]))
            for child in busy:
                if child.conn not in ready and child.proc.sentinel not in ready:
                    continue
                outcome, died = child.receive()
                item, child.item = child.item, None
                if died is not None:  # this child is done for: a lost row, and a new child for what follows
                    outcome = lost(item, died)
                    child.stop()
                    peaks.append(child.peak_mib)
                    children.remove(child)
                finish(item, outcome)
                following = next(waiting, None)
                if following is not None and died is None:
                    give(child, following)
                elif following is not None:
                    start(following)
    finally:
        for child in children:
            child.stop()
            peaks.append(child.peak_mib)
    return peaks
