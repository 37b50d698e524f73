"""Is this a submission for this lab? The notebooks the build writes name their lab in their metadata
(``{"attnlab": {"lab": "lab06_multi_head_attention", ...}}``); a notebook that names another lab is refused.

A notebook without that metadata (re-saved by another tool, typed from scratch) is graded as usual: only a
positive statement that it belongs to another lab refuses it.
"""

from __future__ import annotations

import json
import re


def notebook_lab(data: bytes) -> str | None:
    """The lab id a notebook's metadata names, or None (no metadata, not a notebook, unreadable)."""
    try:
        nb = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, ValueError):
        return None
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    lab = meta.get("attnlab", {}).get("lab") if isinstance(meta, dict) and isinstance(meta.get("attnlab"), dict) else None
    return lab if isinstance(lab, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,80}", lab) else None


def short_id(lab: str) -> str:
    """``lab06_multi_head_attention`` -> ``lab06`` (the form the CLI accepts)."""
    m = re.match(r"(lab\d+)_", lab)
    return m.group(1) if m else lab


def wrong_lab_message(data: bytes, lab: str) -> str | None:
    """None when the notebook may be graded as ``lab``; otherwise the error naming both labs."""
    named = notebook_lab(data)
    if named is None or named == lab:
        return None
    # the student reads it first (feedback, Gradescope), the grader second
    return (f"this notebook is {short_id(named)}'s ({named}), not {short_id(lab)}'s ({lab}): "
            f"submit your {short_id(lab)} notebook (graders: `attnlab grade {short_id(named)}` grades this file)")
