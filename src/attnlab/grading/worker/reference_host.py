"""The reference's callbacks answered in a capped child process of the grader, not in the grader itself.

Under ``attnlab grade`` a question graded "with the reference" runs the reference's code on arguments the student's
code chose (``reference_calls.py``): cheap to send, possibly costly to answer (a zero-size dimension beside a huge
one, sizes passed as numbers, arguments that broadcast to a cube, hundreds of modules). ``ReferenceHost`` (one per
submission, owned by ``RemoteStudent``) answers them in a child forked from the grader on the first callback (it
shares the grader's imports and the reference's functions, so it starts in milliseconds), under the caps of
``ReferenceBudget``: address space (``RLIMIT_AS``, above the child's own at the fork), CPU time per test
(``RLIMIT_CPU``, moved on at each test), and the frame budget of ``wire`` for every answer. The grader only
relays frames, so its own peak stays within the bound ``docs/GRADING.md`` states, whatever is asked.

``ReferenceHost.calls(functions)`` is one test's: ``answer(callback) -> dict`` and ``used`` as ``ReferenceCalls``
(which runs in the child, unchanged). A callback that goes over a cap is refused, the later callbacks of that
test too, the child is stopped (the next test's first callback forks a fresh one), and ``check()`` raises
``ReferenceOverBudget`` naming what was too large and the limit: the test is lost, whatever the student's code
caught. The in-process ``LocalStudent`` binds the reference directly (trusted code, not this route).
"""

from __future__ import annotations

import math
import os
import re
import resource
import select
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from attnlab.grading.worker import wire
from attnlab.grading.worker.callback_answers import cannot_send_text, checked_answer
from attnlab.grading.worker.reference_calls import ReferenceCalls

__all__ = ["ReferenceBudget", "ReferenceHost", "HostedCalls", "ReferenceOverBudget"]

_OUT_OF_MEMORY = 86  # the child's exit status when it ran out of its address space outside the reference's call
_WARM = {"meta": False}  # whether a child of this process needed torch's meta-device imports (see _warm_meta)
_ALLOCATION = re.compile(r"can't allocate memory|not enough memory|DefaultCPUAllocator|std::bad_alloc")


@dataclass(frozen=True)
class ReferenceBudget:
    """What the reference may spend answering one submission's callbacks (``memory_bytes`` above the child's
    address space at the fork, ``cpu_seconds`` per test)."""

    memory_bytes: int = 2**30
    cpu_seconds: int = 10

    def memory_text(self) -> str:
        return f"the memory limit of the reference's process ({self.memory_bytes / 2**20:,.0f} MiB)"

    def cpu_text(self) -> str:
        return f"the CPU-time limit of the reference's process ({self.cpu_seconds} s per test)"


class ReferenceOverBudget(AssertionError):
    """A test whose callbacks went over ``ReferenceBudget``: the test is lost, with this text."""


class _Exceeded(Exception):
    pass


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmSize:")) * 1024


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _warm_meta() -> None:
    """The imports of a first meta-device run (sympy, torch's symbolic shapes: seconds on a loaded machine, see
    ``reference_calls._check_size``), made once in the grader after a child needed them, so that later children
    share them instead of importing them each (one grading process pays them once, as when the grader ran them)."""
    import torch

    x = torch.randn(1, 2, device="meta")
    torch.softmax(0.5 * x @ x.T + x.sum(), dim=-1).masked_fill(x.T > 0, 0.0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[: 1 << 20]):]


def _over_text(name: str, answer: dict, budget: ReferenceBudget) -> str | None:
    """The over-budget text of a refused answer that ran out of the child's memory, else None."""
    if answer.get("ok") is False and (answer.get("type") == "MemoryError"
                                      or _ALLOCATION.search(str(answer.get("error", "")))):
        return f"`{name}` was called on arguments too large for {budget.memory_text()}"
    return None


