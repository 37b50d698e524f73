"""lock_cells: prose, the set-up cell and the check cells are not editable or deletable; code cells are."""

import nbformat

from attnlab.buildchain.transforms.lock_cells import lock_cells
from attnlab.buildchain.transforms.markers import META


def _cell(make, src, role):
    cell = make(src)
    cell.metadata[META] = {"role": role, "question": None}
    return cell


def test_locks_markdown_setup_and_checks_only():
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.cells = [
        _cell(v4.new_markdown_cell, "# Title", "body"),
        _cell(v4.new_code_cell, "setup()", "setup"),
        _cell(v4.new_code_cell, "def f(): ...", "question"),
        _cell(v4.new_code_cell, 'grader.check("f")', "check"),
        _cell(v4.new_code_cell, "train()", "body"),
        _cell(v4.new_raw_cell, "raw note", "body"),
        v4.new_code_cell("unlabelled"),
    ]
    out = lock_cells(nb)
    locked = [(c.metadata.get("editable"), c.metadata.get("deletable")) for c in out.cells]
    assert locked == [(False, False), (False, False), (None, None), (False, False), (None, None), (None, None),
                      (None, None)]
    assert "editable" not in nb.cells[0].metadata  # input untouched


def test_existing_tags_are_kept():
    nb = nbformat.v4.new_notebook()
    cell = _cell(nbformat.v4.new_code_cell, "setup()", "setup")
    cell.metadata["tags"] = ["attnlab_setup"]
    nb.cells = [cell]
    assert lock_cells(nb).cells[0].metadata["tags"] == ["attnlab_setup"]
