"""The grader's own limits (``worker/deadlines.py``): a cell, a call, a test and a submission each end at their stated
limit, whatever the student's code catches, ignores, masks or blocks, and the feedback names the limit with its value.

Small limits (1 s) keep the tests fast; the real ones are ``runner.DEFAULT_*``."""

import sys
import textwrap
import time

import nbformat
import pytest

from attnlab.grading.runner import grade_submission, worst_case_s
from attnlab.grading.worker.deadlines import CELL_GRACE_S, LOAD, SUBMISSION, Limit, overrun_text
from attnlab.grading.worker.remote import RemoteStudent
from tests.grading.test_api import Spawner

LAB = "lab99_demo"
SLACK_S = 2.0  # how far past its limit a cell may end on a loaded machine (the kill, the pipes)

# Cells that keep running past the worker's own timer, each in its own way.
SWALLOWERS = {
    "except BaseException": """
        import time
        while True:
            try:
                time.sleep(1000)
            except BaseException:
                pass
        """,
    "bare except": """
        while True:
            try:
                while True:
                    pass
            except:
                pass
        """,
    "replaced signal handler": """
        import signal, time
        signal.signal(signal.SIGALRM, lambda signum, frame: None)
        while True:
            time.sleep(0.01)
        """,
    "thread that keeps running": """
        import threading
        def spin():
            while True:
                sum(range(1000))
        worker = threading.Thread(target=spin)
        worker.start()
        while True:
            try:
                worker.join()
            except BaseException:
                pass
        """,
    "pthread_sigmask": """
        import signal, time
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            time.sleep(0.05)
        """,
    "timer cancelled, C sleep": """
        import ctypes, signal
        signal.setitimer(signal.ITIMER_REAL, 0)
        ctypes.CDLL(None).sleep(1000)
        """,
}

# Those the worker's timer cannot stop, whatever the machine: the grader kills their worker. (A SIGALRM masked in
# the main thread may still be taken by another thread of the worker, torch's, and stop the cell as usual.)
KILLED = {"except BaseException", "bare except", "replaced signal handler", "thread that keeps running",
          "timer cancelled, C sleep"}


@pytest.fixture(autouse=True)
def _plain_worker(monkeypatch):
    monkeypatch.setenv("ATTNLAB_SANDBOX", "off")
    monkeypatch.delenv("ATTNLAB_GRADING_SECRET", raising=False)


def _timed(student: RemoteStudent) -> dict:
    """Record, on ``student``, when each cell's progress report arrived and when the grader stopped each worker."""
    seen = {"started": {}, "stopped": []}
    on_progress, stop = student._on_progress, student._stop

    def progress(index):
        seen["started"].setdefault(index, time.monotonic())
        on_progress(index)

    def stopped():
        if student.proc is not None:
            seen["stopped"].append(time.monotonic())
        stop()

    student._on_progress, student._stop = progress, stopped
    return seen


@pytest.mark.parametrize("name", sorted(SWALLOWERS))
def test_a_cell_that_outlives_the_timer_ends_at_the_cell_limit(name):
    spawner = Spawner([sys.executable, "-m", "attnlab.grading.worker.process"])
    cells = [{"index": 1, "source": "before = 1"}, {"index": 2, "source": textwrap.dedent(SWALLOWERS[name])},
             {"index": 3, "source": "after = 2"}]
    student = RemoteStudent(spawner, cells, "", cell_timeout=1.0, load_timeout=60, call_timeout=30)
    seen = _timed(student)
    try:
        student.start()
        ended = min(seen["stopped"][:1] + [seen["started"][3]])  # the grader's kill, or the worker's own timer
        assert 1.0 <= ended - seen["started"][2] <= 1.0 + CELL_GRACE_S + SLACK_S, seen
        assert student.has("before") and student.has("after")  # the load went on without the cell
        (problem,) = student.problems
        assert problem["category"] == "cell_timeout"
        assert problem["message"].startswith(f"{problem['cell']} ran past the 1 s cell limit"), problem
        if name in KILLED:
            assert student.starts == 2 and list(student.fatal_cells) == [2]
            assert spawner.procs[0].wait(timeout=5) is not None  # the first worker is gone, its threads with it
    finally:
        student.close()
        spawner.reap()


def test_a_plain_slow_cell_is_stopped_by_the_workers_timer_without_a_restart():
    spawner = Spawner([sys.executable, "-m", "attnlab.grading.worker.process"])
    cells = [{"index": 1, "source": "while True:\n    pass"}, {"index": 2, "source": "after = 2"}]
    student = RemoteStudent(spawner, cells, "", cell_timeout=1.0, load_timeout=60, call_timeout=30)
    try:
        student.start()
        assert student.starts == 1 and student.has("after") and student.killed_for is None
        assert student.notebook_errors == ["the cell starting `while True:` ran past the 1 s cell limit"]
        assert [p["category"] for p in student.problems] == ["cell_timeout"]
    finally:
        student.close()
        spawner.reap()


