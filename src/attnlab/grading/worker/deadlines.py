"""The grader's time limits on a worker: ``Limit`` (which limit, its stated seconds, the moment it passes) and
``earliest``, the one that passes first. The grader, never the worker, decides that a limit passed: it reads the
worker's pipes against the earliest limit in force and, at that moment, kills the worker from outside (so nothing
the student's code catches, ignores, masks or blocks stretches it) and says which limit it was, with its value.

The limits, each counted by the grader on its own clock (``time.monotonic``):

- ``cell``: one notebook cell while the notebook loads, from the worker's report that the cell starts. The worker's
  own timer stops a plain slow cell at the limit (no restart); a cell that outlives it by ``CELL_GRACE_S`` (it
  caught the timer, masked or replaced its signal, blocked in C) is killed with its worker and skipped.
- ``load``: one load of the notebook, all its cells together.
- ``call``: one request to the student's code during the tests.
- ``test``: one hidden test's time in the student's code (restarts excluded).
- ``submission``: the whole submission (load, restarts, tests).
"""

from __future__ import annotations

import time
from typing import NamedTuple

CELL, LOAD, CALL, TEST, SUBMISSION = "cell", "load", "call", "test", "submission"
CELL_GRACE_S = 1.0  # how long a cell may outlive its limit before the grader kills the worker (the worker's own
# timer stops a plain slow cell first, and its report of the next cell must reach the grader within this)


class Limit(NamedTuple):
    kind: str  # CELL, LOAD, CALL, TEST or SUBMISSION
    seconds: float  # the stated limit (what the feedback says)
    at: float  # when it passes, on time.monotonic()

    @classmethod
    def starting_now(cls, kind: str, seconds: float, grace: float = 0.0) -> Limit:
        return cls(kind, float(seconds), time.monotonic() + seconds + grace)

    def left(self) -> float:
        return self.at - time.monotonic()

    def named(self) -> str:
        """``the 60 s cell limit``."""
        return f"the {_seconds(self.seconds)} s {self.kind} limit"


def _seconds(value: float) -> str:
    return f"{round(value, 3):g}"


def earliest(*limits: Limit | None) -> Limit | None:
    """The limit of ``limits`` (None ones left out) that passes first; None when there is none."""
    present = [limit for limit in limits if limit is not None]
    return min(present, key=lambda limit: limit.at) if present else None


def overrun_text(limit: Limit, *, reading: bool = True) -> str:
    """What the student reads when ``limit`` passed in the middle of a request (the cell's own words are the
    caller's: it knows which cell); ``reading``: False when the worker had stopped reading the grader's request."""
    named = limit.named()
    if limit.kind == CALL:
        why = "an endless loop, or far too slow" if reading else "your code stopped reading its requests"
        return f"your code ran past {named} ({why})"
    text = {SUBMISSION: f"grading this submission ran past {named}; the tests still to run score 0 (make the "
                        "notebook's graded cells faster)",
            LOAD: f"loading the notebook ran past {named} (its graded cells together)",
            TEST: f"this test ran past {named} in your code"}.get(limit.kind, f"the cell ran past {named}")
    return text if reading else f"{text}; your code stopped reading its requests"
