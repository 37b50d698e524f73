"""A term of releases into one student repository: labs 01-11 in deadline order with --labs, each step kept, a failed
gate leaving the repository as it was (issue 34)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.course import load_course
from attnlab.release import release
from attnlab.release.leak_gate import secret_lines

ROOT = Path(__file__).resolve().parents[2]
URL = "https://github.com/example-course/dl-labs"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "commit.gpgsign=false"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every entry under ``folder`` (``.git`` included): its mode and, for a file, its bytes."""
    return {p.relative_to(folder).as_posix(): (p.lstat().st_mode, p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def course():
    return load_course(ROOT)


@pytest.fixture(scope="module")
def term(course, tmp_path_factory):
    """Labs 01-11 released one by one into one git repository, each with the labs due before it --closed, and
    committed; what each step printed and what ``git status`` said before its commit."""
    repo = tmp_path_factory.mktemp("term") / "students"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    steps = []
    for i, lab in enumerate(course.labs):
        closed = [earlier.id.split("_")[0] for earlier in course.labs[:i]]
        argv = ["--root", str(ROOT), "release", str(repo), "--url", URL, "--labs", lab.id.split("_")[0]]
        code = main(argv + (["--closed", ",".join(closed)] if closed else []))
        status = _git(repo, "status", "--porcelain")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"release {lab.id}")
        steps.append((lab.id, code, status, _snapshot(repo / "labs")))
    return repo, steps


def test_every_lab_releases_in_deadline_order_and_no_earlier_lab_is_deleted(course, term):
    repo, steps = term
    assert [(lab, code) for lab, code, _, _ in steps] == [(lab.id, 0) for lab in course.labs]
    for i, (lab, _, status, labs_now) in enumerate(steps):
        deleted = [line for line in status.splitlines() if line.startswith(" D") or line.startswith("D")]
        assert not deleted, f"releasing {lab} deleted {deleted}"
        for earlier in course.labs[:i + 1]:
            assert f"{earlier.id}/{earlier.id}.ipynb" in labs_now
        if i:  # an earlier lab is kept byte for byte, not rebuilt
            before = steps[i - 1][3]
            assert {k: v for k, v in labs_now.items() if not k.startswith(lab)} == before
    assert len(_git(repo, "log", "--oneline").splitlines()) == len(course.labs)


def test_lab10_gives_closed_lab09_code_and_passes_the_gate(course, term):
    repo, _ = term
    nb = json.loads((repo / "labs/lab10_pretrained_transformers/lab10_pretrained_transformers.ipynb").read_text())
    given = "".join("".join(c["source"]) for c in nb["cells"])
    line = "return self.resid_dropout(self.proj(out))"
    assert any(s.strip() == line for s in given.splitlines())
    assert line in secret_lines(course)  # a secret of lab09, shipped only because lab09 is closed


def test_the_readme_lists_every_lab_present_and_the_cpu_install(course, term):
    repo, _ = term
    readme = (repo / "README.md").read_text()
    for lab in course.labs:
        assert lab.title in readme
        assert f"labs/{lab.id}/{lab.id}.ipynb" in readme
    assert ".venv/bin/pip install torch --index-url https://download.pytorch.org/whl/cpu" in readme
    assert readme.index("download.pytorch.org/whl/cpu") < readme.index('pip install -e ".[student]"')


def test_notebooks_point_only_to_what_students_have(course, term):
    repo, _ = term
    contract = (repo / "docs" / "CURRICULUM.md").read_text()
    for lab in course.labs:
        text = "".join("".join(c["source"]) for c in json.loads(
            (repo / "labs" / lab.id / f"{lab.id}.ipynb").read_text())["cells"])
        for phrase in ("instructor notes", "instructor's README", "benchmarks/", "ARCHITECTURE.md", "notes/"):
            assert phrase not in text, f"{lab.id} points students to {phrase!r}, which they do not have"
        for cited in set(re.findall(r"\b(docs/[\w./-]+\.md)", text)):
            assert (repo / cited).is_file(), f"{lab.id} cites {cited}, which the release does not hold"
        assert f"## Lab {lab.id[3:5]}:" in contract
    assert "instructor notes" not in contract and "tests/test_docs.py" not in contract


def test_a_gate_failure_leaves_the_repository_as_it_was(course, term, tmp_path, capsys):
    repo, _ = term
    secret = next(line for line, where in sorted(secret_lines(course).items()) if where.endswith("solution"))
    planted = repo / "labs" / "lab05_self_attention" / "my_notes.py"  # someone copied a solution line in
    planted.write_text(secret + "\n")
    before = _snapshot(repo)
    siblings = sorted(p.name for p in repo.parent.iterdir())
    zips = tmp_path / "zips"
    argv = ["--root", str(ROOT), "release", str(repo), "--url", URL, "--labs", "lab01", "--gradescope", str(zips)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "labs/lab05_self_attention/my_notes.py holds a line of" in err and "left as it was" in err
    assert _snapshot(repo) == before  # byte for byte, .git included
    assert sorted(p.name for p in repo.parent.iterdir()) == siblings  # no staging folder left behind
    assert not zips.exists()
    planted.unlink()
    assert _git(repo, "status", "--porcelain") == ""


def test_replace_all_keeps_only_the_labs_asked_for(course, tmp_path, capsys):
    out = tmp_path / "students"
    for lab in ("lab01", "lab02"):
        assert main(["--root", str(ROOT), "release", str(out), "--url", URL, "--labs", lab]) == 0
    assert "kept from the earlier release" in capsys.readouterr().out
    assert sorted(p.name for p in (out / "labs").iterdir()) == ["lab01_text_as_vectors", "lab02_word2vec"]
    done = release(course, [course.lab("lab03")], out, url=URL, replace_all=True)
    assert done.kept == [] and sorted(p.name for p in (out / "labs").iterdir()) == ["lab03_convolutions"]
    readme = (out / "README.md").read_text()
    assert course.lab("lab03").title in readme and course.lab("lab01").title not in readme


def test_a_release_into_the_current_folder_stages_beside_it(course, tmp_path, monkeypatch):
    out = tmp_path / "students"
    out.mkdir()
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "stale.txt").write_text("from an older release")
    monkeypatch.chdir(out)
    done = release(course, [course.lab("lab01")], ".", url=URL)
    assert done.released == ["lab01_text_as_vectors"]
    assert (out / "labs" / "lab01_text_as_vectors" / "lab01_text_as_vectors.ipynb").is_file()
    assert (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n" and not (out / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["students"]  # no staging or previous folder left
    assert sorted(p.name for p in out.iterdir()) == [".git", ".gitignore", "LICENSE", "README.md", "docs", "labs",
                                                    "pyproject.toml", "src"]
