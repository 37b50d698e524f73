"""``attnlab release OUT --url URL``: a student repository a course can push as it is.

What it writes (and, but for OUT's ``.git`` and the labs kept from earlier releases, nothing else):

    OUT/README.md                      for students: an "Open in Colab" badge per lab, local set-up, how to submit
    OUT/docs/CURRICULUM.md             the students' copy of the contract the notebooks cite: the released labs
    OUT/LICENSE, OUT/.gitignore
    OUT/pyproject.toml, OUT/src/attnlab/   the kit with the released labs' public checks (``pip install`` works)
    OUT/labs/<lab>/<lab>.ipynb         the student notebooks, installing the kit from ``attnlab @ git+URL``
    OUT/dist/attnlab-*.whl             with ``wheel=True``, for courses that host a wheel instead

and, with ``gradescope=DIR`` (the CLI's default: ``OUT-gradescope``, beside OUT, never inside it: the zips hold the
hidden tests), ``DIR/<lab>-gradescope.zip`` per released lab, whose ``setup.sh`` installs the kit from the same
``attnlab @ git+URL`` as the notebooks: one install address for both, set here.

No solution, hidden test, reference, catalogue, master or instructor note: ``leak_gate.check_release`` scans every
file written (inside the wheel too) and fails the release otherwise. A lab whose given cells hold code of a lab that
is still open is held back (``hold_back.py``): its notebook is not written and the README has no row for it.
The output is deterministic.

A release is a transaction (``transaction.py``): built and checked in a staging folder beside OUT, which takes
OUT's place (keeping its ``.git``) only when every gate passed; a failure leaves OUT exactly as it was. The labs a
previous release wrote into OUT/labs/ and this one does not are kept as they are (``Release.kept``), and the README
lists every lab present; ``replace_all`` drops them (the release then holds only the labs asked for).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..buildchain.masters import Masters
from ..course import PLACEHOLDER_SPECS, Course, CourseError, Lab, current_time
from .hold_back import held_back
from .leak_gate import check_release
from .readme import CONTRACT, LICENSE, student_contract, student_readme
from .transaction import copy_kept, kept_labs, staging, swap_in, write_files

GITIGNORE = ".venv/\n__pycache__/\n*.egg-info/\n.ipynb_checkpoints/\nbuild/\n"
# 1980-01-01, the earliest time a zip entry can hold: the wheel's bytes then depend on its contents only.
SOURCE_DATE_EPOCH = "315532800"


def install_spec_for(url: str) -> str:
    """The pip requirement a released notebook installs: ``attnlab @ git+URL`` (``URL`` may already say git+)."""
    url = url.strip().rstrip("/")
    if not url or " " in url or "://" not in url:
        raise CourseError(f"--url {url!r} is not a repository URL; give where the course pushes this folder, for "
                          "example https://github.com/<you>/<course>")
    spec = f"attnlab @ {url if url.startswith('git+') else 'git+' + url}"
    if spec in PLACEHOLDER_SPECS:
        raise CourseError(f"--url {url} is the kit's placeholder address, which no repository answers; give the "
                          "repository your course pushes this release to")
    return spec


def _package_files(root: Path, labs: list[Lab]) -> dict[Path, bytes]:
    """The kit as students install it: pyproject.toml and src/attnlab with the public checks of ``labs`` (the labs
    the release holds: none of a lab not yet released), no caches."""
    files = {Path("pyproject.toml"): (root / "pyproject.toml").read_bytes()}
    package = root / "src" / "attnlab"
    checks, shipped = package / "kit" / "generated" / "public_tests", {lab.id for lab in labs}
    for path in sorted(package.rglob("*")):
        inside = path.relative_to(checks).parts if path.is_relative_to(checks) else ()
        if len(inside) > 1 and inside[0] not in shipped:  # a lab's folder of checks: kept for the labs shipped
            continue
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed", ".json", ".txt"):
            files[path.relative_to(root)] = path.read_bytes()
    return files


def _built(course: Course, labs: list[Lab], spec: str, masters: Masters) -> tuple[dict[Path, bytes], dict[str, bytes]]:
    """The student notebooks (path in OUT -> bytes) and the Gradescope zips (file name -> bytes) of ``labs``,
    both built with ``spec`` as the install address."""
    from attnlab.records.bundle_names import gradescope_zip_name

    from ..buildchain.pipeline import build_lab

    released = dataclasses.replace(course, install_spec=spec)
    notebooks, zips = {}, {}
    for lab in labs:
        files = build_lab(released, lab, masters)
        notebooks[lab.student_notebook.relative_to(course.root)] = files[lab.student_notebook]
        name = gradescope_zip_name(lab.id)
        zips[name] = files[lab.autograder_dir / name]
    return notebooks, zips


def _outside(folder: str | Path, out: Path) -> Path:
    """``folder`` for the Gradescope zips, refused inside ``out`` (the zips hold the hidden tests)."""
    folder = Path(folder)
    if folder.resolve() == out.resolve() or out.resolve() in folder.resolve().parents:
        raise CourseError(f"--gradescope {folder} is inside the student repository {out}; the Gradescope zips "
                          "hold the hidden tests: give a folder outside it (default: OUT-gradescope)")
    return folder


def _write_gradescope(folder: Path, zips: dict[str, bytes]) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in sorted(zips.items()):
        (folder / name).write_bytes(data)
    return [str(folder / name) for name in sorted(zips)]


def _build_wheel(out: Path) -> Path:
    """``pip wheel`` of OUT itself, with fixed timestamps; the wheel lands in OUT/dist."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, "PIP_NO_CACHE_DIR": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "src"
        shutil.copytree(out, work, ignore=shutil.ignore_patterns(".git", "dist"))
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out / "dist"),
                               str(work)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"building the wheel failed: {(proc.stderr or proc.stdout).strip()[-800:]}")
    (wheel,) = sorted((out / "dist").glob("attnlab-*.whl"))
    return wheel


