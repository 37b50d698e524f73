"""The worker: runs a submission's code and answers narrow-interface calls.

Started by the grader as ``python -m attnlab.grading.worker.process`` (inside the sandbox). Protocol: frames of
``attnlab.grading.worker.wire`` on the inherited stdin/stdout; the student's own stdin, stdout and stderr are
``/dev/null``, so printing (or reading ``input()``) cannot corrupt or forge the protocol stream.

Requests: ``{"op": "load", "cells": [{"index": i, "source": str}], "cell_timeout": s}`` first (answered by
``{"progress": i}`` before each cell, then ``{"errors": [the first 20 cell errors], "failed": count}``, each error
``{"index", "line", "error"}``; its ``watch``: the lab's forbidden callables, wrapped before the cells run, see
``call_evidence``), then ``{"op": <Executor op>, "payload": {...}}``. Replies: ``{"ok": True, "value": ...}`` or
``{"ok": False, "error": str}``, each with the request's ``"id"`` and ``"evidence"``: the watched calls the student's
code ran during that request (``call_evidence.end``). While a request runs, a reference proxy (``reference_proxy.py``,
``module_proxy.py``) may send ``{"callback": {...}, "id": n}`` and read the grader's answer (with the same id) before
the reply, whose ``"shortfall"`` names what a proxy could not give the student's code
(``reference_proxy.fell_short``). Nothing the worker sends is trusted beyond being data.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback

from attnlab import settings


class CellTimeout(BaseException):
    """Raised inside a cell that ran past its time limit, so that a plain slow cell stops without a restart. The
    limit itself is the grader's (``deadlines.py``): a cell that catches this, or masks or replaces the signal,
    is killed with its worker from outside a moment later."""


def _on_alarm(signum, frame):  # pragma: no cover - timing dependent
    raise CellTimeout()


class _Stub:
    """Stands in for the notebook's Otter ``grader`` and IPython's shell while grading."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def _prepare_namespace() -> dict:
    """The namespace the graded cells run in: plotting imports deferred to first use (``deferred_imports``: the
    worker does not pay for pyplot unless graded code draws), the notebook's Otter and IPython objects stubbed."""
    import torch

    from attnlab.grading.worker.deferred_imports import deferring_builtins

    return {
        "__name__": "__main__",
        "__builtins__": deferring_builtins(),
        "get_ipython": lambda: _Stub(),
        "display": lambda *a, **k: None,
        "grader": _Stub(),
        "device": torch.device("cpu"),
    }


def _line_in(exc: BaseException, filename: str) -> int | None:
    """The line of cell ``filename`` where ``exc`` happened: a syntax error's line, else the deepest frame there."""
    if isinstance(exc, SyntaxError) and exc.filename == filename:
        return exc.lineno
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


def run_cells(cells: list[dict], namespace: dict, cell_timeout: float, started=lambda index: None) -> list[dict]:
    """Execute each cell; an error in one cell is recorded and the next cell still runs.

    ``started(index)`` is called before each cell, so the grader knows which cell killed the process. An error is
    ``{"index", "line", "error"}``: the line inside the cell, and the error without the cell (the grader names
    the cell from its own copy of the notebook: ``notebook_code.cell_error_text``).
    """
    import linecache

    from attnlab.grading.source.notebook_code import python_source

    report = []
    signal.signal(signal.SIGALRM, _on_alarm)
    for cell in cells:
        index, source = int(cell["index"]), str(cell["source"])
        filename = f"<cell {index}>"
        code = python_source(source)
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        entry = {"index": index, "ok": True, "error": None, "line": None}
        started(index)
        try:
            signal.setitimer(signal.ITIMER_REAL, cell_timeout)
            exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - this process is the sandbox
        except CellTimeout:
            entry.update(ok=False, error=f"did not finish within {cell_timeout:g} s")
        except SystemExit as exc:
            entry.update(ok=False, error=f"called exit({exc.code!r}); the call was ignored")
        except BaseException as exc:  # noqa: BLE001 - student code may raise anything
            text = exc.msg if isinstance(exc, SyntaxError) and exc.filename == filename else exc  # no "<cell 3>"
            entry.update(ok=False, error=f"{type(exc).__name__}: {text}"[:500], line=_line_in(exc, filename))
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        report.append(entry)
    return report


