"""Ending a command's process without the interpreter's teardown.

A process that imported torch spends a long time after its last line freeing every module one by one (figures:
``benchmarks/README.md``); a Gradescope container and an instructor grading one file wait for it.
``exit_without_teardown`` does what a normal exit must (flush the standard streams, run the ``atexit`` functions:
multiprocessing's joins, ``weakref.finalize`` clean-ups, logging) and skips the rest. Only a process's own entry
point calls it (``cli.main`` run as the command, ``grading/bridges/gradescope_run.py``), never a function a test or
a notebook calls; with another thread still running it exits the ordinary way, which waits for that thread.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from contextlib import contextmanager


def exit_without_teardown(code: int | None) -> None:
    """End this process with exit status ``code`` (``sys.exit``'s meaning: None is 0); never returns."""
    status = 0 if code is None else code
    if threading.active_count() > 1 or not isinstance(status, int):
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`attnlab grade ... | head`): nothing left to say
            pass
    os._exit(status)


@contextmanager
def terminated_as_interrupt():
    """SIGTERM (what Slurm and Kubernetes send a task they cancel, requeue or time out) ends a batch as Ctrl-C does:
    what was recorded stays, and the last line says so. Yields a list that is not empty once SIGTERM came."""
    came: list[int] = []

    def stop(signum, frame):
        came.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: left as it is
        yield came
        return
    try:
        yield came
    finally:
        signal.signal(signal.SIGTERM, previous)
