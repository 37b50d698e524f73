"""Similarity at class scale: pairs grouped into clusters, and matches to known solutions marked.

A cluster is a connected component of the pairs at or above the threshold: one student in 9 pairs is one
cluster of 10, not 9 rows to read. Known solutions (the lab's reference solution, ``solutions/<lab>/<lab>.ipynb``,
and what the instructor adds with ``attnlab report --known FILE_OR_DIR``: a public solution, last year's
answers) are fingerprinted with the submissions; a submission at or above the threshold with one of them is
marked with its name, and such a submission forms a cluster of its own when it pairs with no other student.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .load import ReportInputError
from .similarity import Pair, graded_code

REFERENCE = "the reference solution"
KNOWN_SUFFIXES = (".ipynb", ".py")


@dataclass
class Cluster:
    """Submissions (shown names, sorted) linked by pairs; ``pairs``: how many; ``top``: their highest score (0 for a
    cluster of one);
    ``known``: ``(member, known source, score)`` of each match to a known source, best first."""

    members: list[str]
    pairs: int = 0
    top: float = 0.0
    known: list[tuple[str, str, float]] = field(default_factory=list)  # (member, known source, score)


def known_sources(reference: Path | None, paths=(), template: set[str] = frozenset()) -> list[tuple[str, str]]:
    """``(label, code)`` of the reference (when the file exists) and of each ``--known`` file, a folder meaning
    every ``.ipynb`` and ``.py`` file under it. The label is what the page shows: ``the reference solution`` or
    ``known: <file name>``. A notebook that cannot be read raises ``ReportInputError`` naming it."""
    out = []
    if reference is not None and Path(reference).is_file():
        code = graded_code(reference, template)
        if code is not None:
            out.append((REFERENCE, code))
    for item in map(Path, paths):
        files = sorted(p for p in item.rglob("*") if p.suffix in KNOWN_SUFFIXES and p.is_file()) if item.is_dir() \
            else [item]
        for f in files:
            code = f.read_text(encoding="utf-8", errors="replace") if f.suffix == ".py" else graded_code(f, template)
            if code is None:
                raise ReportInputError(f"--known {f}: not a notebook the grader can read; pass a .ipynb or .py file")
            out.append((f"known: {f.name}", code))
    return out


def split_known(pairs: list[Pair], known: set[str]) -> tuple[list[Pair], list[Pair]]:
    """``(pairs of two submissions, matches of a submission with a known source)``; a match is oriented so that
    ``a`` is the submission; pairs of two known sources are dropped."""
    students, matches = [], []
    for p in pairs:
        if p.a in known and p.b in known:
            continue
        if p.a in known or p.b in known:
            if p.a in known:
                p = Pair(p.b, p.a, p.score, p.share_b, p.share_a, p.regions_b, p.regions_a, p.code_b, p.code_a)
            matches.append(p)
        else:
            students.append(p)
    return students, matches


def clusters(pairs: list[Pair], matches: list[Pair] = ()) -> list[Cluster]:
    """The connected components of ``pairs`` (submissions), with each member's ``matches`` to known sources; a
    submission that matches a known source and pairs with nobody is a cluster of one. Highest score first, then
    the largest, then by name."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in pairs:
        parent[root(p.a)] = root(p.b)
    for m in matches:
        root(m.a)
    groups: dict[str, Cluster] = {}
    for name in sorted(parent):
        groups.setdefault(root(name), Cluster([])).members.append(name)
    for p in pairs:
        c = groups[root(p.a)]
        c.pairs, c.top = c.pairs + 1, max(c.top, p.score)
    for m in matches:
        groups[root(m.a)].known.append((m.a, m.b, m.score))
    for c in groups.values():
        c.known.sort(key=lambda k: (-k[2], k[0], k[1]))
    # the highest score first, pair or known match; on a tie the cluster whose own pair scores it (a copy between
    # students) before one whose members match a known solution
    return sorted(groups.values(), key=lambda c: (-max(c.top, c.known[0][2] if c.known else 0.0), -c.top,
                                                  -len(c.members), c.members[0]))


def cluster_of(found: list[Cluster]) -> dict[str, int]:
    """Shown name -> its cluster's number (1-based, in ``found``'s order)."""
    return {name: i for i, c in enumerate(found, start=1) for name in c.members}
