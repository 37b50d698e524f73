"""nbgrader_setup: what the course's nbgrader_config.py adds to nbgrader (alembic on PATH, a notebook without test
cells refused with what to do, the skip tag kept off graded cells)."""

import os
import sys

import nbformat
import pytest

pytest.importorskip("nbgrader")

from attnlab.grading.bridges.nbgrader_setup import (  # noqa: E402
    SKIP_TAG,
    NoTestCells,
    RequireTestCells,
    sanitize_preprocessors,
    tools_on_path,
)

RESOURCES = {"nbgrader": {"assignment": "lab05_self_attention", "student": "alice", "notebook": "lab05_self_attention"}}


def _notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _code(source, nbgrader=None, tags=None):
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    if tags:
        cell.metadata["tags"] = tags
    return cell


def test_a_notebook_without_test_cells_is_refused_with_what_to_do():
    nb = _notebook(_code("def f(): ..."), _code('grader.check("f")'))
    with pytest.raises(NoTestCells) as refused:
        RequireTestCells().preprocess(nb, RESOURCES)
    said = str(refused.value)
    assert "alice/lab05_self_attention/lab05_self_attention.ipynb" in said and "would score it 0" in said
    assert "attnlab grade lab05_self_attention" in said and "labs/lab05_self_attention/" in said


def test_graded_cells_lose_the_skip_tag_and_experiments_keep_it():
    test = _code('grader.check("f")', {"grade": True, "grade_id": "test_f", "points": 1.0}, tags=[SKIP_TAG, "x"])
    experiment = _code("train()", tags=[SKIP_TAG])
    nb, _ = RequireTestCells().preprocess(_notebook(test, experiment), RESOURCES)
    assert nb.cells[0].metadata["tags"] == ["x"] and nb.cells[1].metadata["tags"] == [SKIP_TAG]


def test_the_check_runs_before_nbgraders_own_steps():
    steps = sanitize_preprocessors()
    assert steps[0] is RequireTestCells and [s.__name__ for s in steps[1:]][-2:] == ["OverwriteCells",
                                                                                     "CheckCellMetadata"]


def test_tools_on_path_puts_this_pythons_folder_first(monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    tools_on_path()
    assert os.environ["PATH"].split(os.pathsep) == [os.path.dirname(sys.executable), "/usr/bin", "/bin"]
    tools_on_path()  # once only
    assert os.environ["PATH"].count(os.path.dirname(sys.executable)) == 1


# -- nbgrader outside the repository: autograde refuses to start without the hidden tests ------------------------
ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
LAB = "lab05_self_attention"


@pytest.fixture
def course(tmp_path, monkeypatch):
    """The course's nbgrader folder copied out of the repository (a JupyterHub course directory), one submission."""

    from attnlab.buildchain.pipeline import build_lab
    from attnlab.course import load_course
    from attnlab.grading.core.bundle import BUNDLE_ENV

    monkeypatch.delenv(BUNDLE_ENV, raising=False)
    kit = load_course(ROOT)
    for path, data in build_lab(kit, kit.lab(LAB)).items():  # git keeps nbgrader's config, not its source notebooks
        rel = path.relative_to(ROOT / "nbgrader") if path.is_relative_to(ROOT / "nbgrader") else None
        if rel is not None:
            (tmp_path / "course" / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "course" / rel).write_bytes(data)
    (tmp_path / "course" / "submitted" / "alice" / LAB).mkdir(parents=True)
    return tmp_path / "course"


def test_autograde_outside_the_repository_stops_before_anyone_is_scored(course, capsys):
    from attnlab.grading.bridges.nbgrader_setup import require_bundles

    for argv in (["nbgrader", "autograde", LAB, "--create"], ["nbgrader", "autograde", f"--assignment={LAB}"],
                 ["nbgrader", "autograde"]):
        with pytest.raises(SystemExit) as stopped:
            require_bundles(course / "nbgrader_config.py", argv)
        said = capsys.readouterr().err
        assert stopped.value.code == 1 and "autograde stopped before grading anyone" in said, argv
        assert f"{LAB}: no autograder/{LAB}/ in {course}" in said and "Copy the course repository's autograder/" in said
    require_bundles(course / "nbgrader_config.py", ["nbgrader", "generate_assignment", LAB])  # other commands: as before


def test_autograde_finds_the_bundle_copied_into_the_course_folder_or_named_by_the_setting(course, monkeypatch):
    import shutil

    from attnlab.grading.bridges.nbgrader_setup import bundle_problem, require_bundles
    from attnlab.grading.core.bundle import BUNDLE_ENV

    argv = ["nbgrader", "autograde", LAB, "--create"]
    monkeypatch.setenv(BUNDLE_ENV, str(ROOT / "autograder" / "lab06_multi_head_attention"))
    assert "not lab05_self_attention's autograder bundle" in bundle_problem(LAB, course)
    monkeypatch.setenv(BUNDLE_ENV, str(ROOT / "autograder" / LAB))
    require_bundles(course / "nbgrader_config.py", argv)
    monkeypatch.delenv(BUNDLE_ENV)
    shutil.copytree(ROOT / "autograder" / LAB, course / "autograder" / LAB)
    require_bundles(course / "nbgrader_config.py", argv)
    assert bundle_problem(LAB, course / "autograded" / "alice" / LAB) is None  # where the kernel looks from


def test_a_notebook_whose_bundle_is_missing_is_refused_not_scored(course, monkeypatch):
    from attnlab.grading.bridges.nbgrader_setup import NoBundle

    monkeypatch.chdir(course)
    test = _code('grader.check("f")', {"grade": True, "grade_id": "test_f", "points": 1.0})
    with pytest.raises(NoBundle, match="alice's lab05_self_attention is not graded: the hidden tests .* cannot be found"):
        RequireTestCells().preprocess(_notebook(test), RESOURCES)
