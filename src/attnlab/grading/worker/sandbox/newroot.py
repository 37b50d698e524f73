"""The sandbox's file system built by system calls, for a child of the zygote: the same plan of mounts
(``mounts.mount_plan`` with ``with_parents``) that bubblewrap gets as options and ``unshare`` as a shell script, mounted
under an empty folder in the child's own mount namespace, which then becomes its root (``pivot_root``)."""

from __future__ import annotations

import os
import shutil

from attnlab.grading.worker.sandbox import syscalls as sc

_DEV_NODES = ("null", "zero", "full", "random", "urandom")
_DEV_LINKS = (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
              ("stderr", "/proc/self/fd/2"))


def build_root(newroot: str, mounts: list, workdir: str, disk_bytes: int, uid: int | None) -> None:
    """Mount ``mounts`` (``[dest, kind, source, mode]``, parents first) under ``newroot`` and make it the root.
    Needs root in a private mount namespace (``unshare(CLONE_NEWNS)``) and a pid namespace of its own for
    ``/proc``; raises ``OSError`` naming the mount that failed."""
    sc.mount(None, "/", None, sc.MS_REC | sc.MS_PRIVATE)  # nothing below propagates back to the host
    sc.mount("attnlab-root", newroot, "tmpfs", sc.MS_NOSUID | sc.MS_NODEV, "mode=0755,size=1m")
    for dest, kind, source, mode in mounts:
        _mount_one(newroot + dest, kind, source, mode, disk_bytes, uid, is_workdir=dest == workdir)
    os.chdir(newroot)
    sc.pivot_root(".", ".")  # the old root is stacked on the new one: detach it
    sc.umount2(".", sc.MNT_DETACH)
    os.chdir("/")
    sc.mount(None, "/", None, sc.MS_BIND | sc.MS_REMOUNT | sc.MS_RDONLY | sc.MS_NOSUID | sc.MS_NODEV)


def _mount_one(target: str, kind: str, source: str, mode: int, disk_bytes: int, uid: int | None, *,
               is_workdir: bool) -> None:
    """One mount of the plan at ``target`` (its path under the new root)."""
    nosuid = sc.MS_NOSUID | sc.MS_NODEV
    if kind in ("dir", "copy-dir"):
        os.makedirs(target, exist_ok=True)
        os.chmod(target, mode)
        _own(target, uid, kind == "copy-dir")
    elif kind == "ro":
        _make_like(source, target)
        sc.mount(source, target, None, sc.MS_BIND | sc.MS_REC)
        sc.read_only_recursive(target)
    elif kind in ("symlink", "copy-link"):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(source, target)
    elif kind == "tmpfs":
        os.makedirs(target, exist_ok=True)
        sc.mount("attnlab", target, "tmpfs", nosuid, f"size={disk_bytes},mode={mode:o}")
        _own(target, uid, is_workdir)
    elif kind == "hide":
        if mode == 0o755:
            sc.mount("attnlab-hidden", target, "tmpfs", nosuid | sc.MS_RDONLY, "size=4k,mode=755")
        else:
            sc.mount("/dev/null", target, None, sc.MS_BIND)
    elif kind == "proc":
        os.makedirs(target, exist_ok=True)
        sc.mount("proc", target, "proc", nosuid | sc.MS_NOEXEC)
    elif kind == "dev":
        _make_dev(target)
    elif kind == "copy-file":
        shutil.copyfile(source, target, follow_symlinks=False)
        os.chmod(target, mode)
        _own(target, uid, True)
    else:
        raise ValueError(f"unknown mount kind {kind!r} for {target}")


def _make_like(source: str, target: str) -> None:
    """An empty folder or file at ``target`` to bind ``source`` on."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "wb").close()


def _make_dev(target: str) -> None:
    os.makedirs(target, exist_ok=True)
    os.chmod(target, 0o755)
    for node in _DEV_NODES:
        open(os.path.join(target, node), "wb").close()
        sc.mount(f"/dev/{node}", os.path.join(target, node), None, sc.MS_BIND)
    for link, to in _DEV_LINKS:
        os.symlink(to, os.path.join(target, link))


def _own(path: str, uid: int | None, give: bool) -> None:
    if give and uid is not None:
        os.chown(path, uid, uid, follow_symlinks=False)
