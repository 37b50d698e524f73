"""The thin CLI, called in-process: build, build --check, grade --json, catalogue, --root."""

import json
import shutil
from pathlib import Path

import pytest

from attnlab.cli import main, parser

FIXTURE = Path(__file__).parent / "fixtures" / "course"
LAB = "lab99_demo"
N_OUTPUTS = 9


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv("ATTNLAB_ROOT", raising=False)
    monkeypatch.setenv("ATTNLAB_SANDBOX", "off")


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    return root


def test_build_then_check_is_clean(course, capsys):
    assert main(["--root", str(course), "build"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == N_OUTPUTS and all(line.startswith("wrote ") for line in out)
    assert f"wrote labs/{LAB}/{LAB}.ipynb" in out
    assert (course / "labs" / LAB / f"{LAB}.ipynb").is_file()

    assert main(["--root", str(course), "build", "--check"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "attnlab build --check: all outputs match a fresh build\n" and captured.err == ""

    # a second build writes nothing
    assert main(["--root", str(course), "build", "lab99"]) == 0
    assert capsys.readouterr().out == ""


def test_check_fails_on_stale_outputs_and_names_them(course, capsys):
    assert main(["--root", str(course), "build"]) == 0
    (course / "labs" / LAB / f"{LAB}.ipynb").unlink()
    (course / "labs" / LAB / "notes.txt").write_text("left over")
    capsys.readouterr()
    assert main(["--root", str(course), "build", "--check", LAB]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"missing: labs/{LAB}/{LAB}.ipynb",
                                         f"stale (not produced by the build): labs/{LAB}/notes.txt"]
    assert "2 file(s) differ from a fresh build; run `attnlab build`" in captured.err
    assert not (course / "labs" / LAB / f"{LAB}.ipynb").exists()  # --check never writes


def test_check_before_any_build_fails(course, capsys):
    assert main(["--root", str(course), "build", "--check"]) == 1
    assert len(capsys.readouterr().out.splitlines()) == N_OUTPUTS


def test_root_is_found_from_the_current_folder(course, monkeypatch, capsys):
    sub = course / "instructor" / LAB
    monkeypatch.chdir(sub)
    assert main(["build", "lab99"]) == 0
    assert (course / "solutions" / LAB / f"{LAB}.ipynb").is_file()
    assert not (sub / "labs").exists()


def test_root_from_attnlab_root(course, tmp_path, monkeypatch, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("ATTNLAB_ROOT", str(course))
    assert main(["build"]) == 0
    assert (course / "labs" / LAB / f"{LAB}.ipynb").is_file() and list(elsewhere.iterdir()) == []


def test_outside_a_course_the_error_says_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="set ATTNLAB_ROOT"):
        main(["build"])


def test_unknown_lab_lists_the_known_ones(course):
    with pytest.raises(ValueError, match=r"unknown lab 'lab42'; this course has: lab99_demo"):
        main(["--root", str(course), "build", "lab42"])


def test_grade_json_schema(built_course, tmp_path, capsys):
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a_empty.ipynb").write_bytes(b"")
    (subs / "b_garbage.ipynb").write_bytes(b"\x00\xff")
    (subs / ".hidden.ipynb").write_bytes(b"")  # dot files in a folder are skipped
    assert main(["--root", str(built_course), "grade", "lab99", str(subs), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert isinstance(results, list) and len(results) == 2
    assert [Path(r["submission"]).name for r in results] == ["a_empty.ipynb", "b_garbage.ipynb"]
    for r in results:
        assert {"submission", "score", "max_score", "questions"} <= set(r)
        assert set(r) - {"submission", "score", "max_score", "questions"} <= {"errors", "isolation", "elapsed_s"}
        assert isinstance(r["submission"], str)
        assert r["score"] == 0.0 and r["max_score"] == 3.0
        assert isinstance(r["score"], float) and isinstance(r["max_score"], float)
        assert list(r["questions"]) == ["double", "Scale"]
        for name, q in r["questions"].items():
            assert set(q) == {"score", "max_score", "messages"}, name
            assert isinstance(q["score"], float) and isinstance(q["max_score"], float)
            assert isinstance(q["messages"], list) and all(isinstance(m, str) for m in q["messages"])
        assert r["questions"]["double"]["max_score"] == 2.0 and r["questions"]["Scale"]["max_score"] == 1.0
    assert "empty" in results[0]["questions"]["double"]["messages"][0]
    assert "not a Jupyter notebook" in results[1]["questions"]["double"]["messages"][0]


def test_grade_prints_a_table_without_json(built_course, tmp_path, capsys):
    path = tmp_path / "mine.ipynb"
    path.write_bytes(b"")
    assert main(["--root", str(built_course), "grade", LAB, str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["submission", "score", "seconds"]
    assert lines[1].startswith("mine.ipynb") and "0.0 / 3" in lines[1] and "empty" in lines[1]


def test_catalogue_on_the_fixture_kills_mutants_and_keeps_variants(built_course, capsys):
    assert main(["--root", str(built_course), "catalogue", "lab99"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    verdicts = {line.split()[1]: (line.split()[0], line.split()[-1]) for line in lines}
    assert verdicts == {"double_adds_one": ("mutant", "killed"), "scale_ignores_weight": ("mutant", "killed"),
                        "double_add": ("variant", "marks")}
    assert lines[2].rstrip().endswith("full marks") and "2.0/2.0" in lines[2]


def test_catalogue_fails_when_a_mutant_survives_or_a_variant_loses_points(built_course, tmp_path, capsys):
    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    (root / "instructor" / LAB / "catalogue.py").write_text(
        "from attnlab.grading.catalogue import Entry\n"
        "MUTANTS = [Entry('not_a_bug', 'double', 'def double(x):\\n    return 2 * x\\n')]\n"
        "VARIANTS = [Entry('wrong_variant', 'double', 'def double(x):\\n    return x\\n')]\n")
    assert main(["--root", str(root), "catalogue", LAB]) == 1
    out = capsys.readouterr().out
    assert "SURVIVED" in out and "LOST POINTS" in out


def test_parser_shape():
    p = parser()
    args = vars(p.parse_args(["--root", "/x", "build", "lab05", "--check"]))
    assert args["root"] == "/x" and args["labs"] == ["lab05"] and args["check"] is True
    args = vars(p.parse_args(["build"]))  # defaults are left to the functions
    assert "labs" not in args and "check" not in args and "root" not in args
    with pytest.raises(SystemExit):
        p.parse_args([])


def test_gradebook_accepts_the_global_root_option(built_course, tmp_path, capsys):
    from attnlab.grading.gradebook import open_gradebook

    db = tmp_path / "gradebook.db"
    with open_gradebook(db):
        pass
    assert main(["--root", str(built_course), "gradebook", str(db), "--csv", str(tmp_path / "out.csv")]) == 0
    assert (tmp_path / "out.csv").exists()
