"""read_master: a jupytext percent master (or an .ipynb) becomes an nbformat notebook."""

from pathlib import Path

import nbformat
import pytest

from attnlab.buildchain.transforms.read_master import read_master

MASTER = Path(__file__).resolve().parents[1] / "fixtures" / "course" / "instructor" / "lab99_demo" / "lab99_demo.py"


def test_reads_the_percent_master_cell_by_cell():
    nb = read_master(MASTER)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds[:4] == ["markdown", "code", "raw", "markdown"]
    assert len(nb.cells) == 16
    assert nb.cells[0].source == "# Lab 99: a fixture for the build tests"
    # raw cells lose one level of comment: the Otter marker and its YAML config come out as written in Otter
    assert nb.cells[2].source == "# BEGIN QUESTION\nname: double\npoints: 2"
    assert "# BEGIN SOLUTION" in nb.cells[4].source and nb.cells[4].source.startswith("def double(x):")
    # the jupytext tag syntax `# %% tags=["otter_ignore"]` becomes cell metadata
    assert nb.cells[-1].metadata["tags"] == ["otter_ignore"]


def test_accepts_a_str_path_and_an_ipynb(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "m.ipynb"
    nbformat.write(nb, path)
    back = read_master(str(path))
    assert [(c.cell_type, c.source) for c in back.cells] == [("markdown", "# T"), ("code", "x = 1")]


def test_missing_master_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.py"):
        read_master(tmp_path / "nope.py")
