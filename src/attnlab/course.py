"""The course: where the repository is, which labs exist, how a lab id resolves (``lab05`` -> ``lab05_self_attention``)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from .grading.bundle import CATALOGUE, HIDDEN_TESTS

COURSE_FILE = Path("instructor") / "course.yml"
# The install_spec the kit once shipped with: no repository answers it, so a notebook built with it cannot set up.
PLACEHOLDER_SPECS = ("attnlab @ git+https://github.com/attnlab/attnlab",)


class CourseError(ValueError):
    """instructor/course.yml cannot be used as it is; the message says what to set."""


def check_install_spec(spec: str) -> str | None:
    """Raise ``CourseError`` for the placeholder; return a warning for an empty spec, else None."""
    if spec.strip() in PLACEHOLDER_SPECS:
        raise CourseError(
            f"{COURSE_FILE}: install_spec is still the placeholder {spec.strip()!r}, which no repository answers, "
            "so the notebooks could not install the kit on Colab. Set it to where your students install attnlab "
            "from (for example 'attnlab @ git+https://github.com/<you>/<your-course>'), or leave it empty and "
            "publish with `attnlab release OUT --url URL`, which sets it to the released repository.")
    if not spec.strip():
        return (f"{COURSE_FILE} has no install_spec: the notebooks in labs/ run where attnlab is installed "
                "(pip install -e .), but cannot install it on Colab, and the Gradescope zip cannot set up. "
                "Publish with `attnlab release OUT --url URL`, or set install_spec.")
    return None


@dataclass(frozen=True)
class Lab:
    id: str
    title: str
    root: Path

    @property
    def master(self) -> Path:
        return self.root / "instructor" / self.id / f"{self.id}.py"

    @property
    def hidden_tests(self) -> Path:
        return self.root / "instructor" / self.id / HIDDEN_TESTS

    @property
    def catalogue(self) -> Path:
        return self.root / "instructor" / self.id / CATALOGUE

    @property
    def student_notebook(self) -> Path:
        return self.root / "labs" / self.id / f"{self.id}.ipynb"

    @property
    def solution_notebook(self) -> Path:
        return self.root / "solutions" / self.id / f"{self.id}.ipynb"

    @property
    def autograder_dir(self) -> Path:
        return self.root / "autograder" / self.id

    @property
    def nbgrader_source(self) -> Path:
        return self.root / "nbgrader" / "source" / self.id / f"{self.id}.ipynb"

    @property
    def public_tests_dir(self) -> Path:
        return self.root / "src" / "attnlab" / "public_tests" / self.id


@dataclass(frozen=True)
class Course:
    root: Path
    name: str
    install_spec: str
    labs: tuple[Lab, ...]

    def lab(self, name: str) -> Lab:
        """Resolve a lab id or its short form (``lab05``)."""
        for lab in self.labs:
            if name in (lab.id, lab.id.split("_")[0]):
                return lab
        known = ", ".join(lab.id for lab in self.labs)
        raise ValueError(f"unknown lab {name!r}; this course has: {known}")

    def select(self, names) -> list[Lab]:
        return [self.lab(n) for n in names] if names else list(self.labs)


def find_root(start: str | Path | None = None) -> Path:
    """The course repository: ``$ATTNLAB_ROOT``, else the first parent of ``start`` (cwd) with instructor/course.yml."""
    env = os.environ.get("ATTNLAB_ROOT")
    if env:
        return Path(env).resolve()
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / COURSE_FILE).exists():
            return folder
    raise FileNotFoundError(f"no {COURSE_FILE} in {here} or its parents; run attnlab from the course "
                            "repository or set ATTNLAB_ROOT")


def load_course(root: str | Path | None = None) -> Course:
    root = Path(root).resolve() if root else find_root()
    data = yaml.safe_load((root / COURSE_FILE).read_text()) or {}
    labs = tuple(Lab(str(item["id"]), str(item.get("title", item["id"])), root) for item in data.get("labs", []))
    return Course(root, str(data.get("name", "attnlab")), str(data.get("install_spec") or ""), labs)
