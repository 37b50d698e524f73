"""The student-facing outputs: Gradescope results.json and feedback.md."""

import json
from pathlib import Path

import pytest

from attnlab.course import CourseError, load_course
from attnlab.gradescope_visibility import MANIFEST_KEY, Visibility
from attnlab.grading.outputs.feedback import feedback_markdown, write_feedback
from attnlab.grading.outputs.gradebook import InvalidResult
from attnlab.grading.outputs.gradescope import to_gradescope, write_results_json

RESULT = {
    "submission": "/srv/grading/2024/subs/alice.ipynb", "score": 3.5, "max_score": 9.0,
    "questions": {
        "softmax": {"score": 2.0, "max_score": 2.0, "messages": []},
        "scaled_dot_product_attention": {
            "score": 1.5, "max_score": 6.0,
            "messages": ["the weights must sum to 1 over the keys",
                         "masked positions got weight 0.2\nexpected 0"],
        },
        "MultiHeadAttention": {"score": 0.0, "max_score": 1.0, "messages": []},
    },
    "isolation": "uid 65534, no network, rlimits", "elapsed_s": 3.14159,
    "errors": ["cell 4 raised NameError: name 'tokens' is not defined"],
    "hidden_source": "def test_sdpa(student, ref, rng): SECRET_HIDDEN_LINE",
}


def test_gradescope_results_schema_with_the_hidden_tests_visible():
    assert to_gradescope(RESULT, Visibility(hidden_tests="visible")) == {
        "score": 3.5,
        "execution_time": 3.14,
        "output": "Total: 3.5 / 9",
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "tests": [
            {"name": "Your notebook", "score": 0.0, "max_score": 0.0,
             "output": "- cell 4 raised NameError: name 'tokens' is not defined", "output_format": "text",
             "visibility": "visible"},
            {"name": "softmax", "score": 2.0, "max_score": 2.0, "output": "", "output_format": "text",
             "visibility": "visible"},
            {"name": "scaled_dot_product_attention", "score": 1.5, "max_score": 6.0,
             "output": "- the weights must sum to 1 over the keys\n- masked positions got weight 0.2\n  expected 0",
             "output_format": "text", "visibility": "visible"},
            {"name": "MultiHeadAttention", "score": 0.0, "max_score": 1.0, "output": "", "output_format": "text",
             "visibility": "visible"},
        ],
    }


def _shown_before_the_due_date(results: dict) -> str:
    """All the text a student sees before the due date: the top-level output and the tests visible at once."""
    return "\n".join([results["output"]] + [f"{t['name']} {t['score']} {t['output']}" for t in results["tests"]
                                            if t["visibility"] == "visible"])


def test_by_default_the_hidden_tests_show_after_the_due_date_and_the_notebook_at_once():
    out = to_gradescope(RESULT)
    assert out["visibility"] == "after_due_date"
    assert [(t["name"], t["visibility"]) for t in out["tests"]] == [
        ("Your notebook", "visible"), ("softmax", "after_due_date"),
        ("scaled_dot_product_attention", "after_due_date"), ("MultiHeadAttention", "after_due_date")]
    early = _shown_before_the_due_date(out)
    assert "expected 0" not in early and "weights must sum to 1" not in early  # no hidden test's message or value
    assert "Total" not in early and "3.5" not in early  # nor the score they add up to
    assert "cell 4 raised NameError" in early  # the notebook's own error, at once
    assert "shown after the due date" in out["output"]


@pytest.mark.parametrize("hidden", ["after_published", "hidden"])
def test_each_configured_visibility_reaches_every_question(hidden):
    out = to_gradescope(RESULT, Visibility(public_checks="after_due_date", hidden_tests=hidden))
    assert [t["visibility"] for t in out["tests"]] == ["after_due_date"] + [hidden] * 3
    assert _shown_before_the_due_date(out).count("expected") == 0


