"""Start an untrusted worker process in isolation, and say honestly which isolation holds.

The grader calls ``spawn([sys.executable, "-m", "attnlab.grading.worker.process"], workdir=..., limits=...)`` and talks to
the worker over ``stdin``/``stdout``. Mechanisms, best first (``ATTNLAB_SANDBOX=bwrap|unshare|setpriv|none|off`` or
``mechanism=`` forces one; ``off`` is ``none``). Each is one subclass of :class:`Mechanism` (``check``: does it work
here; ``start``: the worker in it; attributes and hooks: what it enforces, which ``isolation_report`` turns into the
:class:`IsolationReport`):

- ``bubblewrap`` (:class:`Bubblewrap`): new mount, pid, network, ipc and uts namespaces. The worker sees only what
  Python needs (read-only), ``/proc`` of its own pid namespace, a minimal ``/dev``, and private tmpfs mounts for its
  workdir, ``/tmp`` and ``/dev/shm``.
- ``unshare`` (:class:`Unshare`): the same picture built with util-linux ``unshare`` + ``chroot`` (machines without bwrap).
- ``setpriv-only`` (:class:`SetprivOnly`): root without namespaces (e.g. Docker's default seccomp profile): another
  uid and rlimits only.
- ``none`` (:class:`NoIsolation`): a plain subprocess in a new session with rlimits.

As root, every sandbox runs as its own dedicated uid (default 64000-64255, ``ATTNLAB_SANDBOX_UIDS=FIRST-LAST``), not
as ``nobody``: RLIMIT_NPROC counts per uid (threads included), so parallel workers sharing ``nobody`` would eat each
other's budget, and a uid used by nothing else can be swept clean by ``kill_tree``.

The workdir: in the namespace mechanisms the worker's workdir is a tmpfs of ``disk_bytes`` mounted at the same path,
holding a copy of the host folder at spawn time; what the worker writes there is not copied back (exchange data over
the pipes). In ``setpriv-only`` and ``none`` the worker works in the host folder itself.

Worker start: where the mechanism is ``bubblewrap`` or ``unshare``, the grader is root and the command is
``python -c``/``-m`` of this Python, ``spawn`` forks the worker from a warm zygote that imported torch once
(``zygote``: the same namespaces, mount plan, uid and limits, built by system calls in ``newroot`` and
``syscalls``; ``forked``: the grader's side), else it starts the mechanism's command cold
(``ATTNLAB_WORKER_START=auto|fork|cold``). ``IsolationReport.start`` says which, and why not forked.

One job per module: ``limits`` (:class:`Limits` and how they are applied), ``host`` (what this machine offers),
``mounts`` (what the worker may see), ``mechanisms`` (one class per mechanism), ``isolation`` (which mechanism is
used and what it enforces: ``available``, ``probe``), ``uids`` (dedicated uids), ``proctable`` (reading /proc),
``running`` (what every running worker shares: its stderr tail, exit status, ``kill_tree`` and
release), ``sandboxed`` (a worker started by the mechanism's command), ``zygote``, ``forked``, ``newroot`` and
``syscalls`` (the fork path) and ``launch`` (``spawn``, ``run_once``). This module is the public
face: import from here.
"""

from __future__ import annotations

from attnlab.grading.worker.sandbox.forked import ENV_START, Forked, ZygoteUnavailable, prestart, shutdown
from attnlab.grading.worker.sandbox.isolation import ENV_MECHANISM, IsolationReport, available, probe
from attnlab.grading.worker.sandbox.launch import run_once, spawn
from attnlab.grading.worker.sandbox.limits import Limits
from attnlab.grading.worker.sandbox.mechanisms import (
    BWRAP,
    MECHANISMS,
    NONE,
    SETPRIV,
    UNSHARE,
    Bubblewrap,
    Mechanism,
    NoIsolation,
    SetprivOnly,
    Unshare,
)
from attnlab.grading.worker.sandbox.mounts import private_paths, python_paths
from attnlab.grading.worker.sandbox.sandboxed import Sandboxed
from attnlab.grading.worker.sandbox.uids import ENV_UIDS

__all__ = ["BWRAP", "ENV_MECHANISM", "ENV_START", "ENV_UIDS", "MECHANISMS", "NONE", "SETPRIV", "UNSHARE", "Bubblewrap",
           "Forked", "IsolationReport", "Limits", "Mechanism", "NoIsolation", "Sandboxed", "SetprivOnly", "Unshare",
           "ZygoteUnavailable", "available", "prestart", "private_paths", "probe", "python_paths", "run_once",
           "shutdown", "spawn"]
