"""Fixtures for the data-layer tests: the shared real data, a loopback HTTP server, a closed port.

No test here uses the internet or writes outside ``tmp_path``.
"""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path

import pytest

# /work/main/tests/datasets/conftest.py -> /work/shared/data: the `shared/` folder beside the repository.
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path):
    """No mirror from the developer's shell, and a default cache inside tmp_path (never ~/.cache)."""
    monkeypatch.delenv("ATTNLAB_DATA_MIRROR", raising=False)
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path / "default-cache"))


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "SHA256SUMS").is_file():
        pytest.skip(f"the real data copies are not at {SHARED_DATA} (shared/ beside the repository)")
    return SHARED_DATA


class LoopbackServer:
    """``http.server`` on 127.0.0.1 (port chosen by the OS) serving ``directory``; records request paths."""

    def __init__(self, directory: Path):
        requests: list[str] = []

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(directory), **kwargs)

            def do_GET(self):  # noqa: N802 (http.server's name)
                requests.append(self.path)
                super().do_GET()

            def log_message(self, format, *args):  # silence the access log
                pass

        self.requests = requests
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def serve():
    """``serve(directory) -> LoopbackServer``; every server is shut down at the end of the test."""
    servers: list[LoopbackServer] = []

    def start(directory: Path) -> LoopbackServer:
        server = LoopbackServer(directory)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
