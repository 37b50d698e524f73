"""The docs stay true: the map names every module, and the contract holds every graded name of every lab."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnlab.course import load_course

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
CURRICULUM = ROOT / "docs" / "CURRICULUM.md"


def _modules() -> list[str]:
    """Every module of the package as a path relative to src/attnlab (generated public checks excluded)."""
    package = ROOT / "src" / "attnlab"
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("public_tests/") or path.name == "__init__.py":
            continue
        found.append(rel)
    return found


@pytest.mark.parametrize("module", _modules())
def test_the_map_names_every_module(module):
    text = ARCHITECTURE.read_text()
    name = module.removesuffix(".py")
    dotted = "attnlab." + name.replace("/", ".")
    parts = module.split("/")
    spellings = {dotted, *("/".join(parts[i:]) for i in range(len(parts)))}
    named = any(re.search(rf"[`/ .]{re.escape(s)}\b", text) for s in spellings)
    assert named, (
        f"docs/ARCHITECTURE.md does not mention src/attnlab/{module}; add a one-line entry to its module list")


def _graded_names(master: Path) -> list[str]:
    """Question names of a master: the `name:` line of every BEGIN QUESTION block."""
    return re.findall(r"^# # BEGIN QUESTION\n# name: *([A-Za-z_][A-Za-z0-9_]*)", master.read_text(), flags=re.M)


def _section(text: str, number: str) -> str:
    match = re.search(rf"^## Lab {number}\b.*?(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"docs/CURRICULUM.md has no '## Lab {number}' section"
    return match.group(0)


@pytest.mark.parametrize("lab", load_course(ROOT).labs, ids=lambda lab: lab.id)
def test_every_graded_name_is_in_the_contract(lab):
    section = _section(CURRICULUM.read_text(), lab.id[3:5])
    names = _graded_names(lab.master)
    assert names, f"{lab.master} has no question"
    missing = [n for n in names if not re.search(rf"`(class )?{n}\b", section)]
    assert not missing, f"{lab.id} grades {missing}, which docs/CURRICULUM.md's Lab {lab.id[3:5]} section does not define"


def test_docs_cite_the_contract_in_the_repository():
    stale = []
    for path in [ROOT / "README.md", *ROOT.glob("instructor/*/README.md"), *ROOT.glob("docs/*.md"),
                 *ROOT.glob("instructor/*/lab*.py")]:
        text = path.read_text()
        if "shared/CURRICULUM.md" in text or "instructor/CURRICULUM.md" in text:
            stale.append(path.relative_to(ROOT).as_posix())
    assert not stale, f"these files cite a contract outside the repository; cite docs/CURRICULUM.md: {stale}"
