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

from .api import LocalStudent
from .hidden import HiddenSuite, import_file, run_suite


@dataclass(frozen=True)
class Entry:
    name: str        # short id, e.g. "sdpa_no_scale"
    question: str    # the graded name it breaks (mutant) or reimplements (variant)
    source: str      # Python source redefining one or more graded names
    why: str = ""    # the mistake a student makes, in words (for instructors)
    hint: str = ""   # the same, addressed to the student: "your weights are the softmax over the queries (dim=-2)"


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
