"""The catalogue's entries as candidates for the diagnosis (``diagnose.py``): each entry's code, compiled once.

``mutants.student_with`` compiles the reference and the entry every time it is called. The diagnosis replays 10-30
candidates per failed question, many of them for every submission of a batch, so this module keeps the compiled
code of each entry (per process, the most recent ``CANDIDATES_KEPT``) and runs it in a fresh namespace per
candidate.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from attnlab.grading.core.mutants import Catalogue, Entry, student_with
from attnlab.grading.worker.api import LocalStudent, StudentAPI, trusted_namespace

CANDIDATES_KEPT = 256  # compiled catalogue entries kept per process: a course's catalogues are about 300 entries


class Compiled:
    """Each catalogue entry's code (the reference, then the entry's definitions), compiled once per process.

    ``mutants.student_with`` compiles the reference and the entry every time it is called, a real share of a
    diagnosis that replays tens of candidates (``benchmarks/README.md``). The compiled code is reused; each candidate
    still runs it in a fresh namespace, so no state passes from one replay to the next. The first use of an entry
    goes through ``student_with`` itself (its source, its file name, its ``CatalogueError`` for a broken entry), so
    the two cannot drift apart."""

    def __init__(self, size: int = CANDIDATES_KEPT):
        self.size, self.lock = size, threading.Lock()
        self.code: OrderedDict[tuple[str, str, str, str], tuple[Any, str]] = OrderedDict()

    def candidate(self, catalogue: Catalogue, entry: Entry) -> StudentAPI:
        key = (catalogue.reference_code, entry.name, entry.question, entry.source)
        with self.lock:
            found = self.code.get(key)
            if found is not None:
                self.code.move_to_end(key)
        if found is None:
            student = student_with(catalogue.reference_code, entry)  # CatalogueError naming a broken entry
            compiled = compile(student.code, f"<catalogue {entry.name}>", "exec")
            with self.lock:
                self.code[key] = (compiled, student.code)
                while len(self.code) > self.size:
                    self.code.popitem(last=False)
            return student
        compiled, source = found
        namespace = trusted_namespace()  # as LocalStudent.from_code
        try:
            exec(compiled, namespace)  # noqa: S102 - the instructor's catalogue: trusted code
        except Exception:  # noqa: BLE001 - ran before, fails now: student_with says so, naming the entry
            return student_with(catalogue.reference_code, entry)
        return LocalStudent(namespace, source)


_COMPILED = Compiled()


def compiled_candidate(catalogue: Catalogue, entry: Entry) -> StudentAPI:
    """``student_with(catalogue.reference_code, entry)``, from the process's compiled code after the first time."""
    return _COMPILED.candidate(catalogue, entry)
