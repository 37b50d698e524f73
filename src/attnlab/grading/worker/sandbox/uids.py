"""Dedicated uids for workers started by root (default 64000-64255, ``ATTNLAB_SANDBOX_UIDS=FIRST-LAST``): the range,
and claiming a uid no account and no process uses, held by a lock file for the sandbox's lifetime."""

from __future__ import annotations

import fcntl
import os
import pwd
import tempfile

from attnlab import settings
from attnlab.grading.worker.sandbox.proctable import process_table

ENV_UIDS = settings.SANDBOX_UIDS


def uid_range() -> range:
    raw = settings.get(ENV_UIDS)
    try:
        first, last = (int(x) for x in raw.split("-"))
        if not 0 < first <= last:
            raise ValueError
    except ValueError:
        raise ValueError(f"{ENV_UIDS}={raw!r}: expected FIRST-LAST, a range of unused uids such as "
                         f"{settings.VARIABLES[ENV_UIDS].default}") from None
    return range(first, last + 1)


def claim_uid() -> tuple[int, int]:
    """A uid no account and no process uses, locked for this sandbox: (uid, lock fd)."""
    busy = {p.uid for p in process_table(with_uid=True).values()}
    lock_dir = "/run/attnlab-sandbox" if os.path.isdir("/run") else os.path.join(tempfile.gettempdir(),
                                                                                  "attnlab-sandbox")
    os.makedirs(lock_dir, mode=0o700, exist_ok=True)
    for uid in uid_range():
        if uid in busy or uid == os.getuid():
            continue
        try:
            pwd.getpwuid(uid)
            continue  # a real account
        except KeyError:
            pass
        fd = os.open(os.path.join(lock_dir, f"uid-{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return uid, fd
        except BlockingIOError:
            os.close(fd)
    r = uid_range()
    raise RuntimeError(f"no free sandbox uid in {r[0]}-{r[-1]} (all used by accounts, processes or other "
                       f"sandboxes); set {ENV_UIDS}=FIRST-LAST to a larger range of unused uids")
