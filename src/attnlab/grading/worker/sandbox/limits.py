"""The resource limits of one worker (:class:`Limits`) and how they are applied: ``prlimit`` in front of the
worker's command, or ``setrlimit`` between fork and exec where ``prlimit`` is missing."""

from __future__ import annotations

import resource
import shutil
from dataclasses import dataclass

# RLIMIT_CPU's hard limit is this far above the soft one: at the soft limit the kernel sends SIGXCPU, which ends the
# worker and says "the CPU-time limit" (grading/worker/deaths.py); at a hard limit equal to it, the kernel's SIGKILL
# would look like a kill from outside.
CPU_GRACE_S = 2


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


def rlimit_values(limits: Limits) -> list[tuple[str, int, int]]:
    """``(RLIMIT_name, soft, hard)`` of each limit a worker gets."""
    return [("RLIMIT_AS", limits.memory_bytes, limits.memory_bytes),
            ("RLIMIT_CPU", limits.cpu_seconds, limits.cpu_seconds + CPU_GRACE_S),
            ("RLIMIT_NPROC", limits.max_processes, limits.max_processes),
            ("RLIMIT_FSIZE", limits.file_size_bytes, limits.file_size_bytes),
            ("RLIMIT_NOFILE", limits.open_files, limits.open_files), ("RLIMIT_CORE", 0, 0)]


def rlimit_argv(limits: Limits) -> list[str]:
    """prlimit in front of the worker; [] where prlimit is missing (then set_rlimits runs as preexec_fn)."""
    tool = shutil.which("prlimit")
    if tool is None:
        return []
    return [tool, f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}:{limits.cpu_seconds + CPU_GRACE_S}",
            f"--nproc={limits.max_processes}", f"--fsize={limits.file_size_bytes}", f"--nofile={limits.open_files}",
            "--core=0", "--"]


def set_rlimits(limits: Limits) -> None:
    for name, soft, hard in rlimit_values(limits):
        if hasattr(resource, name):
            resource.setrlimit(getattr(resource, name), (soft, hard))
