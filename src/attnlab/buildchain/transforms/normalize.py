"""Last transform of every notebook branch (but add_checksums, which needs the final sources): output-free notebooks.

Clears outputs and execution counts, keeps only the cell metadata Jupyter and the grader use,
numbers cell ids from the lab id, and writes fixed notebook metadata. Removes the build's internal
labels, so it must run after every transform that reads them.
"""

from __future__ import annotations

import copy

import nbformat

from .answer_cells import ANSWER_META
from .markers import META

KEEP_CELL_METADATA = ("tags", "editable", "deletable", "nbgrader", ANSWER_META)


def normalize(nb, *, lab_id: str, kind: str):
    nb = copy.deepcopy(nb)
    out = nbformat.v4.new_notebook()
    out.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "attnlab": {"lab": lab_id, "kind": kind},
    }
    for i, cell in enumerate(nb.cells):
        meta = {k: cell.metadata[k] for k in KEEP_CELL_METADATA if k in cell.metadata and k != META}
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(cell.source.strip("\n"))
        elif cell.cell_type == "markdown":
            new = nbformat.v4.new_markdown_cell(cell.source.strip("\n"))
        else:
            new = nbformat.v4.new_raw_cell(cell.source.strip("\n"))
        new.metadata = meta
        new.id = f"{lab_id.split('_')[0]}-{kind[:3]}-{i:03d}"
        out.cells.append(new)
    nbformat.validate(out)
    return out


def notebook_bytes(nb) -> bytes:
    return (nbformat.writes(nb, version=4) + "\n").encode()
