"""``attnlab gradebook TARGET --check SUBMISSIONS``: verify a run in one command; ``rerun_line``, the command that
grades exactly what a batch or a check left.

Every submission file in the folder is looked up in the gradebook by its key (the file name, or the student under
the resubmission rule the batch used: ``student_from``, ``student_from.py``) and listed when its row is
**missing**, **stale** (the file's sha256 differs from the row's: it changed after it was graded, the row is of
another file of that name, or the file cannot be read now) or **errored** (the grader itself failed on it: stored as
0, graded again by the next run). A row with no file in the folder is not listed (the folder may be one of several).

A rerun line is a command to paste as is: the full path of this ``attnlab``, the files by their full paths, an
absolute ``--out`` and the batch's ``--student-from`` rule, so that following it keeps one row per student.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from attnlab.grading.outputs.connection import GradebookError
from attnlab.grading.outputs.gradebook import open_gradebook, redact_url, sqlite_path
from attnlab.grading.scale.batch import file_sha256
from attnlab.grading.scale.submissions import collect_submissions
from attnlab.records.safe_text import for_terminal, readable_name
from attnlab.student_from import student_rule

KINDS = ("missing", "stale", "errored")


@dataclass(frozen=True)
class Finding:
    kind: str  # one of KINDS
    key: str  # the submission's file name
    path: str  # the file in the submissions folder
    detail: str  # why, in words


@dataclass
class CheckReport:
    lab: str | None  # None: the gradebook is empty
    checked: int = 0  # submission files looked up
    findings: list[Finding] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(f.kind == kind for f in self.findings)

    def current(self) -> int:
        """Files with a row of their exact content and no grader error."""
        return self.checked - len({f.key for f in self.findings})

    def lines(self, submissions) -> list[str]:
        """One line per finding, then the summary (terminal-safe)."""
        counts = ", ".join(f"{self.count(kind)} {kind}" for kind in KINDS)
        return [for_terminal(f"{f.kind:<8} {f.key}: {f.detail}") for f in self.findings] + [for_terminal(
            f"attnlab gradebook --check: {self.lab or 'no lab yet'}, {self.checked} submission(s) in {submissions}: "
            f"{self.current()} graded and current; {counts}")]

    def rerun(self, target, student_from: str | None = None) -> str:
        """The command that grades the listed files into the gradebook ``target`` (a grading output folder: as
        ``--out``; a file or URL: ``--gradebook``, with ``--out OUT`` to fill in), under the rule ``student_from``."""
        folder = Path(str(target)).is_dir()
        return rerun_line(self.lab or "LAB", {f.key: f.path for f in self.findings},
                          out=str(target) if folder else "OUT", gradebook=None if folder else str(target),
                          student_from=student_from)


def attnlab_executable() -> str:
    """The full path of the ``attnlab`` command running now (beside this Python in a virtual environment, else the
    one on PATH), or ``attnlab`` where none is found."""
    beside = Path(sys.executable).absolute().parent / "attnlab"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("attnlab")
    return str(Path(found).absolute()) if found else "attnlab"


def _absolute(path: str) -> str:
    return path if path == "OUT" or "://" in path else str(Path(path).absolute())


def rerun_line(lab: str, left: dict[str, str], *, out: str, gradebook: str | None,
               student_from: str | None = None) -> str:
    """The last line of a batch that left submissions: how many, and the command that grades exactly them
    (no ``--shard``: the files are named; a gradebook URL's password shows as ``***``; a name that is not UTF-8
    as ``safe_text.readable_name`` shows it). Under a rule, the files keyed by their own names are graded without
    it (a second command: the folder rule would key such a file by its folder), the others with it."""
    tail = ["--out", _absolute(out)]
    if gradebook:
        tail += ["--gradebook", redact_url(gradebook) if "://" in gradebook else _absolute(gradebook)]
    by_name = {k: p for k, p in left.items() if student_from is None or readable_name(Path(p).name) == k}
    by_student = {k: p for k, p in left.items() if k not in by_name}
    commands = []
    for group, rule in ((by_student, ["--student-from", student_from]), (by_name, [])):
        if group:
            files = [_absolute(readable_name(p)) for p in group.values()]
            commands.append(shlex.join([attnlab_executable(), "grade", lab, *files, *tail, *rule]))
    return for_terminal(f"attnlab grade: {len(left)} submission(s) left: rerun: {'; '.join(commands)}")


def _last_line(text: str) -> str:
    lines = [line for line in str(text).strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "?"


def _gradebook_files(target) -> list[Path]:
    """The gradebook's own files, never taken as submissions when they lie in the folder."""
    if "://" in str(target):
        return []
    db = sqlite_path(target)
    return [db] + [db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")]


def _lab(book, lab: str | None) -> str | None:
    labs = book.labs()
    if lab is not None:
        if labs and lab not in labs:
            raise GradebookError(f"the gradebook {book.target} has no rows of lab {lab!r}; its labs: {', '.join(labs)}")
        return lab
    if len(labs) > 1:
        raise GradebookError(f"the gradebook {book.target} holds several labs ({', '.join(labs)}): pass --lab")
    return labs[0] if labs else None


def check_gradebook(target, submissions, *, lab: str | None = None, student_from=None) -> CheckReport:
    """Compare the gradebook at ``target`` (folder, .db file or postgresql:// URL) with the submission files in
    ``submissions`` (a folder or files), keyed under the resubmission rule ``student_from`` (``None``, ``"folder"``
    or a pattern, as the batch took it); ``lab``: which lab's rows (needed when the gradebook holds several)."""
    files = collect_submissions([submissions] if isinstance(submissions, (str, Path)) else submissions,
                               exclude=_gradebook_files(target), student_from=student_from)
    with open_gradebook(target, create=False) as book:
        lab = _lab(book, lab)
        rows = {r["key"]: r for r in book.rows(lab)} if lab is not None else {}
    report = CheckReport(lab=lab, checked=len(files))
    for key, path in files.items():
        row = rows.get(key)
        if row is None:
            report.findings.append(Finding("missing", key, str(path), "no row in the gradebook"))
            continue
        try:
            differs = row["sha256"] != file_sha256(path)
            why = f"the file differs from the one graded at {row['graded_at']}"
        except OSError as exc:
            differs, why = True, f"the file cannot be read now ({exc.strerror})"
        if differs:
            report.findings.append(Finding("stale", key, str(path), why))
        if row["grader_error"] is not None:
            report.findings.append(Finding("errored", key, str(path),
                                           f"grader error: {_last_line(row['grader_error'])}"))
    return report


def print_check(target, submissions, *, lab: str | None = None, student_from: str | None = None) -> bool:
    """``attnlab gradebook --check``: print the findings and the summary (standard output) and, when there are
    findings, the rerun command (standard error); whether anything was listed. ``student_from``: the rule's text."""
    done = check_gradebook(target, submissions, lab=lab, student_from=student_rule(student_from))
    print("\n".join(done.lines(submissions)))
    if done.findings:
        print(done.rerun(target, student_from), file=sys.stderr)
    return bool(done.findings)
