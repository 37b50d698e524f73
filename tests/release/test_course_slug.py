"""The course's slug: every identifier made from the course (the student repository's folder in the README's clone
command, nbgrader's course_id) comes from it, the display name only reaches prose; a name that gives no slug is
refused by build and release on one line."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from attnlab.buildchain.pipeline import build_lab
from attnlab.cli import main
from attnlab.course import COURSE_FILE, CourseError, load_course, slug_of
from attnlab.release import release

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "course"
AWKWARD = "DL for Text, winter 2026/27"


@pytest.mark.parametrize("name, slug", [
    (AWKWARD, "dl-for-text-winter-2026-27"), ("attnlab", "attnlab"),
    ("Traitement du langage (hiver) é", "traitement-du-langage-hiver-e"),
    ("  --Deep   Learning--  ", "deep-learning"), ("x" * 80, "x" * 64),
])
def test_a_slug_is_derived_from_the_name(name, slug):
    assert slug_of(name) == slug


def test_a_given_slug_wins_and_a_malformed_one_is_refused():
    assert slug_of(AWKWARD, "dl-text-27") == "dl-text-27"
    for bad in ("DL Text", "dl_text", "-dl", "dl--text", "dl/text"):
        with pytest.raises(CourseError, match=f"slug: '{re.escape(bad)}' is not an identifier"):
            slug_of(AWKWARD, bad)
    with pytest.raises(CourseError, match="the course name '日本語の講義' gives no identifier .* add one: slug: my-course"):
        slug_of("日本語の講義")


def _fixture(tmp_path, name: str, slug: str = "") -> Path:
    root = tmp_path / "repo"
    shutil.copytree(FIXTURE, root)
    config = root / COURSE_FILE
    config.write_text(config.read_text().replace("name: fixture course", f"name: '{name}'"
                                                 + (f"\nslug: '{slug}'" if slug else "")))
    return root


def test_build_and_release_refuse_a_name_without_a_slug_on_one_line(tmp_path, capsys):
    root = _fixture(tmp_path, "日本語の講義")
    assert load_course(root).name == "日本語の講義"  # grading and the report still read the course
    assert main(["--root", str(root), "build"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab build: instructor/course.yml: the course name '日本語の講義' gives no identifier")
    assert err.count("\n") == 1 and not (root / "labs").exists()
    assert main(["--root", str(root), "release", str(tmp_path / "out"), "--url", "https://example.invalid/c"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("attnlab release: instructor/course.yml: the course name") and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_malformed_slug_is_refused_by_every_command(tmp_path, capsys):
    root = _fixture(tmp_path, AWKWARD, slug="DL Text")
    assert main(["--root", str(root), "build"]) == 2
    assert "slug: 'DL Text' is not an identifier" in capsys.readouterr().err


def test_nbgrader_course_id_is_the_slug(tmp_path):
    course = load_course(_fixture(tmp_path, AWKWARD))
    config = build_lab(course, course.labs[0])[course.root / "nbgrader" / "nbgrader_config.py"].decode()
    assert "c.CourseDirectory.course_id = 'dl-for-text-winter-2026-27'\n" in config and AWKWARD not in config


def test_the_readme_clone_command_runs_as_written(tmp_path):
    """The README's shell line, run by bash, clones a local bare repository into the slug's folder and enters it."""
    course = dataclasses.replace(load_course(ROOT), name=AWKWARD)
    upstream = tmp_path / "upstream"
    subprocess.run(["git", "init", "-q", "-b", "main", str(upstream)], check=True)
    (upstream / "README.md").write_text("students' copy\n")
    git = ["git", "-C", str(upstream), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    bare = tmp_path / "course-repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(upstream), str(bare)], check=True)
    out = tmp_path / "students"
    release(course, [course.lab("lab01")], out, url=bare.as_uri())
    readme = (out / "README.md").read_text()
    assert readme.startswith(f"# {AWKWARD}: the labs")  # the display name in prose
    line = next(x for x in readme.splitlines() if x.startswith("git clone "))
    assert "dl-for-text-winter-2026-27-labs && cd dl-for-text-winter-2026-27-labs" in line
    work = tmp_path / "laptop"
    work.mkdir()
    done = subprocess.run(["bash", "-c", f"set -e; {line}; pwd; cat README.md"], cwd=work, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(work / "dl-for-text-winter-2026-27-labs"), "students' copy"]
