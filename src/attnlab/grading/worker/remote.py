"""``RemoteStudent``: the narrow interface (``StudentAPI``) to student code running in a worker process, reached through
its stdin/stdout pipes; it restarts a dead worker (skipping a cell that killed it) and bounds every read, write,
restart and second of the submission's time, trusting nothing the worker sends. ``WorkerDied``: the worker is gone."""

from __future__ import annotations

import os
import re
import select
import signal
import time
from typing import Any

from attnlab.grading.core import result_fields as fields
from attnlab.grading.core.notebook_code import cell_error_text, cell_where, name_cells
from attnlab.grading.outputs.safe_text import MAX_MESSAGES, clip
from attnlab.grading.worker import call_evidence, wire
from attnlab.grading.worker.api import StudentAPI, definition_source
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.module_calls import is_module_class
from attnlab.grading.worker.reference_calls import ReferenceCalls

__all__ = ["RemoteStudent", "WorkerDied"]


_CELL_TIMEOUT = re.compile(r"did not finish within [0-9.e+]+ s")  # worker.run_cells' own text, whole
_CELL_LIMIT = re.compile(r"(MemoryError|RecursionError): ")  # the exception's type, which its text follows


def _cell_category(error: str) -> str:
    """A failed cell's category: the worker's timer stopped it (its whole error is ``did not finish within
    N s``: an exception's text always starts with its type), it ran out of memory or recursion (the type), else
    the cell raised."""
    if _CELL_TIMEOUT.fullmatch(error):
        return fields.CELL_TIMEOUT
    return fields.CELL_LIMIT if _CELL_LIMIT.match(error) else fields.CELL_ERROR


def _binding(functions: dict) -> dict:
    """The ``bind_reference`` request for ``functions``: the names, and which of them are module classes (bound to a
    ``module_proxy`` class in the worker, the others to a ``ReferenceProxy``)."""
    return {"names": list(functions), "modules": [n for n, fn in functions.items() if is_module_class(fn)]}


class WorkerDied(StudentError):
    """The worker process is gone (crash, exit, kill) or stopped answering."""