_CALLBACKS = [0]  # the id of the latest callback: the grader's answer must carry it


def _callback(message: dict, proto_in, proto_out):
    """Ask the grader in the middle of a request (a reference proxy's call) and return its answer; an answer with
    another id (the conversation out of step) is refused, never taken for this one."""
    from attnlab.grading.worker.reference_proxy import fell_short
    from attnlab.grading.worker.wire import WireError, pack, read_frame

    _CALLBACKS[0] = ident = _CALLBACKS[0] + 1
    try:
        data = pack({"callback": message, "id": ident}, budget=True)
    except WireError as exc:
        fell_short(str(message.get("name")), f"your code gives it a value the grader cannot be sent ({exc})")
        raise TypeError(f"`{message.get('name')}` was given a value that cannot be sent to the grader: {exc}") from None
    proto_out.write(data)
    answer = read_frame(proto_in, budget=False)
    if not isinstance(answer, dict) or answer.get("id") != ident:
        got = answer.get("id") if isinstance(answer, dict) else None
        return {"ok": False, "type": "RuntimeError", "error": f"the grader's answer to callback {ident} carried the "
                f"id {got!r:.40}: the conversation is out of step, refused"}
    return answer


def main() -> int:
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault(settings.FAST, "1")
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdin = open(os.devnull)  # noqa: SIM115
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115

    from attnlab.grading.worker import call_evidence
    from attnlab.grading.worker.executor import Executor, StudentError
    from attnlab.grading.worker.module_proxy import proxy_class
    from attnlab.grading.worker.reference_proxy import ReferenceProxy, take_shortfalls
    from attnlab.grading.worker.wire import WireError, pack, read_frame
    from attnlab.records.safe_text import MAX_MESSAGES

    namespace = _prepare_namespace()
    executor = Executor(namespace)
    def callback(message):
        return _callback(message, proto_in, proto_out)

    executor.proxy = lambda name, module=False: (proxy_class if module else ReferenceProxy)(name, callback)

    def reply(message):
        try:
            data = pack(message, budget=True)
        except WireError as exc:
            data = pack({"ok": False, "id": message.get("id"), "error": f"returned a value that cannot be graded: {exc}",
                         "evidence": message.get("evidence", [])})
        proto_out.write(data)

    while True:
        try:
            request = read_frame(proto_in, budget=False)  # the grader's own requests
        except EOFError:
            return 0
        op, ident = request.get("op"), request.get("id")
        if op == "load":
            call_evidence.install(request.get("watch") or ())  # trusted code, before the student's
            cells = run_cells(request["cells"], namespace, float(request.get("cell_timeout", 60)),
                              started=lambda index: proto_out.write(pack({"progress": index})))
            errors = [{k: c[k] for k in ("index", "line", "error")} for c in cells if not c["ok"]]
            reply({"ok": True, "id": ident, "value": {"errors": errors[:MAX_MESSAGES], "failed": len(errors)}})
            continue
        call_evidence.begin(guard=request.get("guard") is not False)
        take_shortfalls()
        try:
            answer = {"ok": True, "value": executor.dispatch(op, request.get("payload", {}))}
        except StudentError as exc:
            answer = {"ok": False, "error": str(exc)}
        except SystemExit as exc:
            answer = {"ok": False, "error": f"your code called exit({exc.code!r})"}
        except BaseException as exc:  # noqa: BLE001
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
        shortfall = take_shortfalls()
        reply({**answer, "id": ident, "evidence": call_evidence.end(), **({"shortfall": shortfall} if shortfall else {})})


if __name__ == "__main__":
    sys.exit(main())
