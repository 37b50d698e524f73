"""Catalogues of buggy (mutants) and correct alternative (variants) implementations.

A lab's ``instructor/<lab>/catalogue.py`` lists ``MUTANTS`` and ``VARIANTS`` as ``Entry`` objects. Each
entry's ``source`` redefines one or more graded names; it is run after the reference code, so the rest
of the reference (a class calling the function, say) picks the entry's definition up. The kit's tests
grade every entry by calling the hidden tests on it through the narrow interface (no notebook, no
worker: fast): a mutant must lose points on ``question``, a variant must keep full marks everywhere.
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


def student_with(reference_code: str, entry: Entry) -> LocalStudent:
    code = f"{reference_code}\n\n# --- catalogue entry: {entry.name}\n{dedent(entry.source)}"
    return LocalStudent.from_code(code, f"<catalogue {entry.name}>")


def grade_entry(suite: HiddenSuite, reference: LocalStudent, reference_code: str, entry: Entry,
                seed: int = 0) -> dict[str, dict]:
    """The hidden-test results of ``entry`` (question -> score, max_score, messages)."""
    return run_suite(suite, student_with(reference_code, entry), reference, seed=seed)


def load_catalogue(path: str | Path) -> tuple[list[Entry], list[Entry]]:
    """Import ``catalogue.py`` and return ``(MUTANTS, VARIANTS)``."""
    path = Path(path)
    module = import_file(path, f"_attnlab_catalogue_{path.parent.name}", what="")
    return list(getattr(module, "MUTANTS", [])), list(getattr(module, "VARIANTS", []))
