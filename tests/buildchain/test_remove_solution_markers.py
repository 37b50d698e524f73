"""remove_solution_markers: the solution branch keeps the code, drops the marker lines."""

import ast

import nbformat

from attnlab.buildchain.transforms.remove_solution_markers import remove_markers_from_source, remove_solution_markers


def test_block_markers_go_the_code_stays_with_its_indentation():
    src = "def f(x):\n    # BEGIN SOLUTION\n    y = x * 2\n    return y\n    # END SOLUTION\nz = 1"
    out = remove_markers_from_source(src)
    assert out == "def f(x):\n    y = x * 2\n    return y\nz = 1"
    ast.parse(out)


def test_solution_suffix_is_removed_from_the_line():
    assert remove_markers_from_source("        return x * self.weight  # SOLUTION") == "        return x * self.weight"
    assert remove_markers_from_source("a = 1 #solution\nb = 2") == "a = 1\nb = 2"


def test_unmarked_code_is_unchanged():
    src = "x = 1  # not a marker\n# a note about the solution below\n"
    assert remove_markers_from_source(src) == src


def test_notebook_level_only_code_cells():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# BEGIN SOLUTION is how masters mark code"),
                nbformat.v4.new_code_cell("# BEGIN SOLUTION\nx = 1\n# END SOLUTION"),
                nbformat.v4.new_raw_cell("y = 2  # SOLUTION")]
    out = remove_solution_markers(nb)
    assert [c.source for c in out.cells] == ["# BEGIN SOLUTION is how masters mark code", "x = 1", "y = 2  # SOLUTION"]
    assert nb.cells[1].source == "# BEGIN SOLUTION\nx = 1\n# END SOLUTION"
