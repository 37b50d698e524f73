"""The narrow interface through which hidden tests reach student code.

Hidden tests receive two ``StudentAPI`` objects, ``student`` and ``ref``, and never touch notebook
internals. They can only:

- ask whether a name exists (``has``) and read its source (``source``),
- call a function by name with tensors and plain values (``call``),
- build a module by name with arguments (``create``), then read and load its state dict, cast it,
  run a method forward (and backward) in train or eval mode (``ModuleRef``),
- build any other object by name, call its public methods and read its public attributes (a tokenizer's
  ``encode`` and ``vocab_size``),
- pass an object built by ``create`` to a function (``greedy_decode(model, ...)``): it stays in the
  student's process, and the function receives the object itself.

Every value that comes back went through the wire format (``wire.roundtrip``), also in-process, so a
test always sees plain tensors, tuples, lists and JSON values, whoever produced them.

``LocalStudent`` runs the code in this process (the reference; Otter's in-kernel ``grader.check``).
``RemoteStudent`` talks to a worker process (``attnlab.grading.worker``), possibly sandboxed.
"""

from __future__ import annotations

import ast
import os
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from . import wire
from .executor import Executor, StudentError
from .notebook_code import cell_error_text, cell_where, name_cells
from .safe_text import MAX_MESSAGES, clip
from .wire import ModuleHandle

__all__ = ["StudentAPI", "ModuleRef", "Result", "LocalStudent", "RemoteStudent", "StudentError",
           "definition_source"]


@dataclass
class Result:
    """What a call returned.

    output: the returned value (tensors detached).
    grads: gradient of sum(output_leaf * grad_output) w.r.t. each floating-point tensor argument,
        keyed by position (int) or keyword name (str); None where no gradient reached it.
    param_grads: the same for a module's parameters, keyed by parameter name.
    modified: positions / keyword names of tensor arguments the call changed in place.
    """

    output: Any
    grads: dict = field(default_factory=dict)
    param_grads: dict = field(default_factory=dict)
    modified: list = field(default_factory=list)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal shape, dtype and values, NaN equal to NaN (an untouched NaN input is not 'modified')."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def _sent_tensors(args, kwargs) -> dict[str, torch.Tensor]:
    sent = {str(i): a for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
    sent.update({k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)})
    return sent


def _result(raw: Any, args=(), kwargs=None) -> Result:
    """A call's reply as a ``Result``. Which arguments were modified in place is decided here, from the
    arguments as the callee left them (``inputs_after``) and the tensors this process sent: nothing the
    worker computes is trusted."""
    malformed = StudentError("the grading process sent a malformed reply (did your code write to its pipes?)")
    if not (isinstance(raw, dict) and "output" in raw and isinstance(raw.get("grads", {}), dict)
            and isinstance(raw.get("param_grads", {}), dict) and isinstance(raw.get("inputs_after"), dict)):
        raise malformed
    after, modified = raw["inputs_after"], []
    for key, sent in _sent_tensors(args, kwargs or {}).items():
        now = after.get(key)
        if not isinstance(now, torch.Tensor):
            raise malformed
        if not _same(now, sent):
            modified.append(int(key) if key.isdigit() else key)
    grads = {int(k) if str(k).isdigit() else k: v for k, v in raw.get("grads", {}).items()}
    return Result(raw["output"], grads, dict(raw.get("param_grads", {})), modified)


class StudentAPI:
    """Base class: subclasses implement ``_op(op, **payload)`` returning plain values."""

    def _op(self, op: str, **payload) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def has(self, name: str) -> bool:
        return bool(self._op("has", name=name))

    def source(self, name: str | None = None) -> str | None:
        """The source of definition ``name`` (None: all code), or None when unknown."""
        raise NotImplementedError

    def call(self, name: str, *args, grad: bool = False, grad_outputs=None, **kwargs) -> Result:
        """``name(*args, **kwargs)``; an argument may be a ``ModuleRef`` of this API (the object itself is passed)."""
        args, kwargs = tuple(self._handle(a) for a in args), {k: self._handle(v) for k, v in kwargs.items()}
        return _result(self._op("call", name=name, args=list(args), kwargs=kwargs, grad=grad,
                                grad_outputs=grad_outputs), args, kwargs)

    def _handle(self, value: Any) -> Any:
        if not isinstance(value, ModuleRef):
            return value
        if value.api is not self:
            raise ValueError(f"a {value.name} built by another StudentAPI cannot be passed here: build it with "
                             "this one's create")
        return value.handle

    def create(self, name: str, *args, **kwargs) -> "ModuleRef":
        return ModuleRef(self, self._op("create", name=name, args=list(args), kwargs=kwargs), name)


