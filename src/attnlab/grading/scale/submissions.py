"""Which files a batch grades, and under which key (the gradebook row's name): one row per submission file, or,
with a student rule, one row per student.

The rule for resubmissions (``attnlab grade --student-from``):

- no rule: the key is the file's name (``alice.ipynb``); a resubmission under the same name replaces its row, and
  a file under a new name (``alice-v2.ipynb``) is a new row.
- ``--student-from REGEX``: the regular expression must match the whole stem of a file's name; its group named
  ``student`` (else its first group) is the student id and the key (``(?P<student>[^-]+)(-v\\d+)?``: ``alice``,
  ``alice-v2`` -> ``alice``). A file whose stem does not match keeps its file name as key.
- ``--student-from folder``: the layout of Gradescope exports and nbgrader, one folder per student
  (``submissions/alice/lab05.ipynb``): each folder directly in an input folder is a student, named by the folder;
  the files directly in it are that student's submissions. Files beside the folders keep their file names as keys.
  A file named on its own (``submissions/alice/lab05.ipynb``, as a rerun line names it) is its folder's student's.

With a rule, the newest file of a student (by modification time, then by name) is the one graded, and its row
replaces the student's earlier row, whatever that file was called. A file or folder is never followed or opened
here (the grader gives a link, pipe or device a row saying so).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from attnlab.records.safe_text import readable_name
from attnlab.student_from import FOLDER_RULE, student_of, student_rule


def _entries(folder: Path, excluded: set[Path], *, folders: bool) -> list[Path]:
    """The non-hidden entries directly in ``folder`` that are folders (``folders``), or anything else."""
    found = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith(".") or p.resolve() in excluded:
            continue
        is_dir = stat.S_ISDIR(os.lstat(p).st_mode)
        if is_dir == folders:
            found.append(p)
    return found


def _candidates(inputs, excluded: set[Path], rule) -> list[tuple[str, Path]]:
    """``(key, path)`` of every file the inputs hold, with the rule's keys (several per student)."""
    found = []
    for item in inputs:
        item = Path(item)
        if item.is_dir() and not item.is_symlink():
            files = _entries(item, excluded, folders=False)
            if rule == FOLDER_RULE:
                found += [(readable_name(d.name), f) for d in _entries(item, excluded, folders=True)
                          for f in _entries(d, excluded, folders=False)]
        elif os.path.lexists(item) and not item.is_dir():
            if item.name.startswith("."):
                raise ValueError(f"submission {item} is a hidden file (its results would go to a hidden "
                                 "or parent folder of out_dir): rename it without the leading dot")
            files = [item]
            if rule == FOLDER_RULE:  # named on its own: its folder is the student
                found.append((readable_name(item.absolute().parent.name), item))
                continue
        else:
            raise FileNotFoundError(f"submission input {item} is neither a file nor a directory: check it")
        for path in files:
            student = student_of(rule, path.name) if rule not in (None, FOLDER_RULE) else None
            found.append((readable_name(student) if student else readable_name(path.name), path))
    return found


def _newest(paths: list[Path]) -> Path:
    return max(paths, key=lambda p: (os.lstat(p).st_mtime_ns, p.name))


def collect_submissions(inputs, *, exclude=(), student_from=None) -> dict[str, Path]:
    """Map key -> path for the given files and directories, sorted by key (see the module docstring; a key is
    text, ``safe_text.readable_name``: bytes that are not UTF-8 as ``\\xNN``).

    ``exclude``: paths never taken (the batch's own outputs). ``student_from``: ``None``, ``"folder"`` or a
    pattern (``student_rule``). Without a rule, two different files with the same name, or with the same stem
    (both would write ``<out_dir>/submissions/<stem>/``), are an error naming both.
    """
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    rule = student_rule(student_from) if isinstance(student_from, str) else student_from
    excluded = {Path(p).resolve() for p in exclude}
    by_key: dict[str, list[Path]] = {}
    for key, path in _candidates(inputs, excluded, rule):
        same = by_key.setdefault(key, [])
        if all(p.resolve() != path.resolve() for p in same):
            same.append(path)
    found: dict[str, Path] = {}
    for key, paths in sorted(by_key.items()):
        named = [p for p in paths if readable_name(p.name) == key]  # keyed by its own file name, not a student
        if rule is None or named:
            if len(paths) > 1:
                raise ValueError(f"two submissions are named {key!r}: {readable_name(str(paths[0]))} and "
                                 f"{readable_name(str(paths[1]))}; the file name is the gradebook key, so rename "
                                 "one or grade the folders separately")
            found[key] = paths[0]
        else:
            found[key] = _newest(paths)
    _check_stems(found)
    return found


def output_stem(key: str, path: Path) -> str:
    """The name of a submission's output folder: the file's stem when keyed by its file name, else the student id."""
    return Path(key).stem if readable_name(path.name) == key else key


def _check_stems(found: dict[str, Path]) -> None:
    stems: dict[str, str] = {}
    for key, path in found.items():
        other = stems.setdefault(output_stem(key, path), key)
        if other != key:
            raise ValueError(
                f"submissions {readable_name(str(found[other]))} and {readable_name(str(path))} would both "
                f"write their results to <out_dir>/submissions/{output_stem(key, path)}/: rename one"
            )
