"""attnlab release: a student repository with the notebooks, the kit and a README, and nothing instructors keep."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.commands import UsageError
from attnlab.commands import release as release_command
from attnlab.course import load_course
from attnlab.release import install_spec_for, release
from attnlab.release.leak_gate import ReleaseLeak, _notebook_lines, check_release, secret_lines
from attnlab.release.readme import colab_url

ROOT = Path(__file__).resolve().parents[2]
URL = "https://github.com/example-course/dl-labs"


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT)


@pytest.fixture(scope="module")
def released(course, tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    release(course, list(course.labs), out, url=URL)
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_layout_notebooks_kit_readme_licence_and_nothing_else(course, released):
    files = _files(released)
    for lab in course.labs:
        assert f"labs/{lab.id}/{lab.id}.ipynb" in files
        assert any(name.startswith(f"src/attnlab/public_tests/{lab.id}/") for name in files)
    assert {"README.md", "LICENSE", "pyproject.toml", ".gitignore", "src/attnlab/__init__.py"} <= set(files)
    tops = {name.split("/")[0] for name in files}
    assert tops == {"README.md", "LICENSE", "pyproject.toml", ".gitignore", "labs", "src"}


def test_notebooks_install_the_kit_from_the_released_repository(course, released):
    for lab in course.labs:
        nb = json.loads((released / "labs" / lab.id / f"{lab.id}.ipynb").read_text())
        setup = next("".join(c["source"]) for c in nb["cells"] if "attnlab_setup" in c["metadata"].get("tags", []))
        assert f"KIT = 'attnlab @ git+{URL}'" in setup


def test_readme_has_a_colab_badge_per_lab_and_says_how_to_submit(course, released):
    readme = (released / "README.md").read_text()
    for lab in course.labs:
        assert (f"https://colab.research.google.com/github/example-course/dl-labs/blob/main/labs/{lab.id}/"
                f"{lab.id}.ipynb") in readme
    assert "File › Download › Download .ipynb" in readme and 'pip install -e ".[student]"' in readme


def test_colab_links_only_for_github():
    assert colab_url("git+https://github.com/a/b.git", "dev", "labs/x.ipynb") == (
        "https://colab.research.google.com/github/a/b/blob/dev/labs/x.ipynb")
    assert colab_url("https://gitlab.example.edu/a/b", "main", "x.ipynb") is None


def test_release_is_deterministic(course, released, tmp_path):
    again = tmp_path / "again"
    release(course, list(course.labs), again, url=URL)
    assert _files(again) == _files(released)


def test_the_leak_gate_passes_the_release_and_knows_the_secrets(course, released):
    check_release(course, list(course.labs), released)
    secrets = secret_lines(course)
    origins = {origin.split("/")[-1].split(" ")[-1] for origin in secrets.values()}
    assert origins == {"catalogue.py", "hidden_tests.py", "solution"}


def _plant(released, tmp_path, rel, text):
    copy = tmp_path / "planted"
    shutil.copytree(released, copy)
    path = copy / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(path.read_text() + "\n" + text + "\n" if path.exists() else text)
    return copy


@pytest.mark.parametrize("origin", ["solution", "hidden_tests.py", "catalogue.py"])
def test_the_leak_gate_catches_a_planted_secret_line(course, released, tmp_path, origin):
    shown = _notebook_lines(released, list(course.labs))  # given code from an earlier lab is meant to be seen
    line = next(line for line, where in sorted(secret_lines(course).items()) if where.endswith(origin)
                and line not in shown)
    planted = _plant(released, tmp_path, "src/attnlab/public_tests/lab05_self_attention/causal_mask.py", line)
    with pytest.raises(ReleaseLeak, match="causal_mask.py holds a line of"):
        check_release(course, list(course.labs), planted)


def test_the_leak_gate_refuses_instructor_files_and_looks_inside_wheels(course, released, tmp_path):
    planted = _plant(released, tmp_path, "solutions/lab05_self_attention/notes.md", "x")
    with pytest.raises(ReleaseLeak, match="instructor-only file: solutions/"):
        check_release(course, list(course.labs), planted)
    secret = next(iter(sorted(secret_lines(course))))
    wheel_dir = tmp_path / "w"
    shutil.copytree(released, wheel_dir)
    (wheel_dir / "dist").mkdir()
    with zipfile.ZipFile(wheel_dir / "dist" / "attnlab-0.1.0-py3-none-any.whl", "w") as zf:
        zf.writestr("attnlab/extra.py", secret + "\n")
    with pytest.raises(ReleaseLeak, match=r"attnlab-0.1.0-py3-none-any.whl!attnlab/extra.py"):
        check_release(course, list(course.labs), wheel_dir)


def test_the_placeholder_and_non_urls_are_refused(tmp_path, capsys):
    assert install_spec_for("https://gitlab.example.edu/a/b.git/") == "attnlab @ git+https://gitlab.example.edu/a/b.git"
    # commands raise UsageError; the CLI prints it on one line, exit 2
    with pytest.raises(UsageError, match="placeholder"):
        release_command(out=str(tmp_path / "o"), url="https://github.com/attnlab/attnlab", root=str(ROOT))
    assert not (tmp_path / "o").exists()
    assert main(["--root", str(ROOT), "release", str(tmp_path / "o"), "--url", "my course"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab release: ") and "is not a repository URL" in err and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_wheel_is_written_deterministically_and_holds_the_checks(course, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    release(course, list(course.labs)[:1], a, url=URL, wheel=True)
    release(course, list(course.labs)[:1], b, url=URL, wheel=True)
    (wa,), (wb,) = list((a / "dist").glob("*.whl")), list((b / "dist").glob("*.whl"))
    assert wa.read_bytes() == wb.read_bytes()
    with zipfile.ZipFile(wa) as zf:
        names = zf.namelist()
    assert any(n.startswith("attnlab/public_tests/lab05_self_attention/") for n in names)
