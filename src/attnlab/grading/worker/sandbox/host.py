"""What this machine offers the sandbox: tools on PATH, whether a command runs, whether other users can run a
program, and user names."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path


def run_quietly(argv: list[str], timeout: float = 5.0) -> str:
    """'' when argv exits 0, else its last stderr line (or why it could not run)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if done.returncode == 0:
        return ""
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def missing_tools(*tools: str) -> str:
    absent = [t for t in tools if shutil.which(t) is None]
    return f"{', '.join(absent)} not found on PATH" if absent else ""


def others_cannot_run(program: str) -> str:
    """'' when any user can run `program` (needed when setpriv-only switches uid in place), else why not."""
    path = os.path.abspath(shutil.which(program) or program)
    for p in (path, os.path.realpath(path)):
        for folder in reversed(Path(p).parents):
            if not os.stat(folder).st_mode & 0o001:
                return f"{program} is not runnable by other users: {folder} is not searchable by them"
        if not os.stat(p).st_mode & 0o001:
            return f"{program} is not executable by other users"
    return ""


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
