"""Grade many submissions: collect the files, keep one shard, skip what is already graded, grade the rest
on ``jobs`` workers (forked grader processes with the real grader, ``grading/pool.py``; threads for a custom
``grade_fn``), and write ``results.json`` + ``feedback.md`` per submission and a gradebook row.

A submission is keyed by its file name (``alice.ipynb``); its outputs go to ``out_dir/<stem>/``. Every
selected file gets a row, whatever it contains: a notebook the grader cannot read scores 0 with messages
(the grader's job), and a grader that raises or returns garbage gives a row with score 0 and the error,
which the next run grades again. Ctrl-C stops the batch; what was recorded stays, and rerunning the same
command resumes.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from attnlab.grading import pool
from attnlab.grading.bundle import manifest_lab, manifest_questions
from attnlab.grading.feedback import write_feedback
from attnlab.grading.gradebook import (
    DEFAULT_NAME,
    Gradebook,
    GradebookUnavailable,
    InvalidResult,
    format_score,
    open_gradebook,
    sqlite_path,
    validate_result,
)
from attnlab.grading.gradescope import write_results_json
from attnlab.grading.progress import BatchProgress
from attnlab.grading.result_fields import GRADER_ERROR, problem
from attnlab.grading.runner import grade_submission, ungraded, warm_up
from attnlab.grading.safe_text import readable_name
from attnlab.grading.scheduler import is_auto, shard_from_environment

STUDENT_MESSAGE_ON_GRADER_ERROR = (
    "The grader itself failed on this submission, so it has not been graded yet. "
    "This is not a problem with your notebook: your instructor has the details and will regrade it."
)


@dataclass
class BatchSummary:
    """What a batch did. ``results`` holds one clean result per graded or failed submission (key order),
    each with two extra fields: ``key`` and ``grader_error`` (None, or the grader's error text)."""

    lab: str
    graded: int = 0  # graded and recorded (a broken notebook graded 0 counts here)
    skipped: int = 0  # already in the gradebook with the same content
    failed: int = 0  # the grader raised or returned garbage: recorded with score 0, retried next run
    results: list[dict] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False
    jobs_as: str = "one at a time"  # or "2 grader processes", "2 threads"
    process_peaks_mib: list[float] = field(default_factory=list)  # each grader process's peak resident MiB
    unwritten: int = 0  # graded, results files written, but the gradebook row could not be (after the retries)
    left: dict[str, str] = field(default_factory=dict)  # key -> path of each submission to rerun (failed, unwritten)

    def __str__(self) -> str:
        text = f"{self.lab}: {self.graded} graded, {self.skipped} skipped (already graded)"
        if self.failed:
            text += f", {self.failed} failed (grader error, recorded as 0; rerun to retry)"
        if self.unwritten:
            text += f", {self.unwritten} not written to the gradebook (rerun to record)"
        text += f" in {self.elapsed_s:.1f} s" + (f" on {self.jobs_as}" if self.jobs_as != "one at a time" else "")
        return text + (" (interrupted: rerun the same command to resume)" if self.interrupted else "")


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a batch. ``summary`` says what was recorded before it."""

    def __init__(self, summary: BatchSummary):
        super().__init__(str(summary))
        self.summary = summary


# -- selecting the submissions -----------------------------------------------------------------------------
def collect_submissions(inputs, *, exclude=()) -> dict[str, Path]:
    """Map key (the file name as text, ``safe_text.readable_name``: bytes that are not UTF-8 as ``\\xNN``) ->
    path for the given files and directories, sorted by key.

    A directory contributes each non-hidden entry directly in it that is not a folder, whatever its extension
    (never followed or opened here: the grader gives a link, pipe or device a row saying so).
    ``exclude``: paths never taken (the batch's own outputs). Two different files with the same name,
    or with the same stem (both would write ``out_dir/<stem>/``), are an error naming both.
    """
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    excluded = {Path(p).resolve() for p in exclude}
    found: dict[str, Path] = {}
    for item in inputs:
        item = Path(item)
        if item.is_dir() and not item.is_symlink():
            files = sorted(
                p for p in item.iterdir()
                if not p.name.startswith(".") and not stat.S_ISDIR(os.lstat(p).st_mode)
                and p.resolve() not in excluded
            )
        elif os.path.lexists(item) and not item.is_dir():
            if item.name.startswith("."):
                raise ValueError(f"submission {item} is a hidden file (its results would go to a hidden "
                                 "or parent folder of out_dir): rename it without the leading dot")
            files = [item]
        else:
            raise FileNotFoundError(f"submission input {item} is neither a file nor a directory: check it")
        for path in files:
            key = readable_name(path.name)
            earlier = found.get(key)
            if earlier is not None and earlier.resolve() != path.resolve():
                raise ValueError(
                    f"two submissions are named {key!r}: {readable_name(str(earlier))} and "
                    f"{readable_name(str(path))}; the file name is the gradebook key, so rename one or grade "
                    "the folders separately"
                )
            found[key] = path
    stems: dict[str, str] = {}
    for key in sorted(found):
        other = stems.setdefault(Path(key).stem, key)
        if other != key:
            raise ValueError(
                f"submissions {readable_name(str(found[other]))} and {readable_name(str(found[key]))} would both "
                f"write their results to <out_dir>/{Path(key).stem}/: rename one"
            )
    return {key: found[key] for key in sorted(found)}


def parse_shard(shard: str) -> tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)``: the second of three shards (1-based). ``"auto"``: from Slurm or Kubernetes."""
    if is_auto(shard):
        shard = shard_from_environment(shard)
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(shard))
    if not match:
        raise ValueError(f"shard {shard!r} is not of the form i/N (for example 2/3: the 2nd of 3 shards)")
    index, count = int(match.group(1)), int(match.group(2))
    if count < 1 or not 1 <= index <= count:
        raise ValueError(f"shard {shard!r}: i/N needs N >= 1 and 1 <= i <= N (shards are numbered from 1)")
    return index, count


def in_shard(key: str, index: int, count: int) -> bool:
    """Stable across machines and runs: sha1 of the key, modulo the shard count."""
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest(), 16) % count == index - 1


