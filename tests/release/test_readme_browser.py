"""The student README as GitHub shows it, in Chromium: the Markdown rendered to HTML (markdown-it, GitHub's tables),
served on 127.0.0.1, read back from the page: one row and one Colab link per lab, torch's CPU step before the kit's.
Set ATTNLAB_SHOTS to a folder to keep the screenshot."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

from attnlab.course import load_course
from attnlab.release import release

ROOT = Path(__file__).resolve().parents[2]
URL = "https://github.com/example-course/dl-labs"
CHROMIUM = next((p for p in (os.environ.get("ATTNLAB_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser")) if p), None)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
# GitHub's look, roughly: its font stack, width and table borders
STYLE = ("body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:880px;margin:24px auto;"
         "line-height:1.5;color:#1f2328}table{border-collapse:collapse}td,th{border:1px solid #d0d7de;"
         "padding:6px 13px}pre{background:#f6f8fa;padding:16px;overflow:auto}code{font-size:85%}")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install chromium (.ci/run does), "
                                                "or set ATTNLAB_CHROMIUM to a Chromium binary"),
]


def render(markdown: str) -> str:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return f"<!doctype html><meta charset='utf-8'><title>README</title><style>{STYLE}</style>{body}"


@pytest.fixture()
def served(tmp_path):
    """The release of labs 01-05 with its README rendered to index.html, served on 127.0.0.1; the page's URL."""
    course = load_course(ROOT)
    out = tmp_path / "students"
    release(course, course.select(["lab01", "lab02", "lab03", "lab04", "lab05"]), out, url=URL)
    (out / "index.html").write_text(render((out / "README.md").read_text()), encoding="utf-8")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/index.html", course
    server.shutdown()
    server.server_close()


def test_the_student_readme_reads_right_in_chromium(served, tmp_path):
    from playwright.sync_api import sync_playwright

    url, course = served
    shots = Path(os.environ.get("ATTNLAB_SHOTS") or tmp_path)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        page.goto(url)
        rows = page.locator("table tbody tr")
        titles = [rows.nth(i).locator("td").first.inner_text() for i in range(rows.count())]
        colab = page.locator("a[href^='https://colab.research.google.com/github/example-course/dl-labs/blob/main/']"
                             ).count()
        notebook_links = [page.locator("table tbody tr td:nth-child(2) a").nth(i).get_attribute("href")
                          for i in range(rows.count())]
        code = page.locator("pre code").all_inner_texts()
        headings = page.locator("h2").all_inner_texts()
        page.screenshot(path=str(shots / "student-readme.png"), full_page=True)
        browser.close()
    labs = course.select(["lab01", "lab02", "lab03", "lab04", "lab05"])
    assert titles == [lab.title for lab in labs]
    assert colab == len(labs)
    assert notebook_links == [f"labs/{lab.id}/{lab.id}.ipynb" for lab in labs]
    local = next(block for block in code if "jupyter lab" in block)
    assert local.index("--index-url https://download.pytorch.org/whl/cpu") < local.index('pip install -e ".[student]"')
    assert headings == ["On Google Colab", "On your own machine (JupyterLab)", "Handing in", "Grading"]
    assert (shots / "student-readme.png").stat().st_size > 10_000
