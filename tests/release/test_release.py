"""attnlab release: a student repository with the notebooks, the kit and a README, and nothing instructors keep."""

from __future__ import annotations

import dataclasses
import json
import shutil
import zipfile
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from attnlab.buildchain.masters import Masters
from attnlab.buildchain.transforms.check_no_leak import solution_lines
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.cli import main
from attnlab.commands import UsageError
from attnlab.commands import release as release_command
from attnlab.course import CourseError, load_course
from attnlab.release import install_spec_for, release
from attnlab.release.hold_back import held_back
from attnlab.release.leak_gate import ReleaseLeak, _shown_lines, check_release, secret_lines
from attnlab.release.readme import colab_url

ROOT = Path(__file__).resolve().parents[2]
URL = "https://github.com/example-course/dl-labs"
# Labs whose given cells hold code of lab05, lab06, lab07 or lab09 (lab11: lab07's blocks; lab12: lab09's GPT): held
# back while those are open (no due dates here).
GIVING = {"lab06_multi_head_attention", "lab07_transformer_block", "lab08_translation", "lab10_pretrained_transformers",
          "lab11_vision_transformer", "lab12_modern_decoder"}
NOW = datetime(2027, 2, 20, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT)


@pytest.fixture(scope="module")
def released(course, tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    release(course, list(course.labs), out, url=URL)
    return out


def _shipped(course):
    return [lab for lab in course.labs if lab.id not in GIVING]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_layout_notebooks_kit_readme_licence_and_nothing_else(course, released):
    files = _files(released)
    for lab in course.labs:
        assert (f"labs/{lab.id}/{lab.id}.ipynb" in files) == (lab.id not in GIVING)
        # a lab not released yet ships none of its public checks
        shipped = any(name.startswith(f"src/attnlab/kit/generated/public_tests/{lab.id}/") for name in files)
        assert shipped == (lab.id not in GIVING)
    assert {"README.md", "LICENSE", "pyproject.toml", ".gitignore", "src/attnlab/__init__.py",
            "docs/CURRICULUM.md"} <= set(files)
    tops = {name.split("/")[0] for name in files}
    assert tops == {"README.md", "LICENSE", "pyproject.toml", ".gitignore", "labs", "src", "docs"}


def test_notebooks_install_the_kit_from_the_released_repository(course, released):
    for lab in (lab for lab in course.labs if lab.id not in GIVING):
        nb = json.loads((released / "labs" / lab.id / f"{lab.id}.ipynb").read_text())
        setup = next("".join(c["source"]) for c in nb["cells"] if "attnlab_setup" in c["metadata"].get("tags", []))
        assert f"KIT = 'attnlab @ git+{URL}'" in setup


def test_readme_has_a_colab_badge_per_lab_and_says_how_to_submit(course, released):
    readme = (released / "README.md").read_text()
    for lab in course.labs:
        assert ((f"https://colab.research.google.com/github/example-course/dl-labs/blob/main/labs/{lab.id}/"
                 f"{lab.id}.ipynb") in readme) == (lab.id not in GIVING)
        assert (lab.title in readme) == (lab.id not in GIVING)  # no row for a held-back lab
    assert "File › Download › Download .ipynb" in readme and 'pip install -e ".[student]"' in readme


def test_colab_links_only_for_github():
    assert colab_url("git+https://github.com/a/b.git", "dev", "labs/x.ipynb") == (
        "https://colab.research.google.com/github/a/b/blob/dev/labs/x.ipynb")
    assert colab_url("https://gitlab.example.edu/a/b", "main", "x.ipynb") is None


def test_release_is_deterministic(course, released, tmp_path):
    again = tmp_path / "again"
    release(course, list(course.labs), again, url=URL)
    assert _files(again) == _files(released)


def test_the_leak_gate_passes_the_release_and_knows_the_secrets(course, released):
    check_release(course, _shipped(course), released)
    secrets = secret_lines(course)
    origins = {origin.split("/")[-1].split(" ")[-1] for origin in secrets.values()}
    assert origins == {"catalogue.py", "hidden_tests.py", "solution"}


def _plant(released, tmp_path, rel, text):
    copy = tmp_path / "planted"
    shutil.copytree(released, copy)
    path = copy / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(path.read_text() + "\n" + text + "\n" if path.exists() else text)
    return copy


@pytest.mark.parametrize("origin", ["solution", "hidden_tests.py", "catalogue.py"])
def test_the_leak_gate_catches_a_planted_secret_line(course, released, tmp_path, origin):
    shown = _shown_lines(_shipped(course), Masters(course))  # given code from an earlier lab is meant to be seen
    line = next(line for line, where in sorted(secret_lines(course).items()) if where.endswith(origin)
                and line not in shown)
    planted = _plant(released, tmp_path, "src/attnlab/kit/generated/public_tests/lab05_self_attention/causal_mask.py", line)
    with pytest.raises(ReleaseLeak, match="causal_mask.py holds a line of"):
        check_release(course, _shipped(course), planted)


LAB01 = "lab01_text_as_vectors"


def test_the_released_notebook_has_the_written_answer_cells_and_no_reference_or_rubric(course, released):
    from attnlab.buildchain.transforms.parse_questions import parse_questions
    from attnlab.records.stub_text import PLACEHOLDER

    lab = course.lab(LAB01)
    written = [q for q in parse_questions(read_master(lab.master))[1] if q.manual]
    assert len(written) >= 2
    cells = json.loads((released / "labs" / LAB01 / f"{LAB01}.ipynb").read_text())["cells"]
    answers = {c["metadata"]["attnlab"]["written"]: c for c in cells if "attnlab" in c["metadata"]}
    assert list(answers) == [q.name for q in written]
    for q in written:
        cell = answers[q.name]
        assert "".join(cell["source"]) == PLACEHOLDER and cell["metadata"]["nbgrader"]["points"] == q.points
    text = "\n".join(p.read_text(errors="replace") for p in released.rglob("*") if p.is_file())
    assert not [q.name for q in written if q.reference.split("\n")[0] in text]
    assert not [c for q in written for c, _ in q.rubric if c in " ".join(text.split())]


@pytest.mark.parametrize("kind", ["the reference answer", "a rubric criterion"])
def test_the_leak_gate_catches_a_planted_reference_answer_or_rubric_criterion(course, released, tmp_path, kind):
    from attnlab.release.leak_gate import course_written_secrets

    secrets = course_written_secrets(course)
    assert {what.split("(")[-1] for what in secrets.values()} >= {f"{LAB01})"}
    secret = next(s for s, what in sorted(secrets.items()) if what.startswith(kind) and LAB01 in what)
    # in the student's answer cell of the released notebook, re-wrapped
    copy = tmp_path / "planted"
    shutil.copytree(released, copy)
    path = copy / "labs" / LAB01 / f"{LAB01}.ipynb"
    nb = json.loads(path.read_text())
    at = next(i for i, c in enumerate(nb["cells"]) if "attnlab" in c["metadata"])
    nb["cells"][at]["source"] = "My answer:\n" + secret.replace(" ", "\n", 2)
    path.write_text(json.dumps(nb))
    with pytest.raises(ReleaseLeak, match=rf"{LAB01}.ipynb cell {at} holds {kind} of written question .*\({LAB01}\)"):
        check_release(course, _shipped(course), copy)
    # in a plain file of the kit
    planted = _plant(released, tmp_path / "b", "README.md", f"Note: {secret} (copied)")
    with pytest.raises(ReleaseLeak, match=rf"README.md holds {kind}"):
        check_release(course, _shipped(course), planted)


def test_the_leak_gate_refuses_instructor_files_and_looks_inside_wheels(course, released, tmp_path):
    planted = _plant(released, tmp_path, "solutions/lab05_self_attention/notes.md", "x")
    with pytest.raises(ReleaseLeak, match="instructor-only file: solutions/"):
        check_release(course, _shipped(course), planted)
    secret = next(iter(sorted(secret_lines(course))))
    wheel_dir = tmp_path / "w"
    shutil.copytree(released, wheel_dir)
    (wheel_dir / "dist").mkdir()
    with zipfile.ZipFile(wheel_dir / "dist" / "attnlab-0.1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("attnlab/extra.py", secret + "\n")
    with pytest.raises(ReleaseLeak, match=r"attnlab-0.1.0-py3-none-any.whl!attnlab/extra.py"):
        check_release(course, _shipped(course), wheel_dir)


def test_the_placeholder_and_non_urls_are_refused(tmp_path, capsys):
    assert install_spec_for("https://gitlab.example.edu/a/b.git/") == "attnlab @ git+https://gitlab.example.edu/a/b.git"
    # commands raise UsageError; the CLI prints it on one line, exit 2
    with pytest.raises(UsageError, match="placeholder"):
        release_command(out=str(tmp_path / "o"), url="https://github.com/attnlab/attnlab", root=str(ROOT))
    assert not (tmp_path / "o").exists()
    assert main(["--root", str(ROOT), "release", str(tmp_path / "o"), "--url", "my course"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab release: ") and "is not a repository URL" in err and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_wheel_is_written_deterministically_and_holds_the_checks(course, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    release(course, list(course.labs)[:1], a, url=URL, wheel=True)
    release(course, list(course.labs)[:1], b, url=URL, wheel=True)
    (wa,), (wb,) = list((a / "dist").glob("*.whl")), list((b / "dist").glob("*.whl"))
    assert wa.read_bytes() == wb.read_bytes()
    with zipfile.ZipFile(wa) as zf:
        names = zf.namelist()
    first = list(course.labs)[0].id
    assert any(n.startswith(f"attnlab/kit/generated/public_tests/{first}/") for n in names)  # the released lab's checks
    assert not any(n.startswith("attnlab/kit/generated/public_tests/lab05_self_attention/") for n in names)  # only those


def _scanned_lines(folder: Path):
    """(file, line) of every line in folder: notebooks cell by cell, wheels member by member (independent of the
    gate's own reader)."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as zf:
                texts = [(f"{rel}!{m}", zf.read(m).decode("utf-8", "replace")) for m in zf.namelist()]
        elif path.suffix == ".ipynb":
            texts = [(rel, "".join(cell["source"])) for cell in json.loads(path.read_text())["cells"]]
        else:
            texts = [(rel, path.read_bytes().decode("utf-8", "replace"))]
        for name, text in texts:
            yield from ((name, line.strip()) for line in text.splitlines())


def test_a_release_of_an_open_course_ships_no_line_of_any_solution(course, tmp_path, capsys):
    """The first command an instructor runs: every lab, no due dates. lab06-08 would ship lab05-07's solutions in
    their given cells, lab10 lab07's and lab09's, lab11 lab07's, lab12 lab09's; they are held back, the rest
    released, exit 0."""
    out = tmp_path / "course-labs"
    assert main(["--root", str(ROOT), "release", str(out), "--url", URL, "--wheel"]) == 0
    said = capsys.readouterr().out
    assert "attnlab release: released lab01_text_as_vectors, lab02_word2vec, lab03_convolutions, " \
           "lab04_recurrent_networks, lab05_self_attention, lab09_mini_gpt, lab13_adapt_and_align\n" in said
    assert ("attnlab release: held back: lab06_multi_head_attention gives code from lab05_self_attention "
            "(scaled_dot_product_attention), which is still open (no due date): release lab06 after "
            "lab05_self_attention closes, or mark lab05_self_attention closed in instructor/course.yml") in said
    assert "attnlab release: held back: lab11_vision_transformer gives code from " in said
    assert "attnlab release: held back: lab12_modern_decoder gives code from lab09_mini_gpt" in said
    assert said.count("held back:") == 6
    solutions = {line: where for line, where in secret_lines(course).items() if where.endswith(" solution")}
    # a line a released lab's own master shows outside its solution blocks (an argument check) is no solution
    own = set()
    for lab in _shipped(course):
        own |= {line.strip() for line in lab.master.read_text().splitlines()} - solution_lines(read_master(lab.master))
    found = [(name, line, solutions[line]) for name, line in _scanned_lines(out) if line in solutions
             and line not in own]
    assert any(name.endswith(".whl!attnlab/course.py") for name, _ in _scanned_lines(out))  # the wheel was read
    assert found == []


def _with_due(course, **dues):
    labs = tuple(dataclasses.replace(lab, due=dues.get(lab.id.split("_")[0], lab.due)) for lab in course.labs)
    return dataclasses.replace(course, labs=labs)


def test_a_lab_is_held_back_until_the_lab_it_gives_code_from_closes(course, tmp_path):
    dated = _with_due(course, lab05=date(2027, 2, 14))
    labs = [dated.lab("lab05"), dated.lab("lab06")]
    before = release(dated, labs, tmp_path / "before", url=URL, now=datetime(2027, 2, 14, 23, 0, tzinfo=timezone.utc))
    assert before.released == ["lab05_self_attention"]
    assert before.held_back == {"lab06_multi_head_attention": (
        "lab06_multi_head_attention gives code from lab05_self_attention (scaled_dot_product_attention), which is "
        "still open (due 2027-02-14): release lab06 after lab05_self_attention closes, or mark lab05_self_attention "
        "closed in instructor/course.yml (closed: true, or a due: date that has passed) or with --closed lab05")}
    assert not (tmp_path / "before" / "labs" / "lab06_multi_head_attention").exists()
    after = release(dated, labs, tmp_path / "after", url=URL, now=NOW)
    assert (after.released, after.held_back) == (["lab05_self_attention", "lab06_multi_head_attention"], {})
    nb = json.loads((tmp_path / "after/labs/lab06_multi_head_attention/lab06_multi_head_attention.ipynb").read_text())
    given = next("".join(c["source"]) for c in nb["cells"] if "".join(c["source"]).startswith("# Given (from"))
    assert "def scaled_dot_product_attention" in given  # lab05 has closed: its code is given


def test_hold_back_follows_given_code_to_the_lab_that_wrote_it(course):
    """lab07 gives lab06's copy of lab05's function: with lab06 closed and lab05 open, lab07 waits for lab05."""
    closed06 = course.with_closed(["lab06"])
    reasons = held_back(closed06, [closed06.lab("lab06"), closed06.lab("lab07"), closed06.lab("lab09")], NOW)
    assert sorted(reasons) == ["lab06_multi_head_attention", "lab07_transformer_block"]
    assert reasons["lab07_transformer_block"].startswith(
        "lab07_transformer_block gives code from lab05_self_attention (scaled_dot_product_attention), which is "
        "still open (no due date): release lab07 after lab05_self_attention closes")
    both_open = held_back(course, [course.lab("lab07")], NOW)["lab07_transformer_block"]
    assert "and from lab06_multi_head_attention (split_heads, merge_heads, MultiHeadAttention), which is still open" \
        in both_open and both_open.endswith("or with --closed lab05,lab06")
    everything = course.with_closed(["lab05", "lab06", "lab07", "lab09"])
    assert held_back(everything, list(everything.labs), NOW) == {}


def test_the_gate_fails_given_code_of_an_open_lab_and_passes_it_once_closed(course, tmp_path):
    closed = course.with_closed(["lab05"])
    labs = [closed.lab("lab06")]
    release(closed, labs, tmp_path / "r", url=URL, now=NOW)
    check_release(closed, labs, tmp_path / "r", now=NOW)
    with pytest.raises(ReleaseLeak, match=r"lab06_multi_head_attention.ipynb cell \d+ holds a line of "
                                          r"lab05_self_attention(/catalogue.py| solution): "):
        check_release(course, labs, tmp_path / "r", now=NOW)  # lab05 open: the same files leak its solution
    transitively = course.with_closed(["lab06"])  # closing lab06 does not publish lab05's code it gives
    with pytest.raises(ReleaseLeak, match="holds a line of lab05_self_attention"):
        check_release(transitively, labs, tmp_path / "r", now=NOW)


def test_the_gate_reads_notebook_cells_not_their_json(course, released, tmp_path):
    """A notebook's JSON quotes each line ("    x = ...\\n",): the gate reads the cells' text."""
    shown = _shown_lines(_shipped(course), Masters(course))
    line = next(line for line, where in sorted(secret_lines(course).items()) if where.endswith("solution")
                and line not in shown)
    copy = tmp_path / "planted"
    shutil.copytree(released, copy)
    path = copy / "labs/lab02_word2vec/lab02_word2vec.ipynb"
    nb = json.loads(path.read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "source": ["x = 1\n", "    " + line + "\n"],
                        "outputs": [], "execution_count": None})
    path.write_text(json.dumps(nb, indent=1))
    with pytest.raises(ReleaseLeak, match=r"lab02_word2vec.ipynb cell \d+ holds a line of .* solution"):
        check_release(course, _shipped(course), copy)


def test_nothing_to_release_is_an_error_that_writes_nothing(course, tmp_path, capsys):
    with pytest.raises(CourseError, match="nothing to release, every lab asked for is held back: lab06_multi"):
        release(course, [course.lab("lab06")], tmp_path / "r", url=URL, now=NOW)
    assert not (tmp_path / "r").exists()
    assert main(["--root", str(ROOT), "release", str(tmp_path / "r"), "--url", URL, "--labs", "lab07"]) == 2
    assert "attnlab release: nothing to release" in capsys.readouterr().err


def test_closed_on_the_command_line_takes_commas_or_separate_ids(tmp_path, capsys):
    assert release_command(out=str(tmp_path / "a"), url=URL, labs=["lab06"], closed=["lab05,lab09"],
                           root=str(ROOT)) == 0
    said = capsys.readouterr().out
    assert "released lab06_multi_head_attention\n" in said and "held back" not in said
    assert main(["--root", str(ROOT), "release", str(tmp_path / "b"), "--url", URL, "--labs", "lab06", "lab07",
                 "--closed", "lab05", "lab06"]) == 0
    assert "released lab06_multi_head_attention, lab07_transformer_block\n" in capsys.readouterr().out


def test_release_writes_gradescope_zips_installing_from_the_url_beside_out(tmp_path, capsys):
    out = tmp_path / "students"
    assert main(["--root", str(ROOT), "release", str(out), "--url", URL, "--labs", "lab01"]) == 0
    zips = tmp_path / "students-gradescope"
    assert sorted(p.name for p in zips.iterdir()) == ["lab01_text_as_vectors-gradescope.zip"]
    with zipfile.ZipFile(zips / "lab01_text_as_vectors-gradescope.zip") as zf:
        setup = zf.read("setup.sh").decode()
        assert "bundle/hidden_tests.py" in zf.namelist()
    assert f"kit='attnlab @ git+{URL}'" in setup
    assert not [p for p in out.rglob("*.zip")]
    assert str(zips / "lab01_text_as_vectors-gradescope.zip") in capsys.readouterr().out


def test_release_refuses_a_gradescope_folder_inside_the_student_repository(tmp_path, capsys):
    out = tmp_path / "students"
    argv = ["--root", str(ROOT), "release", str(out), "--url", URL, "--labs", "lab01"]
    assert main(argv + ["--gradescope", str(out / "zips")]) == 2
    assert "hold the hidden tests" in capsys.readouterr().err
    assert not out.exists()


def test_a_release_reads_and_parses_each_master_once(course, tmp_path, monkeypatch):
    """The hold-back rule, the build of each lab (its given cells included) and every gate of the leak check share
    the run's masters (``buildchain/masters.py``): each master of the course is read from disk and parsed once."""
    import pathlib

    from attnlab.buildchain.transforms import read_master as reader

    masters = {lab.master.resolve(): lab.id for lab in course.labs}
    reads: dict[str, int] = {}
    parses: list[str] = []
    read_text, parse = pathlib.Path.read_text, reader.parse_master

    def counted_read(self, *args, **kwargs):
        if self.resolve() in masters:
            reads[masters[self.resolve()]] = reads.get(masters[self.resolve()], 0) + 1
        return read_text(self, *args, **kwargs)

    def counted_parse(text, **kwargs):
        parses.append(text)
        return parse(text, **kwargs)

    monkeypatch.setattr(pathlib.Path, "read_text", counted_read)
    monkeypatch.setattr(reader, "parse_master", counted_parse)
    two = list(course.labs[:2])
    done = release(course, two, tmp_path / "out", url=URL)
    assert done.released == [lab.id for lab in two]
    assert {lab.id for lab in two} <= set(reads), "the released labs' masters were not read"
    assert {lab: n for lab, n in reads.items() if n != 1} == {}, "a master was read more than once"
    assert len(parses) == len(set(parses)) == len(reads), "a master was parsed more than once"
