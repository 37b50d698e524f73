"""answer_cells: a written question's reference becomes one answer cell; the whole build on a master with a
written question (tests/buildchain/written_master.py): the student notebook gets an open answer cell with the
placeholder and its metadata, never the reference or the rubric; the solution and the nbgrader source keep the
reference; the bundle lists the question (``written_questions``); the code questions are untouched."""

from __future__ import annotations

import json
import zipfile

import nbformat
import pytest

from attnlab.buildchain.pipeline import build, build_lab
from attnlab.buildchain.transforms.answer_cells import (
    ANSWER_META,
    EXPORT_BEGIN,
    EXPORT_END,
    answer_cells,
)
from attnlab.buildchain.transforms.markers import META
from attnlab.buildchain.transforms.nbgrader_cells import checksum
from attnlab.course import load_course
from attnlab.grading.core.bundle import RubricItem, WrittenQuestion, load_bundle, written_questions
from attnlab.records.stub_text import PLACEHOLDER

from .written_master import CRITERIA, FIXTURE, LAB, NAME, PROMPT, REFERENCE, with_written


def _labelled(source, role, question=None):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata[META] = {"role": role, "question": question}
    return cell


def test_the_reference_cells_become_one_answer_cell_in_their_place():
    nb = nbformat.v4.new_notebook()
    nb.cells = [_labelled("intro", "body"), _labelled("the prompt", "question", "w"),
                _labelled("first part\n", "reference", "w"), _labelled("second part", "reference", "w"),
                _labelled("after", "body")]
    out = answer_cells(nb, {"w": 1.5})
    assert [c.source for c in out.cells] == ["intro", EXPORT_BEGIN, "the prompt", "first part\n\nsecond part",
                                             EXPORT_END, "after"]
    answer = out.cells[3]
    assert answer.cell_type == "markdown"
    assert answer.metadata[ANSWER_META] == {"written": "w", "points": 1.5}
    assert answer.metadata[META] == {"role": "answer", "question": "w"}
    assert len(nb.cells) == 5  # the input is not touched
    # a code question's cells (not in points) are left alone
    assert [c.source for c in answer_cells(nb, {}).cells] == [c.source for c in nb.cells]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = with_written(tmp_path_factory.mktemp("written"))
    course = load_course(root)
    build(course, list(course.labs))
    return root


def _notebook(root, folder):
    return nbformat.read(root / folder / LAB / f"{LAB}.ipynb", as_version=4)


def _answer(nb):
    (cell,) = [c for c in nb.cells if c.metadata.get(ANSWER_META, {}).get("written") == NAME]
    return cell


def test_the_student_notebook_gets_an_open_answer_cell_and_no_reference_or_rubric(built):
    nb = _notebook(built, "labs")
    cell = _answer(nb)
    assert cell.cell_type == "markdown" and cell.source == PLACEHOLDER
    assert cell.metadata[ANSWER_META] == {"written": NAME, "points": 2.0}
    assert "editable" not in cell.metadata and "deletable" not in cell.metadata  # not locked
    meta = cell.metadata["nbgrader"]
    assert (meta["grade"], meta["solution"], meta["locked"], meta["points"], meta["grade_id"]) == (True, True, False,
                                                                                                     2.0, NAME)
    assert meta["checksum"] == checksum(cell)
    index = nb.cells.index(cell)
    # the prompt stays, right before the answer, both framed by Otter's export comments (locked)
    assert [c.source for c in nb.cells[index - 2:index + 2]] == [EXPORT_BEGIN, PROMPT, PLACEHOLDER, EXPORT_END]
    assert nb.cells[index + 1].metadata["editable"] is False
    text = (built / "labs" / LAB / f"{LAB}.ipynb").read_text()
    assert "element by element" not in text
    assert not [c for c in CRITERIA if c in text], "a rubric criterion reached the student notebook"
    assert "BEGIN SOLUTION" not in text and "manual: true" not in text and "rubric" not in text


def test_the_solution_and_the_nbgrader_source_keep_the_reference(built):
    for folder, kind in (("solutions", "solution"), ("nbgrader/source", "nbgrader")):
        nb = _notebook(built, folder)
        cell = _answer(nb)
        assert cell.source == REFERENCE, kind
        assert cell.metadata["nbgrader"]["grade_id"] == NAME and cell.metadata["nbgrader"]["points"] == 2.0
        text = json.dumps(nb)
        assert not [c for c in CRITERIA if c in text], f"a rubric criterion reached the {kind} notebook"
    config = (built / "nbgrader" / "nbgrader_config.py").read_text()
    assert f"c.ClearSolutions.text_stub = {PLACEHOLDER!r}" in config


