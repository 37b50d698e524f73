"""insert_setup_cell: the first code cell of every release notebook."""

import ast

import nbformat

from attnlab.build.transforms.insert_setup_cell import insert_setup_cell, setup_source
from attnlab.build.transforms.markers import META

SPEC = "attnlab @ git+https://example.invalid/attnlab@v1"


def nb_of(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _pip_call(source):
    """The list literal passed to subprocess.run in the set-up cell, as strings (sys.executable as a marker)."""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute) and n.func.attr == "run"]
    assert len(calls) == 1
    (argv,) = calls[0].args[:1]
    assert isinstance(argv, ast.List)
    return [e.value if isinstance(e, ast.Constant) else ast.unparse(e) for e in argv.elts]


def test_inserted_after_the_leading_markdown_cells():
    nb = nb_of(nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_markdown_cell("Intro"),
               nbformat.v4.new_code_cell("import torch"), nbformat.v4.new_markdown_cell("more"))
    out = insert_setup_cell(nb, lab_id="lab05_self_attention", install_spec=SPEC)
    assert [c.cell_type for c in out.cells] == ["markdown", "markdown", "code", "code", "markdown"]
    setup = out.cells[2]
    assert setup.metadata["tags"] == ["attnlab_setup"]
    assert setup.metadata[META] == {"role": "setup", "question": None}
    assert out.cells[3].source == "import torch"
    assert len(nb.cells) == 4  # input untouched


def test_first_when_no_leading_markdown_and_last_when_only_markdown():
    out = insert_setup_cell(nb_of(nbformat.v4.new_code_cell("x = 1")), lab_id="lab01_x", install_spec=SPEC)
    assert out.cells[0].metadata["tags"] == ["attnlab_setup"]
    out = insert_setup_cell(nb_of(nbformat.v4.new_markdown_cell("a")), lab_id="lab01_x", install_spec=SPEC)
    assert [c.cell_type for c in out.cells] == ["markdown", "code"]
    assert insert_setup_cell(nb_of(), lab_id="lab01_x", install_spec=SPEC).cells[0].metadata["tags"] == ["attnlab_setup"]


def test_source_names_the_lab_and_installs_the_spec_without_torch():
    src = setup_source("lab05_self_attention", SPEC)
    tree = ast.parse(src)
    argv = _pip_call(src)
    assert argv == ["sys.executable", "-m", "pip", "install", "-q", SPEC]
    assert not any("torch" in a for a in argv), "the set-up cell must never reinstall torch"
    # start_lab is called with the lab id, and only when the kit is missing is anything installed
    starts = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "start_lab"]
    assert [ast.literal_eval(s.args[0]) for s in starts] == ["lab05_self_attention"]
    ifs = [n for n in tree.body if isinstance(n, ast.If)]
    assert len(ifs) == 1 and "find_spec" in ast.unparse(ifs[0].test)
    assert any(isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "run" for n in ast.walk(ifs[0]))


def test_quotes_in_the_spec_stay_one_argument():
    spec = "attnlab @ git+https://h/x.git@it's"
    assert _pip_call(setup_source("lab01_x", spec))[-1] == spec
