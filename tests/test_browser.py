"""JupyterLab in a real browser: a student opens the lab, runs the set-up cell, types an answer into a TODO cell
and runs its check, once wrong and once right, and reads what a student sees. Headless Chromium from Debian's
packages (installed by .ci/run), driven by Playwright; Playwright never downloads a browser here.

Screenshots go to the test's tmp folder (``browser/`` in it; the path is printed) for a person to look at: the
check marks are plain text (``[pass]``, ``[FAIL]``), so they render without an emoji font (Debian's Chromium)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from chromium_browser import CHROMIUM, NO_CHROMIUM, launch

ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).parent / "jupyter"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM),
    pytest.mark.skipif(not JUPYTER.exists(), reason="JupyterLab is not installed: pip install -e '.[student]'"),
]

WRONG = '''def simple_self_attention(x):
    w = torch.softmax(x @ x.transpose(-2, -1), dim=-2)
    return w @ x, w'''
BROKEN = '''def simple_self_attention(x):
    w = torch.softmax(x @ x.transpose(-2, -1), dim=-1
    return w @ x, w'''
RIGHT = '''def simple_self_attention(x):
    w = torch.softmax(x @ x.transpose(-2, -1), dim=-1)
    return w @ x, w'''

# lab04's gru_cell, one of the questions added in session 2: z swapped (z weighs the candidate), then right
GRU_WRONG = '''def gru_cell(x_t, h_prev, W_ih, W_hh, b_ih, b_hh):
    i_r, i_z, i_n = (x_t @ W_ih.T + b_ih).chunk(3, dim=-1)
    h_r, h_z, h_n = (h_prev @ W_hh.T + b_hh).chunk(3, dim=-1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    return z * torch.tanh(i_n + r * h_n) + (1 - z) * h_prev'''
GRU_RIGHT = GRU_WRONG.replace("return z * torch.tanh(i_n + r * h_n) + (1 - z) * h_prev",
                              "return (1 - z) * torch.tanh(i_n + r * h_n) + z * h_prev")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serve(tmp_path: Path, lab_ids: tuple[str, ...]):
    """JupyterLab on loopback serving a folder that holds the labs' student notebooks; yields lab id -> URL."""
    for lab_id in lab_ids:
        shutil.copy(ROOT / "labs" / lab_id / f"{lab_id}.ipynb", tmp_path)
    port, token = _free_port(), secrets.token_hex(16)
    settings = tmp_path / ".settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        '{"fetchNews": "false", "checkForUpdates": false}')
    log = open(tmp_path / "jupyterlab.log", "w")
    proc = subprocess.Popen(
        [str(JUPYTER), "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}",
         f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp_path / '.workspaces'}"],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "MPLBACKEND": "Agg"})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("JupyterLab did not start:\n" + (tmp_path / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.5)
    try:
        # a workspace per notebook: JupyterLab would otherwise reopen the other test's notebook beside it
        yield {lab_id: f"{base}/lab/workspaces/{lab_id}/tree/{lab_id}.ipynb?token={token}" for lab_id in lab_ids}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """One JupyterLab for the module's tests (it takes a while to start), serving the notebooks they open."""
    with _serve(tmp_path_factory.mktemp("jupyterlab"), ("lab05_self_attention", "lab04_recurrent_networks")) as urls:
        yield urls


def _cell(page, text: str):
    return page.locator(".jp-Notebook .jp-Cell").filter(has_text=text).first


def _run(page, cell, timeout_s=120):
    """Run one cell (click into it, Shift+Enter) and wait until it has run (its own prompt shows a new execution
    count: a wait for "no [*]" alone could be true before the kernel starts, and return the old output) and the
    kernel is idle again; return its output text."""
    prompt = cell.locator(".jp-InputPrompt").element_handle()
    before = prompt.text_content()
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function("([prompt, before]) => /\\[\\d+\\]/.test(prompt.textContent) && prompt.textContent !== before"
                           " && ![...document.querySelectorAll('.jp-InputPrompt')].some(p => p.textContent.includes('*'))",
                           arg=[prompt, before], timeout=timeout_s * 1000)
    return "\n".join(cell.locator(".jp-OutputArea-output").all_inner_texts())  # without the "[4]:" prompts


def _type_answer(page, cell, code: str):
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code)  # no key events: the editor's auto-indent and bracket closing stay out


