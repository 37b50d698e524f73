"""A name defined in several cells is graded on its last definition, on every route: `attnlab grade` (the worker runs
every cell) and, in the student's kernel at a question's check cell (plain Otter, nbgrader), the grading of that
question sees the notebook's last definitions while it runs; the feedback names both cells
(tests/grading/test_route_agreement.py grades the same notebook through the four routes themselves)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from attnlab.course import load_course
from attnlab.grading.bridges import in_kernel
from attnlab.grading.core.hidden import LAST_GRADED
from attnlab.grading.core.mutants import load_catalogue
from attnlab.grading.runner import grade_submission
from attnlab.grading.source.notebook_code import described_cells, joined_source, read_cells

ROOT = Path(__file__).resolve().parents[2]
LAB = load_course(ROOT).lab("lab06")
NOTE = ("note: `split_heads` is defined in the cell defining `split_heads` and again, further down, in the cell "
        "defining `split_heads`, `merge_heads`; the last definition is graded")


def _redefined(tmp_path: Path) -> Path:
    """lab06's solution plus, after `merge_heads`' answer (below `split_heads`' check cell), the catalogue's cell that
    redefines both as plain reshapes (wrong, and each the other's inverse)."""
    entry = next(m for m in load_catalogue(LAB.catalogue)[0] if m.name == "merge_split_inverse_reshapes")
    nb = json.loads(LAB.solution_notebook.read_text())
    at = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith("def merge_heads"))
    nb["cells"].insert(at + 1, {"cell_type": "code", "execution_count": None, "id": "redefined", "metadata": {},
                                "outputs": [], "source": entry.source.strip()})
    path = tmp_path / "redefined.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _kernel_at_check_cell(path: Path, question: str) -> dict:
    """The notebook's globals as a kernel holds them at ``question``'s check cell: the graded cells above it run."""
    check = next(i for i, c in enumerate(json.loads(path.read_text())["cells"])
                 if "".join(c["source"]).strip() == f'grader.check("{question}")')
    env = {"device": torch.device("cpu")}
    for cell in read_cells(path):
        if cell.index < check:
            exec(compile(cell.source, f"<cell {cell.index}>", "exec"), env)  # noqa: S102 - the lab's solution
    return env


def test_attnlab_grade_grades_the_last_definition_and_says_so(tmp_path):
    split = grade_submission(LAB.autograder_dir, _redefined(tmp_path))["questions"]["split_heads"]
    assert split["score"] < split["max_score"], split
    assert NOTE in split["messages"], split["messages"]


def test_in_the_kernel_a_check_cell_grades_the_last_definition_and_leaves_its_own(tmp_path):
    path = _redefined(tmp_path)
    env = _kernel_at_check_cell(path, "split_heads")
    at_check = env["split_heads"]
    assert "merge_heads" not in env  # defined only further down: graded on its last definition too
    cells = read_cells(path)
    entry = in_kernel.question_result(env, LAB.autograder_dir, path.read_bytes(), joined_source(cells),
                            described_cells(cells), "split_heads")
    ours = grade_submission(LAB.autograder_dir, path)["questions"]
    assert entry["score"] == ours["split_heads"]["score"] < entry["max_score"], (entry, ours["split_heads"])
    assert NOTE in entry["messages"] and NOTE in in_kernel.test_message(entry, entry["failed"][0]), entry["messages"]
    assert env["split_heads"] is at_check and "merge_heads" not in env  # the rest of the notebook runs as it would
    merge = in_kernel.question_result(env, LAB.autograder_dir, path.read_bytes(), joined_source(cells),
                            described_cells(cells), "merge_heads")
    assert merge["score"] == ours["merge_heads"]["score"], (merge, ours["merge_heads"])


def test_a_name_defined_once_gets_no_note(tmp_path):
    mha = grade_submission(LAB.autograder_dir, _redefined(tmp_path))["questions"]["MultiHeadAttention"]
    assert not any(m.endswith("the last definition is graded") for m in mha["messages"]), mha["messages"]


ASSIGNED = '''
def _plain_split(x, num_heads):
    B, n, d = x.shape
    return x.reshape(B, num_heads, n, d // num_heads)  # no transpose: wrong


split_heads = _plain_split
'''


def test_a_graded_name_bound_by_assignment_further_down_is_graded_on_every_route(tmp_path):
    """A later cell binding a graded name by assignment (``split_heads = _plain_split``, below `split_heads`' check
    cell): `attnlab grade` grades the notebook's final binding, and so does the kernel at the check cell (before,
    it graded the check-time ``def``, the solution's, with full marks)."""
    nb = json.loads(LAB.solution_notebook.read_text())
    at = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith("def merge_heads"))
    nb["cells"].insert(at + 1, {"cell_type": "code", "execution_count": None, "id": "assigned", "metadata": {},
                                "outputs": [], "source": ASSIGNED.strip()})
    path = tmp_path / "assigned.ipynb"
    path.write_text(json.dumps(nb))
    ours = grade_submission(LAB.autograder_dir, path)["questions"]["split_heads"]
    assert ours["score"] < ours["max_score"], ours
    assert any(m.endswith(LAST_GRADED) for m in ours["messages"]), ours["messages"]
    env = _kernel_at_check_cell(path, "split_heads")
    at_check = env["split_heads"]
    cells = read_cells(path)
    entry = in_kernel.question_result(env, LAB.autograder_dir, path.read_bytes(), joined_source(cells),
                                      described_cells(cells), "split_heads")
    assert entry["score"] == ours["score"], (entry, ours)
    assert env["split_heads"] is at_check and "_plain_split" not in env  # the check-time bindings are back
