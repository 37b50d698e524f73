"""Which isolation holds: the mechanisms by name (``_kind``, with aliases), which of them work here (``available``,
cached), the one ``spawn`` uses (best first, or forced by ``mechanism=`` or ``ATTNLAB_SANDBOX``), and what it
enforces (``probe``, :class:`IsolationReport`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from attnlab import settings
from attnlab.grading.worker.sandbox.host import user_name
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
from attnlab.grading.worker.sandbox.uids import uid_range

_ALIASES = {"bwrap": BWRAP, "bubblewrap": BWRAP, "unshare": UNSHARE, "setpriv": SETPRIV, "setpriv-only": SETPRIV,
            "none": NONE, "off": NONE}
ENV_MECHANISM = settings.SANDBOX


@dataclass
class IsolationReport:
    mechanism: str  # one of MECHANISMS
    user: str  # the user the worker runs as
    network_isolated: bool
    filesystem_hidden: bool  # grader files unreadable from the worker
    pid_namespace: bool  # the whole process tree dies with the sandbox
    limits: dict  # Limits field name -> True when enforced
    notes: list[str] = field(default_factory=list)  # what failed or is weak, and why
    start: str = ""  # how the worker started: "fork from a warm zygote" or "cold (why not forked)"

    def summary(self) -> str:
        held = [name for name, ok in self.limits.items() if ok]
        lost = [name for name, ok in self.limits.items() if not ok]
        parts = [
            f"{self.mechanism} as {self.user}",
            "network isolated" if self.network_isolated else "network OPEN",
            "grader files hidden" if self.filesystem_hidden else "grader files VISIBLE",
            "pid namespace" if self.pid_namespace else "no pid namespace",
            "limits " + (", ".join(held) or "none"),
        ]
        if lost:
            parts.append("not enforced " + ", ".join(lost))
        if self.start:
            parts.append(f"started {self.start}")
        return "; ".join(parts)


_KINDS: dict[str, Mechanism] = {kind.name: kind for kind in (Bubblewrap(), Unshare(), SetprivOnly(), NoIsolation())}
assert tuple(_KINDS) == MECHANISMS, "the mechanisms, best first"


_availability: dict[str, str] = {}  # mechanism -> "" when it works, else why not


def _kind(name: str) -> Mechanism:
    """The Mechanism called `name` (an alias such as 'bwrap' or 'off' is accepted)."""
    kind = _KINDS.get(_ALIASES.get(name.lower(), name))
    if kind is None:
        raise ValueError(f"sandbox mechanism {name!r}: expected one of {', '.join(sorted(_ALIASES))}")
    return kind


def available(mechanism: str, refresh: bool = False) -> str:
    """'' when ``mechanism`` works on this machine, else why not (cached)."""
    if refresh or mechanism not in _availability:
        _availability[mechanism] = _kind(mechanism).available_here()
    return _availability[mechanism]


def choose(mechanism: str | None, refresh: bool = False) -> tuple[Mechanism, list[str]]:
    """The mechanism to use and notes on the better ones that do not work here."""
    forced = mechanism or settings.get(ENV_MECHANISM).strip()
    if forced:
        name = _ALIASES.get(forced.lower())
        if name is None:
            raise ValueError(f"sandbox mechanism {forced!r}: expected one of {', '.join(sorted(_ALIASES))} "
                             f"(set by mechanism= or ${ENV_MECHANISM})")
        why = available(name, refresh)
        if why:
            raise RuntimeError(f"sandbox mechanism {name} does not work here: {why}. Unset ${ENV_MECHANISM} "
                               f"(or pass mechanism=None) to use the best one that works.")
        return _KINDS[name], []
    notes = []
    for kind in _KINDS.values():  # best first
        why = available(kind.name, refresh) or kind.skipped_when_automatic()
        if not why:
            return kind, notes
        notes.append(f"{kind.name} unavailable: {why}")
    raise AssertionError("mechanism 'none' always works")


def probe(refresh: bool = False, mechanism: str | None = None) -> IsolationReport:
    """What isolation ``spawn`` gives on this machine with default Limits (cached; ``refresh`` re-tests)."""
    kind, notes = choose(mechanism, refresh)
    root = os.geteuid() == 0
    return isolation_report(kind, Limits(), uid=None if root and kind.dedicated_uid else os.getuid(), notes=notes)


def isolation_report(kind: Mechanism, limits: Limits, *, uid: int | None, notes: list[str]) -> IsolationReport:
    """What `kind` enforces for a worker running as `uid` (None: a dedicated uid not yet claimed)."""
    worker_is_root = os.geteuid() == 0 and not kind.dedicated_uid
    limits_held = {
        "memory_bytes": sys.platform.startswith("linux"),  # macOS accepts RLIMIT_AS but does not enforce it
        "cpu_seconds": True,
        "max_processes": not worker_is_root,
        "file_size_bytes": True,
        "open_files": True,
        "disk_bytes": kind.namespaces,
    }
    notes = list(notes)
    if not limits_held["memory_bytes"]:
        notes.append(f"memory_bytes not enforced: {sys.platform} does not enforce RLIMIT_AS")
    if worker_is_root:
        notes.append("max_processes not enforced: RLIMIT_NPROC does not bind root, and the worker runs as root")
    notes += kind.limit_notes(worker_is_root)
    if not kind.namespaces:
        notes.append("disk_bytes not enforced: the worker writes to the host workdir (file_size_bytes holds "
                     "per file)")
    notes += kind.weaknesses()
    if kind.namespaces and limits.network:
        notes.append("network allowed by Limits.network=True")
    return IsolationReport(mechanism=kind.name, user=_describe_user(kind, uid),
                           network_isolated=kind.namespaces and not limits.network,
                           filesystem_hidden=kind.namespaces, pid_namespace=kind.namespaces, limits=limits_held,
                           notes=notes)


def _describe_user(kind: Mechanism, uid: int | None) -> str:
    if uid is None:
        first, last = uid_range()[0], uid_range()[-1]
        return f"a dedicated uid from {first}-{last}"
    if uid == os.getuid():
        return f"{user_name(uid)} (uid {uid}, the grader's own user){kind.own_user_detail}"
    return f"uid {uid} (dedicated to this sandbox, no login)"
