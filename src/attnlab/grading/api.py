"""The narrow interface through which hidden tests reach student code.

Hidden tests receive two ``StudentAPI`` objects, ``student`` and ``ref``, and never touch notebook
internals. They can only:

- ask whether a name exists (``has``) and read its source (``source``),
- call a function by name with tensors and plain values (``call``),
- build a module by name with arguments (``create``), then read and load its state dict, cast it,
  run a method forward (and backward) in train or eval mode (``ModuleRef``).

Every value that comes back went through the wire format (``wire.roundtrip``), also in-process, so a
test always sees plain tensors, tuples, lists and JSON values, whoever produced them.

``LocalStudent`` runs the code in this process (the reference; Otter's in-kernel ``grader.check``).
``RemoteStudent`` talks to a worker process (``attnlab.grading.worker``), possibly sandboxed.
"""

from __future__ import annotations

import ast
import os
import select
import time
from dataclasses import dataclass, field
from typing import Any

from . import wire
from .executor import Executor, StudentError
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


def _result(raw: dict) -> Result:
    grads = {int(k) if str(k).isdigit() else k: v for k, v in raw.get("grads", {}).items()}
    return Result(raw["output"], grads, dict(raw.get("param_grads", {})), list(raw.get("modified", [])))


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
        return _result(self._op("call", name=name, args=list(args), kwargs=kwargs, grad=grad,
                                grad_outputs=grad_outputs))

    def create(self, name: str, *args, **kwargs) -> "ModuleRef":
        return ModuleRef(self, self._op("create", name=name, args=list(args), kwargs=kwargs), name)


class ModuleRef:
    """An object built by ``StudentAPI.create``; it lives wherever the student code runs."""

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

    def to(self, dtype) -> "ModuleRef":
        self.api._op("to", handle=self.handle, dtype=dtype)
        return self

    def call(self, *args, method: str = "forward", train: bool = False, grad: bool = False,
             grad_outputs=None, **kwargs) -> Result:
        return _result(self.api._op("module_call", handle=self.handle, method=method, args=list(args),
                                    kwargs=kwargs, train=train, grad=grad, grad_outputs=grad_outputs))


def definition_source(code: str, name: str | None) -> str | None:
    """Source of the last top-level ``def``/``class`` called ``name`` in ``code`` (all code if None)."""
    if name is None:
        return code
    try:
        tree = ast.parse(code)
    except SyntaxError:
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

    ``proc`` is a ``subprocess.Popen`` or ``sandbox.Sandboxed`` running ``python -m attnlab.grading.worker``.
    ``code`` is the submission's graded code as the grader read it from the notebook (trusted copy).
    """

    def __init__(self, proc, code: str, *, call_timeout: float = 30.0):
        self.proc, self.code, self.call_timeout = proc, code, call_timeout
        self.dead_reason: str | None = None

    def source(self, name: str | None = None) -> str | None:
        return definition_source(self.code, name)

    def load(self, cells: list[dict], *, cell_timeout: float, total_timeout: float) -> dict:
        """Run the submission's cells in the worker; returns ``{"cells": [...], "names": [...]}``."""
        return self._request({"op": "load", "cells": cells, "cell_timeout": cell_timeout}, total_timeout)

    def _op(self, op: str, **payload) -> Any:
        return self._request({"op": op, "payload": payload}, self.call_timeout)

    def _request(self, message: dict, timeout: float) -> Any:
        if self.dead_reason:
            raise WorkerDied(f"not run: {self.dead_reason}")
        try:
            os.write(self.proc.stdin.fileno(), wire.pack(message))
        except (BrokenPipeError, OSError):
            self._die(f"your code ended the Python process ({self._exit_text()})")
        reply = self._read_reply(timeout)
        if not isinstance(reply, dict) or "ok" not in reply:
            self._die("the worker sent a malformed reply")
        if reply["ok"]:
            return reply.get("value")
        raise StudentError(str(reply.get("error", "unknown error")))

    def _read_reply(self, timeout: float) -> Any:
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = bytearray()
        need = 8
        length = None
        while len(buf) < need:
            left = deadline - time.monotonic()
            if left <= 0:
                self._die(f"timed out after {timeout:g} s (an endless loop, or far too slow)")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, min(1 << 20, need - len(buf)))
            if not chunk:
                self._die(f"your code ended the Python process ({self._exit_text()})")
            buf += chunk
            if length is None and len(buf) >= 8:
                length = int.from_bytes(buf[:8], "little")
                if length > wire.MAX_FRAME_BYTES:
                    self._die(f"the worker sent a reply of {length} bytes, over the limit")
                need = 8 + length
        try:
            return wire.unpack_body(bytes(buf[8:]))
        except wire.WireError as exc:
            self._die(f"the worker sent a malformed reply ({exc})")

    def _exit_text(self) -> str:
        try:
            code = self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001
            return "it stopped answering"
        if code is not None and code < 0:
            import signal

            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def _die(self, reason: str):
        self.dead_reason = reason
        self.close()
        raise WorkerDied(reason)

    def close(self) -> None:
        kill = getattr(self.proc, "kill_tree", None) or self.proc.kill
        try:
            kill()
        except Exception:  # noqa: BLE001
            pass
