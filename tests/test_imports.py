"""The import graph of src/attnlab has no cycle, and every module imports on its own.

The graph comes from ``ast``: every ``import`` and ``from ... import`` of an attnlab module, at module level and
inside functions alike (a lazy import hides a cycle from Python, not from this test). Imports under
``if TYPE_CHECKING:`` never run and are left out. A parent package's ``__init__`` that Python runs on the way is
not an edge: only what a module names. The generated public checks are left out."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = SRC / "attnlab"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))
            if "public_tests" not in p.relative_to(PACKAGE).parts}


def _type_checking_nodes(tree) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {id(n) for child in node.body for n in ast.walk(child)}
    return skipped


def _imports(name: str, path: Path, modules: set[str]) -> set[str]:
    """The attnlab modules ``name`` (at ``path``) imports anywhere in its code."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            submodules = {f"{base}.{a.name}" for a in node.names} & modules  # `from pkg import module`
            found |= submodules
            if len(submodules) < len(node.names):  # a name that is no module: the package's __init__ runs
                found.add(base)
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) for every strongly connected part of ``graph`` that has one (Tarjan)."""
    index, low, stack, on_stack, parts = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(part)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(part, graph) for part in parts]


def _cycle_in(part: set[str], graph) -> list[str]:
    """A path ``start -> ... -> start`` inside the strongly connected ``part`` (breadth first: a shortest one)."""
    start = min(part)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & part):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no cycle through {start} in {sorted(part)}")


def test_the_graph_sees_lazy_imports_and_names_a_cycle():
    assert "attnlab.grading.bridges.nbgrader_bridge" in import_graph()["attnlab.public_check"]  # imported in a method
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_the_package():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles in src/attnlab (break each: move what both need into a module of its own):\n" \
        + "\n".join(" -> ".join(c) for c in cycles)


CHILD = textwrap.dedent("""
    import importlib, json, os, sys, traceback
    for outside in json.loads(sys.argv[2]):  # the slow imports (torch...), once before the forks
        try:
            importlib.import_module(outside)
        except Exception:  # noqa: BLE001 - a child that needs it reports the failure
            pass
    assert not [m for m in sys.modules if m == "attnlab" or m.startswith("attnlab.")]
    failed = []
    for name in json.loads(sys.argv[1]):
        pid = os.fork()
        if pid == 0:
            try:
                importlib.import_module(name)
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        if os.waitpid(pid, 0)[1]:
            failed.append(name)
    print(json.dumps(failed))
""")


def _outside_imports() -> list[str]:
    """The packages outside attnlab and the standard library that modules import at their top."""
    found = set()
    for path in _modules().values():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
    return sorted(m for m in found if m.partition(".")[0] not in sys.stdlib_module_names | {"attnlab"})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks a child per module (Linux)")
def test_every_module_imports_on_its_own():
    """Each module in a fresh child of an interpreter that has imported no attnlab module (only the packages
    outside it, preloaded for speed)."""
    names = sorted(_modules())
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(names), json.dumps(_outside_imports())],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    assert failed == [], f"these modules do not import on their own: {failed}\n{done.stderr[-3000:]}"


def test_no_module_imports_a_private_name_of_another():
    """A name another module imports is public (no leading underscore); what stays private stays in its module."""
    found = []
    for path in _modules().values():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} takes {a.name} from {node.module or '.'}"
                          for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, "rename these without the underscore where they are defined and used:\n" + "\n".join(found)
