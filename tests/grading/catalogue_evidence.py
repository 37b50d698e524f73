"""Run a lab's reference and catalogue entries with the worker's forbidden-call watch installed in this process
(``call_evidence.install``: run it in a process of its own), each entry's code compiled as a notebook cell, and
print, as JSON, what the grader would mark for review (``call_evidence.Tracker``) or add to a costed question.

    python tests/grading/catalogue_evidence.py AUTOGRADER_DIR [variants|mutants|all] [NAME,NAME...]

(the names, when given, keep only those entries, and the reference).

Used by ``test_call_evidence.py`` (lab05's variants) and to measure every lab's catalogue.
"""

from __future__ import annotations

import json
import sys
from textwrap import dedent

from attnlab.grading.core.bundle import load_bundle
from attnlab.grading.core.hidden import run_suite
from attnlab.grading.worker import call_evidence
from attnlab.grading.worker.api import LocalStudent, trusted_namespace
from attnlab.records import result_fields as fields


class WatchedStudent(LocalStudent):
    """Code run as one notebook cell (``<cell 1>``) in this process; each operation reports, as the worker does,
    the watched calls the code ran, checked by ``call_evidence.checked_uses``."""

    def __init__(self, code: str, watch):
        namespace = trusted_namespace()
        exec(compile(code, "<cell 1>", "exec"), namespace)  # noqa: S102 - the course's own code
        super().__init__(namespace, code, [{"index": 1, "source": code, "where": "the entry's cell"}])
        self.watch, self.call_uses, self.call_uses_refused = tuple(watch), [], 0

    def _op(self, op, **payload):
        call_evidence.begin()
        try:
            return super()._op(op, **payload)
        finally:
            uses, refused = call_evidence.checked_uses(call_evidence.end(), self.cells, self.watch)
            self.call_uses += uses
            self.call_uses_refused += refused


def main(lab_dir: str, kinds: str, only: str = "") -> dict:
    bundle = load_bundle(lab_dir)
    catalogue = bundle.catalogue()
    watch = bundle.suite.watched_calls
    call_evidence.install(watch)
    entries = [("reference", catalogue.reference_code)]
    chosen = {"variants": catalogue.variants, "mutants": catalogue.mutants,
              "all": catalogue.variants + catalogue.mutants}[kinds]
    keep = set(only.split(",")) if only else None
    entries += [(e.name, f"{catalogue.reference_code}\n\n{dedent(e.source)}") for e in chosen
                if keep is None or e.name in keep]
    out = {"watched": list(watch), "entries": len(entries), "flagged": {}, "confirmed": {}}
    for name, code in entries:
        review: list[str] = []
        results = run_suite(bundle.suite, WatchedStudent(code, watch), bundle.reference, seed=0, review=review)
        flagged = [r for r in review if r.startswith(("forbidden call seen running", "the grading process sent"))]
        confirmed = [q for q, r in results.items() if r.get(fields.FORBIDDEN)
                     and any("the grading run saw it" in m for m in r["messages"])]
        if flagged:
            out["flagged"][name] = flagged
        if confirmed:
            out["confirmed"][name] = confirmed
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4])))
