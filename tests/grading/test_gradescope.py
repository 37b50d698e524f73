"""The student-facing outputs: Gradescope results.json and feedback.md."""

import json

import pytest

from attnlab.grading.feedback import feedback_markdown, write_feedback
from attnlab.grading.gradebook import InvalidResult
from attnlab.grading.gradescope import to_gradescope, write_results_json

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


def test_gradescope_results_schema():
    assert to_gradescope(RESULT) == {
        "score": 3.5,
        "execution_time": 3.14,
        "output": "Total: 3.5 / 9\n- cell 4 raised NameError: name 'tokens' is not defined",
        "output_format": "text",
        "test_output_format": "text",
        "tests": [
            {"name": "softmax", "score": 2.0, "max_score": 2.0, "output": "", "output_format": "text",
             "visibility": "visible"},
            {"name": "scaled_dot_product_attention", "score": 1.5, "max_score": 6.0,
             "output": "- the weights must sum to 1 over the keys\n- masked positions got weight 0.2\n  expected 0",
             "output_format": "text", "visibility": "visible"},
            {"name": "MultiHeadAttention", "score": 0.0, "max_score": 1.0, "output": "", "output_format": "text",
             "visibility": "visible"},
        ],
    }


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
