"""Every page of `attnlab mark` checked with axe-core (the npm package, injected through Playwright into Debian's
headless Chromium): no serious or critical violation. Skipped where Chromium or axe-core is not installed
(``npm install -g axe-core``)."""

from __future__ import annotations

import pytest
from chromium_browser import CHROMIUM, NO_AXE, NO_CHROMIUM, axe_core, launch

from attnlab.marking.regrades import NO_CHANGE, add_requests, checked_request, questions_by_key, resolve
from attnlab.marking.store import MarkStore

from .student_notebook import write_notebook
from .test_shared_host import TOKEN, _marking, book, serving  # noqa: F401 - book: the class's fixture

AXE = axe_core()
pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM),
              pytest.mark.skipif(AXE is None, reason=NO_AXE)]
PAGES = ("/", "/l/lab05/q/mirror/1", "/l/lab05/q/mirror/2", "/l/lab05/q/mirror/groups",
         "/l/lab05/q/mirror/search", "/l/lab05/q/mirror/search?q=text&student=student-&unmarked=1", "/l/lab05/students",
         "/l/lab05/s/1", "/audit", "/l/lab05/requests")
MATHS = "Typeset: $\\frac{q \\cdot k}{\\sqrt{d}}$ and $$\\sum_{i=1}^d q_i k_i$$"  # MathML on the answer pages
RUN_AXE = """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
    .filter(v => v.impact === "serious" || v.impact === "critical")
    .map(v => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map(n => n.target.join(" ")).slice(0, 3).join(", ")})`)"""


def test_every_page_has_no_serious_or_critical_axe_violation(book, tmp_path):  # noqa: F811 - the fixture
    sync_api = pytest.importorskip("playwright.sync_api")
    store = MarkStore(book)
    store.save_mark("lab05", "alice.ipynb", "mirror", items=["mirror.1"], comment="good", marker="ann", version=0)
    store.change_score("lab05", "bob.ipynb", "mirror", 1, reason="appeal", marker="ann", version=0)
    asked = questions_by_key(store, "lab05")
    add_requests(store, [checked_request(asked, "lab05", key, "mirror", "please look again", f"2027-02-1{i}T10:00Z")
                         for i, key in enumerate(("alice.ipynb", "bob.ipynb"), start=5)], marker="ann", source="entered")
    resolve(store, "lab05", 1, decision=NO_CHANGE, reason="the rubric stands", marker="ann")  # one open, one resolved
    book.transaction(lambda ex: ex("UPDATE questions SET answer = ? WHERE key = 'bob.ipynb'", (MATHS,)), write=True)
    sha = write_notebook(tmp_path / "alice.ipynb")  # alice's own outputs (a table, a plot) beside her answer
    book.transaction(lambda ex: ex("UPDATE submissions SET path = ?, sha256 = ? WHERE key = 'alice.ipynb'",
                                   (str(tmp_path / "alice.ipynb"), sha)), write=True)
    with serving(_marking(book)) as base, sync_api.sync_playwright() as pw:
        browser = launch(pw)
        page = browser.new_context(bypass_csp=True).new_page()  # the page's CSP admits no injected script
        page.goto(f"{base}/?token={TOKEN}")
        found, plots = {}, []
        for path in PAGES:
            assert page.goto(base + path).status == 200, path
            page.add_script_tag(path=str(AXE))
            found[path] = page.evaluate(RUN_AXE)
            plots += page.evaluate("() => [...document.querySelectorAll('#outputs img')].map(i => i.naturalWidth)")
        browser.close()
    assert {p: v for p, v in found.items() if v} == {}
    assert plots == [1]  # alice's PNG, shown under the page's CSP (img-src data: only)
