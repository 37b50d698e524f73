"""Grade many submissions: collect the files, keep one shard, skip what is already graded, grade the rest
on ``jobs`` workers (forked grader processes with the real grader, ``grading/scale/pool.py``; threads for a custom
``grade_fn``), and write ``results.json`` + ``feedback.md`` per submission and a gradebook row.

A submission is keyed by its file name (``alice.ipynb``), or by its student under a ``student_from`` rule
(``submissions.py``: the newest file of a student replaces the student's row); its outputs go to
``out_dir/submissions/<stem>/`` (``outputs.py``), never beside the kit's own files in out_dir. The grader grades a
private copy of the bytes read once, and the row stores the digest of those bytes. Every
selected file gets a row, whatever it contains: a notebook the grader cannot read scores 0 with messages
(the grader's job), and a grader that raises or returns garbage gives a row with score 0 and the error,
which the next run grades again. Ctrl-C stops the batch; what was recorded stays, and rerunning the same
command resumes. A submission's two files are written under private temporary names, its row recorded, and
only then both files put in place, so files and row agree; a write that fails (a full disk) stops the batch
with ``BatchWriteFailed`` naming the path: the rows recorded before it stay, and rerunning resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from attnlab.gradescope_visibility import Visibility
from attnlab.grading.core.bundle import manifest_lab, manifest_questions, read_manifest
from attnlab.grading.core.written_answers import add_written, awaiting_note, points_awaiting
from attnlab.grading.outputs.connection import GradebookUnavailable
from attnlab.grading.outputs.feedback import feedback_markdown
from attnlab.grading.outputs.files import OutputWriteError, commit_files, discard, kit_paths, output_folders, stage_files
from attnlab.grading.outputs.gradebook import (
    DEFAULT_NAME,
    Gradebook,
    InvalidResult,
    open_gradebook,
    sqlite_path,
    validate_result,
)
from attnlab.grading.outputs.gradescope import results_json_text
from attnlab.grading.runner import grade_submission, ungraded, warm_up
from attnlab.grading.scale import pool
from attnlab.grading.scale.progress import BatchProgress
from attnlab.grading.scale.scheduler import is_auto, shard_from_environment
from attnlab.grading.scale.submissions import collect_submissions, output_stem
from attnlab.grading.source.notebook_code import SubmissionError, SubmissionUnreadable, read_submission
from attnlab.records.result_fields import GRADER_ERROR, problem
from attnlab.records.safe_text import readable_name
from attnlab.records.score_text import format_score

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


class BatchWriteFailed(Exception):
    """An output file or the gradebook row of a submission could not be written (a full disk, no permission): the
    batch stopped there. ``summary`` says what was recorded before; ``str()`` names the path and the fix."""

    def __init__(self, summary: BatchSummary, error: OSError, key: str):
        super().__init__(f"{error}; stopped before recording {key}: {summary.graded + summary.failed} recorded, "
                         "none lost; free the space (or fix the permission) and run the same command again to resume")
        self.summary = summary
        self.error = error


class BatchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a batch. ``summary`` says what was recorded before it."""

    def __init__(self, summary: BatchSummary):
        super().__init__(str(summary))
        self.summary = summary


# -- selecting the submissions -----------------------------------------------------------------------------
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


# -- grading one ---------------------------------------------------------------------------------------
def lab_id(lab_dir) -> str:
    """The lab a built autograder folder grades (its manifest's ``lab``, else the folder's name)."""
    return manifest_lab(lab_dir) or Path(lab_dir).name


def _grade_one(grade_fn, lab_dir, path: Path) -> tuple[dict, str | None, str | None]:
    """(clean result, None, sha256) or (failure result, grader error text, sha256): ``path``'s bytes are read once
    and a private copy of them graded, and sha256 is their digest (None when they could not be read: the grader
    was given the file itself, to say why). Never raises an ``Exception``."""
    start = time.monotonic()
    sha, error = None, None
    try:
        with tempfile.TemporaryDirectory(prefix="attnlab-graded-") as tmp:
            graded, sha = _private_copy(path, Path(tmp))
            if grade_fn is grade_submission:  # the student's code must not read the other submissions either
                raw = grade_submission(lab_dir, graded, hide=(path.resolve().parent,))
            else:
                raw = grade_fn(lab_dir, graded)
    except Exception:
        error = traceback.format_exc()
    if error is None:
        try:
            result = _as_original(validate_result(raw), graded, path)
            result["submission"] = result["submission"] or str(path)
            return result, None, sha
        except InvalidResult as exc:
            error = f"grade_fn returned an invalid result: {exc}"
    return (*_grader_failure(lab_dir, path, error, time.monotonic() - start), sha)


