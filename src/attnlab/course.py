"""The course: where the repository is, which labs exist, how a lab id resolves (``lab05`` -> ``lab05_self_attention``),
what Gradescope shows students of each lab and when (``gradescope:``, course-wide and per lab: ``Visibility``), who
each submission is (``roster:``, a list or a CSV file: ``attnlab.roster``), the resubmission rule every grading
command takes when given none (``student_from:``, as ``--student-from``: ``grading/scale/submissions.py``),
and which labs are still open (the one owner of that: a lab is closed by ``closed: true``, by a ``due:`` date that has
passed, or by the release's ``--closed``; otherwise it is open)."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

import yaml

from attnlab.gradescope_visibility import VISIBILITIES, Visibility
from attnlab.records.bundle_names import CATALOGUE, HIDDEN_TESTS
from attnlab.student_from import student_rule

from . import settings
from .late_policy import LabDeadline, LatePolicy, LatePolicyError, parse_extensions, parse_policy
from .roster import Roster, RosterError, roster_from

COURSE_FILE = Path("instructor") / "course.yml"
# The install_spec the kit once shipped with: no repository answers it, so a notebook built with it cannot set up.
PLACEHOLDER_SPECS = ("attnlab @ git+https://github.com/attnlab/attnlab",)


class CourseError(ValueError):
    """instructor/course.yml cannot be used as it is; the message says what to set."""


SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # what an identifier made from the course may hold
MAX_SLUG = 64


def slug_of(name: str, given: str = "") -> str:
    """The course's identifier (a folder, nbgrader's ``course_id``, file names): ``slug:`` as given, else ``name``
    in lowercase ASCII letters and digits joined by ``-`` (``DL for Text, winter 2026/27`` ->
    ``dl-for-text-winter-2026-27``). Raises ``CourseError`` when neither gives one."""
    if given:
        if not SLUG.fullmatch(given) or len(given) > MAX_SLUG:
            raise CourseError(f"{COURSE_FILE}: slug: {given!r} is not an identifier; write lowercase letters, digits "
                              f"and single '-' between them, at most {MAX_SLUG} characters (slug: dl-text-2027)")
        return given
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    slug = "-".join(re.findall(r"[a-z0-9]+", ascii_name))[:MAX_SLUG].strip("-")
    if not slug:
        raise CourseError(f"{COURSE_FILE}: the course name {name!r} gives no identifier (lowercase letters, digits "
                          "and -) for folders and nbgrader's course_id; add one: slug: my-course")
    return slug


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
    late: LatePolicy = LatePolicy()  # ``late:``, the lab's or the course's (``attnlab.late_policy``)
    extensions: dict = field(default_factory=dict, compare=False)  # ``extensions:``: submission id -> more time

    @property
    def deadline(self) -> LabDeadline | None:
        """The lab's due date, late policy and extensions, or None without a due date (no work is late)."""
        return None if self.due is None else LabDeadline(self.due, self.late, self.extensions)

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
        return self.root / "src" / "attnlab" / "kit" / "generated" / "public_tests" / self.id


@dataclass(frozen=True)
class Course:
    root: Path
    name: str
    install_spec: str
    labs: tuple[Lab, ...]
    roster: Roster = field(default_factory=Roster, compare=False)  # ``roster:``: who each submission is
    given_slug: str = ""  # ``slug:`` in course.yml; ``slug`` derives one from the name without it
    student_from: str | None = None  # ``student_from:``: the resubmission rule (``--student-from``'s default)

    @property
    def slug(self) -> str:
        """The identifier of the course (``slug_of``): the student repository's folder, nbgrader's ``course_id``,
        file names; ``name`` stays for prose. ``CourseError`` for a name that gives none."""
        return slug_of(self.name, self.given_slug)

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


def _lab_entry(item, root: Path, visibility: Visibility, late: LatePolicy) -> Lab:
    lab_id = str(item["id"])
    closed = item.get("closed", False)
    if not isinstance(closed, bool):
        raise CourseError(f"{COURSE_FILE}: {lab_id} has closed: {closed!r}; write closed: true or closed: false")
    try:
        policy = parse_policy(lab_id, item.get("late"), parse_due, late)
        extensions = parse_extensions(lab_id, item.get("extensions"), parse_due)
    except LatePolicyError as exc:
        raise CourseError(f"{COURSE_FILE}: {exc}") from None
    return Lab(lab_id, str(item.get("title", lab_id)), root, parse_due(lab_id, item.get("due")), closed,
               parse_visibility(lab_id, item.get("gradescope"), visibility), policy, extensions)


def load_course(root: str | Path | None = None) -> Course:
    root = Path(root).resolve() if root else find_root()
    data = yaml.load((root / COURSE_FILE).read_text(), Loader=_Loader) or {}
    visibility = parse_visibility("the course", data.get("gradescope"), Visibility())
    try:
        late = parse_policy("the course", data.get("late"), parse_due)
    except LatePolicyError as exc:
        raise CourseError(f"{COURSE_FILE}: {exc}") from None
    labs = tuple(_lab_entry(item, root, visibility, late) for item in data.get("labs", []))
    try:
        roster = roster_from(data.get("roster"), (root / COURSE_FILE).parent)
    except RosterError as exc:
        raise CourseError(f"{COURSE_FILE}: {exc}") from None
    given = str(data.get("slug") or "").strip()
    if given:
        slug_of("", given)  # a malformed slug is refused whatever the command
    return Course(root, str(data.get("name", "attnlab")), str(data.get("install_spec") or ""), labs, roster, given,
                  _student_from(data.get("student_from")))


def _student_from(value) -> str | None:
    """``student_from:`` of course.yml: absent, ``folder`` or a pattern with a group (``student_rule``)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise CourseError(f"{COURSE_FILE}: student_from: {value!r} is not text: write folder, or a pattern such as "
                          "'(?P<student>[^-]+)(-v\\d+)?' in quotes")
    try:
        student_rule(value)
    except ValueError as exc:
        raise CourseError(f"{COURSE_FILE}: student_from: {exc}") from None
    return value