class ModuleRef:
    """An object built by ``StudentAPI.create``; it lives wherever the student code runs. It can be passed to
    ``StudentAPI.call`` as an argument (``student.call("generate", model, idx, 5)``); ``call(method=...)`` runs
    one of its methods (any method of a module; a public method of a plain object, such as a tokenizer)."""

    def __init__(self, api: StudentAPI, handle: ModuleHandle, name: str):
        self.api, self.handle, self.name = api, handle, name

    def state_dict(self) -> dict:
        return self.api._op("state_dict", handle=self.handle)

    def param_shapes(self) -> dict:
        return {k: tuple(v) for k, v in self.api._op("param_shapes", handle=self.handle).items()}

    def load_state_dict(self, state: dict) -> tuple[list, list]:
        """Load with strict=False; returns (missing_keys, unexpected_keys)."""
        missing, unexpected = self.api._op("load_state_dict", handle=self.handle, state=state)
        return list(missing), list(unexpected)

    def attr(self, name: str) -> Any:
        """The public attribute ``name`` of the object (a plain value or tensors: anything that can travel)."""
        return self.api._op("get_attr", handle=self.handle, name=name)

    def to(self, dtype) -> "ModuleRef":
        self.api._op("to", handle=self.handle, dtype=dtype)
        return self

    def call(self, *args, method: str = "forward", train: bool = False, grad: bool = False,
             grad_outputs=None, **kwargs) -> Result:
        return _result(self.api._op("module_call", handle=self.handle, method=method, args=list(args),
                                    kwargs=kwargs, train=train, grad=grad, grad_outputs=grad_outputs), args, kwargs)


def definition_source(code: str, name: str | None) -> str | None:
    """Source of the last top-level ``def``/``class`` called ``name`` in ``code`` (all code if None)."""
    if name is None:
        return code
    try:
        tree = ast.parse(code)
    except (SyntaxError, RecursionError, MemoryError):
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            found = ast.get_source_segment(code, node)
    return found


class LocalStudent(StudentAPI):
    """Student (or reference) code in this process: ``namespace`` is where its cells ran.

    ``code`` is the source that produced the namespace (for ``source``); without it, ``inspect`` is tried.
    """

    def __init__(self, namespace: dict[str, Any], code: str | None = None):
        self.executor = Executor(namespace)
        self.code = code

    @classmethod
    def from_code(cls, code: str, filename: str = "<reference>") -> "LocalStudent":
        namespace: dict[str, Any] = {"__name__": "__attnlab_code__"}
        exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - trusted code only
        return cls(namespace, code)

    def _op(self, op: str, **payload) -> Any:
        payload = wire.roundtrip(payload)  # the callee never shares tensors with the test
        return wire.roundtrip(self.executor.dispatch(op, payload))

    def source(self, name: str | None = None) -> str | None:
        if self.code is not None:
            return definition_source(self.code, name)
        if name is None or name not in self.executor.namespace:
            return None
        import inspect

        try:
            return inspect.getsource(self.executor.namespace[name])
        except (OSError, TypeError):
            return None


class WorkerDied(StudentError):
    """The worker process is gone (crash, exit, kill) or stopped answering."""


