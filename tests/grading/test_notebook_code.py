"""notebook_code: which code of a submission the grader runs, and clear refusals of files that are not notebooks."""

import json
import os

import nbformat
import pytest

from attnlab.grading.source.notebook_code import (
    MAX_NOTEBOOK_BYTES,
    CodeCell,
    SubmissionError,
    cell_error_text,
    cells_from_notebook,
    describe_cell,
    describe_location,
    joined_source,
    name_cells,
    python_source,
    read_cells,
)


def write_nb(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nbformat.write(nb, path)
    return path


def code(src, tags=None):
    cell = nbformat.v4.new_code_cell(src)
    if tags:
        cell.metadata["tags"] = tags
    return cell


def test_graded_cells_in_order_with_notebook_indices(tmp_path):
    path = write_nb(tmp_path / "s.ipynb", [
        nbformat.v4.new_markdown_cell("# Lab"),
        code("from attnlab.labkit import start_lab\ngrader, device = start_lab('lab99_demo')", ["attnlab_setup"]),
        code("import torch"),
        code("def double(x):\n    return 2 * x"),
        code('grader.check("double")'),
        code("grader.check('double')\ngrader.check_all()  # two checks"),
        code("train_for_hours()", ["otter_ignore", "other"]),
        code("   \n\n"),
        nbformat.v4.new_raw_cell("raw = 1"),
        code("grader.check('double')\nprint('mixed cells run')"),
        code("x = 1", ["keep_me"]),
    ])
    cells = read_cells(path)
    assert cells == [CodeCell(2, "import torch", "Lab"), CodeCell(3, "def double(x):\n    return 2 * x", "Lab"),
                     CodeCell(9, "grader.check('double')\nprint('mixed cells run')", "Lab"),
                     CodeCell(10, "x = 1", "Lab")]


def test_list_sources_are_joined(tmp_path):
    path = tmp_path / "s.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": ["a = 1\n", "b = 2"]}]}))
    assert read_cells(path) == [CodeCell(0, "a = 1\nb = 2")]


def test_empty_file(tmp_path):
    (tmp_path / "e.ipynb").write_bytes(b"")
    with pytest.raises(SubmissionError, match="the submitted file is empty; submit your saved .ipynb notebook"):
        read_cells(tmp_path / "e.ipynb")


def test_missing_file(tmp_path):
    with pytest.raises(SubmissionError, match="cannot read the submission: No such file or directory"):
        read_cells(tmp_path / "nope.ipynb")


@pytest.mark.parametrize("data", [b"\x00\x01\x02\xff\xfe garbage", b"\x89PNG\r\n\x1a\n", "not json at all".encode(),
                                  b'{"cells": [', "é".encode("latin-1")])
def test_binary_garbage_and_broken_json(tmp_path, data):
    (tmp_path / "g.ipynb").write_bytes(data)
    with pytest.raises(SubmissionError, match="not a Jupyter notebook"):
        read_cells(tmp_path / "g.ipynb")


@pytest.mark.parametrize("doc", [[1, 2], {"cells": "x"}, {"nbformat": 4}, "a string", 42, None])
def test_json_that_is_not_a_notebook(tmp_path, doc):
    (tmp_path / "j.ipynb").write_text(json.dumps(doc))
    with pytest.raises(SubmissionError, match="JSON but not a Jupyter notebook"):
        read_cells(tmp_path / "j.ipynb")


def test_odd_cells_are_skipped_or_refused_without_crashing():
    assert cells_from_notebook({"cells": [1, "x", None, {"cell_type": "code"},
                                          {"cell_type": "code", "metadata": "bad", "source": "a = 1"},
                                          {"cell_type": "code", "metadata": {"tags": "otter_ignore"}, "source": "b = 1"},
                                          {"cell_type": "code", "metadata": {"tags": [1, None]}, "source": "c = 1"}]}) == [
        CodeCell(4, "a = 1"), CodeCell(5, "b = 1"), CodeCell(6, "c = 1")]
    with pytest.raises(SubmissionError, match="neither text nor a list of lines"):
        cells_from_notebook({"cells": [{"cell_type": "code", "source": 5}]})


def test_huge_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.ipynb"
    with open(path, "wb") as f:  # sparse: no disk space used, nothing to parse
        f.truncate(MAX_NOTEBOOK_BYTES + 1)
    with pytest.raises(SubmissionError, match=r"the submitted file is 50 MiB, over the 50 MiB limit; clear the outputs"):
        read_cells(path)
    assert os.path.getsize(path) == MAX_NOTEBOOK_BYTES + 1


def test_magics_are_transformed():
    out = python_source("%matplotlib inline\n!pip install foo\nx = 1\n")
    assert "get_ipython().run_line_magic('matplotlib', 'inline')" in out
    assert "get_ipython().system('pip install foo')" in out
    assert out.rstrip().endswith("x = 1")
    compile(out, "<cell>", "exec")
    assert python_source("y = 2\n") == "y = 2\n"


