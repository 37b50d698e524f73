"""Autograder branch: Otter's autograder zip (``otter run -a``, Gradescope with plain Otter).

Made by Otter Generate itself (its run_autograder, setup.sh and environment templates), then repacked
deterministically. The hidden tests and the reference travel as support files: Otter copies them next
to the submission, where the in-kernel bridge finds them. Needs the test files (public_tests with
hidden cases) and reference_code first.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .package_zip import repack


def otter_zip(test_files: dict[str, str], support_files: dict[str, bytes], *, requirements: str,
              python_version: str = "3.11") -> bytes:
    import otter.generate

    with tempfile.TemporaryDirectory(prefix="attnlab-otter-") as tmp:
        tmp = Path(tmp)
        (tmp / "tests").mkdir()
        for name, text in test_files.items():
            (tmp / "tests" / name).write_text(text)
        for name, data in support_files.items():
            (tmp / name).write_bytes(data)
        (tmp / "requirements.txt").write_text(requirements)
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            otter.generate.main(tests_dir="tests", output_path="autograder.zip", files=sorted(support_files),
                                requirements="requirements.txt", python_version=python_version, no_config=True)
        finally:
            os.chdir(cwd)
        return repack((tmp / "autograder.zip").read_bytes())
