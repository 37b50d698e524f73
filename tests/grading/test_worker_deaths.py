"""Whose a worker's death is (grading/worker/deaths.py): the student's code exiting, crashing or passing a limit
keeps its 0 with the reason; a kill from outside (the OOM killer, an administrator) is a grader error: an errored row,
exit 3, listed by ``gradebook --check``, graded again by the rerun it prints."""

from __future__ import annotations

import os
import shlex
import signal
import threading
import time

import pytest

from attnlab.cli import main
from attnlab.grading.outputs.gradebook import open_gradebook
from attnlab.grading.runner import grade_submission
from attnlab.grading.worker.deaths import WorkerKilled, judge
from attnlab.records import result_fields as fields

LAB = "lab99_demo"


@pytest.mark.parametrize("code, students, says", [
    (3, True, "your code ended the Python process (exit code 3)"),
    (None, True, "it stopped answering"),
    (-signal.SIGSEGV, True, "killed by signal SIGSEGV"),
    (-signal.SIGABRT, True, "killed by signal SIGABRT"),
    (-signal.SIGXCPU, True, "your code went past its CPU-time limit"),
    (-signal.SIGXFSZ, True, "your code went past its file-size limit"),
    (-signal.SIGKILL, False, "killed from outside (SIGKILL)"),
    (-signal.SIGTERM, False, "killed from outside (SIGTERM)"),
    (-signal.SIGHUP, False, "killed from outside (SIGHUP)"),
])
def test_each_way_of_ending_has_one_owner(code, students, says):
    death = judge(code)
    assert death.students is students and says in death.reason
    assert death.category == (fields.WORKER_CRASH if students else fields.GRADER_ERROR)


def test_a_kill_by_the_grader_at_its_limit_is_the_students_with_the_limit_named():
    limit = fields.problem(fields.TIMEOUT, "this test ran past its limit of 60 s: the worker was stopped")
    for code in (-signal.SIGKILL, -signal.SIGTERM, 0, None):
        death = judge(code, limit=limit)
        assert (death.students, death.category, death.reason) == (True, fields.TIMEOUT, limit["message"])


def test_the_cpu_limit_ends_a_worker_with_sigxcpu_not_sigkill(tmp_path):
    from attnlab.grading.worker.sandbox import Limits, run_once

    rc, _, _, timed_out = run_once(["python3", "-c", "while True: pass"], workdir=str(tmp_path),
                                   limits=Limits(cpu_seconds=1), timeout=30, mechanism="none")
    assert not timed_out and rc == -signal.SIGXCPU and judge(rc).students


SLOW_CELL = '''
import os as _os, time as _time
if _os.path.exists({marker!r}):
    with open({pidfile!r}, "w") as f:
        f.write(str(_os.getpid()))
    _time.sleep(60)
'''
SLOW_DOUBLE = '''
import os as _os, time as _time
_double = double
def double(x):
    if _os.path.exists({marker!r}):
        with open({pidfile!r}, "w") as f:
            f.write(str(_os.getpid()))
        _time.sleep(60)
    return _double(x)
'''


def _slow_submission(built_course, folder, marker, pidfile, cell=SLOW_CELL):
    import nbformat

    nb = nbformat.read(built_course / "solutions" / LAB / f"{LAB}.ipynb", as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(cell.format(marker=str(marker), pidfile=str(pidfile))))
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / "alice.ipynb")
    return folder / "alice.ipynb"


def _kill_when_started(pidfile, sig=signal.SIGKILL):
    def kill():
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if pidfile.exists() and pidfile.read_text().strip():
                os.kill(int(pidfile.read_text()), sig)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def plain_worker(monkeypatch):
    monkeypatch.setenv("ATTNLAB_SANDBOX", "off")  # the worker's pid as this process sees it


@pytest.mark.parametrize("while_", ["loading", "in a call"])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_worker_killed_from_outside_is_a_grader_error_not_a_zero(built_course, tmp_path, plain_worker, while_, sig):
    marker, pidfile = tmp_path / "slow", tmp_path / "pid"
    marker.write_text("")
    path = _slow_submission(built_course, tmp_path / "subs", marker, pidfile,
                            SLOW_CELL if while_ == "loading" else SLOW_DOUBLE)
    killer = _kill_when_started(pidfile, sig)
    with pytest.raises(WorkerKilled, match=rf"killed from outside \({signal.Signals(sig).name}\)"):
        grade_submission(built_course / "autograder" / LAB, path)
    killer.join()


def test_a_killed_worker_gives_an_errored_row_exit_3_a_check_line_and_a_regrade(built_course, tmp_path,
                                                                                plain_worker, capsys):
    marker, pidfile = tmp_path / "slow", tmp_path / "pid"
    marker.write_text("")
    subs, out = tmp_path / "subs", tmp_path / "out"
    _slow_submission(built_course, subs, marker, pidfile)
    killer = _kill_when_started(pidfile)
    assert main(["--root", str(built_course), "grade", LAB, str(subs), "--out", str(out)]) == 3
    killer.join()
    err = capsys.readouterr().err.strip().splitlines()
    with open_gradebook(out, create=False) as book:
        [row] = book.rows(LAB)
    assert row["grader_error"] and "killed from outside (SIGKILL)" in row["grader_error"]
    assert "your code ended" not in row["grader_error"]
    feedback = (out / "submissions" / "alice" / "feedback.md").read_text()
    assert "not a problem with your notebook" in feedback

    assert main(["--root", str(built_course), "gradebook", str(out), "--check", str(subs)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("errored  alice.ipynb: grader error: attnlab.grading.worker.deaths.WorkerKilled: "
                                   "the worker running this submission was killed from outside (SIGKILL)")
    rerun = captured.err.strip().split("rerun: ", 1)[1]
    assert rerun == err[-1].split("rerun: ", 1)[1]  # the batch's last line and the check's: one command

    marker.unlink()  # the machine is quiet again: the printed command grades it for real
    argv = shlex.split(rerun)
    assert argv[0].endswith("/attnlab") and argv[1:3] == ["grade", LAB]
    assert main(["--root", str(built_course), *argv[1:]]) == 0
    with open_gradebook(out, create=False) as book:
        [row] = book.rows(LAB)
    assert row["grader_error"] is None and row["score"] == 3.0
