"""Grade one submission: run its code in a worker process, run the hidden tests in this process.

Only trusted code decides the score: the hidden tests and the reference run here; the student's code
runs in the worker (sandboxed where the machine allows) and only plain data comes back.
"""

from __future__ import annotations

import ast
import gc
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from attnlab.grading.core.bundle import Bundle, grading_seed, load_bundle
from attnlab.grading.core.lab_check import wrong_lab_message
from attnlab.grading.core.written_answers import add_written
from attnlab.grading.source.notebook_code import (
    SourceTooLarge,
    SubmissionError,
    code_spans,
    described_cells,
    joined_source,
    python_source,
    read_cells,
    read_submission,
)
from attnlab.grading.worker.deaths import WorkerKilled
from attnlab.records import result_fields as fields

if TYPE_CHECKING:
    from attnlab.grading.worker.remote import RemoteStudent

# Start-up order: this module imports no torch. ``grade_submission`` starts the worker's zygote first (it imports
# torch in its own process), then imports torch here (the bundle, the hidden tests, the diagnosis): the two
# imports overlap, and ``attnlab grade`` pays for torch once on the clock, not twice.

DEFAULT_CELL_TIMEOUT = 60.0
DEFAULT_LOAD_TIMEOUT = 300.0
DEFAULT_CALL_TIMEOUT = 30.0
DEFAULT_TEST_TIMEOUT = 60.0
# The whole submission: load, restarts and tests. Far above what an honest solution takes on a shared small CPU
# (benchmarks/README.md), so that only runaway code reaches it; past it, the remaining tests say why they scored 0.
DEFAULT_SUBMISSION_TIMEOUT = 600.0


def worst_case_s(timeout: float = DEFAULT_SUBMISSION_TIMEOUT) -> float:
    """The longest one submission can hold a grading slot, whatever its code does: its ``timeout`` (the bundle, the
    load, restarts and tests: the grader enforces every limit from outside the worker, ``worker/deadlines.py``),
    then the kill of a worker that outlived it and the diagnosis at its wall backstop (a loaded machine)."""
    from attnlab.grading.diagnosis.diagnose import DEFAULT_BUDGET_S, WALL_BACKSTOP
    from attnlab.grading.worker.sandbox.running import KILL_DEADLINE_S

    return timeout + KILL_DEADLINE_S + DEFAULT_BUDGET_S * WALL_BACKSTOP


def _start_worker(workdir: Path, hide: list[Path]):
    """Start ``python -m attnlab.grading.worker.process`` in the sandbox (``ATTNLAB_SANDBOX=off`` is its ``none``
    mechanism); the worker imports this grader's own ``attnlab``."""
    from attnlab.grading.worker import sandbox

    argv = [sys.executable, "-m", "attnlab.grading.worker.process"]
    proc = sandbox.spawn(argv, workdir=workdir, hide=tuple(hide), env=_worker_env())
    return proc, proc.report.summary()


