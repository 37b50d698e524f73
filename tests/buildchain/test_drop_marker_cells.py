"""drop_marker_cells: the raw marker cells leave, everything else (check cells included) stays in order."""

from pathlib import Path

import nbformat

from attnlab.buildchain.transforms.drop_marker_cells import drop_marker_cells
from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.parse_questions import parse_questions
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.buildchain.transforms.replace_tests import replace_tests

MASTER = Path(__file__).resolve().parents[1] / "fixtures" / "course" / "instructor" / "lab99_demo" / "lab99_demo.py"


def test_markers_dropped_rest_kept_in_order():
    replaced = replace_tests(parse_questions(read_master(MASTER))[0])
    out = drop_marker_cells(replaced)
    assert [c.metadata[META]["role"] for c in out.cells] == [
        "body", "body", "question", "question", "check", "question", "check", "body"]
    assert [c.source for c in out.cells] == [c.source for c in replaced.cells
                                             if c.metadata[META]["role"] != "marker"]
    assert not any(c.cell_type == "raw" for c in out.cells)
    # the check cell follows its question's code (it stood where END TESTS was)
    assert out.cells[4].source == 'grader.check("double")' and out.cells[3].source.startswith("def double")


def test_unlabelled_and_plain_raw_cells_stay():
    nb = nbformat.v4.new_notebook()
    plain = nbformat.v4.new_raw_cell("a raw note, not a marker")
    plain.metadata[META] = {"role": "body", "question": None}
    marker = nbformat.v4.new_raw_cell("# END QUESTION")
    marker.metadata[META] = {"role": "marker", "question": "q"}
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), plain, marker]
    out = drop_marker_cells(nb)
    assert [c.source for c in out.cells] == ["x = 1", "a raw note, not a marker"]
    assert len(nb.cells) == 3
