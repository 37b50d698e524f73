"""The class at a glance, as numbers: score distributions, diagnosed mistakes, failed hidden tests, unwritten
questions, and the health of the grading run.

Every category is read from the row's structured fields (``records/result_fields.py``), never from message text,
which holds student text (an exception message saying "likely mistake: ..." or "timed out after" is only text):
failed tests from a question's ``failed``; a submission's problems, diagnosed mistakes and unwritten questions
through ``categories`` (the one reader of those); the row's ``elapsed_s``. Messages are read only as examples
shown to a person.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from attnlab.records import result_fields as fields
from attnlab.records.safe_text import clip
from attnlab.records.score_text import format_score
from attnlab.records.student_names import Names

from .categories import CATEGORIES, diagnosed, problems, unwritten
from .load import Submission

FULL_MARKS_SLACK = 1e-9
EXAMPLE_CHARS = 400  # an example message, clipped


@dataclass
class Distribution:
    """Scores of one question (or the total) over the submissions."""

    name: str
    max_score: float
    values: list[float]  # the marked scores only
    awaiting: int = 0  # submissions whose answer (for the total: any answer) awaits marking

    def cells(self) -> list[str]:
        """Mean, median and share at full marks as the tables show them: ``-`` where no answer is marked yet (a
        written question awaiting marking has no score, not 0)."""
        if not self.values:
            return ["-", "-", "-"]
        return [f"{self.mean:.2f}", format_score(self.median), f"{100 * self.full_share:.0f}%"]

    @property
    def label(self) -> str:
        """The name, with ``(N awaiting marking)`` when some answers wait for a person."""
        return self.name + (f" ({self.awaiting} awaiting marking)" if self.awaiting else "")

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
        scores = [s.questions[q]["score"] for s in subs if q in s.questions]
        per_q.append(Distribution(q, max(maxima), [float(v) for v in scores if v is not None],
                                  sum(v is None for v in scores)))
    total = Distribution("total", max((s.max_score for s in subs), default=0.0), [s.score for s in subs],
                         sum(s.awaiting_points > 0 for s in subs))
    return total, per_q


@dataclass
class Mistake:
    """A diagnosed mistake: its question, the hint students read, the catalogue entries with that hint, how many
    submissions made it (``students``: which), and one anonymised example of a failed test's message."""

    question: str
    hint: str
    entries: list[str]
    count: int
    example: str
    students: list[str] = field(default_factory=list)  # the keys of the submissions that made it


def mistakes(subs: list[Submission], names: Names, mutants=()) -> list[Mistake]:
    """Mistakes ranked by how many submissions made them (then by question and hint); ``mutants``: the lab's
    catalogued mistakes (``mutants.Entry``), whose names are given for each hint."""
    found: dict[tuple[str, str], list[Submission]] = {}
    for s in subs:
        for q, hint in diagnosed(s):
            found.setdefault((q, hint), []).append(s)
    out = []
    for (q, hint), who in found.items():
        entries = [m.name for m in mutants if m.question == q and m.hint == hint]
        first = min(who, key=lambda s: names.alias(s.key))
        failed = [m for m in first.questions[q]["messages"] if m.startswith("failed: ")]
        example = names.scrub(first.key, clip(failed[0], EXAMPLE_CHARS), always=True) if failed else ""
        out.append(Mistake(q, hint, entries, len(who), example, sorted(s.key for s in who)))
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
        for q in unwritten(s):
            counts[q] = counts.get(q, 0) + 1
    return sorted(counts.items(), key=lambda x: (-x[1], x[0]))


@dataclass
class Health:
    """Rows a person should look at: ``listed[category]`` (``categories.CATEGORIES``) as ``(key, one line saying
    why)``, and the grading time."""

    listed: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    median_s: float = 0.0
    slowest: list[tuple[str, float]] = field(default_factory=list)

    def of(self, *names: str) -> list[tuple[str, str]]:
        return [row for name in names for row in self.listed.get(name, [])]

    @property
    def timed_out(self) -> list[tuple[str, str]]:
        return self.of("timeout", "cell_timeout")

    @property
    def crashed(self) -> list[tuple[str, str]]:
        return self.of("worker_crash")

    @property
    def unreadable(self) -> list[tuple[str, str]]:
        return self.of("unreadable", "wrong_lab", "source_too_large")

    @property
    def grader_errors(self) -> list[tuple[str, str]]:
        return self.of("grader_error")

    @property
    def flagged(self) -> list[tuple[str, str]]:
        return self.of("rule_breach")


def health(subs: list[Submission], slowest: int = 5) -> Health:
    """Each submission under each of its problems (``categories.problems``: timeouts, cell timeouts and limits,
    crashes, unreadable files, syntax errors, course-rule breaches, grader errors), and the median and slowest
    grading times."""
    h = Health(listed={c: [] for c in CATEGORIES})
    for s in subs:
        for p in problems(s):
            h.listed[p.category].append((s.key, clip(p.text, EXAMPLE_CHARS)))
    times = [s.elapsed_s for s in subs]
    h.median_s = statistics.median(times) if times else 0.0
    h.slowest = sorted(((s.key, s.elapsed_s) for s in subs), key=lambda x: (-x[1], x[0]))[:slowest]
    return h
