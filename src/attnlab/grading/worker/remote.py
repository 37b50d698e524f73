"""``RemoteStudent``: the narrow interface (``StudentAPI``) to student code running in a worker process, reached through
its stdin/stdout pipes; it restarts a dead worker (skipping a cell that killed it or outlived its limit) and bounds
every read, write, restart and second of the submission's time (``deadlines``: the grader's own clock, never the
worker's), trusting nothing the worker sends. ``WorkerDied``: the worker is gone."""

from __future__ import annotations

import contextlib
import os
import re
import select
import time
from typing import Any

from attnlab.grading.source.notebook_code import cell_error_text, cell_where, name_cells
from attnlab.grading.worker import call_evidence, deaths, wire
from attnlab.grading.worker.api import StudentAPI, definition_source
from attnlab.grading.worker.callback_answers import answer_frame, binding, checked_shortfalls
from attnlab.grading.worker.deadlines import CALL, CELL, CELL_GRACE_S, LOAD, SUBMISSION, TEST, Limit, earliest, overrun_text
from attnlab.grading.worker.executor import StudentError
from attnlab.grading.worker.reference_calls import ReferenceCalls
from attnlab.grading.worker.reference_host import HostedCalls, ReferenceHost
from attnlab.records import result_fields as fields
from attnlab.records.safe_text import MAX_MESSAGES, clip

__all__ = ["RemoteStudent", "WorkerDied"]


_CELL_TIMEOUT = re.compile(r"did not finish within [0-9.e+]+ s")  # worker.run_cells' own text, whole
_LATE_READS = 4  # reads of data already waiting, once a cell's limit passed (see _late)
_CELL_LIMIT = re.compile(r"(MemoryError|RecursionError): ")  # the exception's type, which its text follows


def _cell_category(error: str) -> str:
    """A failed cell's category: the worker's timer stopped it (its whole error is ``did not finish within
    N s``: an exception's text always starts with its type), it ran out of memory or recursion (the type), else
    the cell raised."""
    if _CELL_TIMEOUT.fullmatch(error):
        return fields.CELL_TIMEOUT
    return fields.CELL_LIMIT if _CELL_LIMIT.match(error) else fields.CELL_ERROR


class WorkerDied(StudentError):
    """The worker process is gone (crash, exit, kill) or stopped answering."""