def _serve(rfd: int, wfd: int, known: dict, budget: ReferenceBudget) -> None:
    """The child's loop: one test's ``ReferenceCalls`` at a time, each answer packed within the frame budget."""
    import torch

    torch.set_num_threads(1)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + budget.memory_bytes,) * 2)
    _, cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)
    source = os.fdopen(rfd, "rb", buffering=0)
    calls, test = ReferenceCalls({}), None
    while True:
        try:
            request = wire.read_frame(source, budget=False)  # the grader's own frames
        except EOFError:
            return
        if request["test"] != test:  # a new test: its own reference modules, its own CPU time
            test, calls = request["test"], ReferenceCalls({n: known[n] for n in request["names"] if n in known})
            soft = math.ceil(_cpu_used()) + budget.cpu_seconds
            resource.setrlimit(resource.RLIMIT_CPU, (soft if cpu_hard < 0 else min(soft, cpu_hard), cpu_hard))
        refused = len(calls.refused)
        answer = checked_answer(calls, request["callback"])  # its tensors checked here, where it is made
        name = str(request["callback"].get("name", "?"))[:60] if isinstance(request["callback"], dict) else "?"
        out = {"answer": answer, "used": sorted(calls.used), "refused": calls.refused[refused:],
               "over": _over_text(name, answer, budget), "meta": "sympy" in sys.modules}
        try:
            data = wire.pack(out, budget=True)
        except wire.WireError as exc:  # over the frame budget: the test is lost
            text = cannot_send_text(name, exc)
            data = wire.pack({"answer": {"ok": False, "error": text, "type": "RuntimeError"}, "used": out["used"],
                              "refused": [], "over": text})
        _write_all(wfd, data)


def _child_main(rfd: int, wfd: int, known: dict, budget: ReferenceBudget) -> None:
    """In the forked child: never returns (``os._exit``: no finalizer of the grader's objects runs here)."""
    status = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        low, high = sorted((rfd, wfd))  # the grader's other pipes (the worker's, the zygote's) are not the child's
        os.closerange(3, low)
        os.closerange(low + 1, high)
        os.closerange(high + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        _serve(rfd, wfd, known, budget)
    except MemoryError:
        status = _OUT_OF_MEMORY
    except BaseException:  # noqa: BLE001 - anything else: the grader reads the pipe's end
        status = 1
    finally:
        os._exit(status)


class _Child:
    """The forked process and the grader's ends of its two pipes."""

    def __init__(self, known: dict, budget: ReferenceBudget):
        down_r, down_w = os.pipe()  # grader -> child
        up_r, up_w = os.pipe()  # child -> grader
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(down_w)
            os.close(up_r)
            _child_main(down_r, up_w, known, budget)
        os.close(down_r)
        os.close(up_w)
        self.pid, self.to_child, self.from_child = pid, down_w, up_r
        os.set_blocking(up_r, False)

    def read(self, deadline: float) -> bytearray | None:
        """One frame's body, None when the child closed its pipe; ``_Exceeded`` past ``deadline``."""
        head = self._read_into(bytearray(8), deadline)
        if head is None:
            return None
        length = int.from_bytes(head, "little")
        if length > wire.MAX_FRAME_BYTES:
            raise _Exceeded(f"sent {length:,} bytes, over the frame limit of {wire.MAX_FRAME_BYTES:,}")
        return self._read_into(bytearray(length), deadline)

    def _read_into(self, buf: bytearray, deadline: float) -> bytearray | None:
        view = memoryview(buf)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Exceeded("ran past the time left to this test")
            if not select.select([self.from_child], [], [], left)[0]:
                continue
            try:
                got = os.readv(self.from_child, [view[: 1 << 20]])
            except BlockingIOError:
                continue
            if not got:
                return None
            view = view[got:]
        return buf

    def status(self) -> int | None:
        """The child's wait status once it has ended (waited for a moment), else None."""
        for _ in range(50):
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.pid = 0
                return status
            time.sleep(0.01)
        return None

    def stop(self) -> None:
        for fd in (self.to_child, self.from_child):
            os.close(fd)
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = 0


class ReferenceHost:
    """One submission's reference child (forked on the first callback, again after one that went over a cap or
    when a test binds a function the child was forked without). ``time_left()``: the seconds the grader may wait
    for an answer (``RemoteStudent``: the limit in force)."""

    def __init__(self, time_left: Callable[[], float] | None = None, budget: ReferenceBudget | None = None):
        self.time_left = time_left or (lambda: 60.0)
        self.budget = budget or ReferenceBudget()
        self._known: dict[str, Callable] = {}  # every function bound in this submission, by name
        self._child: _Child | None = None
        self._tests = 0
        self.forks = 0  # children started (tests, benchmarks)

    def calls(self, functions: dict[str, Callable]) -> "HostedCalls":
        """One test's callbacks for ``functions`` (name -> the reference's function or class)."""
        self._tests += 1
        for name, fn in functions.items():
            if self._known.get(name) is not fn:
                self._known[name] = fn
                self.stop()  # the running child was forked without it
        return HostedCalls(self, self._tests, functions)

    def ask(self, test: int, names: list[str], message: Any) -> dict:
        """The child's reply to one callback of test ``test``; ``_Exceeded`` when it went over a cap."""
        if self._child is None:
            if _WARM["meta"] and "sympy" not in sys.modules:
                _warm_meta()
            self._child = _Child(self._known, self.budget)
            self.forks += 1
        child = self._child
        try:
            _write_all(child.to_child, wire.pack({"test": test, "names": names, "callback": message}))
            body = child.read(time.monotonic() + max(0.0, self.time_left()))
        except BrokenPipeError:
            body = None
        except _Exceeded:
            self.stop()
            raise
        if body is None:
            raise _Exceeded(self._death_text(child))
        try:
            reply = wire.unpack_body(body)
        except wire.WireError as exc:
            self.stop()
            raise _Exceeded(f"got a malformed answer from the reference ({exc})") from None
        if not (isinstance(reply, dict) and isinstance(reply.get("answer"), dict)):
            self.stop()
            raise _Exceeded("got a malformed answer from the reference")
        _WARM["meta"] = _WARM["meta"] or reply.get("meta") is True
        return reply

    def _death_text(self, child: _Child) -> str:
        status = child.status()
        self.stop()
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGXCPU, signal.SIGKILL):
            return f"went over {self.budget.cpu_text()}"
        if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == _OUT_OF_MEMORY:
            return f"went over {self.budget.memory_text()}"
        return f"stopped the reference's process (wait status {status})"

    def stop(self) -> None:
        if self._child is not None:
            self._child.stop()
            self._child = None

    close = stop


