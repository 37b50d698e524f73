"""insert_setup_cell: the first code cell of every release notebook."""

import ast
import contextlib
import io
import subprocess
import sys
from unittest import mock

import nbformat

from attnlab.buildchain.transforms.insert_setup_cell import insert_setup_cell, setup_source
from attnlab.buildchain.transforms.markers import META

SPEC = "attnlab @ git+https://example.invalid/attnlab@v1"


def nb_of(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _kit(source):
    """The value the set-up cell assigns to KIT (the install spec), as a literal."""
    (assign,) = [n for n in ast.parse(source).body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "KIT"]
    return ast.literal_eval(assign.value)


def _run_install_part(source, *, returncode, stderr="", missing=True):
    """Run the set-up cell up to start_lab with attnlab 'missing' and pip faked; return (printed, exit, argv)."""
    install_part = source.split("from attnlab.labkit")[0]
    calls, out, err = [], io.StringIO(), io.StringIO()

    def fake_run(argv, **kwargs):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, returncode, stdout="", stderr=stderr)

    exit_message = None
    with mock.patch("importlib.util.find_spec", return_value=None if missing else object()), \
            mock.patch("subprocess.run", fake_run), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(install_part, "<setup>", "exec"), {})
        except SystemExit as exc:
            exit_message = str(exc)
    return out.getvalue() + err.getvalue(), exit_message, calls


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
    assert _kit(src) == SPEC
    printed, stopped, calls = _run_install_part(src, returncode=0)
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", SPEC]]
    assert not any("torch" in a for a in calls[0]), "the set-up cell must never reinstall torch"
    assert stopped is None
    assert printed.splitlines() == ["Installing the attnlab kit, about a minute (torch stays as it is)...",
                                    "attnlab installed."]
    starts = [n for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "start_lab"]
    assert [ast.literal_eval(s.args[0]) for s in starts] == ["lab05_self_attention"]


def test_nothing_is_installed_where_the_kit_is_present():
    printed, stopped, calls = _run_install_part(setup_source("lab01_x", SPEC), returncode=0, missing=False)
    assert (printed, stopped, calls) == ("", None, [])


def test_a_failed_install_says_the_course_set_up_is_incomplete_without_a_traceback():
    pip_error = "ERROR: Error [Errno 2] No such file or directory: 'git' while executing command git version"
    printed, stopped, calls = _run_install_part(setup_source("lab01_x", SPEC), returncode=1,
                                                stderr="noise\n\x1b[31m" + pip_error + "\x1b[0m\n\x1b[0m")
    assert len(calls) == 1 and stopped == "attnlab is not installed; the cells below need it"
    assert "The course set-up is incomplete" in printed and SPEC in printed
    assert "Tell your instructor" in printed and pip_error in printed and "noise" not in printed
    assert "Traceback" not in printed


def test_a_notebook_built_without_an_address_says_so_and_runs_no_pip():
    printed, stopped, calls = _run_install_part(setup_source("lab01_x", ""), returncode=0)
    assert calls == [] and stopped and "built without one" in printed and "Tell your instructor" in printed


def test_quotes_in_the_spec_stay_one_argument():
    spec = "attnlab @ git+https://h/x.git@it's"
    assert _kit(setup_source("lab01_x", spec)) == spec