def _open(browser, url: str):
    """The notebook open in a new page, its kernel connected."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(url, timeout=90_000)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=90_000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle'], .jp-KernelStatus", timeout=90_000)
    page.wait_for_timeout(2000)  # the kernel connects
    return page


def _student_session(url: str, shots: Path, definition: str, name: str, steps) -> dict[str, str]:
    """Open the lab, run the set-up, then for each (step, answer) of ``steps`` type the answer (None: leave the stub)
    into the cell starting ``definition`` and run it and ``grader.check(name)``; the output text of each, and a
    screenshot of each step."""
    from playwright.sync_api import sync_playwright

    seen = {}
    with sync_playwright() as pw:
        browser = launch(pw)
        page = _open(browser, url)
        page.screenshot(path=str(shots / "1-opened.png"))
        seen["setup"] = _run(page, _cell(page, "Set-up: run this cell first"))
        _run(page, _cell(page, "import matplotlib.pyplot as plt"))
        question, check = _cell(page, definition), _cell(page, f'grader.check("{name}")')
        for shot, (step, answer) in enumerate(steps, start=2):
            if answer is not None:
                _type_answer(page, question, answer)
            seen[f"{step}-cell"] = _run(page, question)
            seen[step] = _run(page, check)
            check.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"{shot}-{name}-{step}.png"))
        browser.close()
    (shots / "what-the-student-sees.txt").write_text("\n\n".join(f"== {k}\n{v}" for k, v in seen.items()))
    return seen


def test_a_student_runs_the_setup_answers_wrong_then_right(jupyterlab, tmp_path):
    shots = tmp_path / "browser"
    shots.mkdir()
    print(f"screenshots: {shots}")
    seen = _student_session(jupyterlab["lab05_self_attention"], shots, "def simple_self_attention(x):",
                            "simple_self_attention",
                            (("blank", None), ("syntax", BROKEN), ("wrong", WRONG), ("right", RIGHT)))

    assert re.search(r"attnlab lab05_self_attention: .*(cpu|CPU|cuda|CUDA)", seen["setup"]), seen["setup"]
    assert "Traceback" not in seen["setup"]
    # the untouched stub: one plain-text line that says so, no traceback
    assert seen["blank"].strip() == "[FAIL] simple_self_attention: not written yet", seen["blank"]
    # a syntax error: Python names it where the student typed it; the check still runs the last good definition
    assert "SyntaxError" in seen["syntax-cell"], seen["syntax-cell"]
    assert seen["syntax"].strip() == "[FAIL] simple_self_attention: not written yet", seen["syntax"]
    # the wrong answer: the failing check by its name and how far off the value is; not the check's source
    wrong = seen["wrong"]
    assert wrong.startswith("[FAIL] simple_self_attention: ") and "checks failed" in wrong, wrong
    assert "row sums" in wrong and "yours" in wrong and "expected" in wrong and "off by" in wrong, wrong
    assert "expect_close(" not in wrong and "assert " not in wrong, wrong
    assert "_run_public" not in wrong and "Traceback" not in wrong, wrong
    assert re.fullmatch(r"\[pass\] simple_self_attention: all \d+ checks passed", seen["right"].strip()), seen["right"]
    # plain ASCII marks: no emoji that Debian's Chromium draws as an empty box
    for step in ("blank", "syntax", "wrong", "right"):
        assert seen[step].isascii(), (step, seen[step])


def test_a_new_question_blank_wrong_right(jupyterlab, tmp_path):
    """lab04's gru_cell as a student meets it: the stub's check says so in one line; a swapped update gate fails
    the worked example with the numbers; the right answer passes."""
    shots = tmp_path / "browser"
    shots.mkdir()
    print(f"screenshots: {shots}")
    seen = _student_session(jupyterlab["lab04_recurrent_networks"], shots, "def gru_cell(", "gru_cell",
                            (("blank", None), ("wrong", GRU_WRONG), ("right", GRU_RIGHT)))

    assert "Traceback" not in seen["setup"], seen["setup"]
    assert seen["blank"].strip() == "[FAIL] gru_cell: not written yet", seen["blank"]
    wrong = seen["wrong"]
    assert wrong.startswith("[FAIL] gru_cell: ") and "checks failed" in wrong, wrong
    assert "[FAIL] the worked example" in wrong and "yours" in wrong and "off by" in wrong, wrong
    assert "Traceback" not in wrong and "expect_close(" not in wrong, wrong
    assert re.fullmatch(r"\[pass\] gru_cell: all \d+ checks passed", seen["right"].strip()), seen["right"]
