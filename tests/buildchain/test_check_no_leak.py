"""check_no_leak: no solution line reaches the student notebook."""

import re
from pathlib import Path

import nbformat
import pytest

from attnlab.buildchain.transforms.check_no_leak import LeakError, check_no_leak, solution_lines
from attnlab.buildchain.transforms.drop_marker_cells import drop_marker_cells
from attnlab.buildchain.transforms.insert_setup_cell import insert_setup_cell
from attnlab.buildchain.transforms.lock_cells import lock_cells
from attnlab.buildchain.transforms.normalize import normalize
from attnlab.buildchain.transforms.parse_questions import parse_questions
from attnlab.buildchain.transforms.read_master import read_master
from attnlab.buildchain.transforms.replace_tests import replace_tests
from attnlab.buildchain.transforms.strip_solutions import strip_solutions
from attnlab.grading.core.mutants import Entry

MASTER = Path(__file__).resolve().parents[1] / "fixtures" / "course" / "instructor" / "lab99_demo" / "lab99_demo.py"


def nb_of(*sources, cell_type="code"):
    nb = nbformat.v4.new_notebook()
    make = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
    nb.cells = [make(s) for s in sources]
    return nb


MASTER_NB = nb_of(
    "def attention(q, k, v):\n"
    "    # BEGIN SOLUTION\n"
    "    scores = q @ k.transpose(-2, -1)\n"
    "    # the scale\n"
    "    return scores.softmax(-1) @ v\n"
    "    # END SOLUTION",
    "weights = torch.softmax(scores, dim=-1)  # SOLUTION\nshort = 1  # SOLUTION",
)


def test_solution_lines_collects_block_and_suffix_lines_but_not_short_or_comment_lines():
    assert solution_lines(MASTER_NB) == {
        "scores = q @ k.transpose(-2, -1)",
        "return scores.softmax(-1) @ v",
        "weights = torch.softmax(scores, dim=-1)",
    }


@pytest.mark.parametrize("leaked", [
    "    scores = q @ k.transpose(-2, -1)",
    "weights = torch.softmax(scores, dim=-1)",
])
def test_raises_on_a_leaked_line_naming_cell_and_line(leaked):
    student = nb_of("import torch", f"def attention(q, k, v):\n{leaked}\n    ...")
    with pytest.raises(LeakError, match="cell 1 contains solution code: " + re.escape(repr(leaked.strip()))):
        check_no_leak(MASTER_NB, student)


def test_a_leak_in_markdown_counts_too():
    with pytest.raises(LeakError):
        check_no_leak(MASTER_NB, nb_of("Hint: `return scores.softmax(-1) @ v`\nreturn scores.softmax(-1) @ v",
                                       cell_type="markdown"))


def test_hints_that_only_resemble_the_solution_pass():
    check_no_leak(MASTER_NB, nb_of("# the scale", "short = 1", "scores = ...  # TODO",
                                   "return scores.softmax(-1) @ v  # and more"))


def test_the_real_student_notebook_is_clean_and_an_unstripped_one_is_not():
    labelled, _ = parse_questions(read_master(MASTER))
    common = insert_setup_cell(drop_marker_cells(replace_tests(labelled)), lab_id="lab99_demo", install_spec="attnlab")
    student = normalize(lock_cells(strip_solutions(common)), lab_id="lab99_demo", kind="student")
    assert check_no_leak(labelled, student) is None
    with pytest.raises(LeakError, match="result = x \\* 2"):
        check_no_leak(labelled, normalize(common, lab_id="lab99_demo", kind="student"))


CATALOGUE = [Entry("no_scale", "attention", '''
def attention(q, k, v):
    scores = q @ k.transpose(-2, -1)
    return torch.softmax(scores, dim=0) @ v
''', "softmax over the wrong axis", hint="your softmax runs over dim 0")]


def test_a_catalogue_line_in_the_student_notebook_is_a_leak_but_a_signature_is_not():
    student = nb_of("def attention(q, k, v):\n    return torch.softmax(scores, dim=0) @ v")
    with pytest.raises(LeakError, match=r"cell 0 contains a line of a catalogue entry: 'return torch.softmax"):
        check_no_leak(MASTER_NB, student, catalogue=CATALOGUE)
    # the signature is in the master outside the solution blocks: students see it anyway
    assert check_no_leak(MASTER_NB, nb_of("def attention(q, k, v):\n    ..."), catalogue=CATALOGUE) is None


def test_the_public_check_files_are_checked_for_solution_and_catalogue_lines():
    with pytest.raises(LeakError, match=r"public check file attention.py contains a line of a catalogue entry"):
        check_no_leak(MASTER_NB, nb_of("x = 1"), catalogue=CATALOGUE,
                      public_files={"attention.py": "x = 1\n    return torch.softmax(scores, dim=0) @ v\n"})
    with pytest.raises(LeakError, match=r"public check file a.py contains solution code"):
        check_no_leak(MASTER_NB, nb_of("x = 1"), public_files={"a.py": "weights = torch.softmax(scores, dim=-1)"})