class RemoteStudent(StudentAPI):
    """Student code in a worker process, reached through its stdin/stdout pipes.

    ``spawn()`` starts ``python -m attnlab.grading.worker`` (a sandboxed process) and returns it. ``cells`` are the
    submission's graded cells (``[{"index", "source"}]``) and ``code`` their source as the grader read it from the
    notebook (a trusted copy, for ``source``).

    When the worker dies (a crash, ``os._exit``, a memory or time limit), the call in progress fails and the
    next call starts a fresh worker, so one bad function costs only the tests that call it. A cell that kills
    the worker while loading is skipped on the next start.

    Every resource is bounded whatever the worker sends: at most ``1 + max_restarts`` starts in all (loads that
    skip a cell included), every read and write against a deadline, and everything against ``deadline``
    (``time.monotonic``), the end of this submission's time.
    """

    def __init__(self, spawn, cells: list[dict], code: str, *, cell_timeout: float, load_timeout: float,
                 call_timeout: float, max_restarts: int = 4, deadline: float | None = None):
        self.spawn, self.cells, self.code = spawn, list(cells), code
        self.cell_timeout, self.load_timeout, self.call_timeout = cell_timeout, load_timeout, call_timeout
        self.max_restarts = max_restarts
        self.deadline = deadline  # the whole submission's end (load, restarts, tests)
        self.proc = None
        self.starts = 0
        self.dead_reason: str | None = None  # set once no more restarts are allowed
        self.fatal_cells: dict[int, str] = {}  # cell index -> why it was skipped
        self.cell_errors: list[str] = []  # errors of the first complete load
        self._loaded_once = False
        self._progress: tuple[list[int], int] | None = None  # (cells sent in this load, position reported)
        self._test_deadline: float | None = None  # end of the current test's time, see set_deadline

    def set_deadline(self, deadline: float | None) -> None:
        """Calls until ``deadline`` (time.monotonic) share what is left of it; None lifts it."""
        self._test_deadline = deadline

    def source(self, name: str | None = None) -> str | None:
        return definition_source(self.code, name)

    def _give_up(self, reason: str):
        self._stop()
        self.dead_reason = self.dead_reason or reason
        raise WorkerDied(self.dead_reason)

    def _timeout(self, limit: float) -> float:
        """``limit``, cut to what is left of the submission's time (giving up when nothing is)."""
        if self.deadline is None:
            return limit
        left = self.deadline - time.monotonic()
        if left <= 0:
            self._give_up("grading this submission ran past its overall time limit; the tests still to run "
                          "score 0 (make the notebook's graded cells faster)")
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
            try:
                loaded = self._request({"op": "load", "cells": cells, "cell_timeout": self.cell_timeout}, timeout)
            except WorkerDied as exc:
                if self.dead_reason:
                    raise
                order, position = self._progress
                if position < 0:
                    self._give_up(f"the grading process could not start your code ({exc})")
                self.fatal_cells[order[position]] = f"{cell_where(self.cells, order[position])} was skipped: {exc}"
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
            if self._test_deadline is not None:  # restarting is the grader's time, not the test's
                self._test_deadline += time.monotonic() - began
        timeout = self._timeout(self.call_timeout)
        if self._test_deadline is not None:
            left = self._test_deadline - time.monotonic()
            if left <= 0:
                raise StudentError("this test ran out of time in your code")
            timeout = min(timeout, left)
        return self._request({"op": op, "payload": payload}, timeout)

    def _request(self, message: dict, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        self._write(wire.pack(message), deadline, timeout)
        while True:
            reply = self._read_frame(deadline, timeout)
            if isinstance(reply, dict) and set(reply) == {"progress"}:
                self._on_progress(reply["progress"])
                continue
            break
        if not isinstance(reply, dict) or "ok" not in reply:
            self._died("the worker sent a malformed reply")
        if reply["ok"]:
            return reply.get("value")
        raise StudentError(clip(name_cells(str(reply.get("error", "unknown error")), self.cells)))  # bounded

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
                self._died(f"timed out after {timeout:g} s (your code stopped reading its requests)")
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
                self._died(f"timed out after {timeout:g} s (an endless loop, or far too slow)")
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

    def _died(self, reason: str):
        self._stop()
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