def file_sha256(path) -> str:
    """The content's digest; a link, pipe or device is never opened (its digest says what it is)."""
    digest = hashlib.sha256()
    mode = os.lstat(path).st_mode
    if not stat.S_ISREG(mode):
        return hashlib.sha256(f"not a regular file: mode {mode:o}".encode()).hexdigest()
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


MAX_FOLDER_BYTES = 200  # a results folder's name; file systems allow 255 bytes, and "\\xNN" keys grow 4x


def _folder(stem: str) -> str:
    """``stem``, or when its UTF-8 is longer than ``MAX_FOLDER_BYTES``, its start and a digest of the whole."""
    raw = stem.encode("utf-8")
    if len(raw) <= MAX_FOLDER_BYTES:
        return stem
    return raw[: MAX_FOLDER_BYTES - 13].decode("utf-8", "ignore") + "-" + hashlib.sha1(raw).hexdigest()[:12]


def output_folders(keys, reserved=()) -> dict[str, str]:
    """Key -> the folder under out_dir for its results: the file's stem (shortened past ``MAX_FOLDER_BYTES``),
    moved to ``<stem>.results`` when the stem is one of the ``reserved`` names (the gradebook's files beside
    the folders)."""
    reserved = set(reserved)
    stems = {k: _folder(Path(k).stem) for k in keys}
    folders = {k: (f"{stem}.results" if stem in reserved else stem) for k, stem in stems.items()}
    taken: dict[str, str] = {}
    for key, folder in folders.items():
        other = taken.setdefault(folder, key)
        if other != key or folder in reserved:
            raise ValueError(f"submissions {other} and {key} would both write their results to "
                             f"<out_dir>/{folder}/: rename one")
    return folders


# -- grading one ---------------------------------------------------------------------------------------
def lab_id(lab_dir) -> str:
    """The lab a built autograder folder grades (its manifest's ``lab``, else the folder's name)."""
    return manifest_lab(lab_dir) or Path(lab_dir).name


def _grade_one(grade_fn, lab_dir, path: Path) -> tuple[dict, str | None]:
    """(clean result, None) or (failure result, grader error text). Never raises an ``Exception``."""
    start = time.monotonic()
    try:
        raw = grade_fn(lab_dir, path)
        error = None
    except Exception:
        error = traceback.format_exc()
    if error is None:
        try:
            result = validate_result(raw)
            result["submission"] = result["submission"] or str(path)
            return result, None
        except InvalidResult as exc:
            error = f"grade_fn returned an invalid result: {exc}"
    return _grader_failure(lab_dir, path, error, time.monotonic() - start)


