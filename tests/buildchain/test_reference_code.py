"""reference_code: the graded code cells of the solution notebook, nothing else."""

import nbformat

from attnlab.buildchain.transforms.reference_code import reference_code


def solution_nb():
    v4 = nbformat.v4
    setup = v4.new_code_cell("from attnlab.labkit import start_lab\ngrader, device = start_lab('lab01_x')")
    setup.metadata["tags"] = ["attnlab_setup"]
    experiment = v4.new_code_cell("history = train_for_an_hour()")
    experiment.metadata["tags"] = ["otter_ignore"]
    nb = v4.new_notebook()
    nb.cells = [v4.new_markdown_cell("# Title"), setup, v4.new_code_cell("import math"),
                v4.new_code_cell("def f(x):\n    return math.sqrt(x)"), v4.new_code_cell('grader.check("f")'),
                experiment, v4.new_code_cell("   \n"), v4.new_code_cell("%matplotlib inline\nK = 3"),
                v4.new_raw_cell("raw = 1")]
    return nb


def test_keeps_only_graded_code_in_order():
    text = reference_code(solution_nb(), lab_id="lab01_x")
    assert text.startswith("# Reference implementation of lab01_x")
    assert "instructor/lab01_x/lab01_x.py" in text.splitlines()[1]
    body = text.split("do not edit.\n", 1)[1]
    assert body.index("import math") < body.index("def f(x):") < body.index("K = 3")
    for skipped in ("start_lab", "grader", "train_for_an_hour", "raw = 1", "%matplotlib"):
        assert skipped not in text
    assert text.endswith("K = 3\n") and not text.endswith("\n\n")


class _Shell:
    def __init__(self):
        self.magics = []

    def run_line_magic(self, name, line):
        self.magics.append((name, line))


def test_the_reference_runs_with_magics_turned_into_calls():
    shell = _Shell()
    ns = {"get_ipython": lambda: shell}
    exec(compile(reference_code(solution_nb(), lab_id="lab01_x"), "reference.py", "exec"), ns)
    assert ns["f"](16.0) == 4.0 and ns["K"] == 3
    assert shell.magics == [("matplotlib", "inline")]


def test_result_is_deterministic():
    assert reference_code(solution_nb(), lab_id="lab01_x") == reference_code(solution_nb(), lab_id="lab01_x")
