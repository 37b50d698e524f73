"""The grader's own work on a submission's source is bounded: hostile source (5 MB of code, a 512 KiB cell, nesting
thousands deep, a hundred thousand tiny cells) is refused before anything is parsed, with a row that says why; and
the largest source the limits accept keeps the grader within its documented bound (160 MiB above its baseline,
docs/GRADING.md), measured as the growth of VmHWM in a fresh grading process (benchmarks/hostile_source.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import benchmark_scripts
import pytest

from attnlab.grading.source import notebook_code as nc

ROOT = Path(__file__).resolve().parents[2]
LAB_DIR = ROOT / "autograder" / "lab05_self_attention"


def _benchmark():
    return benchmark_scripts.load("hostile_source")


def _cells(sources: list[str]) -> dict:
    return {"cells": [{"cell_type": "code", "metadata": {}, "source": s} for s in sources]}


@pytest.mark.parametrize("sources, says", [
    (["x = 1\n" * 6_000], "has 36,000 characters, over the limit of 32,768"),
    (["x = '" + "y" * 30_000 + "'\n"] * 5, "the graded cells have 150,035 characters or more, over the limit of "
                                          "131,072"),
    (["a\n" * 2_000] * 3, "the graded cells have 6,003 lines or more, over the limit of 5,000"),
    (["a\n"] * 2_001, "the notebook has 2,001 cells, over the limit of 2,000"),
])
def test_sizes_past_a_limit_are_refused_before_any_parse(sources, says):
    with pytest.raises(nc.SourceTooLarge, match="too large for the grader") as caught:
        nc.cells_from_notebook(_cells(sources))
    assert says in str(caught.value) and "submit again" in str(caught.value)


def test_a_cell_past_the_size_limit_is_named_without_being_parsed(monkeypatch):
    monkeypatch.setattr(nc.ast, "parse", lambda *a, **k: pytest.fail("parsed"))
    with pytest.raises(nc.SourceTooLarge) as caught:
        nc.cells_from_notebook(_cells(["grader.check('q')\n" + "x = 1\n" * 10_000]))
    assert caught.value.cell == "the cell starting `grader.check('q')`"


@pytest.mark.parametrize("source, says", [
    ("x = " + "-" * 2000 + "1\n", "nests its code 2,003 levels deep, over the limit of 100"),
    ("x = " + "-" * 9000 + "1\n", "is nested too deeply for Python's parser"),
    ("x = [" + "a," * 16_000 + "]\n", "the graded cells have 32,00"),
])
def test_nesting_and_syntax_nodes_past_a_limit_are_refused(source, says):
    cells = nc.cells_from_notebook(_cells([source]))
    with pytest.raises(nc.SourceTooLarge) as caught:
        nc.joined_source(cells)
    assert says in str(caught.value)


def test_json_values_are_counted_before_the_file_is_parsed(tmp_path):
    path = tmp_path / "many.ipynb"
    path.write_text(json.dumps({"cells": [{}] * 600_000}))
    with pytest.raises(nc.SourceTooLarge, match="1,200,00[0-9] commas, brackets and braces.* Clear the outputs"):
        nc.read_cells(path)


def test_the_largest_honest_notebooks_are_well_inside_the_limits():
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        code = nc.joined_source(nc.read_cells(path))
        assert 4 * len(code) < nc.MAX_CODE_CHARS, path


@pytest.mark.slow
@pytest.mark.parametrize("case", ["5mb_source", "512k_cell", "5mb_in_32k_cells", "deep_nesting", "long_chain",
                                  "tiny_cells", "at_the_limits"])
def test_hostile_source_keeps_the_grader_within_its_bound_and_gets_a_row_that_says_why(case):
    bench = _benchmark()
    r = bench.measure(case, LAB_DIR, env={**os.environ, "ATTNLAB_SANDBOX": "off"})
    print(f"{case}: +{r['growth_mib']:.1f} MiB, {r['seconds']:.1f} s (loaded)")
    assert r["growth_mib"] < bench.BOUND_MIB and r["seconds"] < 120, r
    if case == "at_the_limits":  # accepted: graded as usual, the filler cells run
        assert r["score"] == 30 and r["problems"] == [], r
        return
    (problem,) = r["problems"]
    assert r["score"] == 0 and problem["category"] == "source_too_large", r
    assert "too large for the grader" in problem["message"] and problem["message"] in r["errors"], r