@dataclass(frozen=True)
class Release:
    """What ``release`` did: the files written, the labs released, each held-back lab with the reason, and the
    labs a previous release put in OUT that this one kept as they were."""

    written: list[str]
    released: list[str]
    held_back: dict[str, str] = field(default_factory=dict)
    gradescope: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def release(course: Course, labs: list[Lab], out: str | Path, *, url: str, wheel: bool = False,
            branch: str = "main", now: datetime | None = None, gradescope: str | Path | None = None,
            replace_all: bool = False) -> Release:
    """Release those of ``labs`` that give no code of an open lab into ``out``, and with ``gradescope`` their
    Gradescope zips into that folder (outside ``out``), as a transaction (``transaction.py``): all is built and
    checked in a staging folder, which replaces ``out`` (its ``.git`` kept) only when every gate passed.
    The labs a previous release put in ``out`` stay (the README lists them all) unless ``replace_all``.
    ``now`` (default: the current time) decides which labs' due dates have passed. Raises ``ReleaseLeak`` or
    ``CourseError`` with ``out`` untouched, and ``CourseError`` when every lab asked for is held back."""
    spec = install_spec_for(url)
    now = now or current_time()
    masters = Masters(course)  # each master read and parsed once for the whole release
    reasons = held_back(course, labs, now, masters)
    ready = [lab for lab in labs if lab.id not in reasons]
    if not ready:
        raise CourseError("nothing to release, every lab asked for is held back: " + "; ".join(reasons.values()))
    out = Path(out)
    zip_folder = _outside(gradescope, out) if gradescope is not None else None
    notebooks, zips = _built(course, ready, spec, masters)
    kept = [] if replace_all else kept_labs(out, {lab.id for lab in ready})
    present = [lab for lab in course.labs if lab in ready or lab.id in kept]
    files = {**_package_files(course.root, present), **notebooks,
             Path("README.md"): student_readme(course, present, url=url, branch=branch).encode(),
             Path("LICENSE"): LICENSE.encode(), Path(".gitignore"): GITIGNORE.encode(),
             CONTRACT: student_contract(course.root, present).encode()}
    written = [rel.as_posix() for rel in sorted(files)]
    with staging(out) as stage:
        copy_kept(out, stage, kept)
        write_files(stage, files)
        if wheel:
            written.append(_build_wheel(stage).relative_to(stage).as_posix())
        check_release(course, present, stage, now=now, masters=masters)
        swap_in(stage, out)
    zip_paths = _write_gradescope(zip_folder, zips) if zip_folder is not None else []
    return Release(written, [lab.id for lab in ready], reasons, zip_paths, kept)
