"""The import graph of src/attnlab has no cycle, and every module imports on its own.

The graph comes from ``ast``: every ``import`` and ``from ... import`` of an attnlab module, at module level and
inside functions alike (a lazy import hides a cycle from Python, not from this test). Imports under
``if TYPE_CHECKING:`` never run and are left out. A parent package's ``__init__`` that Python runs on the way is
not an edge: only what a module names. The generated public checks (``kit/generated/``) are left out."""

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
            if "generated" not in p.relative_to(PACKAGE).parts}


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
    assert "attnlab.grading.bridges.nbgrader_bridge" in import_graph()["attnlab.labkit"]  # imported in a function
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


# One import path per name: a name is imported from the module that defines it, never through one that only
# imports it (a re-export). A package's __init__ may gather names for its package; no other module does.

CODE_DIRS = ("src", "tests", "benchmarks", "instructor", "autograder")  # autograder: the generated hidden tests


def _bound_names(body) -> set[str]:
    """The names a module's top-level statements define (``def``, ``class``, assignments, also inside top-level
    ``if``/``try``/``with``/``for`` blocks), not those it imports."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        targets = {ast.Assign: lambda n: n.targets, ast.AnnAssign: lambda n: [n.target],
                   ast.AugAssign: lambda n: [n.target], ast.For: lambda n: [n.target],
                   ast.With: lambda n: [i.optional_vars for i in n.items if i.optional_vars]}.get(type(node))
        for target in targets(node) if targets else ():
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        for block in ("body", "orelse", "finalbody"):
            if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                names |= _bound_names(getattr(node, block, []))
        for handler in getattr(node, "handlers", []):
            names |= _bound_names(handler.body)
    return names


def _plain_imports(body) -> set[str]:
    """The names a module binds with a top-level ``import x`` (a module object: a test may patch through it)."""
    return {(a.asname or a.name).partition(".")[0] for n in body if isinstance(n, ast.Import) for a in n.names}


def _absolute(node: ast.ImportFrom, package: str | None) -> str | None:
    if not node.level:
        return node.module
    if package is None:  # a relative import outside src/attnlab: not an attnlab module
        return None
    anchor = package.split(".")
    return ".".join(anchor[:len(anchor) - node.level + 1] + ([node.module] if node.module else []))


def reexported_imports(modules: dict[str, tuple[bool, ast.Module]], files: dict[str, tuple[str | None, ast.Module]]):
    """Each place in ``files`` (shown name -> (its package for relative imports, or None; tree)) that takes a name
    from a module of ``modules`` (name -> (is a package's __init__, tree)) that does not define it: by
    ``from MODULE import NAME`` or as ``alias.NAME`` of a module imported as ``alias``."""
    defined = {m: _bound_names(tree.body) for m, (_, tree) in modules.items()}
    origin = {}  # (module, name) -> the module it imports the name from
    for m, (is_package, tree) in modules.items():
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                here = _absolute(node, m if is_package else m.rpartition(".")[0])
                origin.update({(m, a.asname or a.name): here for a in node.names})

    def misplaced(module: str, name: str) -> str | None:
        if module not in modules or modules[module][0] or name in defined[module] or f"{module}.{name}" in modules:
            return None
        source = origin.get((module, name))
        return f"{name} from {module}" + (f" (it imports it from {source})" if source else " (it does not define it)")

    found = []
    for shown, (package, tree) in files.items():
        aliases, rebound = {}, set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (base := _absolute(node, package)):
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                    elif why := misplaced(base, a.name):
                        found.append(f"{shown}:{node.lineno} imports {why}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) or isinstance(node, ast.arg):
                rebound.add(node.id if isinstance(node, ast.Name) else node.arg)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.value.id not in rebound):
                module = aliases[node.value.id]
                if node.attr not in _plain_imports(modules[module][1].body) and (why := misplaced(module, node.attr)):
                    found.append(f"{shown}:{node.lineno} reads {node.value.id}.{node.attr}: {why}")
    return sorted(found)


def _package_modules() -> dict[str, tuple[bool, ast.Module]]:
    return {_module_name(p): (p.name == "__init__.py", ast.parse(p.read_text(), str(p)))
            for p in sorted(PACKAGE.rglob("*.py"))}


def _code_files() -> dict[str, tuple[str | None, ast.Module]]:
    files = {}
    for folder in CODE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            package = None
            if path.is_relative_to(PACKAGE):
                name = _module_name(path)
                package = name if path.name == "__init__.py" else name.rpartition(".")[0]
            files[str(path.relative_to(ROOT))] = (package, ast.parse(path.read_text(), str(path)))
    return files


def test_the_reexport_finder_sees_both_ways_of_reaching_a_name():
    modules = {name: (name == "p", ast.parse(textwrap.dedent(text))) for name, text in {
        "p": "from p.a import f\n",  # a package's __init__ may gather names
        "p.a": "import os\ndef f(): pass\nX = 1\n",
        "p.b": "from p.a import X, f\nY = X\n",
        "p.c": "from .b import f\n",
    }.items()}
    user = """
        from p import f, a
        from p.a import X
        from p.b import Y
        from p import b as bee
        import p.b as b2
        bee.f(), b2.X, a.os.sep, a.f, bee.Y
    """
    shadowed = "from p import b\ndef g(b):\n    return b.f\n"  # b: the argument, not the module
    files = {"p/c.py": ("p", modules["p.c"][1]), "user.py": (None, ast.parse(textwrap.dedent(user))),
             "shadowed.py": (None, ast.parse(shadowed))}
    assert reexported_imports(modules, files) == [
        "p/c.py:1 imports f from p.b (it imports it from p.a)",
        "user.py:7 reads b2.X: X from p.b (it imports it from p.a)",
        "user.py:7 reads bee.f: f from p.b (it imports it from p.a)",
    ]


def test_every_name_is_imported_from_the_module_that_defines_it():
    found = reexported_imports(_package_modules(), _code_files())
    assert not found, "import each name from the module that defines it (and drop the re-export):\n" + "\n".join(found)


def test_no_noqa_f401_outside_a_packages_init():
    """An unused import kept with ``noqa: F401`` is a re-export in the making; only a package's ``__init__``
    gathers names. (The masters' imports for the student's own code and the tests' fixture imports live outside
    src/attnlab.)"""
    found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted(PACKAGE.rglob("*.py")) if p.name != "__init__.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if "noqa: F401" in line]
    assert not found, "unused imports kept for others to import from here: import those names where they are " \
        "defined and remove these:\n" + "\n".join(found)
