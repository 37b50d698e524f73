"""The student's own outputs beside a written answer (``marking.own_outputs``): the outputs of the code cells of the
question's section, from the notebook that was graded, bounded and escaped; images only as checked PNG data URIs;
a missing or changed notebook said so."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("starlette")
from starlette.testclient import TestClient  # noqa: E402 - after the skip: the marking extra

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.app import create_app  # noqa: E402
from attnlab.marking.own_outputs import MAX_TEXT_CHARS  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402
from .student_notebook import TABLE, notebook, png, write_notebook  # noqa: E402


def _page(tmp_path, nb=None, *, change_after: bool = False, path=None) -> str:
    notebook_path = tmp_path / "alice.ipynb"
    sha = write_notebook(notebook_path, nb)
    if change_after:
        notebook_path.write_text(notebook_path.read_text().replace("0.953", "0.999"))
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        record_student(gb, "lab05", "alice.ipynb", code={}, written={"mirror": ("It climbs to 0.953.", 2.0)},
                       path=path or notebook_path, sha=sha)
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.0", "Quotes the own table", 2.0)])
        client = TestClient(create_app(gb, "secret-token", hosts=["testserver"]), follow_redirects=False)
        client.get("/?token=secret-token")
        page = client.get("/l/lab05/q/mirror/1")
        assert page.status_code == 200
        return page.text.split('id="outputs"')[1].split("</section>")[0]


def test_the_sections_printed_table_and_plot_are_shown_beside_the_answer(tmp_path):
    shown = _page(tmp_path)
    assert TABLE.split("\n")[1] in shown and "1024 |                0.953" in shown
    assert "\x1b" not in shown and "NOT-THIS-SECTION" not in shown  # no ANSI colour; not the earlier section
    assert f'src="data:image/png;base64,{base64.b64encode(png()).decode()}"' in shown
    assert shown.count("<img") == 1  # the base64 SVG dressed as a PNG is dropped
    assert "<script" not in shown and "&lt;script&gt;alert(1)&lt;/script&gt;&lt;table&gt;" in shown  # as source


def test_a_long_output_is_cut_and_invisible_characters_show(tmp_path):
    long = {"output_type": "stream", "name": "stdout", "text": "x\u202e" + "9" * (3 * MAX_TEXT_CHARS)}
    shown = _page(tmp_path, notebook([long]))
    assert "&lt;U+202E&gt;" in shown and "\u202e" not in shown
    assert "more characters not shown" in shown and "9" * (MAX_TEXT_CHARS + 10) not in shown


def test_a_notebook_changed_since_grading_or_missing_shows_no_outputs_and_says_so(tmp_path):
    changed = _page(tmp_path, change_after=True)
    assert "the notebook changed since it was graded" in changed and "0.953" not in changed
    (tmp_path / "gradebook.db").unlink()
    missing = _page(tmp_path, path=tmp_path / "gone.ipynb")
    assert "cannot be read where it was graded" in missing and "<pre>" not in missing
    assert "alice" not in missing and "gone" not in missing  # the path would name the student


def test_a_section_without_outputs_says_so(tmp_path):
    nb = notebook()
    nb["cells"][3]["outputs"] = []
    assert "the code cells before this question have no saved outputs" in _page(tmp_path, nb)


def test_an_answer_cell_whose_metadata_was_lost_is_found_after_its_prompt():
    from attnlab.grading.core.written_answers import Question, answer_position

    cells = notebook()["cells"]
    assert answer_position(cells, Question("mirror", 2.0)) == 5
    cells[5]["metadata"] = {}
    assert answer_position(cells, Question("mirror", 2.0)) is None  # no prompt to look after
    assert answer_position(cells, Question("mirror", 2.0, "Explain the table.")) == 5
    assert answer_position(cells, Question("mirror", 2.0, "a prompt not in the notebook")) is None
