"""Late work: a course's late policy (``late:`` in course.yml), per-student extensions, and what a submission's time
costs under them.

``instructor/course.yml`` (``attnlab.course`` reads it; this module owns the rule)::

    late: {grace: 15 minutes, penalty: 10% per day, cap: 50%, last: 7 days}   # the course's policy
    labs:
      - id: lab05_self_attention
        due: 2027-02-14T23:59+01:00
        late: {penalty: 5% per hour}                     # optional: this lab's own (over the course's)
        extensions: {alice: 2 days, bob: 2027-02-20T12:00+01:00}   # a roster submission id: more time, or a date

- ``grace``: work handed in at most this long after its deadline counts as on time (default none).
- ``penalty``: ``N% per day`` or ``N% per hour`` of the points the work earned, for each day (hour) or part of one
  after the deadline; default none.
- ``cap``: the most a late submission loses, in percent (default 100%).
- ``last``: after it late work scores 0: a date (the end of that day), a date and time with its zone, or a time
  after the deadline (``7 days``); default none. An extension moves a duration ``last`` with the deadline.

The deadline is the lab's ``due`` (a date alone: the end of that day, in the time zone of the machine grading), or
the student's extension. The penalty is never mixed into question scores: it is recorded beside them
(``grading/outputs/late_work.py``) and taken off the total by every reader of the marked gradebook.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import PurePosixPath

UNITS = {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1),
         "week": timedelta(days=7)}
EXAMPLE = "late: {grace: 15 minutes, penalty: 10% per day, cap: 50%, last: 7 days}"


class LatePolicyError(ValueError):
    """``late:`` or ``extensions:`` cannot be used as written; the message names the value and the fix."""


@dataclass(frozen=True)
class LatePolicy:
    grace: timedelta = timedelta(0)
    percent: float = 0.0  # taken per unit (of the points earned)
    unit: str = "day"  # "day" or "hour"
    cap: float = 100.0  # the most taken, in percent
    last: date | datetime | timedelta | None = None  # after it: 0

    @property
    def active(self) -> bool:
        return self.percent > 0 or self.last is not None

    def describe(self) -> str:
        """In students' words: ``10% per day late (at most 50%), 15 minutes' grace; 0 after 7 days``."""
        parts = [f"{self.percent:g}% of your points per {self.unit} or part of one late"
                 + (f" (at most {self.cap:g}%)" if self.cap < 100 else "")] if self.percent else []
        if self.grace:
            parts.append(f"{_duration_text(self.grace)} of grace")
        if self.last is not None:
            parts.append(f"no points for work more than {_duration_text(self.last)} late"
                         if isinstance(self.last, timedelta) else f"no points after {self.last.isoformat()}")
        return "; ".join(parts) or "no penalty"


@dataclass(frozen=True)
class Lateness:
    """What one submission's time means: its deadline (extension applied), how late, the percent taken and why."""

    submitted_at: datetime
    deadline: datetime
    percent: float
    reason: str
    source: str = ""  # where the time was read (``submission_times``)
    extended: bool = False

    def as_dict(self) -> dict:
        return {"submitted_at": self.submitted_at.isoformat(), "deadline": self.deadline.isoformat(),
                "percent": self.percent, "reason": self.reason, "source": self.source, "extended": self.extended}


def _duration(where: str, value) -> timedelta:
    """``15 minutes``, ``2 hours``, ``1 day``, ``3 days``, ``1 week``; a bare number: days."""
    text = str(value).strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(minute|hour|day|week)?s?", text)
    if not match:
        raise LatePolicyError(f"{where}: {value!r} is not a time; write it as 15 minutes, 2 hours or 3 days")
    return float(match.group(1)) * UNITS[match.group(2) or "day"]


def _duration_text(d: timedelta) -> str:
    for name in ("day", "hour", "minute"):
        n = d / UNITS[name]
        if n >= 1 and n == int(n):
            return f"{int(n)} {name}{'s' if n != 1 else ''}"
    return f"{d.total_seconds() / 60:g} minutes"


def _percent(where: str, value) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%?", str(value).strip())
    if not match or not 0 <= float(match.group(1)) <= 100:
        raise LatePolicyError(f"{where}: {value!r} is not a percentage from 0% to 100%; write it as 50%")
    return float(match.group(1))


def _penalty(where: str, value) -> tuple[float, str]:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%\s*(?:per|/|an?)\s*(day|hour)", str(value).strip().lower())
    if not match or float(match.group(1)) > 100:
        raise LatePolicyError(f"{where}: penalty {value!r} is not a rate; write it as 10% per day or 2% per hour")
    return float(match.group(1)), match.group(2)


def parse_policy(where: str, value, parse_time, default: LatePolicy | None = None) -> LatePolicy:
    """A ``late:`` mapping over ``default`` (the course's); ``parse_time(where, text)``: course.yml's date parser
    (``course.parse_due``), for a ``last:`` date."""
    default = default or LatePolicy()
    if value is None:
        return default
    known = {"grace", "penalty", "cap", "last"}
    if not isinstance(value, dict) or set(value) - known:
        raise LatePolicyError(f"{where} has late: {value!r}; write it as {EXAMPLE}")
    changes: dict = {}
    if "grace" in value:
        changes["grace"] = _duration(f"{where} late grace", value["grace"])
    if "penalty" in value:
        changes["percent"], changes["unit"] = _penalty(where, value["penalty"])
    if "cap" in value:
        changes["cap"] = _percent(f"{where} late cap", value["cap"])
    if "last" in value:
        text = str(value["last"]).strip()
        changes["last"] = (_duration(f"{where} late last", text) if re.fullmatch(r"[\d.]+\s*[a-z]+", text)
                           else parse_time(f"{where} (late last)", text))
    return dataclasses.replace(default, **changes)


