"""strip_solutions: solution blocks become TODOs that raise NotImplementedError("<name>: not written yet") inside a
function (``...`` elsewhere), `# SOLUTION` lines become TODOs, indentation kept, test cells untouched."""

import ast

import nbformat
import pytest

from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.strip_solutions import strip_solutions, strip_source


def test_block_becomes_todo_at_the_block_indentation():
    src = ("def f(x):\n"
           "    \"\"\"doc\"\"\"\n"
           "    # BEGIN SOLUTION\n"
           "    y = x * 2\n"
           "    return y\n"
           "    # END SOLUTION\n"
           "\n"
           "z = 1")
    out = strip_source(src)
    assert out == ("def f(x):\n"
                   "    \"\"\"doc\"\"\"\n"
                   "    # TODO: your code here\n"
                   "    raise NotImplementedError(\"f: not written yet\")\n"
                   "\n"
                   "z = 1")
    ast.parse(out)  # still a valid cell


def test_block_at_top_level_and_deeply_nested():
    assert strip_source("# BEGIN SOLUTION\nanswer = 42\n# END SOLUTION") == "# TODO: your code here\n..."
    src = ("class A:\n    def f(self):\n        if True:\n"
           "            # BEGIN SOLUTION\n            pass\n            # END SOLUTION")
    out = strip_source(src)
    assert out.splitlines()[-2:] == ["            # TODO: your code here",
                                     '            raise NotImplementedError("A.f: not written yet")']
    ast.parse(out)


def test_the_stub_names_the_method_and_the_nested_function():
    src = ("class Model(nn.Module):\n"
           "    def __init__(self, d,\n"
           "                 e=1):\n"
           "        super().__init__()\n"
           "        # BEGIN SOLUTION\n"
           "        self.d = d\n"
           "        # END SOLUTION\n"
           "\n"
           "    def forward(self, x):\n"
           "        \"\"\"doc\n"
           "a docstring line at column 0\"\"\"\n"
           "        def inner(y):\n"
           "            # BEGIN SOLUTION\n"
           "            return y\n"
           "            # END SOLUTION\n"
           "        # BEGIN SOLUTION\n"
           "        return inner(x)\n"
           "        # END SOLUTION\n"
           "    # BEGIN SOLUTION\n"
           "    scale = 2\n"
           "    # END SOLUTION\n")
    out = strip_source(src)
    raises = [line.strip() for line in out.splitlines() if "NotImplementedError" in line]
    assert raises == ['raise NotImplementedError("Model.__init__: not written yet")',
                      'raise NotImplementedError("Model.forward.inner: not written yet")',
                      'raise NotImplementedError("Model.forward: not written yet")']
    assert out.rstrip().endswith("    # TODO: your code here\n    ...")  # a class body gets no raise
    namespace = {"nn": type("nn", (), {"Module": object})}
    exec(out, namespace)
    with pytest.raises(NotImplementedError, match=r"^Model.__init__: not written yet$"):
        namespace["Model"](3)


def test_a_cell_with_ipython_magics_falls_back_to_the_indentation():
    out = strip_source("%time\ndef f():\n    # BEGIN SOLUTION\n    pass\n    # END SOLUTION")
    assert out.endswith('    raise NotImplementedError("f: not written yet")')


def test_two_blocks_in_one_cell():
    out = strip_source("# BEGIN SOLUTION\na = 1\n# END SOLUTION\nb = 2\n# BEGIN SOLUTION\nc = 3\n# END SOLUTION")
    assert out == "# TODO: your code here\n...\nb = 2\n# TODO: your code here\n..."


def test_solution_suffix_on_an_assignment_keeps_the_target():
    assert strip_source("    scores = q @ k.transpose(-2, -1)  # SOLUTION") == "    scores = ...  # TODO"
    assert strip_source("self.w_q = nn.Linear(d, d)  # SOLUTION") == "self.w_q = ...  # TODO"
    assert strip_source("a, b = divmod(7, 2)  # SOLUTION") == "a, b = ...  # TODO"
    assert strip_source("cfg['d'] = 4 #solution") == "cfg['d'] = ...  # TODO"


def test_solution_suffix_on_a_statement_becomes_an_ellipsis_at_its_indentation():
    assert strip_source("        return x * self.weight  # SOLUTION") == "        ...  # TODO"
    # a comparison is not an assignment
    assert strip_source("    assert x == 1  # SOLUTION") == "    ...  # TODO"
    out = strip_source("def f(x):\n    return 2 * x  # SOLUTION")
    assert out == "def f(x):\n    ...  # TODO"
    ast.parse(out)


def test_lines_without_markers_are_untouched():
    src = "x = 1  # a solution would go here\n# SOLUTIONS are below\ny = 'BEGIN SOLUTION'"
    assert strip_source(src) == src


def test_begin_solution_with_trailing_words_is_a_block():
    assert strip_source("  # BEGIN SOLUTION NO PROMPT\n  x = 1\n  # END SOLUTION") == "  # TODO: your code here\n  ..."


@pytest.mark.parametrize("src, message", [
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n# END SOLUTION", "nested BEGIN SOLUTION"),
    ("x = 1\n# END SOLUTION", "END SOLUTION without BEGIN SOLUTION"),
    ("# BEGIN SOLUTION\nx = 1", "never closed"),
])
def test_malformed_blocks_raise(src, message):
    with pytest.raises(ValueError, match=message):
        strip_source(src)


def _cell(cell_type, src, role):
    make = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}[cell_type]
    cell = make(src)
    cell.metadata[META] = {"role": role, "question": "q"}
    return cell


def test_notebook_level_strips_code_cells_but_not_tests_or_prose():
    nb = nbformat.v4.new_notebook()
    solution = "def f():\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION"
    nb.cells = [
        _cell("markdown", "x = 1  # SOLUTION", "body"),
        _cell("code", solution, "question"),
        _cell("code", "y = 2  # SOLUTION", "body"),
        _cell("code", "assert f() == 1  # SOLUTION", "test"),
    ]
    out = strip_solutions(nb)
    assert [c.source for c in out.cells] == [
        "x = 1  # SOLUTION",
        'def f():\n    # TODO: your code here\n    raise NotImplementedError("f: not written yet")',
        "y = ...  # TODO",
        "assert f() == 1  # SOLUTION",
    ]
    assert nb.cells[1].source == solution  # input untouched
