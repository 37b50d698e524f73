"""replace_tests: each question's public test cells become one grader.check cell where END TESTS was."""

from pathlib import Path

import nbformat

from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.parse_questions import parse_questions
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.buildchain.transforms.replace_tests import check_cell, replace_tests

MASTER = Path(__file__).resolve().parents[1] / "fixtures" / "course" / "instructor" / "lab99_demo" / "lab99_demo.py"


def labelled_master():
    return parse_questions(read_master(MASTER))[0]


def test_check_cell_source_and_label():
    cell = check_cell("scaled_dot_product_attention")
    assert cell.cell_type == "code"
    assert cell.source == 'grader.check("scaled_dot_product_attention")'
    assert cell.metadata[META] == {"role": "check", "question": "scaled_dot_product_attention"}


def test_test_cells_go_and_a_check_cell_sits_just_before_end_tests():
    master = labelled_master()
    out = replace_tests(master)
    assert len(out.cells) == len(master.cells)  # one test cell out, one check cell in, per question
    assert not [c for c in out.cells if c.metadata[META]["role"] == "test"]
    assert "assert torch.equal(double" not in "\n".join(c.source for c in out.cells)
    sources = [c.source for c in out.cells]
    for name in ("double", "Scale"):
        i = sources.index(f'grader.check("{name}")')
        assert sources[i - 1] == "# BEGIN TESTS"
        assert sources[i + 1] == "# END TESTS"
        assert out.cells[i].metadata[META]["question"] == name
    # order of the rest unchanged
    kept = [c.source for c in master.cells if c.metadata[META]["role"] != "test"]
    assert [s for s in sources if not s.startswith("grader.check")] == kept


def test_empty_tests_block_still_gets_a_check_cell_and_no_tests_block_gets_none():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_raw_cell("# BEGIN QUESTION\nname: a"), nbformat.v4.new_code_cell("a = 1"),
                nbformat.v4.new_raw_cell("# BEGIN TESTS"), nbformat.v4.new_raw_cell("# END TESTS"),
                nbformat.v4.new_raw_cell("# END QUESTION"),
                nbformat.v4.new_raw_cell("# BEGIN QUESTION\nname: b"), nbformat.v4.new_code_cell("b = 1"),
                nbformat.v4.new_raw_cell("# END QUESTION")]
    out = replace_tests(parse_questions(nb)[0])
    assert [c.source for c in out.cells if c.metadata[META]["role"] == "check"] == ['grader.check("a")']
    assert [c.source for c in out.cells].index('grader.check("a")') == 3


def test_input_is_not_mutated():
    master = labelled_master()
    n = len(master.cells)
    replace_tests(master)
    assert len(master.cells) == n
    assert sum(c.metadata[META]["role"] == "test" for c in master.cells) == 2