def _grader_failure(lab_dir, path: Path, error: str, elapsed_s: float = 0.0) -> tuple[dict, str]:
    """The row of a submission the grader failed on: score 0, the student told it is not their fault."""
    failure = ungraded(path, manifest_questions(lab_dir), STUDENT_MESSAGE_ON_GRADER_ERROR,
                       isolation="not run (grader error)", elapsed_s=elapsed_s,
                       problems=[problem(GRADER_ERROR, STUDENT_MESSAGE_ON_GRADER_ERROR)])
    return validate_result(failure), error


# -- the batch -----------------------------------------------------------------------------------------
def grade_batch(
    lab_dir,
    inputs,
    *,
    out_dir,
    jobs: int = 1,
    shard: str | None = None,
    gradebook=None,
    grade_fn=None,
    progress: bool = True,
    regrade: bool = False,
) -> BatchSummary:
    """Grade the submissions in ``inputs`` (files and/or directories) against the built autograder folder
    ``lab_dir`` (``autograder/<lab>/``; its manifest names the lab the gradebook rows are filed under).

    ``out_dir``: gets ``<stem>/results.json`` (Gradescope) and ``<stem>/feedback.md`` per submission (see
    ``output_folders``).
    ``jobs``: submissions graded at once. ``shard``: ``"i/N"``, grade only the i-th of N disjoint parts.
    ``gradebook``: a ``Gradebook``, a SQLite path or a ``postgresql://`` URL (default
    ``out_dir/gradebook.db``). ``grade_fn(lab_dir, path) -> result`` (default
    ``attnlab.grading.runner.grade_submission``). ``regrade``: grade even what the gradebook already has
    with the same content. Raises ``BatchInterrupted`` (a ``KeyboardInterrupt``) on Ctrl-C, after the
    submissions finished so far are recorded.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs={jobs!r}: expected a whole number of workers, 1 or more")
    shard_spec = parse_shard(shard) if shard is not None else None
    in_processes = grade_fn is None and jobs > 1 and pool.start_method() == "processes"
    grade_fn = grade_submission if grade_fn is None else grade_fn
    out_dir = Path(out_dir)
    start = time.monotonic()
    lab = lab_id(lab_dir)

    own_gradebook = not isinstance(gradebook, Gradebook)
    gb_target = out_dir / DEFAULT_NAME if gradebook is None else gradebook
    submissions, folders = _select(inputs, out_dir, gb_target if own_gradebook else None, shard_spec)
    out_dir.mkdir(parents=True, exist_ok=True)
    book = open_gradebook(gb_target) if own_gradebook else gradebook
    summary = BatchSummary(lab=lab)
    bar = None
    try:
        todo = _todo(submissions, book, lab, summary, regrade=regrade)
        bar = BatchProgress(lab, len(todo), enabled=progress)
        finish = _recorder(lab, book, summary, bar, {key: out_dir / folder for key, folder in folders.items()})
        _grade_all(todo, lab_dir, grade_fn, jobs, finish, summary, in_processes=in_processes)
    except KeyboardInterrupt:
        summary.interrupted = True
        raise BatchInterrupted(summary) from None
    finally:
        summary.results.sort(key=lambda r: r["key"])
        summary.elapsed_s = time.monotonic() - start
        if bar is not None:
            bar.close()
        if own_gradebook:
            book.close()
    return summary


def _grade_all(todo, lab_dir, grade_fn, jobs: int, finish, summary: BatchSummary, *, in_processes: bool) -> None:
    """Grade ``todo`` one at a time, in ``jobs`` grader processes (``pool.py``) or on ``jobs`` threads, calling
    ``finish`` in this thread for each; ``summary.jobs_as`` says which."""
    def work(item):
        return _grade_one(grade_fn, lab_dir, item[1])

    if jobs == 1 or len(todo) < 2:
        for item in todo:
            finish(item, work(item))
    elif in_processes:
        summary.jobs_as = f"{jobs} grader processes"
        warm_up(lab_dir)  # the bundle and the zygote, shared by the forks
        summary.process_peaks_mib = pool.run_in_processes(
            todo, jobs, work, finish, lambda item, why: _grader_failure(lab_dir, item[1], why))
    else:
        summary.jobs_as = f"{jobs} threads"
        _run_pool(todo, jobs, work, finish)


def _todo(submissions: dict[str, Path], book, lab: str, summary: BatchSummary, *, regrade: bool) -> list[tuple]:
    """``(key, path, sha256)`` of the submissions to grade; the ones the gradebook already has unchanged are
    counted in ``summary.skipped`` (unless ``regrade``)."""
    todo = []
    for key, path in submissions.items():
        sha = file_sha256(path)
        if not regrade and _is_done(book, lab, key, sha):
            summary.skipped += 1
        else:
            todo.append((key, path, sha))
    return todo


def _is_done(book, lab: str, key: str, sha: str) -> bool:
    """``book.is_done``; a gradebook that does not answer (after its retries) means: grade it."""
    try:
        return book.is_done(lab, key, sha)
    except GradebookUnavailable:
        return False


def _select(inputs, out_dir: Path, gb_target, shard_spec) -> tuple[dict[str, Path], dict[str, str]]:
    """The submissions of this shard (never the gradebook's own files) and their output folders."""
    exclude = []  # the gradebook's own files, when it lies in an input folder
    if gb_target is not None and "://" not in str(gb_target):
        db = sqlite_path(gb_target)
        exclude += [db] + [db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")]
    submissions = collect_submissions(inputs, exclude=exclude)
    if shard_spec:
        submissions = {k: p for k, p in submissions.items() if in_shard(k, *shard_spec)}
    beside = [p.name for p in exclude if p.parent.resolve() == out_dir.resolve()]
    return submissions, output_folders(submissions, reserved=beside)


def _recorder(lab: str, book, summary: BatchSummary, bar, folders: dict[str, Path]):
    """``finish(item, outcome)``: write one submission's files and gradebook row, count it, show it."""

    def finish(item, outcome) -> None:
        (key, path, sha), (result, grader_error) = item, outcome
        write_results_json(result, folders[key] / "results.json")
        write_feedback(result, folders[key] / "feedback.md")
        try:
            book.record(lab, key, path.resolve(), sha, result, grader_error=grader_error)
        except GradebookUnavailable as exc:  # retried already (connection.py): report it, go on to the next
            summary.unwritten += 1
            summary.left[key] = str(path)
            bar.note(f"gradebook row of {key} not written (rerun to record it): {exc}")
        summary.results.append({**result, "key": key, "grader_error": grader_error})
        if grader_error:
            summary.left[key] = str(path)
            summary.failed += 1
            last_line = grader_error.strip().splitlines()[-1] if grader_error.strip() else "?"
            bar.note(f"grader error on {key} (recorded as 0, retried next run): {last_line}")
        else:
            summary.graded += 1
        bar.done(key, f"{format_score(result['score'])}/{format_score(result['max_score'])}",
                 failed=grader_error is not None)

    return finish


def _run_pool(todo, jobs: int, work, finish) -> None:
    """Run ``work(item)`` on ``jobs`` threads, at most ``jobs`` in flight, and ``finish(item, outcome)`` each
    in this thread. On an exception (Ctrl-C included) nothing new starts and in-flight results are dropped:
    a grade cut short by Ctrl-C must not be recorded as a 0."""
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="attnlab-grade")
    waiting = iter(todo)
    running = {}
    try:
        for item in waiting:
            running[pool.submit(work, item)] = item
            if len(running) == jobs:
                break
        while running:
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f][0]):
                item = running.pop(future)
                finish(item, future.result())  # re-raises what work raised (KeyboardInterrupt)
                following = next(waiting, None)
                if following is not None:
                    running[pool.submit(work, following)] = following
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def export_gradebook(target, csv_path, lab: str | None = None, roster=None) -> int:
    """``attnlab gradebook DIR --csv FILE``: write the CSV of the gradebook at ``target`` (a directory
    meaning ``DIR/gradebook.db``, a SQLite file or a ``postgresql://`` URL), students identified by ``roster``
    (``attnlab.roster``); return the number of rows."""
    with open_gradebook(target, create=False) as book:
        return book.export_csv(csv_path, lab=lab, roster=roster)