def test_joined_source_leaves_out_cells_that_do_not_parse():
    cells = [CodeCell(0, "a = 1"), CodeCell(1, "def f(:\n    pass"), CodeCell(2, "%time b = 2"),
             CodeCell(3, "def g():\n    return a")]
    text = joined_source(cells)
    assert "def f(" not in text
    assert text.startswith("a = 1") and "def g():\n    return a" in text
    assert "get_ipython().run_line_magic('time', 'b = 2')" in text
    compile(text, "<all>", "exec")
    assert joined_source([]) == ""


def test_a_cell_is_named_by_what_it_defines_or_its_first_line_and_heading():
    assert describe_cell("import torch\n\nclass A:\n    pass\ndef f(x):\n    return x") == "the cell defining `A`, `f`"
    assert describe_cell("def a(): pass\ndef b(): pass\ndef c(): pass\ndef d(): pass") == \
        "the cell defining `a`, `b`, `c` and 1 more"
    assert describe_cell("\n# try it\nout = attention(q, k, v)", "3. Scaled dot-product attention") == \
        'the cell starting `# try it` under "3. Scaled dot-product attention"'
    assert describe_cell("x = `1`\t" + "y" * 80) == "the cell starting `x = '1' " + "y" * 39 + "...`"
    assert describe_cell("def broken(:\n    pass") == "the cell starting `def broken(:`"  # does not parse
    assert describe_cell("def f(): pass\ndef f(): return 1") == "the cell defining `f`"  # named once


def test_cells_remember_the_heading_they_are_under(tmp_path):
    path = write_nb(tmp_path / "s.ipynb", [
        nbformat.v4.new_markdown_cell("# Lab 5\n\n## 1. Self-attention without parameters\n\ntext"),
        code("a = 1"), nbformat.v4.new_markdown_cell("Some prose, no heading."), code("b = 2"),
        nbformat.v4.new_markdown_cell("## 2. Why scale?"), code("c = 3")])
    assert [c.section for c in read_cells(path)] == ["1. Self-attention without parameters"] * 2 + ["2. Why scale?"]


def test_a_worker_error_report_is_named_by_the_graders_description():
    cells = [{"index": 4, "source": "def f(x):\n    return x"}, {"index": 9, "source": "y = f(1)", "where": "W"}]
    assert cell_error_text(cells, {"index": 4, "line": 2, "error": "E"}) == "the cell defining `f`, line 2: E"
    assert cell_error_text(cells, {"index": 9, "line": None, "error": "E"}) == "W: E"
    assert cell_error_text(cells, {"index": 9, "line": 5, "error": "E"}) == "W: E"  # past the cell's end
    for bad in ["cell 4 raised E", {"index": 3, "line": 1, "error": "E"}, {"index": 4, "line": "1", "error": "E"},
                {"index": 4, "line": 1, "error": 5}, {"index": 4, "line": 1, "error": "E", "where": "forged"},
                {"index": True, "line": 1, "error": "E"}]:
        assert cell_error_text(cells, bad) is None, bad


def test_a_workers_cell_reference_becomes_the_graders_description():
    cells = [{"index": 3, "source": "def f(x):\n    return x / 0"}]
    text = "`f` raised ZeroDivisionError: division by zero (in cell 3, line 2: return x / 0)"
    assert name_cells(text, cells) == ("`f` raised ZeroDivisionError: division by zero "
                                       "(in the cell defining `f`, line 2: return x / 0)")
    assert name_cells("(in cell 8, line 1: x)", cells) == "(in cell 8, line 1: x)"  # never sent: left as it is


def test_describe_location_maps_a_line_of_the_joined_source_to_its_cell_and_line():
    cells = [CodeCell(0, "a = 1"), CodeCell(1, "def f(:\n    pass"), CodeCell(2, "%time b = 2\nc = 3", "Setup"),
             CodeCell(5, "import torch\n\ndef attention(q):\n    return torch.nn.functional.softmax(q, -1)")]
    lines = joined_source(cells).split("\n")
    where = {i + 1: describe_location(cells, i + 1) for i, line in enumerate(lines) if line.strip()}
    assert where[1] == "in the cell starting `a = 1`, line 1"
    assert lines[4] == "c = 3" and where[5] == 'in the cell starting `%time b = 2` under "Setup", line 2'
    assert lines[10].strip().startswith("return torch.nn") and where[11] == "in the cell defining `attention`, line 4"
    assert where[8] == "in the cell defining `attention`, line 1"
    assert 2 not in where and describe_location(cells, 2) == "at line 2 of the graded code"  # between two cells
    assert describe_location(cells, 99) == "at line 99 of the graded code"


def test_reading_never_executes(tmp_path):
    marker = tmp_path / "ran"
    path = write_nb(tmp_path / "s.ipynb", [code(f"open({str(marker)!r}, 'w').write('x')")])
    assert len(read_cells(path)) == 1
    assert not marker.exists()
