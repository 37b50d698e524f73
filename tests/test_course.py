"""course: instructor/course.yml, lab id resolution, finding the repository."""

import re
import shutil
from pathlib import Path

import pytest

from attnlab.course import COURSE_FILE, Course, Lab, find_root, load_course

FIXTURE = Path(__file__).parent / "fixtures" / "course"


@pytest.fixture(autouse=True)
def _no_env_root(monkeypatch):
    monkeypatch.delenv("ATTNLAB_ROOT", raising=False)


def test_load_the_fixture_course():
    course = load_course(FIXTURE)
    assert course.root == FIXTURE.resolve()
    assert course.name == "fixture course"
    assert course.install_spec == "attnlab @ git+https://example.invalid/attnlab"
    assert [(lab.id, lab.title) for lab in course.labs] == [("lab99_demo", "Lab 99: a fixture")]


def test_lab_paths():
    lab = load_course(FIXTURE).lab("lab99_demo")
    root = FIXTURE.resolve()
    assert lab.master == root / "instructor" / "lab99_demo" / "lab99_demo.py"
    assert lab.master.is_file() and lab.hidden_tests.is_file() and lab.catalogue.is_file()
    assert lab.student_notebook == root / "labs" / "lab99_demo" / "lab99_demo.ipynb"
    assert lab.solution_notebook == root / "solutions" / "lab99_demo" / "lab99_demo.ipynb"
    assert lab.autograder_dir == root / "autograder" / "lab99_demo"
    assert lab.public_tests_dir == root / "src" / "attnlab" / "public_tests" / "lab99_demo"


def two_labs():
    root = Path("/c")
    return Course(root, "c", "attnlab", (Lab("lab05_self_attention", "Self-attention", root),
                                          Lab("lab06_multi_head_attention", "Multi-head", root)))


def test_resolution_by_full_and_short_id():
    course = two_labs()
    assert course.lab("lab05").id == "lab05_self_attention"
    assert course.lab("lab05_self_attention").id == "lab05_self_attention"
    assert course.lab("lab06").id == "lab06_multi_head_attention"
    fixture = load_course(FIXTURE)
    assert fixture.lab("lab99") is fixture.lab("lab99_demo")


@pytest.mark.parametrize("name", ["lab07", "lab5", "self_attention", "lab05_self", "LAB05", ""])
def test_unknown_lab_error_lists_the_known_ones(name):
    with pytest.raises(ValueError) as info:
        two_labs().lab(name)
    assert str(info.value) == (f"unknown lab {name!r}; this course has: lab05_self_attention, "
                               "lab06_multi_head_attention")


def test_select_all_or_some():
    course = two_labs()
    assert [lab.id for lab in course.select([])] == ["lab05_self_attention", "lab06_multi_head_attention"]
    assert [lab.id for lab in course.select(None)] == ["lab05_self_attention", "lab06_multi_head_attention"]
    assert [lab.id for lab in course.select(["lab06", "lab05"])] == ["lab06_multi_head_attention",
                                                                     "lab05_self_attention"]
    with pytest.raises(ValueError, match="unknown lab 'lab09'"):
        course.select(["lab05", "lab09"])


def test_find_root_from_a_subfolder(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    deep = root / "instructor" / "lab99_demo" / "notes"
    deep.mkdir()
    assert find_root(deep) == root.resolve()
    assert find_root(root) == root.resolve()
    monkeypatch.chdir(deep)
    assert find_root() == root.resolve()
    assert load_course().root == root.resolve()


def test_find_root_outside_a_course(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no instructor/course.yml in .* or its parents; .*set ATTNLAB_ROOT"):
        find_root(tmp_path)


def test_attnlab_root_wins(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    monkeypatch.setenv("ATTNLAB_ROOT", str(root))
    assert find_root(other) == root.resolve()
    monkeypatch.chdir(other)
    assert load_course().root == root.resolve()


def test_defaults_when_the_config_is_sparse(tmp_path):
    (tmp_path / COURSE_FILE).parent.mkdir(parents=True)
    (tmp_path / COURSE_FILE).write_text("labs:\n  - id: lab01_embeddings\n")
    course = load_course(tmp_path)
    assert course.name == "attnlab" and course.install_spec == ""
    assert [(lab.id, lab.title) for lab in course.labs] == [("lab01_embeddings", "lab01_embeddings")]
    (tmp_path / COURSE_FILE).write_text("")
    assert load_course(tmp_path).labs == ()


def test_the_placeholder_install_spec_is_refused_and_an_empty_one_warned_about():
    from attnlab.course import CourseError, check_install_spec

    with pytest.raises(CourseError, match="still the placeholder.*attnlab release OUT --url URL"):
        check_install_spec("attnlab @ git+https://github.com/attnlab/attnlab")
    assert "cannot install it on Colab" in check_install_spec("  ")
    assert check_install_spec("attnlab @ git+https://example.invalid/course") is None


def test_build_refuses_the_placeholder_with_a_one_line_error(tmp_path, capsys):
    from attnlab.commands import build

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    config = root / COURSE_FILE
    config.write_text(re.sub(r"install_spec:.*", 'install_spec: "attnlab @ git+https://github.com/attnlab/attnlab"',
                             config.read_text()))
    assert build(root=str(root)) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab build: instructor/course.yml: install_spec is still the placeholder")
    assert "Traceback" not in err and not (root / "labs").exists()
