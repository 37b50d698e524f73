"""The docs stay true: the map names every module and only paths that exist, and the contract holds every graded name
of every lab."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnlab.course import load_course

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
CURRICULUM = ROOT / "docs" / "CURRICULUM.md"


PACKAGE = ROOT / "src" / "attnlab"
MAX_LINE = 160
# What a map names in backticks that is not a path of this repository: output folders and absolute paths.
NOT_REPO_PATHS = ("OUT/", "DIR/", "/", "~")
PATH_SUFFIX = re.compile(r"\.(py|md|yml|yaml|json|ipynb|toml|txt|csv|cfg|sh)$")


def _defines_code(init: Path) -> bool:
    """Whether a package's ``__init__.py`` defines a function or class of its own (``release/__init__.py``)."""
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in ast.parse(
        init.read_text()).body)


def _modules() -> list[str]:
    """Every module the map must give a line, as a path relative to src/attnlab: every hand-written ``.py`` file.

    Left out: the generated public checks (``kit/generated/``, one file per check, described by their folder's row)
    and a package's ``__init__.py`` that only imports or documents (its folder's heading describes it); an
    ``__init__.py`` that defines a function or class holds code of its own and needs its line."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("kit/generated/") or (path.name == "__init__.py" and not _defines_code(path)):
            continue
        found.append(rel)
    return found


def _map_lines() -> list[str]:
    return ARCHITECTURE.read_text().splitlines()


def _module_lines() -> dict[str, list[str]]:
    """Module (path relative to src/attnlab) -> the bullet lines of the map's module list that lead with it."""
    text = ARCHITECTURE.read_text()
    section = text[text.index("## Package modules"):]
    section = section[:section.index("\n## ", 1)]
    found: dict[str, list[str]] = {}
    for line in section.splitlines():
        head = re.match(r"- `([^`]+)`", line)
        if head:
            found.setdefault(head.group(1), []).append(line)
    return found


@pytest.mark.parametrize("module", _modules())
def test_the_map_names_every_module_in_one_line(module):
    lines = _module_lines().get(module, [])
    assert len(lines) == 1, (
        f"docs/ARCHITECTURE.md's module list has {len(lines)} lines for src/attnlab/{module}; it needs exactly one "
        f"line that starts with its path (- `{module}`: what it owns)")


def test_every_line_of_the_module_list_names_a_module():
    unknown = sorted(set(_module_lines()) - set(_modules()))
    assert not unknown, f"docs/ARCHITECTURE.md's module list has lines for {unknown}: no such module under src/attnlab"


