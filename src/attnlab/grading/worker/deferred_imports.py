"""Plotting imports deferred to first use, for code that runs while grading (which never draws).

A plain ``import matplotlib.pyplot as plt`` in the reference, in the catalogue's candidates, or in a student's graded
cell binds a stand-in that imports the real module the first time one of its attributes is read. Grading then does
not pay for pyplot's slow import unless graded code really plots (figures: ``benchmarks/README.md``).
"""

from __future__ import annotations

import builtins
import importlib
import sys
import types
from typing import Any

__all__ = ["DEFERRED_IMPORTS", "deferring_import", "deferring_builtins"]

DEFERRED_IMPORTS = ("matplotlib",)


class _Deferred(types.ModuleType):
    """A module not imported yet: the first attribute it does not hold imports the real one and answers from it."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


def deferring_import(name, globals=None, locals=None, fromlist=(), level=0):
    """``__import__`` that answers a plain ``import pkg.mod [as x]`` of a ``DEFERRED_IMPORTS`` package not yet
    imported with stand-ins (``pkg``, holding ``mod``); everything else imports as usual."""
    if level or fromlist or name.partition(".")[0] not in DEFERRED_IMPORTS or name in sys.modules:
        return builtins.__import__(name, globals, locals, fromlist, level)
    parts = name.split(".")
    top = parent = _Deferred(parts[0])
    for i in range(1, len(parts)):
        child = _Deferred(".".join(parts[: i + 1]))
        parent.__dict__[parts[i]] = child
        parent = child
    return top


def deferring_builtins() -> dict[str, Any]:
    """The builtins of a namespace whose plotting imports are deferred (its ``__builtins__``)."""
    return {**vars(builtins), "__import__": deferring_import}
