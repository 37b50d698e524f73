"""attnlab.settings owns every ATTNLAB_* variable: its table is complete, documented, read at call time, and no
other module reads one through os.environ."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnlab import settings

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "attnlab"
NAME = re.compile(r"\bATTNLAB_[A-Z][A-Z_]*[A-Z]\b")
SHELL_READ = re.compile(r"\$\{*ATTNLAB_")


def _modules():
    return [p for p in sorted(SRC.rglob("*.py")) if p != SRC / "settings.py"]


def _docstrings(tree) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.ClassDef)))]
    return {id(n.body[0].value) for n in nodes
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _settings_aliases(tree) -> set[str]:
    """Module-level names bound to a settings constant (``DATA_ENV = settings.DATA``)."""
    return {t.id for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute)
            and isinstance(n.value.value, ast.Name) and n.value.value.id == "settings"
            for t in n.targets if isinstance(t, ast.Name)}


def _is_os_environ(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os")


def _environ_key(node):
    """The key expression of a read of os.environ (``.get(k)``, ``[k]``, ``k in``) or ``os.getenv(k)``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        f = node.func
        if (f.attr in ("get", "pop") and _is_os_environ(f.value)) or (
                f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os"):
            return node.args[0]
    if isinstance(node, ast.Subscript) and _is_os_environ(node.value) and isinstance(node.ctx, ast.Load):
        return node.slice
    if isinstance(node, ast.Compare) and any(_is_os_environ(c) for c in node.comparators):
        return node.left
    return None


def _reads_a_variable(key, aliases: set[str]) -> bool:
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value.startswith("ATTNLAB_")
    if isinstance(key, ast.Attribute):
        return isinstance(key.value, ast.Name) and key.value.id == "settings"
    return isinstance(key, ast.Name) and key.id in aliases


def test_no_module_but_settings_reads_an_attnlab_variable():
    breaches = []
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        docstrings, aliases = _docstrings(tree), _settings_aliases(tree)
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            key = _environ_key(node)
            if key is not None and _reads_a_variable(key, aliases):
                breaches.append(f"{where}:{node.lineno} reads {ast.unparse(key)} through os.environ")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if NAME.fullmatch(node.value) or SHELL_READ.search(node.value):
                    breaches.append(f"{where}:{node.lineno} spells {node.value[:60]!r}: use the constant in "
                                    "attnlab.settings")
    assert not breaches, "read ATTNLAB_* variables with attnlab.settings.get:\n" + "\n".join(breaches)


def test_the_detector_finds_a_read():
    tree = ast.parse('import os\nX = settings.DATA\na = os.environ.get(X)\nb = os.getenv("ATTNLAB_FAST")\n'
                     'c = os.environ[settings.ROOT]\nd = "ATTNLAB_ROOT" in os.environ\ne = os.environ.get("HOME")\n')
    aliases = _settings_aliases(tree)
    found = sorted(n.lineno for n in ast.walk(tree)
                   if (k := _environ_key(n)) is not None and _reads_a_variable(k, aliases))
    assert found == [3, 4, 5, 6]


def test_every_variable_named_in_the_package_has_its_row():
    named = {m for p in SRC.rglob("*.py") for m in NAME.findall(p.read_text())}
    assert named == set(settings.VARIABLES), "named but without a row in settings.VARIABLES: " \
        f"{sorted(named - set(settings.VARIABLES))}; a row nothing names: {sorted(set(settings.VARIABLES) - named)}"
    for variable in settings.VARIABLES.values():
        assert variable.meaning.strip() and variable.name.startswith("ATTNLAB_")


def test_the_architecture_map_documents_every_variable_and_default():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line for line in text.splitlines() if line.startswith("| `ATTNLAB_")}
    assert set(rows) == set(settings.VARIABLES)
    for name, variable in settings.VARIABLES.items():
        if variable.default:
            assert variable.default in rows[name], f"{name}'s default {variable.default!r} is not in its row"


def test_get_reads_at_call_time_and_falls_back_to_the_default(monkeypatch):
    monkeypatch.delenv(settings.SANDBOX_UIDS, raising=False)
    monkeypatch.delenv(settings.DATA, raising=False)
    assert settings.get(settings.SANDBOX_UIDS) == "64000-64255"
    assert settings.get(settings.DATA) == "" and not settings.is_set(settings.DATA)
    monkeypatch.setenv(settings.DATA, "/tmp/cache")
    assert settings.get(settings.DATA) == "/tmp/cache" and settings.is_set(settings.DATA)
    assert settings.get(settings.SHARD_COUNT, {settings.SHARD_COUNT: "4"}) == "4"
    with pytest.raises(KeyError):
        settings.get("ATTNLAB_NO_SUCH_THING")


def test_call_sites_see_a_monkeypatched_variable(monkeypatch, tmp_path):
    from attnlab.course import find_root
    from attnlab.grading.worker.sandbox.forked import start_mode
    from attnlab.kit.datasets.download import default_cache_dir

    monkeypatch.setenv(settings.ROOT, str(tmp_path))
    monkeypatch.setenv(settings.DATA, str(tmp_path / "data"))
    monkeypatch.setenv(settings.WORKER_START, "Cold ")
    assert find_root() == tmp_path.resolve()
    assert default_cache_dir() == tmp_path / "data"
    assert start_mode() == "cold"
    monkeypatch.delenv(settings.WORKER_START)
    assert start_mode() == "auto"


def test_the_gradescope_script_reads_attnlab_python_with_its_default():
    from attnlab.buildchain.transforms import gradescope_zip

    rendered = gradescope_zip.RUN_AUTOGRADER.format(lab="lab01", python_variable=settings.PYTHON,
                                                    python_default=settings.VARIABLES[settings.PYTHON].default)
    assert 'python="${ATTNLAB_PYTHON:-/opt/attnlab/bin/python}"' in rendered