def _as_original(result: dict, graded: Path, path: Path) -> dict:
    """``result`` with the private copy's path, wherever the grader wrote it, replaced by the submission's."""
    if graded == path:
        return result
    text = json.dumps(result)
    return json.loads(text.replace(json.dumps(str(graded))[1:-1], json.dumps(str(path))[1:-1]))


class SubmissionVanished(Exception):
    """A listed submission could not be read when its turn came (removed, moved, made unreadable): a grader error,
    so its row is errored and the next run grades it, never a 0 that looks current."""


def _private_copy(path: Path, folder: Path) -> tuple[Path, str | None]:
    """(a copy of ``path``'s bytes in ``folder``, their sha256), or ``(path, None)`` when the bytes are the
    submission's problem (a link, a pipe, a file past the size limit: the grader gives that file a row saying so).
    Raises ``SubmissionVanished`` when the file cannot be read at all."""
    try:
        data = read_submission(path)
    except SubmissionUnreadable as exc:
        raise SubmissionVanished(f"{readable_name(str(path))} could not be read when its turn came ({exc}): it was "
                                 "removed, moved or made unreadable after it was listed; grade it again once it is "
                                 "back") from None
    except SubmissionError:
        return path, None
    copy = folder / path.name
    copy.write_bytes(data)
    return copy, hashlib.sha256(data).hexdigest()


