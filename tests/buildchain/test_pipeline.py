"""The whole build on the fixture course: deterministic outputs, `build --check`, and what each output holds."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest

from attnlab.buildchain.pipeline import build, build_lab, on_demand
from attnlab.buildchain.transforms.parse_questions import MasterError
from attnlab.course import load_course

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "course"
LAB = "lab99_demo"
OUTPUTS = sorted([
    f"autograder/{LAB}/hidden_tests.py", f"autograder/{LAB}/{LAB}-otter.zip", f"autograder/{LAB}/manifest.json",
    f"autograder/{LAB}/{LAB}-gradescope.zip", f"autograder/{LAB}/catalogue.py",
    f"autograder/{LAB}/reference.py", f"labs/{LAB}/{LAB}.ipynb", f"solutions/{LAB}/{LAB}.ipynb",
    f"src/attnlab/kit/generated/public_tests/{LAB}/Scale.py", f"src/attnlab/kit/generated/public_tests/{LAB}/double.py",
    "nbgrader/nbgrader_config.py", f"nbgrader/source/{LAB}/{LAB}.ipynb",
])
SOLUTION_LINES = ("result = x * 2", "return result", "return x * self.weight")
HIDDEN_TEXT = ("double_values", "scale_values", "compare_call", "build_pair", "generator=rng", "HiddenSuite")


def outputs(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not str(p.relative_to(root)).startswith(("instructor", "docs"))}


def outputs_paths(root: Path) -> list[Path]:
    return [root / rel for rel in outputs(root)]


@pytest.fixture
def built(built_course):
    """The fixture course built once per session (tests/conftest.py); read-only."""
    return built_course


@pytest.fixture
def copy(built, tmp_path):
    """A fresh copy of the built course, for tests that change it."""
    root = tmp_path / "course"
    shutil.copytree(built, root)
    return root


def check(root):
    course = load_course(root)
    return build(course, list(course.labs), check=True)


def test_two_builds_are_byte_identical(built, tmp_path):
    other = tmp_path / "elsewhere"
    shutil.copytree(FIXTURE, other)
    course = load_course(other)
    assert sorted(line.removeprefix("wrote ") for line in build(course, list(course.labs))) == OUTPUTS
    first, second = outputs(built), outputs(other)
    assert sorted(first) == OUTPUTS
    assert first == second


def test_build_again_writes_nothing_and_check_is_clean(copy):
    course = load_course(copy)
    before = outputs(copy)
    assert build(course, list(course.labs)) == []
    assert outputs(copy) == before
    assert check(copy) == []


def test_check_reports_a_changed_master_without_writing(copy):
    master = copy / "instructor" / LAB / f"{LAB}.py"
    master.write_text(master.read_text().replace("result = x * 2", "result = x + x"))
    before = outputs(copy)
    report = check(copy)
    # the student notebook does not show the solution, so it does not change (the nbgrader source does)
    assert sorted(report) == sorted(f"differs from a fresh build: {p}" for p in (
        f"solutions/{LAB}/{LAB}.ipynb", f"autograder/{LAB}/reference.py", f"autograder/{LAB}/{LAB}-otter.zip",
        f"autograder/{LAB}/{LAB}-gradescope.zip", f"nbgrader/source/{LAB}/{LAB}.ipynb"))
    assert outputs(copy) == before


def test_check_reports_a_changed_public_check(copy):
    master = copy / "instructor" / LAB / f"{LAB}.py"
    master.write_text(master.read_text().replace("should be [2, 4]", "must be [2, 4]"))
    report = check(copy)
    assert f"differs from a fresh build: src/attnlab/kit/generated/public_tests/{LAB}/double.py" in report
    assert f"differs from a fresh build: labs/{LAB}/{LAB}.ipynb" not in report


def test_check_reports_a_deleted_output_and_build_restores_it(copy):
    (copy / "labs" / LAB / f"{LAB}.ipynb").unlink()
    assert check(copy) == [f"missing: labs/{LAB}/{LAB}.ipynb"]
    course = load_course(copy)
    assert build(course, list(course.labs)) == [f"wrote labs/{LAB}/{LAB}.ipynb"]
    assert check(copy) == []


def test_check_reports_a_stale_extra_file_and_build_removes_it(copy):
    stale = copy / "autograder" / LAB / "old_reference.py"
    stale.write_text("x = 1\n")
    cache = copy / "src" / "attnlab" / "kit" / "generated" / "public_tests" / LAB / "__pycache__" / "double.cpython-311.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"\0")
    assert check(copy) == [f"stale (not produced by the build): autograder/{LAB}/old_reference.py"]
    assert stale.exists()
    course = load_course(copy)
    assert build(course, list(course.labs)) == [f"removed stale autograder/{LAB}/old_reference.py"]
    assert not stale.exists() and cache.exists()


def _cells(path):
    return nbformat.read(path, as_version=4).cells


def test_student_notebook_has_no_solution_and_no_hidden_test(built):
    text = (built / "labs" / LAB / f"{LAB}.ipynb").read_text()
    for line in SOLUTION_LINES + HIDDEN_TEXT + ("BEGIN SOLUTION", "END SOLUTION", "# SOLUTION", "BEGIN QUESTION",
                                                "assert torch.equal(double"):
        assert line not in text, line
    cells = _cells(built / "labs" / LAB / f"{LAB}.ipynb")
    sources = [c.source for c in cells]
    assert sources.count('grader.check("double")') == 1 and sources.count('grader.check("Scale")') == 1
    assert cells[1].metadata["tags"] == ["attnlab_setup"] and "start_lab('lab99_demo')" in cells[1].source
    assert '    # TODO: your code here\n    raise NotImplementedError("double: not written yet")' in sources[4]
    for public in (built / "src" / "attnlab" / "kit" / "generated" / "public_tests" / LAB).iterdir():
        for word in SOLUTION_LINES + HIDDEN_TEXT:
            assert word not in public.read_text(), (public.name, word)


def test_solution_notebook_holds_the_solution_without_markers(built):
    cells = _cells(built / "solutions" / LAB / f"{LAB}.ipynb")
    text = "\n".join(c.source for c in cells)
    for line in SOLUTION_LINES:
        assert line in text
    assert "SOLUTION" not in text and "TODO" not in text
    assert 'grader.check("double")' in text
    assert [c.cell_type for c in cells] == [c.cell_type for c in _cells(built / "labs" / LAB / f"{LAB}.ipynb")]
    assert all(c.id.startswith("lab99-sol-") for c in cells)


def test_autograder_files(built):
    ag = built / "autograder" / LAB
    manifest = json.loads((ag / "manifest.json").read_text())
    assert manifest == {
        "lab": LAB, "title": "Lab 99: a fixture", "max_score": 3.0, "questions": {"double": 2.0, "Scale": 1.0},
        "tests": [{"name": "double_values", "question": "double", "points": 2.0},
                  {"name": "scale_values", "question": "Scale", "points": 1.0}],
        "gradescope_visibility": {"public_checks": "visible", "hidden_tests": "after_due_date"}}
    # the instructor's files, each under a header naming its source
    header = "# Generated by `attnlab build` from instructor/{}/{}: edit that file, not this one.\n"
    hidden = (FIXTURE / "instructor" / LAB / "hidden_tests.py").read_bytes()
    assert (ag / "hidden_tests.py").read_bytes() == header.format(LAB, "hidden_tests.py").encode() + hidden
    ns = {}
    exec((ag / "reference.py").read_text(), ns)
    import torch

    assert torch.equal(ns["double"](torch.tensor([1.5])), torch.tensor([3.0]))
    assert "an experiment the grader skips" not in (ag / "reference.py").read_text()
    # the catalogue goes to every grader (each names likely mistakes), plain Otter's zip too
    catalogue = header.format(LAB, "catalogue.py").encode() + (FIXTURE / "instructor" / LAB / "catalogue.py").read_bytes()
    assert (ag / "catalogue.py").read_bytes() == catalogue
    import zipfile

    with zipfile.ZipFile(ag / f"{LAB}-gradescope.zip") as zf:
        assert zf.read("bundle/catalogue.py") == catalogue
    with zipfile.ZipFile(ag / f"{LAB}-otter.zip") as zf:
        assert zf.read("files/catalogue.py") == catalogue


def test_build_lab_refuses_hidden_tests_for_an_unknown_question(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    hidden = root / "instructor" / LAB / "hidden_tests.py"
    hidden.write_text(hidden.read_text() + "\n\n@suite.test('triple')\ndef triple_values(student, ref, rng):\n    pass\n")
    course = load_course(root)
    with pytest.raises(MasterError, match=r"hidden tests for questions the master does not have: \['triple'\]"):
        build_lab(course, course.lab(LAB))
    assert not (root / "labs").exists()


def test_build_lab_refuses_master_points_that_disagree_with_the_hidden_tests(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    master = root / "instructor" / LAB / f"{LAB}.py"
    text = master.read_text()
    assert text.count("# points: 2\n") == 1
    master.write_text(text.replace("# points: 2\n", "# points: 5\n"))
    course = load_course(root)
    with pytest.raises(MasterError, match=r"lab99_demo: question 'double' is worth 5 points in the master .*"
                                          r"hidden tests' `points=` add up to 2 .*make them equal"):
        build(course, list(course.labs))
    assert not (root / "labs").exists()


def test_build_warns_about_a_missing_catalogue_readme_and_contract_section(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(FIXTURE, root)
    course = load_course(root)
    assert not [line for line in build(course, list(course.labs)) if line.startswith("warning:")]
    (root / "instructor" / LAB / "catalogue.py").unlink()
    (root / "instructor" / LAB / "README.md").unlink()
    curriculum = root / "docs" / "CURRICULUM.md"
    curriculum.write_text(curriculum.read_text().replace("## Lab 99", "## Lab 98"))
    warnings = [line for line in build(course, list(course.labs)) if line.startswith("warning:")]
    assert warnings == [
        f"warning: {LAB} has no catalogue: write instructor/{LAB}/catalogue.py (MUTANTS: the mistakes students "
        "make, each with a hint; VARIANTS: correct alternatives) so the grader can name likely mistakes and "
        "`attnlab catalogue` can check the hidden tests",
        f"warning: {LAB} has no README: write instructor/{LAB}/README.md (questions, points, contract, timings, "
        "what the experiments show)",
        f"warning: {LAB} has no contract: add a `## Lab 99: <title>` section to docs/CURRICULUM.md with the graded "
        "names, signatures and attributes",
    ]
    assert check(root) == []  # --check reports stale files only


def test_without_an_install_address_no_gradescope_zip_is_written(copy):
    """One address for the notebooks and the Gradescope zip: without one, the build writes no zip that would fail
    in Gradescope (and removes one written before), and its warning says how to get one."""
    config = copy / "instructor" / "course.yml"
    config.write_text(re.sub(r"install_spec:.*", 'install_spec: ""', config.read_text()))
    course = load_course(copy)
    report = build(course, list(course.labs))
    zip_path = copy / "autograder" / LAB / f"{LAB}-gradescope.zip"
    assert not zip_path.exists() and f"removed stale autograder/{LAB}/{LAB}-gradescope.zip" in report
    warning = next(line for line in report if line.startswith("warning: "))
    assert "writes no Gradescope zip" in warning and "attnlab release OUT --url URL" in warning
    assert "KIT = ''" in (copy / "labs" / LAB / f"{LAB}.ipynb").read_text()
    assert check(copy) == []


def test_on_demand_outputs_may_be_absent_and_build_makes_them_again(copy):
    """The zips and nbgrader's source are not kept in git: a fresh clone's check is clean without them, a
    local build that left a different copy is still reported, and `attnlab build` makes them byte for byte."""
    course = load_course(copy)
    made = {p: p.read_bytes() for p in outputs_paths(copy) if on_demand(course, p)}
    assert {p.name for p in made} == {f"{LAB}-otter.zip", f"{LAB}-gradescope.zip", f"{LAB}.ipynb"}
    for p in made:
        p.unlink()
    assert check(copy) == []
    zip_path = next(p for p in made if p.name.endswith("-otter.zip"))
    zip_path.write_bytes(b"an older build")
    assert check(copy) == [f"differs from a fresh build: {zip_path.relative_to(copy)}"]
    build(course, list(course.labs))
    assert {p: p.read_bytes() for p in made} == made


def test_gitignore_keeps_the_on_demand_outputs_out_of_git():
    """.gitignore and `on_demand` say the same of the real course's outputs."""
    course = load_course(ROOT)
    lab = course.labs[0]
    paths = [lab.autograder_dir / f"{lab.id}-otter.zip", lab.autograder_dir / f"{lab.id}-gradescope.zip",
             lab.nbgrader_source, lab.autograder_dir / "reference.py", lab.student_notebook]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *map(str, paths)], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert sorted(ignored) == sorted(str(p) for p in paths if on_demand(course, p))