def _worker_env() -> dict[str, str]:
    """What the worker's environment adds to the sandbox's minimal one. One thread per worker: grading calls are
    small, and parallel jobs must not oversubscribe the cores (threads also count against the process limit)."""
    import attnlab

    return {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONPATH": str(Path(attnlab.__file__).resolve().parent.parent)}


def warm_up(lab_dir) -> None:
    """Before a batch forks its grader processes (``pool.py``): load the bundle and start the workers' zygote in this
    process, so that the forks share both (the zygote starts first and imports torch while the bundle loads). A
    bundle that does not load is left to each grade, which reports it."""
    from attnlab.grading.worker.sandbox import prestart

    prestart(_worker_env())
    _one_thread()
    try:
        load_bundle(lab_dir)
    except Exception:  # noqa: BLE001 - grade_submission raises it again, per submission, as a grader error
        pass
    _freeze_once()
    prestart(_worker_env(), wait=True)  # the forks must find it started: wait for the one above


_FROZEN: list[bool] = []  # gc.freeze done in this process


def _freeze_once() -> None:
    """Once per process, after torch and the first bundle loaded: what is alive then (torch's objects, the bundle) is
    left out of the cycle collector's full collections (``gc.freeze``), so that no grade pays for walking them, and a
    batch's forked grader processes do not copy those pages by collecting them. Later garbage is collected as usual."""
    if not _FROZEN:
        _FROZEN.append(True)
        gc.freeze()


def _one_thread() -> None:
    """Grading runs torch on one thread in this process too (for good: the setting is the process's). The
    reference's tensors are small, and on a busy machine intra-op threads wait on each other, so one thread grades
    faster (``benchmarks/README.md``)."""
    import torch

    if torch.get_num_threads() > 1:
        torch.set_num_threads(1)


def diagnosis_budget(grading_s: float) -> float:
    """``diagnose.diagnosis_budget``, imported when first asked (the diagnosis imports torch)."""
    from attnlab.grading.diagnosis.diagnose import diagnosis_budget as budget

    return budget(grading_s)


def ungraded(submission, questions: dict[str, float], message: str, *, lab: str = "", isolation: str = "",
             elapsed_s: float = 0.0, errors: list[str] | None = None, problems: list[dict] | None = None) -> dict:
    """The one result of a submission that could not be graded: every question 0 of its points, with
    ``message``; ``questions`` maps each question to its points; ``problems``: its ``result_fields`` entries."""
    return {"submission": str(submission), "lab": lab, "score": 0.0, fields.PROBLEMS: list(problems or []),
            "max_score": float(sum(questions.values())),
            "questions": {q: {"score": 0.0, "max_score": float(m), "messages": [message]}
                          for q, m in questions.items()},
            "isolation": isolation, "elapsed_s": round(elapsed_s, 3),
            "errors": [message] if errors is None else errors, "review": []}


def grade_submission(lab_dir: str | Path, path: str | Path, *, cell_timeout: float = DEFAULT_CELL_TIMEOUT,
                     load_timeout: float = DEFAULT_LOAD_TIMEOUT, call_timeout: float = DEFAULT_CALL_TIMEOUT,
                     test_timeout: float = DEFAULT_TEST_TIMEOUT, timeout: float = DEFAULT_SUBMISSION_TIMEOUT,
                     seed: int | None = None, hide=()) -> dict:
    """Grade the notebook at ``path`` against the built autograder in ``lab_dir``; never raises for
    anything the submission does (``deaths.WorkerKilled`` when its worker was killed from outside: a grader error).
    ``timeout`` bounds the whole submission (load, restarts, tests).
    ``hide``: more folders the student's code must not read, besides the bundle and ``path``'s folder (a batch
    grades a private copy of the file, and hides the folder of the original, with the other submissions).
    A written question is not graded here: its answer is read from the notebook and recorded as awaiting marking
    (``written_answers``). Returns the result dict described in docs/GRADING.md."""
    start = time.monotonic()
    from attnlab.grading.worker.sandbox import prestart

    prestart(_worker_env())  # the zygote imports torch while the bundle loads (sandbox/forked.py)
    _one_thread()
    bundle = load_bundle(lab_dir)
    _freeze_once()
    path = Path(path)
    try:
        data = read_submission(path)
        cells = read_cells(path, data)  # within notebook_code's limits, checked before any parse
        code = joined_source(cells)
    except SubmissionError as exc:
        too_large = isinstance(exc, SourceTooLarge)
        problem = fields.problem(fields.SOURCE_TOO_LARGE if too_large else fields.UNREADABLE, str(exc),
                                 exc.cell if too_large else None)
        return add_written(ungraded(path, bundle.questions, str(exc), lab=bundle.lab,
                                    elapsed_s=time.monotonic() - start, problems=[problem]), bundle, None)
    wrong_lab = wrong_lab_message(data, bundle.lab)  # another lab's notebook is refused, not half-graded
    if wrong_lab:
        return add_written(ungraded(path, bundle.questions, wrong_lab, lab=bundle.lab, elapsed_s=time.monotonic()
                                    - start, problems=[fields.problem(fields.WRONG_LAB, wrong_lab)]), bundle, data)
    seed = grading_seed(bundle, data) if seed is None else seed
    with tempfile.TemporaryDirectory(prefix="attnlab-work-") as tmp:
        os.chmod(tmp, 0o777)  # the worker may run as an unprivileged user
        isolation: list[str] = [""]

        from attnlab.grading.worker.remote import RemoteStudent

        def spawn():
            proc, isolation[0] = _start_worker(Path(tmp), [bundle.directory, path.resolve().parent, *hide])
            return proc

        sent = described_cells(cells)
        unparsed = syntax_problems(cells, sent)
        student = RemoteStudent(spawn, sent, code,
                                cell_timeout=cell_timeout, load_timeout=load_timeout, call_timeout=call_timeout,
                                deadline=start + timeout, submission_timeout=timeout,
                                watch=bundle.suite.watched_calls)
        try:
            result = _grade_with(bundle, student, path, seed=seed, test_timeout=test_timeout, start=start)
        finally:
            student.close()
    if student.grader_fault:  # killed from outside (worker/deaths.py): a grader error, never the student's 0
        raise WorkerKilled(student.grader_fault)
    result.update(isolation=isolation[0], elapsed_s=round(time.monotonic() - start, 3))
    result[fields.PROBLEMS] = unparsed + result[fields.PROBLEMS]
    return add_written(result, bundle, data)  # the written answers: plain text of the notebook, read here


def syntax_problems(cells, sent: list[dict]) -> list[dict]:
    """A ``syntax_error`` problem for each graded cell the grader's own parse refuses (``code_spans`` leaves it
    out of the joined source), with Python's own words for it."""
    parsed = {id(cell) for cell, _, _ in code_spans(cells)}
    return [fields.problem(fields.SYNTAX_ERROR, f"{where['where']}{_parse_error(cell.source)}", where["where"])
            for cell, where in zip(cells, sent) if id(cell) not in parsed]


def _parse_error(source: str) -> str:
    """``, line N: IndentationError: expected an indented block`` for a cell that does not parse (within the
    limits ``code_spans`` checked)."""
    try:
        ast.parse(python_source(source))
    except SyntaxError as exc:
        return f", line {exc.lineno}: {type(exc).__name__}: {exc.msg}"
    return ": does not parse as Python"


def _grade_with(bundle: Bundle, student: RemoteStudent, path: Path, *, seed: int, test_timeout: float,
                start: float) -> dict:
    """Load the notebook in the worker, then run the hidden tests (the grader's side) against it, recording
    what failed tests asked so that the likely mistake can be named afterwards (grading/diagnosis/diagnose.py)."""
    from attnlab.grading.core.hidden import run_suite
    from attnlab.grading.diagnosis.diagnose import Recorder, name_mistakes
    from attnlab.grading.worker.executor import StudentError

    try:
        student.start()
    except StudentError as exc:
        message = f"running your notebook failed: {exc}"
        return ungraded(path, bundle.questions, message, lab=bundle.lab,
                        errors=student.notebook_errors + [message], problems=student.problems)
    recorder = Recorder(student)
    review: list[str] = []
    questions = run_suite(bundle.suite, recorder, bundle.reference, seed=seed, test_timeout=test_timeout,
                          on_result=recorder.on_result, review=review)
    name_mistakes(bundle, recorder, questions,
                  budget_s=diagnosis_budget(time.monotonic() - start))
    errors = student.notebook_errors
    if student.dead_reason:
        errors.append(student.dead_reason)
    if student.starts > 1:
        errors.append(f"the grading process was restarted {student.starts - 1} time(s) "
                      "after your code crashed or hung it")
    return {"submission": str(path), "lab": bundle.lab, "score": float(sum(q["score"] for q in questions.values())),
            "max_score": float(sum(bundle.questions.values())), "questions": questions, "isolation": "",
            "elapsed_s": 0.0, "errors": errors, "review": review,
            fields.PROBLEMS: student.problems + [fields.problem(fields.RULE_BREACH, item) for item in review]
            + _forbidden_problems(questions)}


def _forbidden_problems(questions: dict) -> list[dict]:
    """A ``rule_breach`` problem for each hidden test that failed on a lab's forbidden function (its message)."""
    return [fields.problem(fields.RULE_BREACH, next((m for m in q["messages"] if m.startswith(f"failed: {t}: ")), t))
            for q in questions.values() for t in q.get(fields.FORBIDDEN, [])]
