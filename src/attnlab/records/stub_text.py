"""The message of an unwritten answer's stub: what the build's stubs raise, and what the public checks, the grader's
diagnosis and nbgrader's stub recognise."""

from __future__ import annotations

NOT_WRITTEN = "not written yet"


def stub_message(name: str) -> str:
    """``"SelfAttention.forward"`` -> ``"SelfAttention.forward: not written yet"``."""
    return f"{name}: {NOT_WRITTEN}"
