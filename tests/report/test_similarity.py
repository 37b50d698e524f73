"""copydetect's winnowing over graded code: renamed copies score 1.0, independent lab05 solutions stay below the
threshold, the template is never evidence, and the copied regions map onto the raw code."""

from __future__ import annotations

import itertools

import nbformat

from attnlab.grading.core.mutants import load_catalogue
from attnlab.report import similarity as S

from .conftest import LAB, ROOT, renamed, variants_code

TEMPLATE = ROOT / "labs" / LAB / f"{LAB}.ipynb"
SOLUTION = ROOT / "solutions" / LAB / f"{LAB}.ipynb"


def _independent() -> dict[str, str]:
    """The reference's graded code and two solutions written from the catalogue's variants."""
    sources, _ = S.template_sources(TEMPLATE)
    _, variants = load_catalogue(ROOT / "instructor" / LAB / "catalogue.py")
    return {"reference": S.graded_code(SOLUTION, sources), "variants-0": variants_code(variants, 0),
            "variants-1": variants_code(variants, 1)}


def test_a_copy_with_renamed_variables_scores_one_and_independent_solutions_stay_below_the_threshold():
    _, template_code = S.template_sources(TEMPLATE)
    boilerplate = S.template_hashes(template_code)
    codes = _independent()
    codes["copy"] = renamed(codes["variants-1"])
    assert codes["copy"] != codes["variants-1"]
    prints = S.fingerprints(list(codes.items()), boilerplate)
    pairs = S.similar_pairs(prints, threshold=0.0)
    scores = {frozenset((p.a, p.b)): p.score for p in pairs}
    assert scores[frozenset(("copy", "variants-1"))] == 1.0
    independent = [scores.get(frozenset(ab), 0.0) for ab in itertools.combinations(["reference", "variants-0",
                                                                                     "variants-1"], 2)]
    print(f"independent lab05 solutions: pair scores {[round(s, 2) for s in independent]}")
    assert max(independent) < S.DEFAULT_THRESHOLD / 2
    listed = S.similar_pairs(prints)
    assert [{p.a, p.b} for p in listed] == [{"copy", "variants-1"}]


def test_template_cells_and_template_code_are_left_out(tmp_path):
    sources, template_code = S.template_sources(TEMPLATE)
    assert S.graded_code(TEMPLATE, sources) == ""
    blank = S.fingerprint("blank", S.graded_code(TEMPLATE, sources))
    assert blank.fp is None  # nothing to compare: a blank notebook is in no pair
    nb = nbformat.read(TEMPLATE, as_version=4)
    given = next(c.source for c in nb.cells if c.cell_type == "code" and "def " in c.source)
    fp = S.fingerprint("given", given + "\n", S.template_hashes(template_code))
    assert fp.fp is None  # a template cell changed by a newline still holds only template fingerprints
    assert S.graded_code(tmp_path / "missing.ipynb", sources) is None


def test_regions_highlight_the_copied_code_in_the_raw_source():
    body = "\n".join(f"    total = total + values[{i}] * weights[{i}] - offset_{i}" for i in range(12))
    a = f"def score(values, weights):\n    total = 0\n{body}\n    return total\n"
    b = "def unrelated():\n    return 1\n\n\n" + renamed(a).replace("total", "acc")
    pair = S.similar_pairs([S.fingerprint("a", a), S.fingerprint("b", b)], threshold=0.5)[0]
    assert pair.regions_a and pair.regions_b
    start, end = pair.regions_b[0]
    assert "acc = acc + values" in b[start:end] and "unrelated" not in b[start:end]
    assert all(0 <= s < e <= len(a) for s, e in pair.regions_a)
