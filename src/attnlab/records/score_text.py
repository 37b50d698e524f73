"""A score as people read it, in every total, table and file: the one owner of its format."""

from __future__ import annotations


def format_score(x: float) -> str:
    """``6.0 -> "6"``, ``2.5 -> "2.5"``, ``0.1 + 0.2 -> "0.3"`` (6 decimals at most)."""
    text = f"{float(x) + 0.0:.6f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text