def test_the_course_file_sets_the_visibility_and_the_build_carries_it_to_results_json(tmp_path):
    root = tmp_path / "course"
    (root / "instructor").mkdir(parents=True)
    (root / "instructor" / "course.yml").write_text(
        "name: c\ngradescope: {hidden_tests: after_published}\nlabs:\n  - id: lab01_a\n  - id: lab02_b\n"
        "    gradescope: {public_checks: hidden, hidden_tests: visible}\n")
    course = load_course(root)
    assert course.lab("lab01").visibility == Visibility("visible", "after_published")
    assert course.lab("lab02").visibility == Visibility("hidden", "visible")
    manifest = {MANIFEST_KEY: course.lab("lab01").visibility.as_dict()}  # what the build writes (pipeline.py)
    path = write_results_json(RESULT, tmp_path / "results.json", Visibility.from_manifest(manifest))
    assert {t["visibility"] for t in json.loads(path.read_text())["tests"][1:]} == {"after_published"}
    assert Visibility.from_manifest({}) == Visibility() == Visibility.from_manifest({MANIFEST_KEY: {"x": 1}})
    (root / "instructor" / "course.yml").write_text("labs:\n  - id: lab01_a\n    gradescope: {hidden_tests: soon}\n")
    with pytest.raises(CourseError, match="lab01_a has gradescope: hidden_tests: soon, not one of Gradescope's "
                                          "visibilities: visible, after_due_date, after_published, hidden"):
        load_course(root)


def test_the_built_manifests_carry_the_course_visibility():
    root = Path(__file__).resolve().parents[2]
    for lab in load_course(root).labs:
        manifest = json.loads((lab.autograder_dir / "manifest.json").read_text())
        assert Visibility.from_manifest(manifest) == lab.visibility
        assert manifest[MANIFEST_KEY] == {"public_checks": "visible", "hidden_tests": "after_due_date"}


def test_write_results_json_round_trips_and_leaves_no_temp_file(tmp_path):
    path = write_results_json(RESULT, tmp_path / "alice" / "results.json")
    assert json.loads(path.read_text()) == to_gradescope(RESULT)
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


def test_feedback_markdown_content():
    text = feedback_markdown(RESULT)
    assert text.startswith("# Feedback: alice\\.ipynb\n\n**Total: 3.5 / 9**\n")
    assert ("## About your notebook\n\n```text\n- cell 4 raised NameError: name 'tokens' is not defined\n"
            "```\n") in text
    assert "| `scaled_dot_product_attention` | 1.5 / 6 |" in text
    assert ("## `scaled_dot_product_attention`: 1.5 / 6\n\n```text\n"
            "- the weights must sum to 1 over the keys\n"
            "- masked positions got weight 0.2\nexpected 0\n```\n") in text
    assert "## `softmax`: 2 / 2\n\nAll checks passed.\n" in text
    assert "## `MultiHeadAttention`: 0 / 1\n\nNo details were given" in text
    # the order of the result is kept
    assert text.index("## `softmax`") < text.index("## `scaled_dot") < text.index("## `MultiHead")


def test_student_outputs_hold_only_student_facing_fields(tmp_path):
    write_feedback(RESULT, tmp_path / "feedback.md")
    write_results_json(RESULT, tmp_path / "results.json")
    for text in ((tmp_path / "feedback.md").read_text(), (tmp_path / "results.json").read_text()):
        assert "SECRET_HIDDEN_LINE" not in text  # extra fields of the result are never written
        assert "/srv/grading" not in text and "uid 65534" not in text  # nor paths or the isolation report


def test_outputs_refuse_an_invalid_result():
    with pytest.raises(InvalidResult, match=r"result\['max_score'\] is None"):
        feedback_markdown({**RESULT, "max_score": None})
    with pytest.raises(InvalidResult, match=r"has no 'questions'"):
        to_gradescope({"score": 1.0, "max_score": 1.0})
