"""Grade one submission: run its code in a worker process, run the hidden tests in this process.

Only trusted code decides the score: the hidden tests and the reference run here; the student's code
runs in the worker (sandboxed where the machine allows) and only plain data comes back.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .api import LocalStudent, RemoteStudent, StudentError
from .hidden import HiddenSuite, load_suite, run_suite
from .notebook_code import SubmissionError, joined_source, read_cells

DEFAULT_CELL_TIMEOUT = 60.0
DEFAULT_LOAD_TIMEOUT = 300.0
DEFAULT_CALL_TIMEOUT = 30.0
DEFAULT_TEST_TIMEOUT = 60.0


@dataclass
class Bundle:
    """What grading one lab needs, read from ``autograder/<lab>/``."""

    lab: str
    directory: Path
    suite: HiddenSuite
    reference: LocalStudent
    manifest: dict
    secret: bytes

    @property
    def questions(self) -> dict[str, float]:
        return self.suite.questions()


_BUNDLES: dict[Path, Bundle] = {}
_BUNDLES_LOCK = threading.Lock()  # batch jobs are threads


def load_bundle(directory: str | Path) -> Bundle:
    """Load (once per process, thread-safe) the hidden tests, reference and manifest of a built lab."""
    directory = Path(directory).resolve()
    with _BUNDLES_LOCK:
        if directory not in _BUNDLES:
            _BUNDLES[directory] = _load_bundle(directory)
        return _BUNDLES[directory]


def _load_bundle(directory: Path) -> Bundle:
    manifest_path = directory / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"{directory} holds no built autograder (manifest.json missing); "
                                "run `attnlab build` first")
    manifest = json.loads(manifest_path.read_text())
    hidden_path = directory / "hidden_tests.py"
    suite = load_suite(hidden_path)
    reference = LocalStudent.from_code((directory / "reference.py").read_text(), f"<reference {manifest['lab']}>")
    env_secret = os.environ.get("ATTNLAB_GRADING_SECRET")
    secret = env_secret.encode() if env_secret else hashlib.sha256(hidden_path.read_bytes()).digest()
    return Bundle(manifest["lab"], directory, suite, reference, manifest, secret)


def grading_seed(bundle: Bundle, submission_bytes: bytes) -> int:
    """A seed the student cannot predict (it depends on the hidden tests) and that is the same each time
    the same file is graded."""
    digest = hashlib.sha256(bundle.secret + bundle.lab.encode() + hashlib.sha256(submission_bytes).digest())
    return int.from_bytes(digest.digest()[:8], "little") & ((1 << 63) - 1)


def _start_worker(workdir: Path, hide: list[Path]):
    """Start ``python -m attnlab.grading.worker``, sandboxed when ``attnlab.grading.sandbox`` is available."""
    argv = [sys.executable, "-m", "attnlab.grading.worker"]
    # One thread per worker: grading calls are small, and parallel jobs must not oversubscribe the cores
    # (threads also count against the sandbox's process limit).
    threads = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    try:
        from . import sandbox
    except ImportError:
        sandbox = None
    if sandbox is not None and os.environ.get("ATTNLAB_SANDBOX", "") != "off":
        proc = sandbox.spawn(argv, workdir=workdir, hide=tuple(hide), env=threads)
        return proc, proc.report.summary()
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH", "VIRTUAL_ENV")}
    env.update(threads)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=workdir, env=env, start_new_session=True)
    return proc, "none: plain subprocess (no sandbox)"


def _zero(bundle: Bundle, message: str) -> dict:
    return {q: {"score": 0.0, "max_score": m, "messages": [message]} for q, m in bundle.questions.items()}


def grade_submission(lab_dir: str | Path, path: str | Path, *, cell_timeout: float = DEFAULT_CELL_TIMEOUT,
                     load_timeout: float = DEFAULT_LOAD_TIMEOUT, call_timeout: float = DEFAULT_CALL_TIMEOUT,
                     test_timeout: float = DEFAULT_TEST_TIMEOUT, seed: int | None = None) -> dict:
    """Grade the notebook at ``path`` against the built autograder in ``lab_dir``; never raises for
    anything the submission does. Returns the result dict described in docs/ARCHITECTURE.md."""
    start = time.monotonic()
    bundle = load_bundle(lab_dir)
    path = Path(path)
    result = {"submission": str(path), "lab": bundle.lab, "score": 0.0,
              "max_score": float(sum(bundle.questions.values())), "questions": {}, "isolation": "",
              "elapsed_s": 0.0, "errors": []}

    def finish(questions: dict) -> dict:
        result["questions"] = questions
        result["score"] = float(sum(q["score"] for q in questions.values()))
        result["elapsed_s"] = round(time.monotonic() - start, 3)
        return result

    try:
        data = path.read_bytes()
        cells = read_cells(path)
    except (SubmissionError, OSError) as exc:
        message = str(exc) if isinstance(exc, SubmissionError) else f"cannot read the submission: {exc}"
        result["errors"].append(message)
        return finish(_zero(bundle, message))
    # issue 7: a notebook whose metadata names another lab is refused (grading/lab_check.py)
    from .lab_check import wrong_lab_message

    wrong_lab = wrong_lab_message(data, bundle.lab)
    if wrong_lab:
        result["errors"].append(wrong_lab)
        return finish(_zero(bundle, wrong_lab))
    if seed is None:
        seed = grading_seed(bundle, data)
    code = joined_source(cells)

    with tempfile.TemporaryDirectory(prefix="attnlab-work-") as tmp:
        workdir = Path(tmp)
        os.chmod(workdir, 0o777)  # the worker may run as an unprivileged user
        hide = [bundle.directory, path.resolve().parent]
        isolation: list[str] = []

        def spawn():
            proc, how = _start_worker(workdir, hide)
            isolation[:] = [how]
            return proc

        student = RemoteStudent(spawn, [{"index": c.index, "source": c.source} for c in cells], code,
                                cell_timeout=cell_timeout, load_timeout=load_timeout, call_timeout=call_timeout)
        try:
            try:
                student.start()
            except StudentError as exc:
                message = f"running your notebook failed: {exc}"
                result["errors"].extend(student.notebook_errors + [message])
                result["isolation"] = isolation[0] if isolation else ""
                return finish(_zero(bundle, message))
            # issue 7: record what failed tests asked, to name the likely mistake afterwards (grading/diagnose.py)
            from .diagnose import Recorder, diagnosis_budget, name_mistakes

            recorder = Recorder(student)
            questions = run_suite(bundle.suite, recorder, bundle.reference, seed=seed, test_timeout=test_timeout,
                                  on_result=recorder.on_result)
            result["errors"].extend(student.notebook_errors)
            if student.starts > 1:
                result["errors"].append(f"the grading process was restarted {student.starts - 1} time(s) "
                                        "after your code crashed or hung it")
            result["isolation"] = isolation[0] if isolation else ""
            name_mistakes(bundle.directory, bundle.suite, recorder, questions,
                          budget_s=diagnosis_budget(time.monotonic() - start))  # issue 7
            return finish(questions)
        finally:
            student.close()