class RemoteStudent(StudentAPI):
    """Student code in a worker process, reached through its stdin/stdout pipes.

    ``spawn()`` starts ``python -m attnlab.grading.worker.process`` (a sandboxed process) and returns it. ``cells`` are the
    submission's graded cells (``[{"index", "source"}]``) and ``code`` their source as the grader read it from the
    notebook (a trusted copy, for ``source``).

    When the worker dies (a crash, ``os._exit``, a memory or time limit), the call in progress fails and the
    next call starts a fresh worker, so one bad function costs only the tests that call it. A cell that kills
    the worker while loading is skipped on the next start.

    Every resource is bounded whatever the worker sends: at most ``1 + max_restarts`` starts in all (loads that
    skip a cell included), every read and write against a deadline, and everything against ``deadline``
    (``time.monotonic``), the end of this submission's time.

    ``watch``: the lab's forbidden callables the worker records when the student's code runs them during a call
    (``call_evidence``); what it reports is checked and kept in ``call_uses`` (evidence only).
    """

    def __init__(self, spawn, cells: list[dict], code: str, *, cell_timeout: float, load_timeout: float,
                 call_timeout: float, max_restarts: int = 4, deadline: float | None = None, watch=()):
        self.spawn, self.cells, self.code = spawn, list(cells), code
        self.cell_timeout, self.load_timeout, self.call_timeout = cell_timeout, load_timeout, call_timeout
        self.max_restarts = max_restarts
        self.deadline = deadline  # the whole submission's end (load, restarts, tests)
        self.proc = None
        self.starts = 0
        self.dead_reason: str | None = None  # set once no more restarts are allowed
        self.problems: list[dict] = []  # result_fields.problem entries: what went wrong, as the grader saw it
        self.last_death: dict | None = None  # the problem of the latest WorkerDied (see _died)
        self.fatal_cells: dict[int, str] = {}  # cell index -> why it was skipped
        self.cell_errors: list[str] = []  # errors of the first complete load
        self._loaded_once = False
        self._progress: tuple[list[int], int] | None = None  # (cells sent in this load, position reported)
        self._test_deadline: float | None = None  # end of the current test's time, see set_deadline
        self._reference: ReferenceCalls | None = None  # the callbacks this test answers (graded_on_reference)
        self.watch = tuple(watch)[:call_evidence.MAX_WATCHED]
        self.call_uses: list[call_evidence.Use] = []  # forbidden calls the worker saw run (checked, evidence only)
        self.call_uses_refused = 0  # entries of its reports that did not pass the check

    def set_deadline(self, deadline: float | None) -> None:
        """Calls until ``deadline`` (time.monotonic) share what is left of it; None lifts it."""
        self._test_deadline = deadline

    def source(self, name: str | None = None) -> str | None:
        return definition_source(self.code, name)

    def _bind_reference(self, functions: dict) -> set:
        self._reference = calls = ReferenceCalls(functions)
        try:
            self._op("bind_reference", **_binding(functions))
        except StudentError:
            self._unbind_reference()
            raise
        return calls.used

    def _unbind_reference(self) -> None:
        """Restore the student's own bindings, on the grader's time (also after a test that ran out of its own)."""
        self._reference = None
        if self.proc is None or self.dead_reason:  # a fresh worker holds the student's own bindings
            return
        deadline, self._test_deadline = self._test_deadline, None
        try:
            self._op("unbind_reference")
        except StudentError:  # never left with the reference bound: the next call starts a fresh worker
            self._stop()
            raise
        finally:
            self._test_deadline = deadline

    def _give_up(self, reason: str, category: str = fields.WORKER_CRASH):
        self._stop()
        if not self.dead_reason:
            self.dead_reason = reason
            self.problems.append(fields.problem(category, reason))
        raise WorkerDied(self.dead_reason)

    def _timeout(self, limit: float) -> float:
        """``limit``, cut to what is left of the submission's time (giving up when nothing is)."""
        if self.deadline is None:
            return limit
        left = self.deadline - time.monotonic()
        if left <= 0:
            self._give_up("grading this submission ran past its overall time limit; the tests still to run "
                          "score 0 (make the notebook's graded cells faster)", fields.TIMEOUT)
        return min(limit, left)

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker and run the cells; a cell that kills the worker is skipped and the load retried."""
        while True:
            if self.starts > self.max_restarts:
                self._give_up(f"the worker was restarted {self.starts - 1} times; giving up")
            timeout = self._timeout(self.load_timeout)
            self.starts += 1
            self.proc = self.spawn()
            cells = [c for c in self.cells if c["index"] not in self.fatal_cells]
            self._progress = ([c["index"] for c in cells], -1)
            self.last_death = None
            try:
                loaded = self._request({"op": "load", "cells": cells, "cell_timeout": self.cell_timeout,
                                        "watch": list(self.watch)}, timeout)
            except WorkerDied as exc:
                if self.dead_reason:
                    raise
                order, position = self._progress
                timed_out = bool(self.last_death) and self.last_death[fields.CATEGORY] == fields.TIMEOUT
                if position < 0:
                    self._give_up(f"the grading process could not start your code ({exc})",
                                  fields.TIMEOUT if timed_out else fields.WORKER_CRASH)
                where = cell_where(self.cells, order[position])
                self.fatal_cells[order[position]] = f"{where} was skipped: {exc}"
                self.problems.append(fields.problem(fields.CELL_TIMEOUT if timed_out else fields.CELL_LIMIT,
                                                    self.fatal_cells[order[position]], where))
                continue
            finally:
                self._progress = None
            self._loaded(loaded)
            return

    def _loaded(self, loaded: Any) -> None:
        errors = loaded.get("errors") if isinstance(loaded, dict) else None
        texts = [cell_error_text(self.cells, e) for e in errors[:MAX_MESSAGES]] if isinstance(errors, list) else [None]
        if not (None not in texts and len(errors) <= MAX_MESSAGES
                and isinstance(loaded.get("failed"), int) and loaded["failed"] >= len(errors)):
            self._give_up("the grading process sent a malformed reply (did your code write to its pipes?)")
        if not self._loaded_once:
            self.cell_errors = [clip(e) for e in texts]
            self.problems += [fields.problem(_cell_category(e["error"]), text, cell_where(self.cells, e["index"]))
                              for e, text in zip(errors, self.cell_errors)]
            if loaded["failed"] > len(loaded["errors"]):
                self.cell_errors.append(f"… and {loaded['failed'] - len(loaded['errors']):,} more cell errors")
            self._loaded_once = True

    @property
    def notebook_errors(self) -> list[str]:
        return list(self.fatal_cells.values()) + self.cell_errors

    def _op(self, op: str, **payload) -> Any:
        if self.dead_reason:
            raise WorkerDied(f"not run: {self.dead_reason}")
        if self.proc is None:
            began = time.monotonic()
            self.start()
            if self._reference is not None:  # the test goes on with the reference bound in the fresh worker
                self._request({"op": "bind_reference", "payload": _binding(self._reference.functions)},
                              self._timeout(self.call_timeout))
            if self._test_deadline is not None:  # restarting is the grader's time, not the test's
                self._test_deadline += time.monotonic() - began
        timeout = self._timeout(self.call_timeout)
        if self._test_deadline is not None:
            left = self._test_deadline - time.monotonic()
            if left <= 0:
                raise StudentError("this test ran out of time in your code")
            timeout = min(timeout, left)
        self.last_death = None
        try:
            return self._request({"op": op, "payload": payload}, timeout)
        except WorkerDied:
            if self.last_death:  # a call killed or hung the worker: the next call gets a fresh one
                self.problems.append(self.last_death)
            raise

    def _request(self, message: dict, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        self._write(wire.pack(message), deadline, timeout)
        while True:
            reply = self._read_frame(deadline, timeout)
            if isinstance(reply, dict) and set(reply) == {"progress"}:
                self._on_progress(reply["progress"])
                continue
            if isinstance(reply, dict) and set(reply) == {"callback"}:  # the reference's answer, on the test's time
                calls = self._reference or ReferenceCalls({})  # none bound: refused
                self._write(wire.pack(calls.answer(reply["callback"])), deadline, timeout)
                continue
            break
        if not isinstance(reply, dict) or "ok" not in reply:
            self._died("the worker sent a malformed reply")
        self._take_evidence(reply.get("evidence"))
        if reply["ok"]:
            return reply.get("value")
        raise StudentError(clip(name_cells(str(reply.get("error", "unknown error")), self.cells)))  # bounded

    def _take_evidence(self, raw: Any) -> None:
        """The forbidden calls a reply says the student's code ran (``call_evidence.checked_uses``), bounded."""
        uses, refused = call_evidence.checked_uses(raw, self.cells, self.watch)
        self.call_uses += uses[: max(0, 10 * call_evidence.MAX_USES - len(self.call_uses))]  # 1 KB per call at most
        self.call_uses_refused += refused

    def _on_progress(self, index: Any) -> None:
        """The worker says it starts cell ``index``: only the next cells of this load, in order, are believed."""
        if self._progress is None or type(index) is not int:
            self._died("the worker sent a malformed progress report")
        order, position = self._progress
        try:
            at = order.index(index, position + 1)
        except ValueError:
            self._died("the worker sent a malformed progress report")
        self._progress = (order, at)

    def _write(self, data: bytes, deadline: float, timeout: float) -> None:
        """Write a whole request without ever blocking past ``deadline`` (a worker may stop reading)."""
        fd = self.proc.stdin.fileno()
        os.set_blocking(fd, False)
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self._died(f"timed out after {timeout:g} s (your code stopped reading its requests)", fields.TIMEOUT)
            _, ready, _ = select.select([], [fd], [], left)
            if not ready:
                continue
            try:
                view = view[os.write(fd, view[: 1 << 16]):]
            except BlockingIOError:
                continue
            except OSError:
                self._died(f"your code ended the Python process ({self._exit_text()})")

    def _read_frame(self, deadline: float, timeout: float) -> Any:
        """One frame, read into one buffer of its announced size (checked first): the frame is never copied."""
        head = self._read_into(bytearray(8), deadline, timeout)
        length = int.from_bytes(head, "little")
        if length > wire.MAX_FRAME_BYTES:
            self._died(f"the worker sent a reply of {length} bytes, over the limit of {wire.MAX_FRAME_BYTES}")
        body = self._read_into(bytearray(length), deadline, timeout)
        try:
            return wire.unpack_body(body)
        except wire.WireError as exc:
            self._died(f"the worker sent a malformed reply ({exc})")

    def _read_into(self, buf: bytearray, deadline: float, timeout: float) -> bytearray:
        fd, view = self.proc.stdout.fileno(), memoryview(buf)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                self._died(f"timed out after {timeout:g} s (an endless loop, or far too slow)", fields.TIMEOUT)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            got = os.readv(fd, [view[: 1 << 20]])
            if not got:
                self._died(f"your code ended the Python process ({self._exit_text()})")
            view = view[got:]
        return buf

    def _exit_text(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001
            return "it stopped answering"
        if code is not None and code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        if code == 137:
            return "killed, probably for using too much memory"
        return f"exit code {code}"

    def _died(self, reason: str, category: str = fields.WORKER_CRASH):
        """The worker is gone: stop it and raise ``WorkerDied``; ``category`` (``result_fields``) is recorded
        with the reason, so that nothing later has to read the category back from the text."""
        self._stop()
        self.last_death = fields.problem(category, reason)
        raise WorkerDied(reason)

    def _stop(self) -> None:
        if self.proc is None:
            return
        kill = getattr(self.proc, "kill_tree", None) or self.proc.kill
        try:
            kill()
        except Exception:  # noqa: BLE001
            pass
        self.proc = None

    def close(self) -> None:
        self._stop()