def test_killed_for_says_the_grader_stopped_the_worker_at_a_limit_and_nothing_else():
    spawner = Spawner([sys.executable, "-m", "attnlab.grading.worker.process"])
    cells = [{"index": 1, "source": "import os\nos._exit(3)"},
             {"index": 2, "source": textwrap.dedent(SWALLOWERS["bare except"])}, {"index": 3, "source": "after = 1"}]
    student = RemoteStudent(spawner, cells, "", cell_timeout=1.0, load_timeout=60, call_timeout=30)
    deaths, died = [], student._died
    student._died = lambda *a, **k: (deaths.append(student.killed_for), died(*a, **k))
    try:
        student.start()
        assert [None if d is None else (d.kind, d.seconds) for d in deaths] == [None, ("cell", 1.0)]
        assert student.starts == 3 and student.has("after") and student.killed_for is None  # the third worker lives
        assert [p["category"] for p in student.problems] == ["cell_limit", "cell_timeout"]
    finally:
        student.close()
        spawner.reap()


def test_each_limit_is_named_with_its_value():
    assert overrun_text(Limit(LOAD, 300.0, 0)) == ("loading the notebook ran past the 300 s load limit "
                                                   "(its graded cells together)")
    assert overrun_text(Limit(SUBMISSION, 600.0, 0)).startswith("grading this submission ran past the 600 s "
                                                                "submission limit; ")


# ------------------------------------------------------------------------------------------------ whole grades
@pytest.fixture
def lab_dir(built_course):
    return built_course / "autograder" / LAB


@pytest.fixture
def solution(built_course):
    return nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)


def _with_cells(solution, path, sources) -> str:
    solution.cells += [nbformat.v4.new_code_cell(textwrap.dedent(s)) for s in sources]
    nbformat.write(solution, path)
    return path


def test_a_swallowing_cell_costs_the_solution_nothing_and_is_named(lab_dir, solution, tmp_path):
    path = _with_cells(solution, tmp_path / "s.ipynb", [SWALLOWERS["bare except"]])
    res = grade_submission(lab_dir, path, cell_timeout=1.0, load_timeout=60, call_timeout=10)
    assert res["score"] == 3.0
    (problem,) = res["problems"]
    assert problem["category"] == "cell_timeout" and "ran past the 1 s cell limit" in problem["message"]
    assert problem["message"] in res["errors"]


def test_a_call_and_a_test_that_swallow_everything_end_at_their_limits(lab_dir, solution, tmp_path):
    hang = """
        import time
        def double(x):
            while True:
                try:
                    time.sleep(1000)
                except BaseException:
                    pass
        """
    path = _with_cells(solution, tmp_path / "s.ipynb", [hang])
    started = time.monotonic()
    res = grade_submission(lab_dir, path, call_timeout=1.0, test_timeout=30)
    assert res["questions"]["double"]["score"] == 0 and res["questions"]["Scale"]["score"] == 1.0
    messages = res["questions"]["double"]["messages"]  # after the note that a later cell redefines `double`
    assert messages[0].startswith("note: `double` is defined in") and "ran past the 1 s call limit" in messages[1]
    res = grade_submission(lab_dir, path, call_timeout=30, test_timeout=1.0)
    assert "this test ran past the 1 s test limit in your code" in res["questions"]["double"]["messages"][1]
    assert res["questions"]["Scale"]["score"] == 1.0
    assert time.monotonic() - started < 60


def test_a_notebook_of_five_swallowing_cells_ends_within_the_stated_worst_case(lab_dir, solution, tmp_path,
                                                                              monkeypatch):
    """Each cell is stopped at the cell limit and skipped, and the tests still run (restarts after a cell limit
    are not counted by the restart cap); the course rules refuse ``signal`` in graded cells, which costs the
    points, as the notebook says."""
    monkeypatch.delenv("ATTNLAB_SANDBOX")  # the best mechanism here: restarts fork from the warm zygote where it can
    names = ["except BaseException", "bare except", "replaced signal handler", "thread that keeps running",
             "pthread_sigmask"]
    path = _with_cells(solution, tmp_path / "five.ipynb", [SWALLOWERS[n] for n in names])
    timeout = 60.0
    started = time.monotonic()
    res = grade_submission(lab_dir, path, cell_timeout=1.0, load_timeout=20, call_timeout=5, timeout=timeout)
    took = time.monotonic() - started
    assert took <= worst_case_s(timeout), took
    cut = [e for e in res["errors"] if "ran past the 1 s cell limit" in e]
    if not any("submission limit" in e for e in res["errors"]):  # cold starts on a loaded machine may reach it
        assert len(cut) == 5, res["errors"]
        assert [m for q in res["questions"].values() for m in q["messages"] if m.startswith("passed")] == [
            "passed: double_values", "passed: scale_values"]
    assert {p["category"] for p in res["problems"]} <= {"cell_timeout", "rule_breach", "timeout"}, res["problems"]