def _grader_failure(lab_dir, path: Path, error: str, elapsed_s: float = 0.0) -> tuple[dict, str]:
    """The row of a submission the grader failed on: score 0, the student told it is not their fault."""
    failure = ungraded(path, manifest_questions(lab_dir), STUDENT_MESSAGE_ON_GRADER_ERROR,
                       isolation="not run (grader error)", elapsed_s=elapsed_s,
                       problems=[problem(GRADER_ERROR, STUDENT_MESSAGE_ON_GRADER_ERROR)])
    return validate_result(add_written(failure, read_manifest(lab_dir), None)), error  # written: awaiting, not 0


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
    student_from=None,
) -> BatchSummary:
    """Grade the submissions in ``inputs`` (files and/or directories) against the built autograder folder
    ``lab_dir`` (``autograder/<lab>/``; its manifest names the lab the gradebook rows are filed under).

    ``out_dir``: gets ``submissions/<stem>/results.json`` (Gradescope) and ``.../feedback.md`` per submission
    (``outputs.py``). ``student_from``: the resubmission rule, ``None``, ``"folder"`` or a pattern (``submissions.py``).
    ``jobs``: submissions graded at once. ``shard``: ``"i/N"``, grade only the i-th of N disjoint parts.
    ``gradebook``: a ``Gradebook``, a SQLite path or a ``postgresql://`` URL (default
    ``out_dir/gradebook.db``). ``grade_fn(lab_dir, path) -> result`` (default
    ``attnlab.grading.runner.grade_submission``). ``regrade``: grade even what the gradebook already has
    with the same content. Raises ``BatchInterrupted`` (a ``KeyboardInterrupt``) on Ctrl-C, and ``BatchWriteFailed``
    when a file or row cannot be written, after the submissions finished so far are recorded.
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
    submissions, folders = _select(inputs, out_dir, gb_target if own_gradebook else None, shard_spec, student_from)
    out_dir.mkdir(parents=True, exist_ok=True)
    book = open_gradebook(gb_target) if own_gradebook else gradebook
    summary = BatchSummary(lab=lab)
    bar = None
    try:
        todo = _todo(submissions, book, lab, summary, regrade=regrade)
        bar = BatchProgress(lab, len(todo), enabled=progress)
        finish = _recorder(lab, book, summary, bar, folders, Visibility.from_manifest(read_manifest(lab_dir)))
        _grade_all(todo, lab_dir, grade_fn, jobs, finish, summary, in_processes=in_processes,
                   started=lambda item: bar.start(item[0]))
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


def _grade_all(todo, lab_dir, grade_fn, jobs: int, finish, summary: BatchSummary, *, in_processes: bool,
               started) -> None:
    """Grade ``todo`` one at a time, in ``jobs`` grader processes (``pool.py``) or on ``jobs`` threads, calling
    ``started`` as each begins and ``finish`` as each ends, in this thread; ``summary.jobs_as`` says which."""
    def work(item):
        return _grade_one(grade_fn, lab_dir, item[1])

    if jobs == 1 or len(todo) < 2:
        for item in todo:
            started(item)
            finish(item, work(item))
    elif in_processes:
        summary.jobs_as = f"{jobs} grader processes"
        warm_up(lab_dir)  # the bundle and the zygote, shared by the forks
        summary.process_peaks_mib = pool.run_in_processes(
            todo, jobs, work, finish, lambda item, why: (*_grader_failure(lab_dir, item[1], why), None), started)
    else:
        summary.jobs_as = f"{jobs} threads"
        _run_pool(todo, jobs, work, finish, started)


def _todo(submissions: dict[str, Path], book, lab: str, summary: BatchSummary, *, regrade: bool) -> list[tuple]:
    """``(key, path, sha256)`` of the submissions to grade; the ones the gradebook already has unchanged are
    counted in ``summary.skipped`` (unless ``regrade``)."""
    todo = []
    for key, path in submissions.items():
        try:
            sha = file_sha256(path)
        except OSError:  # gone since it was listed: graded, it gets an errored row naming why
            sha = ""
        if not regrade and sha and _is_done(book, lab, key, sha):
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


def _select(inputs, out_dir: Path, gb_target, shard_spec, student_from) -> tuple[dict[str, Path], dict[str, Path]]:
    """The submissions of this shard (never the gradebook's own files, nor out_dir's) and their output folders."""
    exclude = [out_dir, *kit_paths(out_dir)]  # out_dir and the kit's files in it, the gradebook's: in an input folder
    if gb_target is not None and "://" not in str(gb_target):
        db = sqlite_path(gb_target)
        exclude += [db] + [db.with_name(db.name + s) for s in ("-wal", "-shm", "-journal")]
    submissions = collect_submissions(inputs, exclude=exclude, student_from=student_from)
    if shard_spec:
        submissions = {k: p for k, p in submissions.items() if in_shard(k, *shard_spec)}
    return submissions, output_folders({k: output_stem(k, p) for k, p in submissions.items()}, out_dir)


def _recorder(lab: str, book, summary: BatchSummary, bar, folders: dict[str, Path], visibility: Visibility):
    """``finish(item, outcome)``: write one submission's files and gradebook row, count it, show it. The files are
    staged under private names, the row recorded, then the files put in place: a failure leaves neither."""

    def finish(item, outcome) -> None:
        (key, path, sha), (result, grader_error, graded_sha) = item, outcome
        try:
            staged = stage_files({folders[key] / "results.json": results_json_text(result, visibility),
                                  folders[key] / "feedback.md": feedback_markdown(result)})
            try:
                book.record(lab, key, path.resolve(), graded_sha or sha, result, grader_error=grader_error)
            except BaseException:
                discard(staged)
                raise
            commit_files(staged)
        except OutputWriteError as exc:
            raise BatchWriteFailed(summary, exc, key) from exc
        except GradebookUnavailable as exc:  # retried already (connection.py): report it, go on to the next
            summary.unwritten += 1
            summary.left[key] = str(path)
            bar.note(f"gradebook row of {key} not written, nor its files (rerun to record it): {exc}")
        summary.results.append({**result, "key": key, "grader_error": grader_error})
        if grader_error:
            summary.left[key] = str(path)
            summary.failed += 1
            last_line = grader_error.strip().splitlines()[-1] if grader_error.strip() else "?"
            bar.note(f"grader error on {key} (recorded as 0, retried next run): {last_line}")
        else:
            summary.graded += 1
        awaiting = points_awaiting(result)
        bar.done(key, f"{format_score(result['score'])}/{format_score(result['max_score'])}"
                 + (f" ({awaiting_note(awaiting)})" if awaiting else ""), failed=key in summary.left)

    return finish


def _run_pool(todo, jobs: int, work, finish, started) -> None:
    """Run ``work(item)`` on ``jobs`` threads, at most ``jobs`` in flight, ``started(item)`` as each is handed to
    a thread and ``finish(item, outcome)`` as each ends, in this thread. On an exception (Ctrl-C included)
    nothing new starts and in-flight results are dropped: a grade cut short by Ctrl-C must not be recorded as a 0."""
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="attnlab-grade")
    waiting = iter(todo)
    running = {}
    try:
        for item in waiting:
            started(item)
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
                    started(following)
                    running[pool.submit(work, following)] = following
    finally:
        pool.shutdown(wait=False, cancel_futures=True)