HIDDEN = '''
@suite.test("attention", points=1)
def attention_rows(student, ref, rng):
    q = torch.randn(2, 3, 4, dtype=torch.float64, generator=rng)
    def attention(q, k, v):
'''


def test_a_hidden_test_line_in_the_student_notebook_or_a_public_check_is_a_leak():
    student = nb_of("q = torch.randn(2, 3, 4, dtype=torch.float64, generator=rng)")
    with pytest.raises(LeakError, match=r"cell 0 contains a line of the hidden tests: 'q = torch.randn\(2, 3, 4, "
                                        r".*the hidden tests must stay hidden"):
        check_no_leak(MASTER_NB, student, hidden_tests=HIDDEN)
    with pytest.raises(LeakError, match=r"public check file a.py contains a line of the hidden tests"):
        check_no_leak(MASTER_NB, nb_of("x = 1"), hidden_tests=HIDDEN,
                      public_files={"a.py": "    q = torch.randn(2, 3, 4, dtype=torch.float64, generator=rng)"})
    # a line the master shows students anyway (the signature) is no secret; short lines and comments never are
    assert check_no_leak(MASTER_NB, nb_of("def attention(q, k, v):\n    ..."), hidden_tests=HIDDEN) is None


def test_one_rule_says_what_a_secret_line_is():
    from attnlab.buildchain.transforms.check_no_leak import secret_line

    assert secret_line("    return out, weights  ") == "return out, weights"
    assert secret_line("return out, w") == "return out, w"  # 13 characters: long enough
    assert secret_line("return out") is None  # too common to mean anything
    assert [secret_line(s) for s in ("# a long comment line here", "import torch.nn.functional as F",
                                     "from torch import nn, Tensor", '"""A long docstring fence"""')] == [None] * 4


# ------------------------------------------------------------------------------------------------ written questions
def _written_master():
    import jupytext

    from .written_master import FIXTURE, LAB, WRITTEN

    text = (FIXTURE / "instructor" / LAB / f"{LAB}.py").read_text() + WRITTEN
    return jupytext.reads(text, fmt="py:percent")


def test_a_written_questions_reference_runs_and_criteria_are_secrets_but_its_prompt_is_not():
    from attnlab.buildchain.transforms.check_no_leak import SHINGLE, written_secrets

    from .written_master import CRITERIA, NAME, PROMPT, REFERENCE

    secrets = written_secrets(_written_master())
    words = REFERENCE.split()
    runs = {" ".join(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}
    assert set(secrets) == runs | set(CRITERIA)
    assert secrets[CRITERIA[1]] == f"a rubric criterion of written question {NAME!r}"
    assert secrets["every element is multiplied by two, element by"] == (
        f"the reference answer of written question {NAME!r}")
    assert not [s for s in secrets if s in PROMPT]


@pytest.mark.parametrize("planted, kind", [
    pytest.param("My answer: every element is multiplied by two,\n  element   by element, so", "reference",
                 id="a reference line, re-wrapped"),
    pytest.param("Hint: Says the operation is elementwise and keeps the shape.", "rubric criterion",
                 id="a rubric criterion inside a sentence"),
])
def test_a_planted_reference_line_or_criterion_is_a_leak(planted, kind):
    master = _written_master()
    labelled, _ = parse_questions(master)
    student = nb_of("print(1)", planted, cell_type="markdown")
    with pytest.raises(LeakError, match=rf"student notebook cell 1 contains (the|a) {kind}"):
        check_no_leak(labelled, student)
    with pytest.raises(LeakError, match=rf"public check file double.py contains (the|a) {kind}"):
        check_no_leak(labelled, nb_of("print(1)"), public_files={"double.py": f"# {planted}\n"})


def test_seven_words_of_the_reference_or_a_reworded_criterion_are_no_leak():
    master = _written_master()
    labelled, _ = parse_questions(master)
    check_no_leak(labelled, nb_of("every element is multiplied by two, element",
                                  "Says that the operation is elementwise and keeps the shape", cell_type="markdown"))


def test_the_built_student_notebook_with_a_written_question_passes_and_its_solution_does_not(tmp_path):
    from attnlab.buildchain.pipeline import build_lab
    from attnlab.course import load_course

    from .written_master import LAB, with_written

    course = load_course(with_written(tmp_path))
    lab = course.labs[0]
    files = build_lab(course, lab)  # runs check_no_leak on the student notebook
    labelled, _ = parse_questions(read_master(lab.master))
    solution = nbformat.reads(files[lab.solution_notebook].decode(), as_version=4)
    with pytest.raises(LeakError, match="the reference answer of written question"):
        check_no_leak(labelled, nb_of(*[c.source for c in solution.cells if c.cell_type == "markdown"],
                                      cell_type="markdown"))
    assert LAB in str(lab.student_notebook)
