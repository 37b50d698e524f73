"""The texts a student notebook holds until its student writes an answer, spelled once: the build writes them, the
public checks, the grader, nbgrader's stub and the marking app read them."""

from __future__ import annotations

# The ending of a code stub's NotImplementedError ("SelfAttention.forward: not written yet").
NOT_WRITTEN = "not written yet"

# The text of a written question's answer cell in every student notebook, nbgrader's stub for it, and what the grader
# and the marking app read as "not answered".
PLACEHOLDER = "_Type your answer here, replacing this text._"


def stub_message(name: str) -> str:
    """``"SelfAttention.forward"`` -> ``"SelfAttention.forward: not written yet"``."""
    return f"{name}: {NOT_WRITTEN}"
