"""What ``attnlab grade`` prints: the score table (one line per submission, its notes abbreviated to the terminal)
and the ``--json`` rows. A total shows "N points awaiting marking" in the notes while written answers wait for a
person (``written_answers``)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path


def json_rows(results: list[dict]) -> list[dict]:
    """What ``attnlab grade --json`` prints of each result; a file name that is not UTF-8 shows its bytes as
    ``\\xNN`` (``safe_text.readable_name``)."""
    from attnlab.records.safe_text import readable_name

    keep = ("submission", "score", "max_score", "awaiting_points", "questions", "errors", "review", "isolation",
            "elapsed_s")
    return [{k: readable_name(r[k]) if k == "submission" else r[k] for k in keep if k in r} for r in results]


def score_table(results: list[dict], width: int | None = None) -> str:
    """One line per result; the student's file name and messages with control characters escaped; a row with
    items for a person to review (``result["review"]``) says ``needs review`` first. Two files with the same name
    in different folders show as much of their paths as tells them apart (``a/mine.ipynb``, ``b/mine.ipynb``).
    ``width``: the line's length, the notes abbreviated to fit with a visible ``… (+N more)``; default: the
    terminal's width when standard output is one, else no limit (a log keeps every note)."""
    from attnlab.records.safe_text import for_terminal, readable_name
    from attnlab.records.score_text import format_score

    if not results:
        return "no submissions"
    if width is None and sys.stdout.isatty():
        width = shutil.get_terminal_size((120, 24)).columns
    names = [for_terminal(readable_name(n)) for n in distinct_names([r["submission"] for r in results])]
    name_width = max(len(n) for n in names)
    room = None if width is None else max(MIN_NOTES_WIDTH, width - name_width - 28)
    lines = [f"{'submission':<{name_width}}  {'score':>13}  {'seconds':>7}  notes"]
    for name, r in zip(names, results):
        note = abbreviated(for_terminal(_notes(r)), room)
        lines.append(f"{name:<{name_width}}  {r['score']:>6.1f} / {format_score(r['max_score']):<4}"
                     f"  {r.get('elapsed_s', 0):>7.1f}  {note}")
    return "\n".join(lines)


MIN_NOTES_WIDTH = 40


def abbreviated(text: str, room: int | None) -> str:
    """``text`` when it fits in ``room`` characters, else cut after its last whole item (items end at ``, `` or
    ``; ``) that leaves room for ``… (+N more)``, N counting the items left out."""
    if room is None or len(text) <= room:
        return text
    items = re.split(r"(?<=[,;]) ", text)
    kept = ""
    for i, item in enumerate(items):
        candidate = f"{kept} {item}" if kept else item
        rest = len(items) - i - 1
        if len(candidate) + (len(f" … (+{rest} more)") if rest else 0) > room:
            if kept:
                return f"{kept} … (+{rest + 1} more)"
            tail = f" (+{rest} more)" if rest else ""
            return item[:max(1, room - len(tail) - 1)] + "…" + tail
        kept = candidate
    return kept


def distinct_names(paths: list) -> list[str]:
    """Each path's shortest tail (file name, then parent folders) that no other, different path shares."""
    parts = [Path(p).parts or (str(p),) for p in paths]
    depth = [1] * len(parts)
    while True:
        tails = [parts[i][-depth[i]:] for i in range(len(parts))]
        clash = [i for i, t in enumerate(tails) if depth[i] < len(parts[i])
                 and any(tails[j] == t and parts[j] != parts[i] for j in range(len(parts)))]
        if not clash:
            return [str(Path(*t)) for t in tails]
        for i in clash:
            depth[i] += 1


def _notes(result: dict) -> str:
    """The problems' categories (``[timeout, worker crash]``, first, so an abbreviated line keeps them), ``row_notes``
    (``needs review: ...`` first), then the questions that lost points: ``lost: causal_mask 0/2, ...``."""
    from attnlab.grading.outputs.gradebook import row_notes

    lost = [f"{q} {v['score']:g}/{v['max_score']:g}" for q, v in result.get("questions", {}).items()
            if v["score"] is not None and v["score"] < v["max_score"]]  # None: a written answer awaiting marking
    # what went wrong, by category, first: a cut line still shows a timeout or a crash
    found = sorted({p.get("category") for p in result.get("problems") or [] if isinstance(p, dict)} - {None})
    parts = ([f"[{', '.join(c.replace('_', ' ') for c in found)}]"] if found else []) + row_notes(result)
    if lost:
        parts.append("lost: " + ", ".join(lost))
    return "; ".join(parts)
