"""The set-up cell's Otter import skips the IRI grammar a dependency builds at import (``kit/otter_import.py``): a
plain ``import otter`` loads ``rfc3987_syntax`` (where installed), ``import_otter`` does not, Otter's checks still
run, and the module still imports afterwards."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
                                reason="rfc3987_syntax is not installed here: nothing to skip")


def _run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.strip()


def test_a_plain_otter_import_builds_the_grammar():
    assert _run("import sys, otter; print('rfc3987_syntax' in sys.modules)") == "True"


def test_import_otter_skips_it_and_leaves_it_importable():
    said = _run("import sys\n"
                "from attnlab.kit.otter_import import import_otter\n"
                "otter = import_otter()\n"
                "from otter.test_files import test_case\n"
                "import jsonschema\n"
                "jsonschema.validate({'a': 1}, {'type': 'object', 'properties': {'a': {'type': 'integer'}}})\n"
                "print('rfc3987_syntax' in sys.modules, hasattr(otter, 'Notebook'))\n"
                "import rfc3987_syntax\n"
                "print(rfc3987_syntax.is_valid_syntax('iri', 'http://example.org/é'))")
    assert said.splitlines() == ["False True", "True"]
