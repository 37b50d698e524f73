"""The course: where the repository is, which labs exist, how a lab id resolves (``lab05`` -> ``lab05_self_attention``),
what Gradescope shows students of each lab and when (``gradescope:``, course-wide and per lab: ``Visibility``), who
each submission is (``roster:``, a list or a CSV file: ``attnlab.roster``),
and which labs are still open (the one owner of that: a lab is closed by ``closed: true``, by a ``due:`` date that has
passed, or by the release's ``--closed``; otherwise it is open)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import yaml

from attnlab.grading.core.bundle import CATALOGUE, HIDDEN_TESTS
from attnlab.grading.outputs.gradescope import VISIBILITIES, Visibility

from . import settings
from .roster import Roster, RosterError, roster_from

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
                "(pip install -e .), but cannot install it on Colab, and the build writes no Gradescope zip (its "
                "setup.sh could not install the kit). `attnlab release OUT --url URL` writes notebooks and "
                "Gradescope zips (in OUT-gradescope/) that both install from URL; or set install_spec, and "
                "`attnlab build` writes both with it.")
    return None


def current_time() -> datetime:
    """Now, with the machine's time zone: what ``due:`` dates are compared with unless a caller fixes the clock."""
    return datetime.now().astimezone()


@dataclass(frozen=True)
class Lab:
    id: str
    title: str
    root: Path
    due: date | datetime | None = None  # a date alone: the lab is due at the end of that day
    closed: bool = False  # ``closed: true`` in course.yml, or ``--closed`` on the release command
    visibility: Visibility = Visibility()  # ``gradescope:`` in course.yml: when students see what on Gradescope

    def is_open(self, now: datetime | None = None) -> bool:
        """Open until it is marked closed or its due date has passed (``now``: an aware datetime, default now)."""
        if self.closed:
            return False
        if self.due is None:
            return True
        now = now or current_time()
        if isinstance(self.due, datetime):
            return now < self.due
        return now.date() <= self.due

    def state(self, now: datetime | None = None) -> str:
        """In an instructor's words: ``still open (no due date)``, ``closed (due 2027-02-14)``, ..."""
        due = f"due {self.due.isoformat()}" if self.due else "no due date"
        if self.closed:
            return f"closed (marked closed; {due})"
        return f"{'still open' if self.is_open(now) else 'closed'} ({due})"

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
    roster: Roster = field(default_factory=Roster, compare=False)  # ``roster:``: who each submission is

    def lab(self, name: str) -> Lab:
        """Resolve a lab id or its short form (``lab05``)."""
        for lab in self.labs:
            if name in (lab.id, lab.id.split("_")[0]):
                return lab
        known = ", ".join(lab.id for lab in self.labs)
        raise ValueError(f"unknown lab {name!r}; this course has: {known}")

    def select(self, names) -> list[Lab]:
        return [self.lab(n) for n in names] if names else list(self.labs)

    def with_closed(self, names) -> Course:
        """The course with the labs ``names`` (ids or short forms) marked closed, as ``--closed`` asks."""
        closing = {self.lab(n).id for n in names}
        return dataclasses.replace(self, labs=tuple(dataclasses.replace(lab, closed=True) if lab.id in closing
                                                    else lab for lab in self.labs))


def find_root(start: str | Path | None = None) -> Path:
    """The course repository: ``$ATTNLAB_ROOT``, else the first parent of ``start`` (cwd) with instructor/course.yml."""
    env = settings.get(settings.ROOT)
    if env:
        return Path(env).resolve()
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / COURSE_FILE).exists():
            return folder
    raise FileNotFoundError(f"no {COURSE_FILE} in {here} or its parents; run attnlab from the course "
                            "repository or set ATTNLAB_ROOT")


class _Loader(yaml.SafeLoader):
    """YAML without implicit timestamps: ``due:`` stays the text the instructor wrote, parsed by ``parse_due``
    (so ``2027-14-02`` gets an error naming the lab, not a traceback from the YAML reader)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}

DUE_EXAMPLE = "2027-02-14, or with a time and its zone, 2027-02-14T23:59+01:00"


def parse_due(lab_id: str, value) -> date | datetime | None:
    """A lab's ``due:``: None, an ISO date, or an ISO date and time with its zone (``Z`` or ``+01:00``)."""
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    try:
        due = datetime.fromisoformat(text) if ("T" in text or " " in text) else date.fromisoformat(text)
    except ValueError:
        raise CourseError(f"{COURSE_FILE}: {lab_id} has due: {text!r}, which is not a date; write it as "
                          f"{DUE_EXAMPLE}") from None
    if isinstance(due, datetime) and due.utcoffset() is None:
        raise CourseError(f"{COURSE_FILE}: {lab_id} has due: {text!r}, a time without a zone; add the zone "
                          f"({text}+01:00, or {text}Z for UTC), or give the date alone")
    return due


def parse_visibility(where: str, value, default: Visibility) -> Visibility:
    """A ``gradescope:`` mapping (``public_checks:``, ``hidden_tests:``, each one of Gradescope's visibility values)
    over ``default``; ``where`` names the course or the lab in the error."""
    if value is None:
        return default
    example = "gradescope: {public_checks: visible, hidden_tests: after_due_date}"
    if not isinstance(value, dict) or set(value) - {"public_checks", "hidden_tests"}:
        raise CourseError(f"{COURSE_FILE}: {where} has gradescope: {value!r}; write it as {example}")
    merged = {**default.as_dict(), **{k: str(v) for k, v in value.items()}}
    bad = {k: v for k, v in merged.items() if v not in VISIBILITIES}
    if bad:
        raise CourseError(f"{COURSE_FILE}: {where} has gradescope: {', '.join(f'{k}: {v}' for k, v in bad.items())}, "
                          f"not one of Gradescope's visibilities: {', '.join(VISIBILITIES)}")
    return Visibility(**merged)


def _lab_entry(item, root: Path, visibility: Visibility) -> Lab:
    lab_id = str(item["id"])
    closed = item.get("closed", False)
    if not isinstance(closed, bool):
        raise CourseError(f"{COURSE_FILE}: {lab_id} has closed: {closed!r}; write closed: true or closed: false")
    return Lab(lab_id, str(item.get("title", lab_id)), root, parse_due(lab_id, item.get("due")), closed,
               parse_visibility(lab_id, item.get("gradescope"), visibility))


def load_course(root: str | Path | None = None) -> Course:
    root = Path(root).resolve() if root else find_root()
    data = yaml.load((root / COURSE_FILE).read_text(), Loader=_Loader) or {}
    visibility = parse_visibility("the course", data.get("gradescope"), Visibility())
    labs = tuple(_lab_entry(item, root, visibility) for item in data.get("labs", []))
    try:
        roster = roster_from(data.get("roster"), (root / COURSE_FILE).parent)
    except RosterError as exc:
        raise CourseError(f"{COURSE_FILE}: {exc}") from None
    return Course(root, str(data.get("name", "attnlab")), str(data.get("install_spec") or ""), labs, roster)
