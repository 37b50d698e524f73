"""normalize: output-free, deterministic, valid notebooks with only the metadata Jupyter and the grader use."""

import nbformat
import pytest

from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.normalize import normalize, notebook_bytes


def messy_notebook():
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"jupytext": {"formats": "py:percent"}, "kernelspec": {"name": "mine", "display_name": "Mine"},
                   "widgets": {"state": {}}}
    c = nbformat.v4.new_code_cell("\n\nx = 1\nprint(x)\n\n")
    c.execution_count = 7
    c.outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    c.metadata = {"tags": ["otter_ignore"], "editable": False, "deletable": False, "collapsed": True,
                  "lines_to_next_cell": 2, "jupyter": {"source_hidden": True}, META: {"role": "body"}}
    m = nbformat.v4.new_markdown_cell("# Title\n")
    m.metadata = {META: {"role": "body"}, "editable": False}
    r = nbformat.v4.new_raw_cell("raw text")
    r.metadata = {"format": "text/plain"}
    nb.cells = [m, c, r]
    return nb


def test_outputs_counts_and_foreign_metadata_are_gone():
    out = normalize(messy_notebook(), lab_id="lab05_self_attention", kind="student")
    m, c, r = out.cells
    assert c.outputs == [] and c.execution_count is None
    assert dict(c.metadata) == {"tags": ["otter_ignore"], "editable": False, "deletable": False}
    assert dict(m.metadata) == {"editable": False}
    assert dict(r.metadata) == {}
    assert c.source == "x = 1\nprint(x)"  # leading/trailing blank lines stripped, inner text kept
    assert m.source == "# Title"
    assert [x.cell_type for x in out.cells] == ["markdown", "code", "raw"]
    assert dict(out.metadata) == {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "attnlab": {"lab": "lab05_self_attention", "kind": "student"},
    }


def test_ids_are_deterministic_and_distinct_per_kind():
    stu = normalize(messy_notebook(), lab_id="lab05_self_attention", kind="student")
    sol = normalize(messy_notebook(), lab_id="lab05_self_attention", kind="solution")
    assert [c.id for c in stu.cells] == ["lab05-stu-000", "lab05-stu-001", "lab05-stu-002"]
    assert [c.id for c in sol.cells] == ["lab05-sol-000", "lab05-sol-001", "lab05-sol-002"]


def test_valid_nbformat_and_byte_identical_twice():
    a = notebook_bytes(normalize(messy_notebook(), lab_id="lab05_x", kind="solution"))
    b = notebook_bytes(normalize(messy_notebook(), lab_id="lab05_x", kind="solution"))
    assert a == b
    assert a.endswith(b"}\n")
    back = nbformat.reads(a.decode(), as_version=4)
    nbformat.validate(back)
    assert back.nbformat == 4 and back.nbformat_minor >= 5  # cell ids need 4.5
    assert b'"outputs": []' in a and b"execution_count\": null" in a
    assert META.encode() not in a and b"jupytext" not in a and b"collapsed" not in a


def test_input_is_not_mutated():
    nb = messy_notebook()
    normalize(nb, lab_id="lab05_x", kind="student")
    assert nb.cells[1].execution_count == 7 and META in nb.cells[1].metadata


def test_build_labels_never_survive_even_if_listed():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x")
    cell.metadata[META] = {"role": "setup"}
    nb.cells = [cell]
    assert META not in normalize(nb, lab_id="lab01_a", kind="student").cells[0].metadata


@pytest.mark.parametrize("kind", ["student", "solution"])
def test_each_id_is_a_valid_nbformat_id(kind):
    out = normalize(messy_notebook(), lab_id="lab12_gpt", kind=kind)
    assert len({c.id for c in out.cells}) == len(out.cells)
    assert all(1 <= len(c.id) <= 64 for c in out.cells)
