"""Reading the process table: every process in /proc with its parent, group, session, real uid and state, a
process's descendants, and whether a process carries a token in its environment."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgid: int
    sid: int
    uid: int | None  # real uid; None when not asked for
    zombie: bool


def process_table(with_uid: bool = False) -> dict[int, _Proc]:
    """Every process visible in /proc ({} where there is no /proc)."""
    procs = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return procs
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            uid = None
            if with_uid:  # the real uid, which a process cannot change without capabilities
                with open(f"/proc/{name}/status", "rb") as f:
                    uid = int(f.read().split(b"\nUid:")[1].split()[0])
        except OSError:
            continue  # exited meanwhile
        state, ppid, pgid, sid = stat[stat.rindex(b")") + 2:].split()[:4]
        procs[int(name)] = _Proc(int(name), int(ppid), int(pgid), int(sid), uid, state == b"Z")
    return procs


def descendants_of(pid: int, procs: dict[int, _Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def has_token(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return token in f.read().split(b"\0")
    except OSError:
        return False
