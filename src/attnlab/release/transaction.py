"""A release as a transaction: everything is written into a staging folder beside OUT, every gate runs there, and
only then does the staging folder take OUT's place (OUT's ``.git`` moved into it). A gate that fails removes the
staging folder: OUT is left as it was, byte for byte, and no flagged file is left anywhere.

``kept_labs`` is what ``--labs`` keeps: the labs a previous release put in OUT (``labs/<lab>/``) that this release
does not write; they are copied into the staging folder as they are, so releasing lab11 never deletes lab01.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

KEPT = ".git"  # OUT's history: moved into the new release, never rewritten


@contextlib.contextmanager
def staging(out: Path):
    """A fresh folder beside ``out`` (the same file system, so the swap is a rename), removed unless swapped in."""
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.release-", dir=out.parent))
    try:
        yield stage
    finally:
        if stage.exists():
            shutil.rmtree(stage)


def kept_labs(out: Path, writing: set[str]) -> list[str]:
    """The folders under ``out/labs`` that this release does not write (a previous release's labs), sorted."""
    labs = out / "labs"
    if not labs.is_dir():
        return []
    return sorted(p.name for p in labs.iterdir() if p.is_dir() and not p.is_symlink() and p.name not in writing)


def copy_kept(out: Path, stage: Path, names: list[str]) -> list[str]:
    """Copy ``out/labs/<name>`` into the staging folder for each name; the files copied, relative to ``out``."""
    copied = []
    for name in names:
        shutil.copytree(out / "labs" / name, stage / "labs" / name, symlinks=True)
        copied += [p.relative_to(stage).as_posix() for p in sorted((stage / "labs" / name).rglob("*")) if p.is_file()]
    return copied


def write_files(stage: Path, files: dict[Path, bytes]) -> None:
    for rel, data in sorted(files.items()):
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_bytes(data)


def swap_in(stage: Path, out: Path) -> None:
    """Make ``stage`` the new ``out``, carrying ``out/.git`` over; the old content goes only once the new is in
    place (a failure in between puts the old ``out`` back)."""
    if not out.exists():
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(stage, 0o777 & ~umask)  # mkdtemp's 0700 would lock a course's helpers out
        os.rename(stage, out)
        return
    shutil.copymode(out, stage)
    if (out / KEPT).exists():
        os.rename(out / KEPT, stage / KEPT)
    old = out.with_name(stage.name + ".old")
    os.rename(out, old)
    try:
        os.rename(stage, out)
    except OSError:
        os.rename(old, out)
        if (stage / KEPT).exists():
            os.rename(stage / KEPT, out / KEPT)
        raise
    shutil.rmtree(old)
