"""``exit_without_teardown``: the exit status, buffered output and ``atexit`` functions survive; a thread still
running is waited for (the ordinary exit); the CLI's own process ends through it, a test's ``main([...])`` does not."""

from __future__ import annotations

import subprocess
import sys

from attnlab.cli import main


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_status_output_and_atexit_survive():
    proc = _run("import atexit\n"
                "from attnlab.process_exit import exit_without_teardown\n"
                "atexit.register(lambda: print('atexit ran'))\n"
                "print('buffered', end=' ')\n"
                "exit_without_teardown(3)\n"
                "print('never')\n")
    assert (proc.returncode, proc.stdout) == (3, "buffered atexit ran\n")


def test_a_running_thread_is_waited_for():
    proc = _run("import threading, time\n"
                "from attnlab.process_exit import exit_without_teardown\n"
                "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
                "exit_without_teardown(None)\n")
    assert (proc.returncode, proc.stdout) == (0, "thread done\n")


def test_the_command_line_exits_with_the_command_status(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "attnlab.cli", "grade", "lab05", str(tmp_path / "none.ipynb")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no such file or folder" in proc.stderr


def test_main_called_with_arguments_returns(capsys):
    assert main(["grade", "lab05", "/no/such/file.ipynb"]) == 2  # returned: a test's process goes on
    assert "no such file or folder" in capsys.readouterr().err
