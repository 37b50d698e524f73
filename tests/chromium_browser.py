"""Headless Chromium for the browser tests (``test_browser.py``, the report's page): Debian's package (installed by
.ci/run) or ``$ATTNLAB_CHROMIUM``, driven by Playwright, which never downloads a browser here. As root, on a machine
with no network beyond loopback: the flags below."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = next((p for p in (os.environ.get("ATTNLAB_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser")) if p), None)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
NO_CHROMIUM = "no Chromium: apt-get install chromium (.ci/run does), or set ATTNLAB_CHROMIUM to a Chromium binary"


def launch(pw):
    """Playwright's ``pw`` starts the headless Chromium found here."""
    return pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)


def axe_core() -> Path | None:
    """axe-core's ``axe.min.js`` from ``npm install -g axe-core`` (.ci/run installs it), or None."""
    try:
        root = subprocess.run(["npm", "root", "-g"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    found = Path(root) / "axe-core" / "axe.min.js"
    return found if root and found.is_file() else None


NO_AXE = "no axe-core: npm install -g axe-core (.ci/run does)"
