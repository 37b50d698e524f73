"""The resource limits of one worker (:class:`Limits`) and how they are applied: ``prlimit`` in front of the
worker's command, or ``setrlimit`` between fork and exec where ``prlimit`` is missing."""

from __future__ import annotations

import resource
import shutil
from dataclasses import dataclass


@dataclass
class Limits:
    memory_bytes: int = 4 * 2**30  # RLIMIT_AS
    cpu_seconds: int = 600  # RLIMIT_CPU
    max_processes: int = 64  # RLIMIT_NPROC (counts threads too)
    file_size_bytes: int = 64 * 2**20  # RLIMIT_FSIZE
    open_files: int = 256  # RLIMIT_NOFILE
    disk_bytes: int = 256 * 2**20  # size of each tmpfs (workdir, /tmp, /dev/shm) in the namespace mechanisms
    network: bool = False

    def __post_init__(self):
        for name in ("memory_bytes", "cpu_seconds", "max_processes", "file_size_bytes", "open_files", "disk_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name}={value!r}: expected a positive int")


def rlimit_argv(limits: Limits) -> list[str]:
    """prlimit in front of the worker; [] where prlimit is missing (then set_rlimits runs as preexec_fn)."""
    tool = shutil.which("prlimit")
    if tool is None:
        return []
    return [tool, f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}", f"--nproc={limits.max_processes}",
            f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}", "--core=0", "--"]


def set_rlimits(limits: Limits) -> None:
    for name, value in (("RLIMIT_AS", limits.memory_bytes), ("RLIMIT_CPU", limits.cpu_seconds),
                        ("RLIMIT_NPROC", limits.max_processes), ("RLIMIT_FSIZE", limits.file_size_bytes),
                        ("RLIMIT_NOFILE", limits.open_files), ("RLIMIT_CORE", 0)):
        if hasattr(resource, name):
            resource.setrlimit(getattr(resource, name), (value, value))