class HostedCalls:
    """One test's callbacks, answered by the host's child: the interface of ``ReferenceCalls`` (``functions``,
    ``used``, ``refused``, ``answer``) and ``over_budget``, the text of the cap this test went over (or None)."""

    def __init__(self, host: ReferenceHost, test: int, functions: dict[str, Callable]):
        self.host, self.test, self.functions = host, test, dict(functions)
        self.used: set[str] = set()
        self.refused: list[str] = []
        self.over_budget: str | None = None

    def answer(self, message: Any) -> dict:
        """The reply to one callback frame's body, as ``ReferenceCalls.answer`` gives it (computed in the child)."""
        if self.over_budget is None:
            try:
                reply = self.host.ask(self.test, list(self.functions), message)
            except _Exceeded as exc:
                name = message.get("name") if isinstance(message, dict) else None
                self.over_budget = f"calling `{str(name)[:60]}` {exc}"
            else:
                self.used.update(n for n in reply.get("used", ()) if n in self.functions)
                self.refused += [str(r) for r in reply.get("refused", ())]
                if reply.get("over"):
                    self.over_budget = str(reply["over"])
                    self.host.stop()  # a fresh child for the next test
                else:
                    return reply["answer"]
        text = f"{self.over_budget}: refused (this test is lost)"
        self.refused.append(text)
        return {"ok": False, "error": text, "type": "RuntimeError"}

    def check(self) -> None:
        """Raise ``ReferenceOverBudget`` when this test went over a cap (called as the test ends)."""
        if self.over_budget is not None:
            raise ReferenceOverBudget(f"{self.over_budget}; the test is lost (call the reference on smaller inputs)")