@pytest.mark.parametrize("module", sorted(set(_module_lines()) & set(_modules())))
def test_the_names_the_map_gives_exist(module):
    """A name in backticks that looks like a Python name (`fit`, `sized(fast, full)`) occurs in that module."""
    source = (PACKAGE / module).read_text()
    names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\(|`)", _module_lines()[module][0].split(":", 1)[1])
    missing = [n for n in names if not re.search(rf"\b{n}\b", source)]
    assert not missing, f"docs/ARCHITECTURE.md says src/attnlab/{module} has {missing}, which it does not mention"


def _named_paths(text: str) -> list[str]:
    """Every backtick span of ``text`` that looks like a path: no space, and a slash or a file suffix."""
    spans = re.findall(r"`([^`\n]+)`", text)
    return [s for s in spans if " " not in s and not s.startswith(NOT_REPO_PATHS) and ("/" in s or PATH_SUFFIX.search(s))]


def _path_exists(named: str) -> bool:
    """A path relative to the repository or to src/attnlab; ``<lab>`` stands for any lab of the course."""
    labs = [lab.id for lab in load_course(ROOT).labs] if "<lab>" in named else [""]
    for lab in labs:
        path = named.replace("<lab>", lab)
        if (ROOT / path).exists() or (PACKAGE / path).exists():
            return True
    return False


def test_every_path_the_map_names_exists():
    missing = sorted({p for p in _named_paths(ARCHITECTURE.read_text()) if not _path_exists(p)})
    assert not missing, f"docs/ARCHITECTURE.md names paths found neither in the repository nor in src/attnlab: {missing}"


def _dotted_name_exists(dotted: str) -> bool:
    """``attnlab.x.y`` is a module, or a module and one name that module mentions (``attnlab.kit.training.fit``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = PACKAGE.parent.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and re.search(rf"\b{rest[0]}\b", source.read_text()) is not None)
    return False


def test_every_attnlab_module_the_map_names_exists():
    dotted = set(re.findall(r"\battnlab(?:\.[A-Za-z_][A-Za-z0-9_]*)+", ARCHITECTURE.read_text()))
    missing = sorted(d for d in dotted if not _dotted_name_exists(d))
    assert not missing, f"docs/ARCHITECTURE.md names {missing}: no such module in src/attnlab (or no such name in it)"


def test_no_line_of_the_map_is_over_the_limit():
    long = [(n, len(line)) for n, line in enumerate(_map_lines(), 1) if len(line) > MAX_LINE]
    assert not long, f"docs/ARCHITECTURE.md has lines over {MAX_LINE} characters (line, length): {long}"


def test_the_map_holds_no_issue_numbers_and_no_measurements():
    """History stays in git and figures in benchmarks/README.md: the map says what the code is, not when or how fast."""
    issues = [(n, m) for n, line in enumerate(_map_lines(), 1)
              for m in re.findall(r"\bissues?\s*#?\d+|#\d+\b", line, flags=re.I)]
    assert not issues, f"docs/ARCHITECTURE.md cites issues (line, text); say what the code does instead: {issues}"
    figures = [(n, m) for n, line in enumerate(_map_lines(), 1)
               for m in re.findall(r"\b\d[\d.,]*\s?(?:ms|s|MiB|MB|GiB|GB|KiB|KB|%)(?![\w-])", line)]
    assert not figures, f"docs/ARCHITECTURE.md quotes figures (line, text); they belong in benchmarks/README.md: {figures}"


def test_the_grade_flow_names_its_stages_in_order():
    text = ARCHITECTURE.read_text()
    flow = text[text.index("`attnlab grade "):text.index("`attnlab mark ")]
    stages = ["commands.py", "grading/scale/batch.py", "grade_submission", "grading/core/bundle.py",
              "grading/worker/sandbox/launch.py", "grading/worker/process.py", "RemoteStudent", "run_suite",
              "grading/diagnosis/diagnose.py", "grading/outputs/feedback.py", "grading/outputs/gradebook.py"]
    where = [flow.find(stage) for stage in stages]
    assert -1 not in where, f"the grade flow does not name {[s for s, i in zip(stages, where) if i == -1]}"
    assert where == sorted(where), f"the grade flow names the stages out of order: {sorted(zip(where, stages))}"


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
    return line


def test_the_bundle_file_names_are_spelled_in_bundle_names_only():
    """records/bundle_names.py owns the autograder folder's names: no other module writes them as string literals."""
    from attnlab.records import bundle_names

    package = ROOT / "src" / "attnlab"
    names = "|".join(re.escape(n) for n in bundle_names.FILES) + r"|-otter\.zip|-gradescope\.zip"
    literal = re.compile(rf"""["'][^"'\n]*(?:{names})["']""")
    spelled = {path.relative_to(package).as_posix(): literal.findall(path.read_text())
               for path in package.rglob("*.py") if "generated" not in path.parts}
    assert spelled.pop("records/bundle_names.py"), "records/bundle_names.py no longer defines the names"
    assert not {p: hits for p, hits in spelled.items() if hits}, "use the names of attnlab.records.bundle_names"


def test_no_package_module_is_named_like_a_bundle_file():
    """The release refuses any file named like one of the bundle's (``FORBIDDEN_NAMES``): the kit it ships may hold none."""
    from attnlab.records.bundle_names import FILES

    package = ROOT / "src" / "attnlab"
    clashes = sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.name in FILES)
    assert not clashes, f"{clashes}: named like a bundle file, so the release would refuse the kit; rename them"


def test_the_leak_gates_lines_say_what_they_check():
    """Both gates check solution, hidden-test and catalogue lines with one rule (``secret_line``), as the map says."""
    import ast

    for module in ("buildchain/transforms/check_no_leak.py", "release/leak_gate.py"):
        line = _map_line(module)
        for claim in ("solution", "hidden test", "catalogue", "secret_line"):
            assert claim in line, f"docs/ARCHITECTURE.md's line of {module} does not say it checks {claim!r}"
    # the release gate takes its secret lines from the build gate's functions, which apply secret_line (the solution
    # blocks' lines through the run's masters, buildchain/masters.py)
    def taken(path: str) -> set[str]:
        tree = ast.parse((ROOT / "src/attnlab" / path).read_text())
        return {a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                and (node.module or "").endswith("transforms.check_no_leak") for a in node.names}

    assert "instructor_lines" in taken("release/leak_gate.py"), "release/leak_gate.py must import it from check_no_leak"
    assert "solution_lines" in taken("buildchain/masters.py"), "buildchain/masters.py must import it from check_no_leak"
    assert "instructor-only file" in _map_line("release/leak_gate.py")


def test_generated_folders_are_marked_and_the_bundle_copies_say_where_they_come_from():
    import subprocess

    from attnlab.grading.core.bundle import GENERATED_HEADER
    from attnlab.records.bundle_names import CATALOGUE, HIDDEN_TESTS

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
