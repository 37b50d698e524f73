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
    assert lab.public_tests_dir == root / "src" / "attnlab" / "kit" / "generated" / "public_tests" / "lab99_demo"


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
    from attnlab.cli import main

    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    config = root / COURSE_FILE
    config.write_text(re.sub(r"install_spec:.*", 'install_spec: "attnlab @ git+https://github.com/attnlab/attnlab"',
                             config.read_text()))
    assert main(["--root", str(root), "build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab build: instructor/course.yml: install_spec is still the placeholder")
    assert "Traceback" not in err and not (root / "labs").exists()


def _course_with(tmp_path, lab_lines: str, *, load=True):
    (tmp_path / COURSE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / COURSE_FILE).write_text("labs:\n  - id: lab05_self_attention\n" + lab_lines)
    return load_course(tmp_path) if load else None


def test_due_dates_and_closed_flags_are_read(tmp_path):
    from datetime import date, datetime, timedelta, timezone

    course = _course_with(tmp_path, "    due: 2027-02-14\n  - id: lab06_mha\n    due: 2027-02-14T23:59+01:00\n"
                                    "  - id: lab07_block\n    due: '2027-02-14T22:59Z'\n    closed: true\n"
                                    "  - id: lab08_translation\n")
    lab05, lab06, lab07, lab08 = course.labs
    assert lab05.due == date(2027, 2, 14) and not isinstance(lab05.due, datetime)
    assert lab06.due == datetime(2027, 2, 14, 23, 59, tzinfo=timezone(timedelta(hours=1)))
    assert lab07.due == datetime(2027, 2, 14, 22, 59, tzinfo=timezone.utc) and lab07.closed
    assert (lab08.due, lab08.closed) == (None, False)


def test_a_lab_closes_when_its_due_date_has_passed():
    from datetime import date, datetime, timedelta, timezone

    plus1 = timezone(timedelta(hours=1))
    by_date = Lab("lab05_self_attention", "t", Path("/c"), due=date(2027, 2, 14))
    assert by_date.is_open(datetime(2027, 2, 14, 23, 59, tzinfo=plus1))  # due at the end of that day
    assert not by_date.is_open(datetime(2027, 2, 15, 0, 0, tzinfo=plus1))
    by_time = Lab("lab05_self_attention", "t", Path("/c"), due=datetime(2027, 2, 14, 12, 0, tzinfo=plus1))
    assert by_time.is_open(datetime(2027, 2, 14, 10, 59, tzinfo=timezone.utc))
    assert not by_time.is_open(datetime(2027, 2, 14, 11, 0, tzinfo=timezone.utc))  # the same instant as 12:00+01
    assert by_date.state(datetime(2027, 2, 1, tzinfo=plus1)) == "still open (due 2027-02-14)"
    assert by_time.state(datetime(2027, 3, 1, tzinfo=plus1)) == "closed (due 2027-02-14T12:00:00+01:00)"
    undated = Lab("lab05_self_attention", "t", Path("/c"))
    assert undated.is_open() and undated.is_open(datetime(2999, 1, 1, tzinfo=plus1))
    assert undated.state() == "still open (no due date)"
    flagged = Lab("lab05_self_attention", "t", Path("/c"), closed=True)
    assert not flagged.is_open() and flagged.state() == "closed (marked closed; no due date)"


def test_with_closed_marks_labs_by_short_or_full_id_and_leaves_the_rest():
    course = two_labs().with_closed(["lab06"])
    assert [(lab.id, lab.is_open()) for lab in course.labs] == [("lab05_self_attention", True),
                                                                ("lab06_multi_head_attention", False)]
    assert two_labs().labs[1].is_open()  # the course it came from is unchanged
    with pytest.raises(ValueError, match="unknown lab 'lab09'"):
        two_labs().with_closed(["lab09"])


@pytest.mark.parametrize("value, message", [
    ("2027-14-02", "lab05_self_attention has due: '2027-14-02', which is not a date; write it as 2027-02-14"),
    ("next friday", "lab05_self_attention has due: 'next friday', which is not a date"),
    ("2027-02-14T23:59", "lab05_self_attention has due: '2027-02-14T23:59', a time without a zone; add the zone "
                         r"\(2027-02-14T23:59\+01:00, or 2027-02-14T23:59Z for UTC\)"),
])
def test_a_bad_due_date_names_the_lab_the_value_and_the_form(tmp_path, value, message):
    from attnlab.course import CourseError

    with pytest.raises(CourseError, match=message):
        _course_with(tmp_path, f"    due: {value}\n")


def test_closed_must_be_true_or_false(tmp_path):
    from attnlab.course import CourseError

    with pytest.raises(CourseError, match="lab05_self_attention has closed: 'soon'; write closed: true or closed"):
        _course_with(tmp_path, "    closed: soon\n")


def test_a_command_reports_a_bad_due_date_on_one_line(tmp_path, capsys):
    from attnlab.cli import main

    _course_with(tmp_path, "    due: 2027-02-30\n", load=False)
    assert main(["--root", str(tmp_path), "release", str(tmp_path / "out"), "--url", "https://github.com/a/b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab release: instructor/course.yml: lab05_self_attention has due: '2027-02-30'")
    assert "Traceback" not in err and not (tmp_path / "out").exists()
