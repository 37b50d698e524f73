"""A graded batch of lab05 submissions, built once per session for the report's tests.

What it holds (``Batch.true_counts`` and the names below are what the tests check against):

- ``reference.ipynb``: the solution notebook;
- ``independent-0.ipynb``, ``independent-1.ipynb``: the student template with one cell of the catalogue's
  variants (correct code written differently: variant 0, resp. 1, of every question), so that they, and the
  reference, are three independent solutions;
- ``copy-renamed.ipynb``: ``independent-1`` with its local variables renamed (a near-copy);
- ``blank-1..3.ipynb``: the student template;
- mutants: one of four bases (the reference, variant sets 0, 1 and 2) with one catalogued mistake appended; a
  mistake made n times sits on n different bases, so no two submissions are the same file. The mistakes chosen
  change the code's tokens, not only its names: a mistake that only renames (``tril`` -> ``triu``) leaves a
  copy of its base that the similarity, which ignores names, rightly scores 1.0, and the near-copy would not be
  the one top pair;
- a hostile notebook (named like an HTML tag) whose error messages (a cell's, a function's) are an HTML and script
  payload, which imports ``os`` (the course rules flag it) and ends the worker's process (a crash);
- ``corrupt.ipynb``: not a notebook.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
LAB = "lab05_self_attention"
TRUE_COUNTS = {"sdpa_no_scale": 4, "simple_softmax_dim_minus2": 3, "padding_off_by_one": 3,
               "sdpa_inverted_mask": 2, "causal_diagonal_excluded": 2, "simple_scaled": 1,
               "sdpa_masked_fill_zero": 1, "classifier_first_token": 1}
RENAMES = {"w": "attn", "scores": "logits_qk", "i": "row", "pooled": "avg_vec", "out": "result", "real": "keep"}
PAYLOAD = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"
HOSTILE_NAME = "<img src=x onerror=alert(1)>.ipynb"
HOSTILE = f'''
import os

def simple_self_attention(x):
    raise ValueError({PAYLOAD!r})

def causal_mask(n, device=None):
    os._exit(3)
'''
IMPORTS = "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


@dataclass
class Batch:
    out: Path  # the grading output folder (gradebook.db inside)
    subs: Path
    true_counts: dict[str, int]
    independent: tuple[str, ...]  # keys of the independent solutions
    near_copies: tuple[str, str]
    hostile: str
    template: Path
    mutants: list


def variants_code(variants, k: int) -> str:
    """Variant ``k`` (modulo their number) of every question, as one cell."""
    by_question: dict[str, list] = {}
    for v in variants:
        by_question.setdefault(v.question, []).append(v)
    return IMPORTS + "\n\n".join(vs[k % len(vs)].source.strip() for vs in by_question.values())


def renamed(code: str) -> str:
    for old, new in RENAMES.items():
        code = re.sub(rf"\b{old}\b", new, code)
    return code


def _write(base: Path, code: str, path: Path) -> None:
    from attnlab.demo import with_entry

    nbformat.write(with_entry(base, SimpleNamespace(source=code)), path)


def make_submissions(subs: Path) -> dict:
    """Write the batch's notebooks into ``subs``; return what the tests need to know about them."""
    from attnlab.grading.core.mutants import load_catalogue

    template = ROOT / "labs" / LAB / f"{LAB}.ipynb"
    solution = ROOT / "solutions" / LAB / f"{LAB}.ipynb"
    mutants, variants = load_catalogue(ROOT / "instructor" / LAB / "catalogue.py")
    subs.mkdir(parents=True)
    shutil.copy(solution, subs / "reference.ipynb")
    for k in (0, 1):
        _write(template, variants_code(variants, k), subs / f"independent-{k}.ipynb")
    _write(template, renamed(variants_code(variants, 1)), subs / "copy-renamed.ipynb")
    for i in (1, 2, 3):
        shutil.copy(template, subs / f"blank-{i}.ipynb")
    bases = [subs / "reference.ipynb", subs / "independent-0.ipynb", subs / "independent-1.ipynb"]
    _write(template, variants_code(variants, 2), subs.parent / "base-2.ipynb")
    bases.append(subs.parent / "base-2.ipynb")
    by_name = {m.name: m for m in mutants}
    for name, count in TRUE_COUNTS.items():
        for b in range(count):
            nb = nbformat.read(bases[b], as_version=4)
            nb.cells.append(nbformat.v4.new_code_cell(by_name[name].source.strip()))
            nbformat.write(nb, subs / f"mutant-{name}-{b}.ipynb")
    _write(template, HOSTILE, subs / HOSTILE_NAME)
    hostile = nbformat.read(subs / HOSTILE_NAME, as_version=4)
    hostile.cells.append(nbformat.v4.new_code_cell(f"raise ValueError({PAYLOAD!r})"))  # a notebook-level error
    nbformat.write(hostile, subs / HOSTILE_NAME)
    (subs / "corrupt.ipynb").write_bytes(b'{"cells": [ not json')
    return {"template": template, "mutants": mutants}


@pytest.fixture(scope="session")
def lab05_batch(tmp_path_factory) -> Batch:
    """The batch, graded through the real grader (``grade_batch``, 2 jobs, threads of this process) into a
    gradebook. The report is under test, not the diagnosis's time cap: the cap (30% of a submission's grading
    time, at least 0.5 s) is raised to 60 s here, so that a loaded machine cannot leave a mistake unnamed and
    change the true counts (it did once: ``sdpa_inverted_mask`` counted 1 of 2 under CI with other work running)."""
    from attnlab.grading import runner
    from attnlab.grading.scale.batch import grade_batch

    root = tmp_path_factory.mktemp("report-batch")
    subs, out = root / "subs", root / "out"
    made = make_submissions(subs)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "diagnosis_budget", lambda grading_s: 60.0)
        summary = grade_batch(ROOT / "autograder" / LAB, subs, out_dir=out, jobs=2, progress=False)
    assert summary.failed == 0, [r["grader_error"] for r in summary.results if r["grader_error"]]
    return Batch(out, subs, dict(TRUE_COUNTS), ("reference.ipynb", "independent-0.ipynb", "independent-1.ipynb"),
                 ("copy-renamed.ipynb", "independent-1.ipynb"), HOSTILE_NAME, made["template"], made["mutants"])
