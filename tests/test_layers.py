"""Imports run one way between the package's layers, as docs/ARCHITECTURE.md's "Layers" section declares them.

The map lists the layers lowest first; every path it names there (a file or a folder under ``src/attnlab/``) takes its
rank from where it first appears. A module belongs to the longest listed path that holds it, and may import from its
own path and from any path of a lower rank. Every other import, module-level or inside a function (the graph of
``tests/test_imports.py``), must be listed under "Known exceptions, to be removed"; a listed exception that no
longer happens must leave the list, so the list only shrinks."""

from __future__ import annotations

import re

import pytest

from tests.test_imports import PACKAGE, ROOT, _modules, import_graph

MAP = ROOT / "docs" / "ARCHITECTURE.md"


def _section(text: str, heading: str) -> str:
    match = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ )", text, re.M | re.S)
    assert match, f"docs/ARCHITECTURE.md has no section headed {heading!r}"
    return match.group(1)


def declared_order(text: str) -> list[str]:
    """The layer paths (``grading/worker/``, ``course.py``...) of the map's numbered list, lowest first."""
    layers = _section(text, "Layers").split("### Known exceptions")[0]
    items = [line for line in layers.splitlines() if re.match(r"^\d+\. |^   ", line)]
    order = []
    for path in re.findall(r"`([^`]+)`", "\n".join(items)):
        if path not in order and (PACKAGE / path).exists():
            order.append(path)
    return order


def declared_exceptions(text: str) -> set[tuple[str, str]]:
    """(importer, imported) file paths of the map's known exceptions: ``a``, ``b`` -> ``c``; ``d`` -> ``e``."""
    section = _section(text, "Known exceptions, to be removed")
    pairs = set()
    for line in section.splitlines():
        if not line.startswith("- "):
            continue
        for clause in line[2:].split(";"):
            left, arrow, right = clause.partition("->")
            assert arrow, f"a known exception without '->' in docs/ARCHITECTURE.md: {line!r}"
            pairs |= {(a, b) for a in re.findall(r"`([^`]+)`", left) for b in re.findall(r"`([^`]+)`", right)}
    return pairs


def _file(module: str) -> str:
    return str(_modules()[module].relative_to(PACKAGE))


def owner(path: str, order: list[str]) -> str | None:
    """The longest layer path holding ``path`` (a file under src/attnlab)."""
    holders = [p for p in order if path == p or (p.endswith("/") and path.startswith(p))]
    return max(holders, key=len, default=None)


def upward_imports(graph: dict[str, set[str]], order: list[str]) -> set[tuple[str, str]]:
    rank = {p: i for i, p in enumerate(order)}
    upward = set()
    for importer, imported in graph.items():
        a = owner(_file(importer), order)
        for target in imported:
            b = owner(_file(target), order)
            if a is not None and b is not None and a != b and rank[b] > rank[a]:
                upward.add((_file(importer), _file(target)))
    return upward


@pytest.fixture(scope="module")
def text() -> str:
    return MAP.read_text()


def test_every_module_has_a_layer(text):
    order = declared_order(text)
    homeless = sorted(_file(m) for m, path in _modules().items()
                      if owner(_file(m), order) is None and path.read_text().strip())  # an empty __init__ imports nothing
    assert not homeless, (f"{homeless}: no layer in docs/ARCHITECTURE.md's 'Layers' list holds these modules; "
                          "add the file or its folder where it belongs")


def test_imports_follow_the_layers(text):
    upward = upward_imports(import_graph(), declared_order(text)) - declared_exceptions(text)
    assert not upward, "\n".join(
        [f"{a} imports {b}, a higher layer in docs/ARCHITECTURE.md" for a, b in sorted(upward)]
        + ["Move the shared name down to a lower layer (or the importer up); do not add to the known exceptions."])


def test_known_exceptions_still_happen(text):
    happening = upward_imports(import_graph(), declared_order(text))
    stale = declared_exceptions(text) - happening
    assert not stale, f"{sorted(stale)}: listed as known upward imports but no longer happen; remove them from the list"


def test_a_planted_upward_import_is_found(text):
    order = declared_order(text)
    graph = {m: set() for m in _modules()}
    graph["attnlab.settings"] = {"attnlab.commands"}
    assert upward_imports(graph, order) == {("settings.py", "commands.py")}


def _folder(module: str) -> str:
    """A module's folder under src/attnlab (``grading/core``); a top-level module is its own node (``settings.py``): the
    top level holds the bottom (settings) and the top (the command line) of the order alike."""
    path = _modules()[module].relative_to(PACKAGE)
    return path.as_posix() if path.parent == PACKAGE.relative_to(PACKAGE) else path.parent.as_posix()


def folder_cycle(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of folders (``["kit", "grading/bridges", "grading/core", "kit"]``) in the import ``graph``, or []."""
    edges: dict[str, set[str]] = {}
    for importer, imported in graph.items():
        for target in imported:
            if _folder(importer) != _folder(target):
                edges.setdefault(_folder(importer), set()).add(_folder(target))
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [node, nxt] if nxt in path else [node, nxt]
            if nxt not in state:
                found = visit(nxt, path + [node])
                if found:
                    return found
        state[node] = 2
        return []

    for start in sorted(edges):
        found = [] if start in state else visit(start, [])
        if found:
            return found
    return []


def test_no_folder_level_import_cycle():
    cycle = folder_cycle(import_graph())
    assert not cycle, f"the folders import one another in a cycle: {' -> '.join(cycle)} (module level or inside a function)"


def test_a_planted_folder_cycle_is_found():
    graph = {m: set() for m in _modules()}
    graph["attnlab.grading.core.checks"] = {"attnlab.kit.expect"}
    graph["attnlab.kit.public_check"] = {"attnlab.grading.core.hidden"}
    assert folder_cycle(graph) in (["grading/core", "kit", "grading/core"], ["kit", "grading/core", "kit"])
