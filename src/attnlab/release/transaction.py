"""A release as a transaction: everything is written into a staging folder beside OUT, every gate runs there, and
only then does the staged content replace OUT's (all but its ``.git``). A gate that fails removes the staging
folder: OUT is left as it was, byte for byte, and no flagged file is left anywhere.

``kept_labs`` is what ``--labs`` keeps: the labs a previous release put in OUT (``labs/<lab>/``) that this release
does not write; they are copied into the staging folder as they are, so releasing lab11 never deletes lab01.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

KEPT = ".git"  # OUT's history: never moved, never rewritten


@contextlib.contextmanager
def staging(out: Path):
    """A fresh folder beside ``out`` (the same file system, so the swap is renames), removed when done."""
    out = out.resolve()  # ``.`` too: the staging folder goes beside the folder, never inside it
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
    """Make the content of ``out`` (but its ``.git``) that of ``stage``: the old entries move aside, the staged ones
    move in (renames on one file system), and the old ones go only then; a failure in between puts them back.
    ``out`` itself stays the same folder (a shell inside it, its permissions and its ``.git`` are untouched)."""
    out.mkdir(parents=True, exist_ok=True)
    old = Path(tempfile.mkdtemp(prefix=f".{out.resolve().name}.previous-", dir=out.resolve().parent))
    moved_old: list[str] = []
    moved_new: list[str] = []
    try:
        for child in sorted(out.iterdir()):
            if child.name != KEPT:
                os.rename(child, old / child.name)
                moved_old.append(child.name)
        for child in sorted(stage.iterdir()):
            os.rename(child, out / child.name)
            moved_new.append(child.name)
    except OSError:
        for name in moved_new:
            os.rename(out / name, stage / name)
        for name in moved_old:
            os.rename(old / name, out / name)
        raise
    finally:
        shutil.rmtree(old)
