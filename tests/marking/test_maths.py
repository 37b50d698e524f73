"""Maths in an answer typeset on the server as MathML (``marking.maths``): elements and backslashes kept, no script,
no markup or attribute smuggled through a crafted formula; one that cannot be converted shown as its source."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("latex2mathml")
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch  # noqa: E402 - after the skip: the marking extra

from attnlab.grading.outputs.gradebook import open_gradebook  # noqa: E402
from attnlab.marking.maths import MAX_FORMULA_CHARS, formula_html  # noqa: E402
from attnlab.marking.render import answer_html  # noqa: E402
from attnlab.marking.store import MarkStore  # noqa: E402

from .classroom import record_student  # noqa: E402
from .test_shared_host import TOKEN, _marking, serving  # noqa: E402


def test_a_formula_is_mathml_with_its_tex_kept_as_the_annotation():
    html = formula_html(r"\frac{q \cdot k}{\sqrt{d}} + a \, b", display=True)
    assert html.startswith('<math xmlns="http://www.w3.org/1998/Math/MathML" display="block"><semantics>')
    assert "<mfrac>" in html and "<msqrt>" in html and '<mspace width="0.167em"></mspace>' in html
    assert '<annotation encoding="application/x-tex">\\frac{q \\cdot k}{\\sqrt{d}} + a \\, b</annotation>' in html
    assert 'display="inline"' in formula_html("x^2", display=False) and "<msup>" in formula_html("x^2", False)


@pytest.mark.parametrize("tex", [
    r"\text{<script>alert(1)</script>}",  # latex2mathml leaves an mtext's text as it is
    r"\text{<img src=x onerror=alert(1)>}",
    r"\href{javascript:alert(1)}{x}",  # an href attribute
    r'\color{red" onmouseover="alert(1)}{a}',  # a crafted attribute value
    r"\text{</math><script>alert(1)</script>}",
])
def test_a_crafted_formula_smuggles_no_markup_and_is_shown_as_its_source(tex):
    html = formula_html(tex, display=False)
    assert "<script" not in html and "<img" not in html and "href" not in html.replace("\\href", "")
    assert "onmouseover=\"" not in html and "<math" not in html  # refused whole: the source, escaped
    assert html == tex.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;") \
        .replace("'", "&#x27;")


def test_text_in_a_formula_is_escaped_where_it_is_kept():
    html = formula_html(r"a < b \text{ and } c > d \& e", display=False)
    assert "<math" in html and "<mtext>" in html
    assert not re.search(r"<(?!/?(math|semantics|annotation|m[a-z]+)[ >])", html)  # every tag is MathML


@pytest.mark.parametrize("tex", [r"\frac{", r"\begin{matrix}", "x" * (MAX_FORMULA_CHARS + 1), "\\" * 5000])
def test_a_formula_that_cannot_be_converted_is_its_source_escaped(tex):
    assert formula_html(tex, display=True) == tex.replace("&", "&amp;")


def test_an_answers_formula_can_not_break_out_of_its_span():
    html = str(answer_html("see $\\text{</span><script>x</script>}$ and $$\\text{<b>}$$ and $1 < 2$"))
    assert "<script" not in html and "<b>" not in html and "&lt;/span&gt;&lt;script&gt;" in html
    assert html.count("<math") == 1 and "<mo>&lt;</mo>" in html


MATHS_ANSWER = ("The scores are $\\frac{q \\cdot k}{\\sqrt{d}}$, and\n\n"
                "$$\\mathrm{softmax}(x)_i = \\frac{e^{x_i}}{\\sum_j e^{x_j}}$$")
LAYOUT = """() => [...document.querySelectorAll("#answer mfrac")].map(f => {
    const [top, bottom] = [...f.children].map(c => c.getBoundingClientRect());
    return {mathml: f instanceof MathMLElement, above: top.bottom <= bottom.top + 1,
            width: f.getBoundingClientRect().width};
})"""


def test_the_maths_is_laid_out_by_chromium_with_no_script(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip(NO_CHROMIUM)
    with open_gradebook(tmp_path / "gradebook.db") as gb:
        record_student(gb, "lab05", "alice.ipynb", code={}, written={"mirror": (MATHS_ANSWER, 2.0)})
        MarkStore(gb).ensure_rubric("lab05", "mirror", [("mirror.1", "Right", 2.0)])
        with serving(_marking(gb)) as base, sync_api.sync_playwright() as pw:
            browser = launch(pw)
            page = browser.new_page()  # the page's own CSP: no script from us, none needed for the maths
            page.goto(f"{base}/?token={TOKEN}")
            page.goto(f"{base}/l/lab05/q/mirror/1")
            fractions = page.evaluate(LAYOUT)
            hidden = page.evaluate("""() => [...document.querySelectorAll("#answer annotation")].map(
                a => [a.getBoundingClientRect().width, a.textContent])""")
            browser.close()
    assert len(fractions) == 2 and all(f["mathml"] and f["above"] and f["width"] > 5 for f in fractions), fractions
    assert [w for w, _ in hidden] == [0, 0] and "\\frac{q \\cdot k}{\\sqrt{d}}" == hidden[0][1]  # source kept, unseen
