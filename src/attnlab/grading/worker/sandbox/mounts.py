"""What the worker may see: the folders Python needs, the folders always hidden, and the plan of the sandbox's file
system as a list of mounts (:class:`Mount`), parents first, with a copy of the host workdir (``with_parents`` adds
the parent folders bwrap needs)."""

from __future__ import annotations

import os
import site
import sys
from dataclasses import dataclass
from pathlib import Path

from attnlab.grading.worker.sandbox.limits import Limits

# /etc entries the worker may need (dynamic linker, time zone, certificates, fonts for matplotlib, localhost).
_ETC_BASICS = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "hosts", "ssl",
               "ca-certificates", "fonts", "mime.types", "alternatives", "os-release")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def python_paths() -> list[str]:
    """Folders the Python running this grader needs: installation, venv, site-packages, the attnlab package."""
    import attnlab

    paths = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *site.getsitepackages(),
             str(Path(attnlab.__file__).resolve().parent)}
    paths |= {os.path.realpath(p) for p in paths}
    return _outermost(p for p in paths if os.path.exists(p))


def private_paths() -> list[str]:
    """Folders hidden from every worker: the grader's hidden tests, reference and solutions, home folders."""
    import attnlab

    hidden = ["/root", "/home"]
    package = Path(attnlab.__file__).resolve().parent
    if package.parent.name == "src":  # an editable install inside the course repository
        repo = package.parent.parent
        hidden += [str(repo / name) for name in ("autograder", "instructor", "solutions")]
    return hidden


def _outermost(paths) -> list[str]:
    """Sorted absolute paths, without those inside another one of them."""
    kept: list[str] = []
    for p in sorted({os.path.abspath(p) for p in paths}):
        if not any(_inside(p, k) for k in kept):
            kept.append(p)
    return kept


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@dataclass
class Mount:
    dest: str
    kind: str  # ro | symlink | tmpfs | hide | dir | proc | dev, and copy-dir | copy-file | copy-link (workdir)
    source: str = ""  # ro: host path; symlink, copy-link: target; copy-file: the host file
    mode: int = 0o755


def mount_plan(workdir: str, limits: Limits, hide, readable, dedicated_uid: bool) -> list[Mount]:
    """The sandbox's file system, as mounts sorted parents first."""
    mounts = []
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            mounts.append(Mount(d, "symlink", os.readlink(d)))
        elif os.path.isdir(d):
            mounts.append(Mount(d, "ro", d))
    etc = [f"/etc/{name}" for name in _ETC_BASICS if os.path.exists(f"/etc/{name}")]
    needed = python_paths()
    extra = [os.path.abspath(p) for p in readable]
    for p in extra:
        if not os.path.exists(p):
            raise FileNotFoundError(f"readable={p!r}: no such file or folder; pass paths that exist")
    shown = _outermost([*etc, *needed, *extra])
    hidden = [os.path.abspath(p) for p in (*private_paths(), *hide)]
    for h in hidden:
        if h in needed:
            raise ValueError(f"hide={h!r}: Python needs this folder to run the worker; hide a narrower path")
    for p in shown:
        if not any(_inside(p, m.dest) for m in mounts):
            mounts.append(Mount(p, "ro", p))
    for h in hidden:  # only a hidden path inside a visible one needs covering; the rest is never mounted
        if os.path.exists(h) and any(_inside(h, p) and h != p for p in shown):
            mounts.append(Mount(h, "hide", mode=0o755 if os.path.isdir(h) else 0o644))
    writable = 0o777 if dedicated_uid else 0o700
    mounts += [Mount("/proc", "proc"), Mount("/dev", "dev"), Mount("/dev/shm", "tmpfs", mode=0o1777),
               Mount("/tmp", "tmpfs", mode=0o1777), Mount(workdir, "tmpfs", mode=writable)]
    mounts += _copy_in(workdir, limits)
    return sorted(mounts, key=lambda m: Path(m.dest).parts)


def _copy_in(workdir: str, limits: Limits, max_entries: int = 1000) -> list[Mount]:
    """Mounts that copy the host workdir's files into the sandbox's workdir tmpfs."""
    copies, total = [], 0
    for folder, dirs, files in os.walk(workdir):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                copies.append(Mount(path, "copy-link", os.readlink(path)))
            elif os.path.isdir(path):
                copies.append(Mount(path, "copy-dir", mode=0o777))
            elif os.path.isfile(path):
                copies.append(Mount(path, "copy-file", path, mode=0o666))
                total += os.path.getsize(path)
        if len(copies) > max_entries or total > limits.disk_bytes:
            raise ValueError(f"workdir {workdir!r} holds more than {max_entries} entries or "
                             f"{limits.disk_bytes} bytes (Limits.disk_bytes), more than the sandbox copies into "
                             "its tmpfs; pass big read-only data with readable=")
    return copies


def with_parents(mounts: list[Mount]) -> list[Mount]:
    """Mounts with a 0755 'dir' before each missing parent (bwrap would make it 0700, unreadable after setpriv)."""
    out, made, bound = [], set(), []
    for m in mounts:
        for parent in reversed(Path(m.dest).parents[:-1]):  # without "/"
            p = str(parent)
            if p not in made and not any(_inside(p, b) for b in bound):
                out.append(Mount(p, "dir"))
                made.add(p)
        out.append(m)
        made.add(m.dest)
        if m.kind in ("ro", "symlink", "proc", "dev", "hide"):
            bound.append(m.dest)
    return out