def test_the_bundle_lists_the_written_question_and_leaves_the_code_questions_as_they_were(built, tmp_path):
    manifest = json.loads((built / "autograder" / LAB / "manifest.json").read_text())
    assert manifest["questions"] == {"double": 2.0, "Scale": 1.0} and manifest["max_score"] == 3.0
    expected = WrittenQuestion(NAME, 2.0, PROMPT, REFERENCE, (
        RubricItem(f"{NAME}.1", CRITERIA[0], 1.0), RubricItem(f"{NAME}.2", CRITERIA[1], 1.0),
        RubricItem(f"{NAME}.3", CRITERIA[2], -0.5)))
    bundle_dir = built / "autograder" / LAB
    assert written_questions(bundle_dir) == [expected]
    assert written_questions(load_bundle(bundle_dir)) == [expected]
    assert written_questions(manifest) == [expected]
    assert manifest["written"] == [expected.as_dict()]
    # no test file, no public check, no hidden test for a written question; plain Otter runs the student's code
    # beside its support files: its manifest holds no reference answer or rubric
    with zipfile.ZipFile(bundle_dir / f"{LAB}-otter.zip") as zf:
        assert not [n for n in zf.namelist() if NAME in n]
        otter_manifest = json.loads(zf.read("files/manifest.json"))
        assert "written" not in otter_manifest and otter_manifest["questions"] == manifest["questions"]
        assert not [n for n in zf.namelist() if REFERENCE.split()[0] in zf.read(n).decode(errors="replace")]
    assert not (built / "src" / "attnlab" / "kit" / "generated" / "public_tests" / LAB / f"{NAME}.py").exists()


def test_an_old_bundle_has_no_written_question_and_a_broken_list_says_rebuild(built_course, tmp_path):
    assert written_questions(built_course / "autograder" / LAB) == []
    assert written_questions(tmp_path / "nothing here") == []
    with pytest.raises(ValueError, match=r"broken `written` list .*attnlab build"):
        written_questions({"lab": LAB, "written": [{"name": "x"}]})


def test_a_written_question_changes_no_other_cell(built, built_course):
    """The student notebook of the plain fixture, plus the prompt and the answer cell (the master ends with the
    written question) before the hand-in cell that ends both, cell for cell, metadata included."""
    plain = _notebook(built_course, "labs").cells
    written = _notebook(built, "labs").cells
    assert plain[-1].source.startswith("## Handing in") and written[-1].source == plain[-1].source  # both end so
    plain, written = plain[:-1], written[:-1]
    assert [c.source for c in written] == [c.source for c in plain] + [EXPORT_BEGIN, PROMPT, PLACEHOLDER, EXPORT_END]
    assert [c.metadata for c in written[:len(plain)]] == [c.metadata for c in plain]


def test_a_written_question_that_collides_with_a_code_question_is_refused(tmp_path):
    root = with_written(tmp_path)
    master = root / "instructor" / LAB / f"{LAB}.py"
    master.write_text(master.read_text().replace(f"name: {NAME}", "name: double"))
    course = load_course(root)
    with pytest.raises(ValueError, match="question 'double' is defined twice"):
        build_lab(course, course.labs[0])


def test_otters_pdf_filtering_keeps_exactly_the_written_questions_prompts_and_answers(built, tmp_path):
    """What Otter's PDF export (``otter export --filtering --pagebreaks``, and Otter's Gradescope autograder when it
    uploads a PDF) puts in the PDF, computed by Otter's own filter: each written question's prompt and the
    student's answer, a page break after each, no code and no other prose."""
    from otter.export.exporters.base_exporter import BaseExporter

    nb = _notebook(built, "labs")
    _answer(nb).source = "My double doubles: [2., 4.] for [1., 2.]."
    path = tmp_path / "submission.ipynb"
    nbformat.write(nb, path)
    kept = BaseExporter.load_notebook(str(path), filtering=True, pagebreaks=True)
    assert [(c.cell_type, c.source) for c in kept.cells] == [
        ("markdown", EXPORT_BEGIN), ("markdown", PROMPT), ("markdown", "My double doubles: [2., 4.] for [1., 2.]."),
        ("markdown", "<!-- #newpage -->")]


def test_the_lab01_notebook_exports_its_written_questions_only(tmp_path):
    from otter.export.exporters.base_exporter import BaseExporter

    lab = load_course(FIXTURE.parents[2]).lab("lab01_text_as_vectors")
    written = written_questions(lab.autograder_dir)
    kept = BaseExporter.load_notebook(str(lab.student_notebook), filtering=True, pagebreaks=True)
    answers = [c.metadata[ANSWER_META]["written"] for c in kept.cells if ANSWER_META in c.metadata]
    assert answers == [q.name for q in written] and len(written) >= 2
    prompts = [c.source for c in kept.cells if c.source not in (EXPORT_BEGIN, PLACEHOLDER, "<!-- #newpage -->")]
    assert prompts == [q.prompt for q in written]
    assert all(c.cell_type == "markdown" for c in kept.cells)