class RemoteStudent(StudentAPI):
    """Student code in a worker process, reached through its stdin/stdout pipes.

    ``spawn()`` starts ``python -m attnlab.grading.worker.process`` (a sandboxed process) and returns it. ``cells`` are the
    submission's graded cells (``[{"index", "source"}]``) and ``code`` their source as the grader read it from the
    notebook (a trusted copy, for ``source``).

    When the worker dies (a crash, ``os._exit``, a memory or time limit), the call in progress fails and the next
    call starts a fresh worker, so one bad function costs only the tests that call it; a cell that kills the worker
    while loading is skipped on the next start. ``deaths.judge`` says whose a death is: a kill from outside (no exit
    or crash of the student's code, no limit of ours: ``killed_for`` is None) sets ``grader_fault`` and gives up
    (the runner raises ``WorkerKilled``: a grader error, never the student's 0).

    Every resource is bounded whatever the worker sends: at most ``1 + max_restarts`` starts in all (loads that
    skip a cell included), besides a restart after each cell the grader stopped at the cell limit (it cost that
    limit's time, so the submission's time bounds them, and the grading goes on without the cell); every read and
    write against the earliest limit in force (``deadlines``: the cell's from the worker's report that it starts,
    the load's, the call's, the test's, and ``deadline`` (``time.monotonic``), the end of this submission's
    ``submission_timeout`` seconds). At a limit the grader kills the worker from outside, whatever the student's
    code catches or masks, recording the limit in ``killed_for`` first (a death that is the student's).

    ``watch``: the lab's forbidden callables the worker records when the student's code runs them during a call
    (``call_evidence``; their operations too while ``set_guard`` is on); what it reports is checked and kept in
    ``call_uses`` (evidence only)."""

    def __init__(self, spawn, cells: list[dict], code: str, *, cell_timeout: float, load_timeout: float,
                 call_timeout: float, max_restarts: int = 4, deadline: float | None = None,
                 submission_timeout: float | None = None, watch=()):
        self.spawn, self.cells, self.code = spawn, list(cells), code
        self.cell_timeout, self.load_timeout, self.call_timeout = cell_timeout, load_timeout, call_timeout
        self.max_restarts = max_restarts
        self.deadline = deadline  # the whole submission's end (load, restarts, tests)
        stated = submission_timeout if submission_timeout is not None else (deadline or 0.0) - time.monotonic()
        self._submission = None if deadline is None else Limit(SUBMISSION, round(stated, 1), deadline)
        self._request_limit: Limit | None = None  # the load's or the call's, while a request runs
        self._cell: Limit | None = None  # the running cell's, while a load runs (from its progress report)
        self._late_reads = 0  # of the running cell's, see _late
        self._test: Limit | None = None  # the current test's, see set_deadline
        self.killed_for: Limit | None = None  # the limit the grader stopped the latest worker at (see _overran)
        self.proc = None
        self.starts = 0
        self.cell_limit_restarts = 0  # starts after a cell stopped at the cell limit (not counted by max_restarts)
        self.dead_reason: str | None = None  # set once no more restarts are allowed
        self.problems: list[dict] = []  # result_fields.problem entries: what went wrong, as the grader saw it
        self.last_death: dict | None = None  # the problem of the latest WorkerDied (see _died)
        self.fatal_cells: dict[int, str] = {}  # cell index -> why it was skipped
        self.cell_errors: list[str] = []  # errors of the first complete load
        self._loaded_once = False
        self._progress: tuple[list[int], int] | None = None  # (cells sent in this load, position reported)
        self._reference: HostedCalls | None = None  # the callbacks this test answers (graded_on_reference)
        self._host = ReferenceHost(lambda: self._due().left())  # answers them in a capped child (reference_host)
        self.reference_shortfalls: dict[str, str] = {}  # bound name -> what a proxy could not give (hidden.py)
        self._sent_id = 0  # the id of the latest request: its reply must carry it
        self.watch = tuple(watch)[:call_evidence.MAX_WATCHED]
        self.call_uses: list[call_evidence.Use] = []  # forbidden calls the worker saw run (checked, evidence only)
        self.call_uses_refused = 0  # entries of its reports that did not pass the check
        self.guard_ops = True  # the worker's operation guard during graded calls (set_guard)
        self.grader_fault: str | None = None  # set when the worker was killed from outside: a grader error

    def set_deadline(self, deadline: float | None) -> None:
        """Calls until ``deadline`` (time.monotonic, set as a test starts) share what is left of it; None lifts it."""
        self._test = None if deadline is None else Limit(TEST, round(max(0.0, deadline - time.monotonic()), 1),
                                                         deadline)

    def set_guard(self, on: bool) -> None:  # the operation guard for the next graded calls (hidden.run_suite)
        self.guard_ops = bool(on)

    def source(self, name: str | None = None) -> str | None:
        return definition_source(self.code, name)

    def _bind_reference(self, functions: dict) -> set:
        self._reference = calls = self._host.calls(functions)
        self.reference_shortfalls = {}
        try:
            self._op("bind_reference", **binding(functions))
        except StudentError:
            self._unbind_reference()
            raise
        return calls.used

    def _unbind_reference(self) -> None:
        """Restore the student's own bindings, on the grader's time (also after a test that ran out of its own); a
        test whose callbacks went over the reference's caps is lost (``ReferenceOverBudget``)."""
        calls, self._reference = self._reference, None
        test, self._test = self._test, None
        try:
            if self.proc is not None and not self.dead_reason:  # a fresh worker holds the student's own bindings
                self._op("unbind_reference")
        except StudentError:  # never left with the reference bound: the next call starts a fresh worker
            self._stop()
            raise
        finally:
            self._test = test
            if calls is not None:
                calls.check()

    def _give_up(self, reason: str, category: str = fields.WORKER_CRASH):
        self._stop()
        if not self.dead_reason:
            self.dead_reason = reason
            self.problems.append(fields.problem(category, reason))
        raise WorkerDied(self.dead_reason)

    def _check_time(self) -> None:
        """Give up when the submission's time is over (before a start or a request)."""
        if self._submission is not None and self._submission.left() <= 0:
            self.killed_for = self._submission
            self._give_up(overrun_text(self._submission), fields.TIMEOUT)

    def _due(self) -> Limit:
        """The limit in force that passes first (a request always has its own)."""
        return earliest(self._request_limit, self._cell, self._test, self._submission)

    def _overran(self, limit: Limit, *, reading: bool = True):
        """``limit`` passed while the worker was busy: the grader's own stop. ``killed_for`` is recorded before the
        kill (``_died``, or ``_give_up`` at the submission's limit), whatever the worker does meanwhile."""
        self.killed_for = limit
        text = overrun_text(limit, reading=reading)
        if limit.kind == SUBMISSION:
            self._give_up(text, fields.TIMEOUT)
        self._died(text, fields.TIMEOUT)

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker and run the cells; a cell that kills the worker is skipped and the load retried."""
        while True:
            if self.starts - self.cell_limit_restarts > self.max_restarts:
                self._give_up(f"the worker was restarted {self.starts - 1} times; giving up")
            self._check_time()
            self.starts += 1
            self.proc, self.killed_for = self.spawn(), None
            cells = [c for c in self.cells if c["index"] not in self.fatal_cells]
            self._progress = ([c["index"] for c in cells], -1)
            self.last_death = None
            try:
                loaded = self._request({"op": "load", "cells": cells, "cell_timeout": self.cell_timeout,
                                        "watch": list(self.watch)}, Limit.starting_now(LOAD, self.load_timeout))
            except WorkerDied as exc:
                if self.dead_reason:
                    raise
                order, position = self._progress
                if position < 0:
                    self._give_up(f"the grading process could not start your code ({exc})",
                                  fields.TIMEOUT if self.killed_for else fields.WORKER_CRASH)
                self._skip(order[position], exc)
                continue
            finally:
                self._progress = None
            self._loaded(loaded)
            return

    def _skip(self, index: int, exc: WorkerDied) -> None:
        """Cell ``index`` killed the worker, or outlived a limit (``killed_for``) and was killed with it: the next
        load goes on without it."""
        where, limit = cell_where(self.cells, index), self.killed_for
        if limit is not None and limit.kind == CELL:
            text = (f"{where} ran past {limit.named()}; the grading process was stopped and restarted without "
                    "it (your code kept running after the limit: it must not catch the timer)")
        else:
            text = f"{where} was skipped: {exc}"
        self.fatal_cells[index] = text
        self.cell_limit_restarts += limit is not None and limit.kind == CELL
        self.problems.append(fields.problem(fields.CELL_LIMIT if limit is None else fields.CELL_TIMEOUT, text, where))

    def _loaded(self, loaded: Any) -> None:
        errors = loaded.get("errors") if isinstance(loaded, dict) else None
        texts = [self._cell_text(e) for e in errors[:MAX_MESSAGES]] if isinstance(errors, list) else [None]
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

    def _cell_text(self, entry: Any) -> str | None:
        """The message for a worker's report of a failed cell (``cell_error_text``); a cell its timer stopped is
        told in the grader's words, with the grader's limit."""
        text = cell_error_text(self.cells, entry)
        if text is not None and _cell_category(entry["error"]) == fields.CELL_TIMEOUT:
            return f"{cell_where(self.cells, entry['index'])} ran past {Limit(CELL, self.cell_timeout, 0).named()}"
        return text

    @property
    def notebook_errors(self) -> list[str]:
        return list(self.fatal_cells.values()) + self.cell_errors

    def _op(self, op: str, **payload) -> Any:
        if self.dead_reason:
            raise WorkerDied(f"not run: {self.dead_reason}")
        if self.proc is None:
            self._restart()
        self._check_time()
        if self._test is not None and self._test.left() <= 0:
            raise StudentError(overrun_text(self._test))
        self.last_death = None
        try:
            return self._request({"op": op, "payload": payload, "guard": self.guard_ops},
                                 Limit.starting_now(CALL, self.call_timeout))
        except WorkerDied:
            if self.last_death:  # a call killed or hung the worker: the next call gets a fresh one
                self.problems.append(self.last_death)
            raise

    def _restart(self) -> None:
        """A fresh worker in the middle of the tests: restarting is the grader's time, not the test's."""
        test, self._test = self._test, None
        began = time.monotonic()
        try:
            self.start()
            if self._reference is not None:  # the test goes on with the reference bound in the fresh worker
                self._request({"op": "bind_reference", "payload": binding(self._reference.functions)},
                              Limit.starting_now(CALL, self.call_timeout))
        finally:
            self._test = None if test is None else test._replace(at=test.at + time.monotonic() - began)

    def _request(self, message: dict, limit: Limit) -> Any:
        """Send ``message`` and read its reply, within ``limit`` and the other limits in force (``_due``)."""
        self._request_limit, self._cell = limit, None
        self._sent_id = ident = self._sent_id + 1
        try:
            self._write(wire.pack({**message, "id": ident}))
            while True:
                reply = self._read_frame()
                if isinstance(reply, dict) and set(reply) == {"progress"}:
                    self._on_progress(reply["progress"])
                    continue
                if isinstance(reply, dict) and set(reply) == {"callback", "id"}:  # answered on the test's time
                    self._write(answer_frame(self._reference or ReferenceCalls({}), reply))  # none bound: refused
                    continue
                break
        finally:
            self._request_limit = self._cell = None
        if not isinstance(reply, dict) or "ok" not in reply:
            self._died("the worker sent a malformed reply")
        if reply.get("id") != ident:  # never a reply taken for another request's
            self._died(f"the worker answered request {clip(repr(reply.get('id')), 40)} while the grader waited for "
                       f"request {ident}: the conversation was out of step, so the worker was restarted")
        self.reference_shortfalls.update(checked_shortfalls(reply.get("shortfall"), self._reference.functions
                                                            if self._reference else ()))
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
        self._cell = Limit.starting_now(CELL, self.cell_timeout, CELL_GRACE_S)  # the grader's clock, from now
        self._late_reads = 0

    def _write(self, data: bytes) -> None:
        """Write a whole request without ever blocking past the limit in force (a worker may stop reading)."""
        fd = self.proc.stdin.fileno()
        os.set_blocking(fd, False)
        view = memoryview(data)
        while view:
            limit = self._due()
            left = limit.left()
            if left <= 0:
                self._overran(limit, reading=False)
            _, ready, _ = select.select([], [fd], [], left)
            if not ready:
                continue
            try:
                view = view[os.write(fd, view[: 1 << 16]):]
            except BlockingIOError:
                continue
            except OSError:
                self._gone()

    def _read_frame(self) -> Any:
        """One frame, read into one buffer of its announced size (checked first): the frame is never copied."""
        head = self._read_into(bytearray(8))
        length = int.from_bytes(head, "little")
        if length > wire.MAX_FRAME_BYTES:
            self._died(f"the worker sent a reply of {length} bytes, over the limit of {wire.MAX_FRAME_BYTES}")
        body = self._read_into(bytearray(length))
        try:
            return wire.unpack_body(body)
        except wire.WireError as exc:
            self._died(f"the worker sent a malformed reply ({exc})")

    def _read_into(self, buf: bytearray) -> bytearray:
        fd, view = self.proc.stdout.fileno(), memoryview(buf)
        while view:
            limit = self._due()
            left = limit.left()
            if left <= 0 and not self._late(limit, fd):
                self._overran(limit)
            ready, _, _ = select.select([fd], [], [], max(0.0, left))
            if not ready:
                continue
            got = os.readv(fd, [view[: 1 << 20]])
            if not got:
                self._gone()
            view = view[got:]
        return buf

    def _late(self, limit: Limit, fd: int) -> bool:
        """Past a cell's limit, what the worker already sent is still read (a few reads per cell): its own timer may
        have stopped the cell in time while this grader was not running (a loaded machine)."""
        if limit.kind != CELL or self._late_reads >= _LATE_READS:
            return False
        self._late_reads += 1
        return bool(select.select([fd], [], [], 0)[0])

    def _gone(self):
        """The pipe closed: the student's death (``deaths.judge``) is ``WorkerDied``; a kill from outside gives up."""
        try:
            code = self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001 - it closed its pipes and runs on
            code = None
        ours = self.killed_for and fields.problem(fields.TIMEOUT, overrun_text(self.killed_for))
        death = deaths.judge(code, limit=ours or None)
        if not death.students:
            self.grader_fault = self.grader_fault or death.reason
            self._give_up(death.reason, death.category)
        self._died(death.reason, death.category)

    def _died(self, reason: str, category: str = fields.WORKER_CRASH):
        """The worker is gone: stop it and raise ``WorkerDied``; ``category`` (``result_fields``) is recorded
        with the reason, so that nothing later has to read the category back from the text."""
        self._stop()
        self.last_death = fields.problem(category, reason)
        raise WorkerDied(reason)

    def _stop(self) -> None:  # also close()
        if self.proc is None:
            return
        kill = getattr(self.proc, "kill_tree", None) or self.proc.kill
        with contextlib.suppress(Exception):
            kill()
        self.proc = None

    def close(self) -> None:
        self._stop()
        self._host.close()
