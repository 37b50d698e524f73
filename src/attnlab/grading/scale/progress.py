"""A batch's progress as the person running it sees it: a live line in a terminal, plain lines in a log.

In a terminal (the stream is a TTY): one tqdm line, ``grading lab05:  45%|####  | 9/20 [00:30<00:37, 3.30 s/sub,
failures=0, last=alice.ipynb 16.5/30]``: done and total, rate, ETA and the failures so far. A thread redraws it every
``REFRESH_S`` seconds, so the clock runs while the first submission (or a slow one) is still being graded; tqdm
alone draws only when a submission finishes. The line names the file being graded now (``running=bob.ipynb``, or
``running=bob.ipynb (+2 more)`` with several jobs): the pool reports each start, so a submission running into its
timeout is named while it runs, not only when it ends. Anywhere else (a Slurm log, a pipe, CI): one plain line per
submission, ``[9/20] alice.ipynb 16.5/30; 3.3 s per submission, about 37 s left; failures so far: 0; running:
bob.ipynb``, never the carriage returns of a live line.

The batch forks grader processes (``pool.py``) while the redraw thread runs: a fork copies locks as they are, so
every fork waits for the redraw to finish (``os.register_at_fork``), and no child starts with a stream's lock held.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from tqdm import tqdm

from attnlab.records.safe_text import for_terminal

FALLBACK_SIZE = (120, 24)  # columns, rows (the table after the batch falls back to 120 columns too)
REFRESH_S = 1.0  # the live line's redraw period: progress shows within this of the batch starting
_DRAWING = threading.Lock()  # held while the redraw thread writes; a fork waits for it


def _reset_after_fork() -> None:
    global _DRAWING
    _DRAWING = threading.Lock()  # the child's copy may be held by a thread that does not exist there


os.register_at_fork(before=lambda: _DRAWING.acquire(), after_in_parent=lambda: _DRAWING.release(),
                    after_in_child=_reset_after_fork)


def _size(stream) -> tuple[int, int]:
    """The terminal's ``(columns, rows)``, 0 where it reports none."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return 0, 0
    return size.columns, size.lines


def _eta(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def running_text(keys: list[str]) -> str:
    """The files being graded, as the progress line names them: ``bob.ipynb (+2 more)``; ``""`` for none."""
    if not keys:
        return ""
    return for_terminal(keys[0]) + (f" (+{len(keys) - 1} more)" if len(keys) > 1 else "")


class BatchProgress:
    """``start(key)`` as each submission begins, ``done(key, score, failed)`` after each, ``note(text)`` for a line
    of its own, ``close()`` at the end. ``enabled=False``: silent. ``live``: a live line (default: when
    ``stream`` is a terminal)."""

    def __init__(self, lab: str, total: int, *, enabled: bool = True, stream=None, live: bool | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.lab, self.total, self.enabled = lab, total, enabled
        self.done_count = self.failures = 0
        self.running: list[str] = []  # the keys being graded now, in the order they started
        self.last = ""
        self.began = time.monotonic()
        self.bar = None
        self._stop = threading.Event()
        if not enabled:
            return
        if live is None:
            live = bool(getattr(self.stream, "isatty", lambda: False)())
        if live:
            # a terminal that reports no size (0 x 0: a pseudo-terminal nobody sized) gets a usual one: tqdm
            # hides a bar below a screen of 0 rows and would draw nothing at all
            columns, rows = _size(self.stream)
            self.bar = tqdm(total=total, desc=f"grading {lab}", unit="sub", file=self.stream,
                            dynamic_ncols=columns > 0, ncols=None if columns > 0 else FALLBACK_SIZE[0],
                            nrows=None if rows > 0 else FALLBACK_SIZE[1], mininterval=0.2, postfix="failures=0")
            threading.Thread(target=self._redraw, name="attnlab-progress", daemon=True).start()
        else:
            self._line(f"grading {lab}: {total} submission(s) to grade")

    def _line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _redraw(self) -> None:
        while not self._stop.wait(REFRESH_S):
            with _DRAWING:
                if self.bar is not None and not self._stop.is_set():
                    self.bar.refresh()

    def _postfix(self) -> str:
        running = running_text(self.running)
        return (f"failures={self.failures}" + (f", last={self.last}" if self.last else "")
                + (f", running={running}" if running else ""))

    def start(self, key: str) -> None:
        """Submission ``key`` is handed to a grader: the live line names it until it is done."""
        self.running.append(key)
        if self.enabled and self.bar is not None:
            with _DRAWING:
                self.bar.set_postfix_str(self._postfix(), refresh=True)

    def done(self, key: str, score: str, *, failed: bool = False) -> None:
        """One submission finished (``failed``: the grader failed on it, or its row was not written: it is left to
        rerun); ``score``: as ``16.5/30``."""
        self.done_count += 1
        self.failures += bool(failed)
        if key in self.running:
            self.running.remove(key)
        if not self.enabled:
            return
        last = self.last = f"{for_terminal(key)} {score}"
        if self.bar is not None:
            with _DRAWING:
                self.bar.set_postfix_str(self._postfix(), refresh=False)
                self.bar.update(1)
            return
        per = (time.monotonic() - self.began) / self.done_count
        left = (self.total - self.done_count) * per
        self._line(f"[{self.done_count}/{self.total}] {last}; {per:.1f} s per submission, about {_eta(left)} left; "
                   f"failures so far: {self.failures}"
                   + (f"; running: {running_text(self.running)}" if self.running else ""))

    def note(self, text: str) -> None:
        """A line of its own (a grader error), above the live line."""
        if not self.enabled:
            return
        if self.bar is not None:
            with _DRAWING:
                tqdm.write(for_terminal(text), file=self.stream)
        else:
            self._line(for_terminal(text))

    def close(self) -> None:
        self._stop.set()
        if self.bar is not None:
            with _DRAWING:
                self.bar.close()
                self.bar = None
