"""The class at a glance, as numbers: score distributions, diagnosed mistakes, failed hidden tests, unwritten
questions, and the health of the grading run.

Every category is read from the row's structured fields (``grading/result_fields.py``: a question's ``mistake``,
``failed`` and ``not_written``, the submission's ``problems``; ``review``, ``grader_error``, ``elapsed_s``), never
from message text, which holds student text: an exception message saying "likely mistake: ..." or "timed out
after" is only text. Messages are read only as examples shown to a person.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from attnlab.grading import result_fields as fields
from attnlab.grading.safe_text import clip

from .load import Names, Submission

FULL_MARKS_SLACK = 1e-9
EXAMPLE_CHARS = 400  # an example message, clipped
TIMED_OUT = (fields.TIMEOUT, fields.CELL_TIMEOUT)  # a call, a cell or the whole submission ran past its limit
CRASHED = (fields.WORKER_CRASH, fields.CELL_LIMIT)  # the worker died or broke its protocol
UNREADABLE = (fields.UNREADABLE, fields.WRONG_LAB, fields.SOURCE_TOO_LARGE)  # refused before a worker ran it


@dataclass
class Distribution:
    """Scores of one question (or the total) over the submissions."""

    name: str
    max_score: float
    values: list[float]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else 0.0

    @property
    def full_share(self) -> float:
        """The share of submissions at full marks (0 when the question is worth nothing)."""
        if not self.values or self.max_score <= 0:
            return 0.0
        return sum(v >= self.max_score - FULL_MARKS_SLACK for v in self.values) / len(self.values)


def distributions(subs: list[Submission]) -> tuple[Distribution, list[Distribution]]:
    """``(total, per question)``; questions in the order of the result that has the most of them."""
    most = max(subs, key=lambda s: len(s.questions), default=None)
    names = list(most.questions) if most else []
    for s in subs:
        names += [q for q in s.questions if q not in names]
    per_q = []
    for q in names:
        maxima = [s.questions[q]["max_score"] for s in subs if q in s.questions]
        per_q.append(Distribution(q, max(maxima), [float(s.questions[q]["score"]) for s in subs
                                                    if q in s.questions]))
    total = Distribution("total", max((s.max_score for s in subs), default=0.0), [s.score for s in subs])
    return total, per_q


@dataclass
class Mistake:
    """A diagnosed mistake: its question, the hint students read, the catalogue entries with that hint, how many
    submissions made it, and one anonymised example of a failed test's message."""

    question: str
    hint: str
    entries: list[str]
    count: int
    example: str


def mistakes(subs: list[Submission], names: Names, mutants=()) -> list[Mistake]:
    """Mistakes ranked by how many submissions made them (then by question and hint); ``mutants``: the lab's
    catalogued mistakes (``mutants.Entry``), whose names are given for each hint."""
    found: dict[tuple[str, str], list[Submission]] = {}
    for s in subs:
        for q, result in s.questions.items():
            mistake = fields.clean_question_fields(result).get(fields.MISTAKE)
            if mistake:
                found.setdefault((q, mistake[fields.HINT]), []).append(s)
    out = []
    for (q, hint), who in found.items():
        entries = [m.name for m in mutants if m.question == q and m.hint == hint]
        first = min(who, key=lambda s: names.alias(s.key))
        failed = [m for m in first.questions[q]["messages"] if m.startswith("failed: ")]
        example = names.scrub(first.key, clip(failed[0], EXAMPLE_CHARS), always=True) if failed else ""
        out.append(Mistake(q, hint, entries, len(who), example))
    return sorted(out, key=lambda m: (-m.count, m.question, m.hint))


def failed_tests(subs: list[Submission]) -> list[tuple[str, str, int]]:
    """``(question, hidden test, submissions failing it)``, most failed first."""
    counts: dict[tuple[str, str], int] = {}
    for s in subs:
        for q, result in s.questions.items():
            for test in set(fields.clean_question_fields(result).get(fields.FAILED, [])):
                counts[(q, test)] = counts.get((q, test), 0) + 1
    return sorted(((q, t, n) for (q, t), n in counts.items()), key=lambda x: (-x[2], x[0], x[1]))


def not_written(subs: list[Submission]) -> list[tuple[str, int]]:
    """``(question, submissions where some part of it says 'not written yet')``, most first."""
    counts: dict[str, int] = {}
    for s in subs:
        for q, result in s.questions.items():
            if fields.clean_question_fields(result).get(fields.NOT_WRITTEN):
                counts[q] = counts.get(q, 0) + 1
    return sorted(counts.items(), key=lambda x: (-x[1], x[0]))


@dataclass
class Health:
    """Rows a person should look at, each as ``(key, one line saying why)``, and the grading time."""

    timed_out: list[tuple[str, str]] = field(default_factory=list)
    crashed: list[tuple[str, str]] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    grader_errors: list[tuple[str, str]] = field(default_factory=list)
    flagged: list[tuple[str, str]] = field(default_factory=list)
    median_s: float = 0.0
    slowest: list[tuple[str, float]] = field(default_factory=list)


def _first(s: Submission, wanted) -> str | None:
    """The message of the submission's first problem in one of the categories ``wanted``, or None."""
    return next((p[fields.MESSAGE] or p[fields.CATEGORY] for p in fields.clean_problems(s.problems)
                 if p[fields.CATEGORY] in wanted), None)


def health(subs: list[Submission], slowest: int = 5) -> Health:
    """Timed out (a call, a cell or the load ran past its limit), crashed the worker (it died or broke the
    protocol), could not be read (never reached a worker: not a notebook, empty, another lab's), grader errors,
    flagged by the course rules (``review``), and the median and slowest grading times."""
    h = Health()
    for s in subs:
        if (why := _first(s, TIMED_OUT)) is not None:
            h.timed_out.append((s.key, clip(why, EXAMPLE_CHARS)))
        if (why := _first(s, CRASHED)) is not None:
            h.crashed.append((s.key, clip(why, EXAMPLE_CHARS)))
        if s.grader_error is not None:
            h.grader_errors.append((s.key, clip(s.grader_error.strip().splitlines()[-1] if s.grader_error.strip()
                                                else "?", EXAMPLE_CHARS)))
        elif (why := _first(s, UNREADABLE)) is not None:  # refused before a worker ran it
            h.unreadable.append((s.key, clip(why, EXAMPLE_CHARS)))
        if s.review:
            h.flagged.append((s.key, clip("; ".join(s.review), EXAMPLE_CHARS)))
    times = [s.elapsed_s for s in subs]
    h.median_s = statistics.median(times) if times else 0.0
    h.slowest = sorted(((s.key, s.elapsed_s) for s in subs), key=lambda x: (-x[1], x[0]))[:slowest]
    return h