def parse_extensions(where: str, value, parse_time) -> dict[str, datetime | date | timedelta]:
    """``extensions:``: roster submission id -> more time (``2 days``) or a new deadline."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise LatePolicyError(f"{where} has extensions: {value!r}; write it as extensions: {{alice: 2 days, bob: "
                              "2027-02-20T12:00+01:00}}")
    out = {}
    for who, when in value.items():
        text = str(when).strip()
        out[str(who)] = (_duration(f"{where} extension of {who}", text) if re.fullmatch(r"[\d.]+\s*[a-z]*", text)
                         else parse_time(f"{where} (extension of {who})", text))
    return out


def end_of(when: date | datetime) -> datetime:
    """A due date as a moment: a datetime as it is, a date alone at the end of that day (this machine's zone)."""
    if isinstance(when, datetime):
        return when
    return datetime.combine(when, time(23, 59, 59)).astimezone()


def extension_for(extensions: dict, key: str):
    """The extension of the submission ``key`` (``alice.ipynb``, ``alice/lab05.ipynb``) by its stem or folder."""
    path = PurePosixPath(str(key).replace("\\", "/"))
    for candidate in (str(key), path.stem, path.parts[0] if len(path.parts) > 1 else None):
        if candidate and candidate in extensions:
            return extensions[candidate]
    return None


@dataclass(frozen=True)
class LabDeadline:
    """One lab's due date, policy and extensions: what ``lateness`` needs."""

    due: date | datetime
    policy: LatePolicy
    extensions: dict = field(default_factory=dict)

    def deadline(self, key: str) -> tuple[datetime, bool]:
        extra = extension_for(self.extensions, key)
        due = end_of(self.due)
        if extra is None:
            return due, False
        return (due + extra if isinstance(extra, timedelta) else max(due, end_of(extra))), True

    def lateness(self, key: str, submitted_at: datetime, source: str = "") -> Lateness:
        """The percent taken off ``key``'s work handed in at ``submitted_at`` (an aware datetime) and why."""
        deadline, extended = self.deadline(key)
        late = submitted_at - deadline
        p = self.policy
        made = dict(submitted_at=submitted_at, deadline=deadline, source=source, extended=extended)
        if self._past_last(deadline, submitted_at):
            return Lateness(percent=100.0, reason=f"handed in after the last day for late work ({self._last_text(deadline)}"
                            "): no points", **made)
        if late <= timedelta(0) or late <= p.grace or not p.percent:
            reason = ("on time" if late <= timedelta(0) else "within the grace period" if late <= p.grace
                      else f"{_duration_text(late)} late, no penalty set")
            return Lateness(percent=0.0, reason=reason, **made)
        units = math.ceil(late / UNITS[p.unit] - 1e-9)
        percent = min(p.cap, units * p.percent)
        plural = "s" if units != 1 else ""
        capped = f" (capped at {p.cap:g}%)" if percent < units * p.percent and p.cap < 100 else ""
        return Lateness(percent=percent, reason=f"{units} {p.unit}{plural} late: -{percent:g}%{capped}", **made)

    def _last(self, deadline: datetime) -> datetime | None:
        last = self.policy.last
        if last is None:
            return None
        return deadline + last if isinstance(last, timedelta) else max(end_of(last), deadline)

    def _past_last(self, deadline: datetime, submitted_at: datetime) -> bool:
        last = self._last(deadline)
        return last is not None and submitted_at > last

    def _last_text(self, deadline: datetime) -> str:
        return self._last(deadline).isoformat(timespec="minutes")


def _when_text(value) -> str | float:
    """A ``date``, ``datetime`` or ``timedelta`` as a config file keeps it: ISO text, or seconds."""
    return value.total_seconds() if isinstance(value, timedelta) else value.isoformat()


def _when(value) -> date | datetime | timedelta:
    if isinstance(value, (int, float)):
        return timedelta(seconds=value)
    return datetime.fromisoformat(value) if "T" in value else date.fromisoformat(value)


def deadline_to_config(d: LabDeadline) -> dict:
    """``d`` as plain values (text and numbers) that a generated config file can hold (nbgrader's late plugin,
    ``grading/bridges/nbgrader_late.py``); ``deadline_from_config`` gives it back."""
    p = d.policy
    return {"due": _when_text(d.due), "grace_s": p.grace.total_seconds(), "percent": p.percent, "unit": p.unit,
            "cap": p.cap, "last": None if p.last is None else _when_text(p.last),
            "extensions": {who: _when_text(when) for who, when in sorted(d.extensions.items())}}


def deadline_from_config(data: dict) -> LabDeadline:
    """The ``LabDeadline`` that ``deadline_to_config`` wrote."""
    policy = LatePolicy(grace=timedelta(seconds=data["grace_s"]), percent=float(data["percent"]), unit=data["unit"],
                        cap=float(data["cap"]), last=None if data["last"] is None else _when(data["last"]))
    return LabDeadline(_when(data["due"]), policy, {who: _when(w) for who, w in data["extensions"].items()})
