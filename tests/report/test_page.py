"""The HTML page: everything a submission controls is escaped, no script can run, regions are marked."""

from __future__ import annotations

from attnlab.report import compute
from attnlab.report.page import CSP, VERDICT, esc, highlighted, render

from .rows import diagnosed, sub

PAYLOAD = "<script>alert(1)</script><img src=x onerror=alert(2)>\x1b[2K\u202e"
NAME = "<img src=x onerror=alert(3)>.ipynb"  # a file name holds no "/"


def test_esc_escapes_markup_quotes_and_controls():
    assert esc(PAYLOAD) == "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;\\x1b[2K&lt;U+202E&gt;"
    assert esc('" \'') == "&quot; &#x27;"


def test_highlighted_marks_regions_and_escapes_around_them():
    assert highlighted("a<b>c d", [(1, 4)]) == "a<mark>&lt;b&gt;</mark>c d"
    assert highlighted("x", []) == "x"


def test_the_page_escapes_student_text_and_allows_no_script():
    subs = [sub(NAME, {"q": (0.0, 1.0, [f"failed: t: {PAYLOAD}", "likely mistake: hint"], diagnosed("hint", "t"))},
                errors=[PAYLOAD], review=[PAYLOAD]),
            sub("ok.ipynb", {"q": (1.0, 1.0, [])})]
    page = render(compute("lab05", subs, figures=False))
    assert "<script" not in page and "<img src=x" not in page and "\x1b" not in page and "\u202e" not in page
    assert page.count("&lt;script&gt;alert(1)") >= 2 and page.count(esc(NAME)) >= 2  # message, notes; name
    assert f'content="{CSP}"' in page and "script-src" not in CSP and "default-src 'none'" in CSP
    assert esc(VERDICT) in page
    anonymous = render(compute("lab05", subs, figures=False, anonymise=True))
    assert "alert(3)" not in anonymous and "&lt;script&gt;alert(1)" in anonymous  # the name only is replaced
