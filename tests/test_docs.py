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


def _module_lines() -> dict[str, list[str]]:
    """Module (path relative to src/attnlab) -> the bullet lines of the map's module list that lead with it."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Package modules"):]
    section = section[:section.index("\n## ", 1)]
    modules = _modules() + ["release/__init__.py"]
    found: dict[str, list[str]] = {}
    for line in section.splitlines():
        head = re.match(r"- `([^`]+)`", line)
        if not head:
            continue
        token = head.group(1)
        if token.startswith("attnlab."):
            token = token.removeprefix("attnlab.").replace(".", "/") + ".py"
        matches = [m for m in modules if m == token or m.endswith("/" + token)]
        assert len(matches) == 1, f"docs/ARCHITECTURE.md: {line[:60]!r} names no module (or several): {matches}"
        found.setdefault(matches[0], []).append(line)
    return found


@pytest.mark.parametrize("module", _modules())
def test_the_map_names_every_module_in_one_line(module):
    lines = _module_lines().get(module, [])
    assert len(lines) == 1, (
        f"docs/ARCHITECTURE.md's module list has {len(lines)} lines for src/attnlab/{module}; it needs exactly one "
        f"line that starts with its name (- `{module.split('/')[-1]}`: what it does)")


@pytest.mark.parametrize("module", sorted(_module_lines()))
def test_the_names_the_map_gives_exist(module):
    """A name in backticks that looks like a Python name (`fit`, `sized(fast, full)`) occurs in that module."""
    source = (ROOT / "src" / "attnlab" / module).read_text()
    names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\(|`)", _module_lines()[module][0])
    missing = [n for n in names if not re.search(rf"\b{n}\b", source)]
    assert not missing, f"docs/ARCHITECTURE.md says src/attnlab/{module} has {missing}, which it does not mention"


def test_the_data_flow_names_every_stage_in_order():
    text = ARCHITECTURE.read_text()
    flow = text[text.index("## Data flow"):text.index("## Package modules")]
    stages = ["(master)", "buildchain/transforms", "autograder/", "grade_submission", "RemoteStudent", "worker.py",
              "executor.py", "checks.py", "results", "feedback.py", "gradebook.py"]
    where = [flow.find(stage) for stage in stages]
    assert -1 not in where, f"the data flow does not name {[s for s, i in zip(stages, where) if i == -1]}"
    assert where == sorted(where), f"the data flow names the stages out of order: {sorted(zip(where, stages))}"


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


def test_the_readmes_and_masters_cite_the_contract():
    files = [ROOT / "README.md", *sorted(ROOT.glob("instructor/*/README.md")),
             *sorted(ROOT.glob("instructor/*/lab*.py"))]
    silent = [p.relative_to(ROOT).as_posix() for p in files if "docs/CURRICULUM.md" not in p.read_text()]
    assert not silent, f"these READMEs and masters do not cite the contract, docs/CURRICULUM.md: {silent}"


def test_docs_cite_the_contract_in_the_repository():
    stale = []
    for path in [ROOT / "README.md", *ROOT.glob("instructor/*/README.md"), *ROOT.glob("docs/*.md"),
                 *ROOT.glob("instructor/*/lab*.py")]:
        text = path.read_text()
        if "shared/CURRICULUM.md" in text or "instructor/CURRICULUM.md" in text:
            stale.append(path.relative_to(ROOT).as_posix())
    assert not stale, f"these files cite a contract outside the repository; cite docs/CURRICULUM.md: {stale}"


def _map_line(module: str) -> str:
    (line,) = _module_lines()[module]
    section = ARCHITECTURE.read_text()
    start = section.index(line)
    end = section.find("\n- ", start + 1)
    return " ".join(section[start:end].split())  # the bullet with its continuation lines


def test_the_bundle_file_names_are_spelled_in_bundle_py_only():
    """grading/core/bundle.py owns the autograder folder: no other module writes its file names as string literals."""
    from attnlab.grading.core import bundle

    package = ROOT / "src" / "attnlab"
    names = "|".join(re.escape(n) for n in bundle.FILES) + r"|-otter\.zip|-gradescope\.zip"
    literal = re.compile(rf"""["'][^"'\n]*(?:{names})["']""")
    spelled = {path.relative_to(package).as_posix(): literal.findall(path.read_text())
               for path in package.rglob("*.py") if "public_tests" not in path.parts}
    assert spelled.pop("grading/core/bundle.py"), "grading/core/bundle.py no longer defines the names"
    assert not {p: hits for p, hits in spelled.items() if hits}, "use the names of attnlab.grading.core.bundle"


def test_the_leak_gates_lines_say_what_they_check():
    """Both gates check solution, hidden-test and catalogue lines with one rule (``secret_line``), as the map says."""
    import ast

    for module in ("buildchain/transforms/check_no_leak.py", "release/leak_gate.py"):
        line = _map_line(module)
        for claim in ("solution", "hidden test", "catalogue", "secret_line"):
            assert claim in line, f"docs/ARCHITECTURE.md's line of {module} does not say it checks {claim!r}"
    # the release gate takes its secret lines from the build gate's functions, which apply secret_line
    gate = ast.parse((ROOT / "src/attnlab/release/leak_gate.py").read_text())
    taken = {a.name for node in gate.body if isinstance(node, ast.ImportFrom)
             and (node.module or "").endswith("transforms.check_no_leak") for a in node.names}
    assert {"instructor_lines", "solution_lines"} <= taken, "release/leak_gate.py must import them from check_no_leak"
    assert "instructor-only file" in _map_line("release/leak_gate.py")


def test_generated_folders_are_marked_and_the_bundle_copies_say_where_they_come_from():
    import subprocess

    from attnlab.grading.core.bundle import CATALOGUE, GENERATED_HEADER, HIDDEN_TESTS

    table = ARCHITECTURE.read_text().split("## Folders", 1)[1].split("\n## ", 1)[0]
    generated = re.findall(r"^\| `([^`]+)` \|.*\| `attnlab build` \|$", table, flags=re.M)
    assert "autograder/<lab>/" in generated and "labs/<lab>/<lab>.ipynb" in generated
    lab = load_course(ROOT).labs[0].id
    paths = [g.replace("<lab>", lab).rstrip("/") for g in generated]
    paths = [p if p.endswith(".ipynb") else f"{p}/x" for p in paths]  # a file inside each generated folder
    out = subprocess.run(["git", "check-attr", "linguist-generated", "--", *paths], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    unmarked = [line for line in out.splitlines() if not line.endswith(": true")]
    assert not unmarked, f".gitattributes does not mark these generated paths linguist-generated: {unmarked}"
    for lab in load_course(ROOT).labs:
        for name in (HIDDEN_TESTS, CATALOGUE):
            text = (lab.autograder_dir / name).read_text()
            assert text.startswith(GENERATED_HEADER.format(lab=lab.id, name=name)), f"{lab.id}/{name}: no header"
