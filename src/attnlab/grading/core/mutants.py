"""Catalogues of buggy (mutants) and correct alternative (variants) implementations.

A lab's ``instructor/<lab>/catalogue.py`` lists ``MUTANTS`` and ``VARIANTS`` as ``Entry`` objects. Each
entry's ``source`` redefines one or more graded names; it is run after the reference code, so the rest
of the reference (a class calling the function, say) picks the entry's definition up. The kit's tests
grade every entry by calling the hidden tests on it through the narrow interface (no notebook, no
worker: fast): a mutant must lose points on ``question``, a variant must keep full marks everywhere (the rule is
``bundle.Bundle.verdict``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

from attnlab.grading.core.hidden import HiddenSuite, import_file, run_suite
from attnlab.grading.worker.api import LocalStudent

# What a mutant should lose of its question: the share of the question's points, (at least, at most). The policy
# behind each tier is written once, in docs/CURRICULUM.md ("Partial credit"); a catalogue entry names a tier or, where
# a question's tests cannot hold a tier (a seed-dependent case, a question of few tests), a range of its own.
ALL = (1.0, 1.0)     # the question is not answered: it never works, or it breaks a course rule (a forbidden call)
MOST = (0.6, 1.0)    # a conceptual mistake: keeps at most the cases where the mistake cannot show
PART = (0.25, 0.8)   # one case of the contract wrong (a mask, padding, an option, train vs eval): keeps the rest
SLIP = (0.01, 0.4)   # a small slip (an edge case, numerical range, an error message): loses a little


@dataclass(frozen=True)
class Entry:
    name: str        # short id, e.g. "sdpa_no_scale"
    question: str    # the graded name it breaks (mutant) or reimplements (variant)
    source: str      # Python source redefining one or more graded names
    why: str = ""    # the mistake a student makes, in words (for instructors)
    hint: str = ""   # the same, addressed to the student: "your weights are the softmax over the queries (dim=-2)"
    loses: tuple[float, float] | None = None  # mutants: the share of its question it should lose (ALL, MOST, ...)


def real_loss(question: dict) -> float:
    """The share of a question's points lost, from its result (``score``, ``max_score``)."""
    return 1.0 - question["score"] / question["max_score"] if question["max_score"] else 0.0


def loss_agrees(entry: Entry, question: dict) -> bool:
    """Whether a mutant's real loss on its question lies in its stated range (a mutant without one never agrees)."""
    if entry.loses is None:
        return False
    low, high = entry.loses
    return low - 1e-9 <= real_loss(question) <= high + 1e-9


def stated(entry: Entry) -> str:
    """A mutant's stated loss in words: "all", "at least 60%", "25% to 80%", or "not stated"."""
    if entry.loses is None:
        return "not stated"
    low, high = entry.loses
    if low == high:
        return "all" if low == 1.0 else f"{low:.0%}"
    return f"at least {low:.0%}" if high == 1.0 else f"{low:.0%} to {high:.0%}"


@dataclass(frozen=True)
class HeldOut:
    """A held-out mistake (``instructor/<lab>/heldout.py``, ``HELDOUT``): written apart from the catalogue (other
    names, other correct code around the bug, sometimes an unrelated correct difference too) and never used by the
    matching; it measures the diagnosis (``benchmarks/diagnosis_coverage.py``). ``expect`` is the name of the
    catalogue mutant whose hint the grader should show, or None for a mistake the catalogue lacks: no name at all."""

    name: str
    question: str
    source: str
    expect: str | None
    why: str = ""


@dataclass(frozen=True)
class Catalogue:
    """A lab's mutants and variants with the reference code they are run after."""

    reference_code: str
    mutants: tuple[Entry, ...]
    variants: tuple[Entry, ...]


class CatalogueError(ValueError):
    """A catalogue (an instructor's file) is broken; the message names the entry and what to fix."""


def student_with(reference_code: str, entry: Entry) -> LocalStudent:
    """The reference with ``entry``'s definitions run after it. Raises ``CatalogueError`` naming the entry when its
    source does not run (an instructor's bug, not a student's)."""
    code = f"{reference_code}\n\n# --- catalogue entry: {entry.name}\n{dedent(entry.source)}"
    try:
        return LocalStudent.from_code(code, f"<catalogue {entry.name}>")
    except Exception as exc:  # noqa: BLE001 - any error of the entry's code: name the entry
        raise CatalogueError(f"catalogue entry {entry.name!r} ({entry.question}) does not run after the reference: "
                             f"{type(exc).__name__}: {exc}; fix its source in the instructor's catalogue, "
                             "then run `attnlab build`") from exc


def grade_entry(suite: HiddenSuite, reference: LocalStudent, reference_code: str, entry: Entry,
                seed: int = 0) -> dict[str, dict]:
    """The hidden-test results of ``entry`` (question -> score, max_score, messages)."""
    return run_suite(suite, student_with(reference_code, entry), reference, seed=seed)


def load_catalogue(path: str | Path) -> tuple[list[Entry], list[Entry]]:
    """Import ``catalogue.py`` and return ``(MUTANTS, VARIANTS)``; ``CatalogueError`` names an entry that is not
    an ``Entry``."""
    path = Path(path)
    module = import_file(path, f"_attnlab_catalogue_{path.parent.name}", what="")
    groups = list(getattr(module, "MUTANTS", [])), list(getattr(module, "VARIANTS", []))
    for group, entries in zip(("MUTANTS", "VARIANTS"), groups):
        for i, entry in enumerate(entries):
            if not isinstance(entry, Entry):
                raise CatalogueError(f"{path}: {group}[{i}] is {entry!r}, not an Entry; write it as "
                                     "Entry(name, question, source, why=..., hint=...)")
    for entry in groups[0]:
        low, high = entry.loses if isinstance(entry.loses, tuple) and len(entry.loses) == 2 else (None, None)
        if not (isinstance(low, (int, float)) and isinstance(high, (int, float)) and 0 < low <= high <= 1):
            raise CatalogueError(f"{path}: mutant {entry.name!r} states loses={entry.loses!r}; state the share of "
                                 f"{entry.question} it should lose: loses=ALL, MOST, PART or SLIP (the tiers of "
                                 "grading/core/mutants.py, the policy in docs/CURRICULUM.md), or a range (low, high) "
                                 "with 0 < low <= high <= 1")
    return groups


def load_heldout(path: str | Path) -> list[HeldOut]:
    """Import ``heldout.py`` and return its ``HELDOUT``; ``CatalogueError`` names an entry that is not a
    ``HeldOut``."""
    path = Path(path)
    module = import_file(path, f"_attnlab_heldout_{path.parent.name}", what="")
    entries = list(getattr(module, "HELDOUT", []))
    for i, entry in enumerate(entries):
        if not isinstance(entry, HeldOut):
            raise CatalogueError(f"{path}: HELDOUT[{i}] is {entry!r}, not a HeldOut; write it as "
                                 "HeldOut(name, question, source, expect=<mutant name or None>, why=...)")
    return entries
