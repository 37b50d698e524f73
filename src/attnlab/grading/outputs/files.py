"""Where a batch writes each submission's files, and how: ``OUT/submissions/<folder>/`` holds ``results.json`` and
``feedback.md``, written atomically under private temporary names.

Student-derived names live one level down, in ``OUT/submissions/``, so no name a student picks can land on the
kit's own files in OUT (``gradebook.db``, ``report.html``, ``report.md``, the CSVs, logs): ``report.html.ipynb``
writes ``OUT/submissions/report.html/``.

Every write goes to a temporary file in the same folder whose name is unique to this process and this call
(``tempfile.mkstemp``: ``.<name>.<random>.tmp``), then ``os.replace`` puts it in place, so two runs of one batch
into one OUT never share a temporary file, and a reader never sees half a file. A failed write (a full disk, a
folder without write permission) removes its temporary file and raises ``OutputWriteError``, which names the path.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

SUBMISSIONS_FOLDER = "submissions"  # OUT/submissions/<folder>/: the only place student-derived names go
MAX_FOLDER_BYTES = 200  # a results folder's name; file systems allow 255 bytes, and "\\xNN" keys grow 4x


# What the kit itself writes directly in OUT besides the gradebook (attnlab report's defaults, the job files' logs):
# never taken as submissions when OUT lies in a submissions folder.
KIT_NAMES = (SUBMISSIONS_FOLDER, "logs", "report.html", "report.md", "report-scores.csv", "report-canvas.csv",
             "report-moodle.csv")


def kit_paths(out_dir) -> list[Path]:
    """The paths of ``KIT_NAMES`` in ``out_dir``."""
    return [Path(out_dir) / name for name in KIT_NAMES]


class OutputWriteError(OSError):
    """A submission's output file could not be written; ``str()`` names the path and the system's reason."""

    def __init__(self, path, exc: OSError):
        super().__init__(exc.errno, f"cannot write {path}: {exc.strerror or exc}")
        self.path = Path(path)


def folder_name(stem: str) -> str:
    """``stem``, or when its UTF-8 is longer than ``MAX_FOLDER_BYTES``, its start and a digest of the whole.
    ``.`` and ``..`` (and any name starting with a dot) get a ``_`` in front: never a hidden or parent folder."""
    raw = stem.encode("utf-8")
    if len(raw) > MAX_FOLDER_BYTES:
        stem = raw[: MAX_FOLDER_BYTES - 13].decode("utf-8", "ignore") + "-" + hashlib.sha1(raw).hexdigest()[:12]
    return "_" + stem if stem.startswith(".") or not stem else stem


def output_folders(stems: dict[str, str], out_dir) -> dict[str, Path]:
    """Key -> ``out_dir/submissions/<folder>``, from key -> stem (a file's stem, ``alice.ipynb`` -> ``alice``, or a
    student id as it is), see ``folder_name``. Two keys with one folder are an error naming both."""
    folders = {k: Path(out_dir) / SUBMISSIONS_FOLDER / folder_name(stem) for k, stem in stems.items()}
    taken: dict[Path, str] = {}
    for key, folder in folders.items():
        other = taken.setdefault(folder, key)
        if other != key:
            raise ValueError(f"submissions {other} and {key} would both write their results to "
                             f"{folder}/: rename one")
    return folders


def _temporary(path: Path, text: str) -> Path:
    """``text`` written to a new private temporary file beside ``path``; removed again if the write fails."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputWriteError(path, exc) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; the outputs are read like any file the batch writes
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise OutputWriteError(path, exc) from exc
    return Path(tmp)


def write_text_atomic(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (see the module docstring); raises ``OutputWriteError``."""
    return commit_files(stage_files({Path(path): text}))[0]


def stage_files(contents: dict[Path, str]) -> dict[Path, Path]:
    """Write every file's text to its own temporary file (final path -> temporary path), all or none: on a failure
    the temporaries already written are removed and ``OutputWriteError`` names the path that failed."""
    staged: dict[Path, Path] = {}
    try:
        for path, text in contents.items():
            staged[path] = _temporary(path, text)
    except OutputWriteError:
        discard(staged)
        raise
    return staged


def commit_files(staged: dict[Path, Path]) -> list[Path]:
    """Move each staged temporary file into place (``os.replace``: atomic within the folder)."""
    done = []
    try:
        for path, tmp in staged.items():
            os.replace(tmp, path)
            done.append(path)
    except OSError as exc:
        discard({p: t for p, t in staged.items() if p not in done})
        raise OutputWriteError(path, exc) from exc
    return done


def discard(staged: dict[Path, Path]) -> None:
    """Remove staged temporary files that will not be used."""
    for tmp in staged.values():
        Path(tmp).unlink(missing_ok=True)
