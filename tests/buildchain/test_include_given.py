"""include_given: a later lab's given cells hold the earlier lab's reference code, taken from its master."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from attnlab.buildchain.transforms.include_given import GIVEN, given_origins, include_given, solution_code
from attnlab.buildchain.transforms.markers import GIVEN_PREFIX
from attnlab.buildchain.transforms.parse_questions import MasterError
from attnlab.buildchain.transforms.read_master import read_master

MASTER = Path(__file__).resolve().parents[1] / "fixtures" / "course" / "instructor" / "lab99_demo" / "lab99_demo.py"


def _nb(*sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# later lab")] + [nbformat.v4.new_code_cell(s) for s in sources]
    return nb


def test_solution_code_has_solutions_without_markers_or_tests_or_experiments():
    code = solution_code(read_master(MASTER))
    assert "result = x * 2" in code and "return x * self.weight" in code
    assert "BEGIN SOLUTION" not in code and "# SOLUTION" not in code
    assert "grader.check" not in code and "an experiment the grader skips" not in code
    assert "double([1, 2]) should be" not in code  # public test cells are not reference code


def test_given_cell_is_replaced_by_the_definitions_in_order():
    nb = _nb("import torch", "# GIVEN from lab99_demo: Scale, double\n", "y = double(torch.ones(2))")
    out = include_given(nb, load_master=lambda lab: read_master(MASTER))
    given = out.cells[2].source
    assert given.startswith("# Given (from lab99_demo): Scale, double.")
    assert given.index("class Scale") < given.index("def double")
    assert "result = x * 2" in given
    namespace = {}
    exec(compile("\n".join(c.source for c in out.cells[1:]), "<test>", "exec"), namespace)  # runs as a whole
    assert namespace["y"].tolist() == [2.0, 2.0]
    assert nb.cells[2].source.startswith("# GIVEN")  # the input is not modified


def test_unknown_name_is_an_error_naming_it():
    nb = _nb("# GIVEN from lab99_demo: triple")
    with pytest.raises(MasterError, match="lab99_demo defines no `triple`"):
        include_given(nb, load_master=lambda lab: read_master(MASTER))


def test_directive_syntax():
    assert GIVEN.match("# GIVEN from lab05_self_attention: a, b").groups() == ("lab05_self_attention", "a, b")
    assert GIVEN.match("#given FROM lab05: a")
    assert not GIVEN.match("# given code below")


def test_cells_without_directive_are_untouched():
    nb = _nb("x = 1", "# Given: nothing special")
    out = include_given(nb, load_master=lambda lab: pytest.fail("no lab should be loaded"))
    assert [c.source for c in out.cells] == [c.source for c in nb.cells]


def test_given_origins_follow_earlier_given_cells_to_the_lab_that_wrote_the_code():
    masters = {"lab05": _nb("def attend(): pass"),
               "lab06": _nb("# GIVEN from lab05: attend", "def split(): pass"),
               "lab07": _nb("# GIVEN from lab06: attend, split", "# GIVEN from lab05: attend")}
    load = masters.__getitem__
    assert given_origins(masters["lab06"], load_master=load) == {"attend": "lab05"}
    assert given_origins(masters["lab07"], load_master=load) == {"attend": "lab05", "split": "lab06"}
    assert given_origins(masters["lab05"], load_master=lambda lab: pytest.fail("nothing to load")) == {}


def test_given_origins_refuse_a_cycle():
    masters = {"a": _nb("# GIVEN from b: f"), "b": _nb("# GIVEN from a: f")}
    with pytest.raises(MasterError, match="given cells form a cycle: a -> b -> a"):
        given_origins(masters["a"], load_master=masters.__getitem__, _seen=("a",))


def test_a_filled_cell_starts_with_the_prefix_the_leak_gates_skip():
    out = include_given(_nb("# GIVEN from lab99_demo: double", "x = 1"), load_master=lambda lab: read_master(MASTER))
    assert [c.source.startswith(GIVEN_PREFIX) for c in out.cells[1:]] == [True, False]
