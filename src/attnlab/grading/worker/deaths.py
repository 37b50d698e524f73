"""Whose is a worker's death: the one place that decides it, from how the process ended and whether the grader
killed it at one of its limits.

The student's (the submission keeps the 0 of what it affects, and the feedback says why):

- the process exited (any exit status: ``os._exit``, ``sys.exit`` at import...), or closed its pipes and kept running;
- it crashed itself: a signal a process raises on itself when its code or a library it called goes wrong (SIGSEGV,
  SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP), or one it asked for (SIGALRM, SIGVTALRM, SIGPROF: a timer);
- it went past a limit the sandbox sets: SIGXCPU (the CPU-time limit; ``limits.py`` sets the hard limit above the
  soft one, so the soft limit's SIGXCPU is the signal a worker meets), SIGXFSZ (the file-size limit);
- the grader killed it at a limit of its own (a cell's, call's or test's time): ``limit`` is the problem the grader
  recorded before the kill, naming the limit, and it is the verdict, whatever the exit status then says.

Anything else is not the student's: SIGKILL without a limit of ours (the machine's out-of-memory killer, ``kill -9``
by an administrator, the zygote or the sandbox's pid 1 gone), SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGUSR1/2
(the grading job being stopped). That is a grader error (``WorkerKilled``): the row is marked errored, the batch
exits non-zero, ``gradebook --check`` lists it and the next run grades it again; never a 0 that looks final.

Known limit: a student's code that sends itself SIGKILL or SIGTERM looks like a kill from outside, so its row is
errored on every run (a person looks at it); it never gains a point that way.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from attnlab.records import result_fields as fields

_CRASHES = frozenset(getattr(signal, name) for name in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT",
                                                       "SIGSYS", "SIGTRAP", "SIGALRM", "SIGVTALRM", "SIGPROF")
                     if hasattr(signal, name))
_LIMITS = {getattr(signal, name): words for name, words in (
    ("SIGXCPU", "its CPU-time limit (make the graded cells faster, or stop a loop that never ends)"),
    ("SIGXFSZ", "its file-size limit (a graded cell wrote too large a file)")) if hasattr(signal, name)}


class WorkerKilled(RuntimeError):
    """The worker was killed by something other than the student's code or a limit of the grader: a grader error
    (the batch records the row as errored, to grade again)."""


@dataclass(frozen=True)
class Death:
    students: bool  # True: the student's code caused it (the 0 stands); False: a grader error
    category: str  # the ``result_fields`` category to record it under
    reason: str  # what a person reads: the student (their death) or the instructor (a grader error)


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def judge(code: int | None, *, limit: dict | None = None) -> Death:
    """Whose the death of a worker is: ``code`` is its exit status as Popen gives it (-N: killed by signal N; None:
    it closed its pipes but had not exited), ``limit`` the problem the grader recorded when it killed the worker at
    one of its own limits (None: the grader did not kill it)."""
    if limit is not None:
        return Death(True, limit[fields.CATEGORY], limit[fields.MESSAGE])
    if code is None:
        return Death(True, fields.WORKER_CRASH, "your code ended the Python process (it stopped answering)")
    if code >= 0:
        text = "killed, probably for using too much memory" if code == 137 else f"exit code {code}"
        return Death(True, fields.WORKER_CRASH, f"your code ended the Python process ({text})")
    number, name = -code, signal_name(-code)
    if number in _LIMITS:
        return Death(True, fields.WORKER_CRASH, f"your code went past {_LIMITS[number]}; the process was stopped "
                                                f"({name})")
    if number in _CRASHES:
        return Death(True, fields.WORKER_CRASH, f"your code ended the Python process (killed by signal {name})")
    return Death(False, fields.GRADER_ERROR, f"the worker running this submission was killed from outside ({name}): "
                                             "not by the student's code nor at a limit of the grader (the machine's "
                                             "out-of-memory killer, an administrator, or the grading job stopping); "
                                             "grade it again")
