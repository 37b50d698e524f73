"""The grader's side of the conversation about the reference, around ``ReferenceCalls.answer``: every callback frame
the worker sends (``{"callback": {...}, "id": n}``) gets exactly one answer frame with the same id, validated before
it is sent, and what the worker reports it could not do with a proxy (``shortfall``) is checked before the grader
believes it.

- ``answer_frame``: the packed answer to one callback frame. The answer's tensors must be plain CPU tensors of a
  dtype that travels (``wire.TENSOR_DTYPES``), and the packed frame within the budget the worker's own frames respect
  (``wire.pack(..., budget=True)``); any exception while answering or packing (a meta-device tensor, an answer over
  ``MAX_FRAME_BYTES``) becomes a refusal of that one callback (``{"ok": False, "id": n, ...}``), never an exception
  out of the request loop, so that the conversation cannot shift.
- ``checked_shortfalls``: the worker's report that student code needed something a proxy cannot give (an attribute
  the reference's module does not hold, a sub-layer's own forward, arguments the reference does not take): only the
  names bound for the test, bounded texts. ``grading/core/hidden.py`` then grades the question on the student's own
  version of that name.
"""

from __future__ import annotations

from typing import Any

import torch

from attnlab.grading.worker import wire
from attnlab.records.safe_text import clip

__all__ = ["answer_frame", "binding", "cannot_send_text", "checked_answer", "checked_shortfalls", "MAX_SHORTFALLS"]

MAX_SHORTFALLS = 8  # names reported per reply (a test binds a few)
_MAX_REASON = 300


def binding(functions: dict) -> dict:
    """The ``bind_reference`` request for ``functions``: the names, and which of them are module classes (bound to a
    ``module_proxy`` class in the worker, the others to a ``ReferenceProxy``)."""
    from attnlab.grading.worker.module_calls import is_module_class

    return {"names": list(functions), "modules": [n for n, fn in functions.items() if is_module_class(fn)]}


def _refusal(ident: int | None, text: str) -> bytes:
    return wire.pack({"ok": False, "id": ident, "error": clip(text, 500), "type": "RuntimeError"})


def _check_tensors(value: Any, depth: int = 0) -> None:
    """Raise ``ValueError`` for a tensor in ``value`` that must not be sent: another device (a meta tensor has no
    data; a GPU tensor would be copied unasked), another layout, a dtype the wire does not carry."""
    if depth > wire.MAX_DEPTH:
        return  # wire.pack refuses it
    if isinstance(value, torch.Tensor):
        if value.device.type != "cpu" or value.layout != torch.strided or value.dtype not in wire.TENSOR_DTYPES:
            raise ValueError(f"a tensor of the answer is on the {value.device} device ({value.layout}, {value.dtype}); only "
                             "dense CPU tensors of the dtypes the wire carries are sent")
    elif isinstance(value, (list, tuple)):
        for item in value:
            _check_tensors(item, depth + 1)
    elif isinstance(value, dict):
        for item in value.values():
            _check_tensors(item, depth + 1)


def cannot_send_text(name: str, exc: BaseException) -> str:
    """The refusal's text when the reference's answer to ``name`` cannot be sent (a check or the packing failed)."""
    return f"the grader could not send the reference `{name[:60]}`'s answer ({type(exc).__name__}: {exc}): refused"


def _callback_name(message: Any) -> str:
    return message["name"] if isinstance(message, dict) and isinstance(message.get("name"), str) else "?"


def _refused(calls, message: Any, exc: BaseException) -> str:
    """The refusal's text for ``message``, recorded in ``calls.refused`` where it keeps a list."""
    text = cannot_send_text(_callback_name(message), exc)
    if isinstance(getattr(calls, "refused", None), list):
        calls.refused.append(text)
    return text


def checked_answer(calls, message: Any) -> dict:
    """``calls.answer(message)`` (a ``ReferenceCalls``' reply) with its tensors checked, or a refusal in its place:
    never raises. Run where the reference runs (``reference_host``'s child) and again by the grader."""
    try:
        reply = calls.answer(message)
        if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
            raise ValueError("the answer is not a reply")
        _check_tensors([reply.get("value"), reply.get("generators")])
        return reply
    except Exception as exc:  # noqa: BLE001 - one refused callback, never a shifted conversation
        return {"ok": False, "error": clip(_refused(calls, message, exc), 500), "type": "RuntimeError"}


def answer_frame(calls, frame: Any) -> bytes:
    """The frame answering the worker's callback ``frame`` with ``calls`` (a ``ReferenceCalls`` or ``HostedCalls``):
    the checked reply with the callback's id, packed within the frame budget, or a refusal with that id. Never
    raises."""
    ident = frame.get("id") if isinstance(frame, dict) and type(frame.get("id")) is int else None
    message = frame.get("callback") if isinstance(frame, dict) else None
    reply = checked_answer(calls, message)
    try:
        return wire.pack({**reply, "id": ident}, budget=True)
    except Exception as exc:  # noqa: BLE001 - one refused callback, never a shifted conversation
        return _refusal(ident, _refused(calls, message, exc))


def checked_shortfalls(raw: Any, bound) -> dict[str, str]:
    """The shortfalls a reply reports (``{name: reason}``), kept only for names in ``bound``, texts bounded."""
    if not isinstance(raw, dict):
        return {}
    return {name: clip(reason, _MAX_REASON) for name, reason in list(raw.items())[:MAX_SHORTFALLS]
            if isinstance(name, str) and name in bound and isinstance(reason, str)}
