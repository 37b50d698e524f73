"""The thin CLI, called in-process: build, build --check, grade --json, catalogue, --root; usage errors (an
unknown lab, a missing path, outside a course) are one line on stderr and exit 2; another lab's notebook is refused."""

import json
import shutil
from pathlib import Path

import pytest

from attnlab.cli import main, parser

FIXTURE = Path(__file__).parent / "fixtures" / "course"
LAB = "lab99_demo"
N_OUTPUTS = 12  # with nbgrader/nbgrader_config.py and nbgrader/source/lab99_demo/lab99_demo.ipynb
N_ON_DEMAND = 3  # two zips and nbgrader's source notebook: a missing one is no problem for --check


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
    assert len(capsys.readouterr().out.splitlines()) == N_OUTPUTS - N_ON_DEMAND  # the zips and nbgrader's source


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


def test_outside_a_course_the_error_says_how_to_fix_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["build"]) == 2
    captured = capsys.readouterr()
    assert "set ATTNLAB_ROOT" in captured.err and len(captured.err.splitlines()) == 1
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("argv", [["build", "lab42"], ["grade", "lab42", "x.ipynb"], ["catalogue", "lab42"]])
def test_unknown_lab_is_one_line_naming_the_known_ones(course, capsys, argv):
    assert main(["--root", str(course), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"attnlab {argv[0]}: unknown lab 'lab42'; this course has: lab99_demo\n"
    assert captured.out == ""


@pytest.mark.parametrize("extra", [[], ["--json"], ["--out", "OUT"]])
def test_a_missing_path_is_one_line_and_exit_2(built_course, tmp_path, capsys, extra):
    real = tmp_path / "real.ipynb"
    real.write_bytes(b"")
    extra = [str(tmp_path / "out") if a == "OUT" else a for a in extra]
    assert main(["--root", str(built_course), "grade", LAB, str(real), str(tmp_path / "typo.ipynb"), *extra]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"attnlab grade: no such file or folder: {tmp_path / 'typo.ipynb'}\n"
    assert captured.out == "" and not (tmp_path / "out").exists()


def _notebook_for(lab: str | None, path: Path, source: Path) -> Path:
    nb = json.loads(source.read_text())
    if lab is None:
        nb["metadata"].pop("attnlab", None)
    else:
        nb["metadata"]["attnlab"]["lab"] = lab
    path.write_text(json.dumps(nb))
    return path


def test_another_labs_notebook_gets_zero_and_an_error_naming_both_labs(built_course, tmp_path, capsys):
    solution = built_course / "solutions" / LAB / f"{LAB}.ipynb"
    other = _notebook_for("lab06_multi_head_attention", tmp_path / "other.ipynb", solution)
    bare = _notebook_for(None, tmp_path / "bare.ipynb", solution)  # e.g. re-saved by a tool that drops metadata
    assert main(["--root", str(built_course), "grade", LAB, str(other), str(bare), "--json"]) == 0
    other_r, bare_r = json.loads(capsys.readouterr().out)
    assert other_r["score"] == 0.0 and other_r["errors"] == [
        "this notebook is lab06's (lab06_multi_head_attention), not lab99's (lab99_demo): "
        "submit your lab99 notebook (graders: `attnlab grade lab06` grades this file)"]
    assert all(q["messages"] == other_r["errors"] for q in other_r["questions"].values())
    assert bare_r["score"] == bare_r["max_score"] == 3.0


def test_batch_mode_keeps_a_row_for_every_file_and_exits_0(built_course, tmp_path, capsys):
    solution = built_course / "solutions" / LAB / f"{LAB}.ipynb"
    subs = tmp_path / "subs"
    subs.mkdir()
    _notebook_for("lab06_multi_head_attention", subs / "a_other.ipynb", solution)
    (subs / "b_empty.ipynb").write_bytes(b"")
    _notebook_for(LAB, subs / "c_mine.ipynb", solution)
    assert main(["--root", str(built_course), "grade", LAB, str(subs), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["a_other.ipynb", "b_empty.ipynb", "c_mine.ipynb"]
    assert "this notebook is lab06's" in lines[1] and "3.0 / 3" in lines[3]


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
        assert set(r) - {"submission", "score", "max_score", "questions"} <= {"errors", "review", "isolation", "elapsed_s"}
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


def test_the_notes_column_names_the_questions_that_lost_points(built_course, tmp_path, capsys):
    nb = json.loads((built_course / "solutions" / LAB / f"{LAB}.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "def double" in "".join(cell["source"]):
            cell["source"] = "def double(x):\n    return x * 2 + 1\n"
    path = tmp_path / "buggy.ipynb"
    path.write_text(json.dumps(nb))
    assert main(["--root", str(built_course), "grade", LAB, str(path)]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert row.startswith("buggy.ipynb") and "1.0 / 3" in row and row.endswith("lost: double 0/2")
    assert main(["--root", str(built_course), "grade", LAB, str(path), "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    # the grader names the likely mistake from the lab's catalogue
    assert result["questions"]["double"]["messages"][-1] == "likely mistake: your double adds 1 to twice the input"


def test_catalogue_on_the_fixture_shows_stated_and_real_loss_and_keeps_variants(built_course, capsys):
    assert main(["--root", str(built_course), "catalogue", "lab99"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[3] == "seed 0: 2 mutants lose what they state, 1 variants at full marks"
    verdicts = {line.split()[1]: (line.split()[0], line.split()[-1]) for line in lines[:3]}
    assert verdicts == {"double_adds_one": ("mutant", "stated"), "scale_ignores_weight": ("mutant", "stated"),
                        "double_add": ("variant", "marks")}
    # the kept share beside the stated loss: double_adds_one keeps 0 of 2 points, stated "at least 60%"
    assert "0.0/2.0" in lines[0] and "kept   0%" in lines[0] and "stated loss at least 60%" in lines[0], lines[0]
    assert "stated loss all" in lines[1], lines[1]
    assert lines[2].rstrip().endswith("full marks") and "2.0/2.0" in lines[2]


def test_catalogue_fails_when_a_mutant_loses_other_than_stated_or_a_variant_loses_points(built_course, tmp_path, capsys):
    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    (root / "instructor" / LAB / "catalogue.py").write_text(
        "from attnlab.grading.core.mutants import MOST, Entry\n"
        "MUTANTS = [Entry('not_a_bug', 'double', 'def double(x):\\n    return 2 * x\\n', loses=MOST),\n"
        "           Entry('stated_too_small', 'double', 'def double(x):\\n    return 2 * x + 1\\n', hint='h',\n"
        "                 loses=(0.1, 0.5))]\n"
        "VARIANTS = [Entry('wrong_variant', 'double', 'def double(x):\\n    return x\\n')]\n")
    # the command grades the built bundle: an edited catalogue is refused until it is built
    assert main(["--root", str(root), "catalogue", LAB]) == 2
    assert capsys.readouterr().err == (f"attnlab catalogue: autograder/{LAB}/ holds an older catalogue.py than "
                                       f"instructor/{LAB}/; run `attnlab build {LAB}` first\n")
    assert main(["--root", str(root), "build", LAB]) == 0
    capsys.readouterr()
    assert main(["--root", str(root), "catalogue", LAB]) == 1
    out = capsys.readouterr().out
    assert "SURVIVED" in out and "LOST POINTS" in out
    # a mutant that loses all of its question where its entry states 10% to 50%: the real and stated loss side by side
    assert "kept   0%  stated loss 10% to 50%     NOT AS STATED" in out, out
    assert out.splitlines()[-1] == ("seed 0: 0 of 2 mutants lose what they state, 0 of 1 variants at full marks; "
                                    "1 mutants without a student hint: not_a_bug")


def test_parser_shape():
    p = parser()
    args = vars(p.parse_args(["--root", "/x", "build", "lab05", "--check"]))
    assert args["root"] == "/x" and args["labs"] == ["lab05"] and args["check"] is True
    args = vars(p.parse_args(["build"]))  # defaults are left to the functions
    assert "labs" not in args and "check" not in args and "root" not in args
    with pytest.raises(SystemExit):
        p.parse_args([])


def test_gradebook_accepts_the_global_root_option(built_course, tmp_path, capsys):
    from attnlab.grading.outputs.gradebook import open_gradebook

    db = tmp_path / "gradebook.db"
    with open_gradebook(db):
        pass
    assert main(["--root", str(built_course), "gradebook", str(db), "--csv", str(tmp_path / "out.csv")]) == 0
    assert (tmp_path / "out.csv").exists()


def test_gradebook_csv_dash_writes_standard_output_not_a_file(built_course, tmp_path, monkeypatch, capsys):
    from attnlab.grading.outputs.gradebook import open_gradebook

    db = tmp_path / "gradebook.db"
    with open_gradebook(db) as book:
        book.record("lab99_demo", "alice.ipynb", "/s/alice.ipynb", "a" * 64,
                    {"score": 2.0, "max_score": 3.0, "questions": {"double": {"score": 2.0, "max_score": 2.0,
                                                                              "messages": []}}})
    monkeypatch.chdir(tmp_path)
    assert main(["--root", str(built_course), "gradebook", str(db), "--csv", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "submission,score,max_score,double,notes\nalice.ipynb,2,3,2,\n"
    assert "wrote 1 rows to standard output" in captured.err
    assert not (tmp_path / "-").exists()


def test_the_table_tells_apart_two_submissions_with_the_same_name(built_course, tmp_path, capsys):
    for folder in ("alice", "bob"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "lab.ipynb").write_bytes(b"")
    (tmp_path / "carol.ipynb").write_bytes(b"")
    paths = [str(tmp_path / "alice" / "lab.ipynb"), str(tmp_path / "bob" / "lab.ipynb"), str(tmp_path / "carol.ipynb")]
    assert main(["--root", str(built_course), "grade", LAB, *paths]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == ["alice/lab.ipynb", "bob/lab.ipynb", "carol.ipynb"]


def test_distinct_names_grow_only_as_far_as_needed():
    from attnlab.grading.outputs.score_table import distinct_names

    assert distinct_names(["x/a/s.ipynb", "y/a/s.ipynb", "t.ipynb", "t.ipynb"]) == [
        "x/a/s.ipynb", "y/a/s.ipynb", "t.ipynb", "t.ipynb"]
    assert distinct_names(["a/s.ipynb", "s.ipynb"]) == ["a/s.ipynb", "s.ipynb"]


def test_catalogue_of_a_lab_without_one_says_what_to_write(built_course, tmp_path, capsys):
    import shutil

    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    (root / "instructor" / LAB / "catalogue.py").unlink()
    assert main(["--root", str(root), "build", LAB]) == 0
    assert f"warning: {LAB} has no catalogue" in capsys.readouterr().out
    assert main(["--root", str(root), "catalogue", LAB]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab catalogue: {LAB} has no catalogue, so there is nothing to grade: write "
                          f"instructor/{LAB}/catalogue.py with MUTANTS = [Entry(")
    assert f"then `attnlab build {LAB}`" in err and "Traceback" not in err


def test_a_release_folder_that_cannot_be_made_is_one_line_exit_2(built_course, tmp_path, capsys):
    (tmp_path / "a-file").write_text("x")
    assert main(["--root", str(built_course), "release", str(tmp_path / "a-file" / "out"), "--url", "https://x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"attnlab release: cannot write the release to {tmp_path / 'a-file' / 'out'}: ")
    assert len(err.splitlines()) == 1
