"""``ClassReport``: everything the report shows, computed once by ``build.compute``; the page, the summary and the
exports read it (a module of its own, so that they need not import ``build``, which imports them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from attnlab.records.student_names import Names

from . import clusters, similarity, stats
from .load import Submission


@dataclass
class ClassReport:
    """Everything the page, the summary and the exports show, computed once."""

    lab: str
    submissions: list[Submission]
    names: Names
    total: stats.Distribution
    per_question: list[stats.Distribution]
    mistakes: list[stats.Mistake]
    failed_tests: list[tuple[str, str, int]]
    not_written: list[tuple[str, int]]
    health: stats.Health
    pairs: list[similarity.Pair]  # of two submissions, highest first
    threshold: float
    compared: int  # submissions whose graded code could be read and compared
    known_matches: list[similarity.Pair] = field(default_factory=list)  # a submission (a) and a known source (b)
    clusters: list[clusters.Cluster] = field(default_factory=list)
    known: list[str] = field(default_factory=list)  # the known sources compared (their labels)
    feedback: dict[str, str] = field(default_factory=dict)  # key -> link to its feedback file, from the page
    mutants: list = field(default_factory=list)  # the catalogue's entries, which name the diagnosed mistakes
    generated_at: str = ""
    figures: dict[str, str] = field(default_factory=dict)  # name -> PNG data URI
