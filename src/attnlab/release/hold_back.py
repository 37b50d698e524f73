"""Which labs a release holds back: a lab whose given cells ship code written in a lab that is still open.

lab06 gives Lab 05's ``scaled_dot_product_attention`` as working code; releasing lab06 while lab05 is open would
hand students lab05's solution. The given code is followed to the lab that wrote it (lab07 gives lab06's copy of
lab05's function: lab07 waits for lab05 too). Whether a lab is open is ``attnlab.course``'s answer.
"""

from __future__ import annotations

from datetime import datetime

from ..buildchain.masters import Masters
from ..buildchain.transforms.include_given import given_origins
from ..course import COURSE_FILE, Course, Lab


def open_origins(course: Course, lab: Lab, now: datetime, masters: Masters) -> dict[str, list[str]]:
    """open lab id -> the names ``lab``'s given cells take from it (empty when every source is closed)."""
    origins = given_origins(masters.notebook(lab.id), load_master=masters.notebook)
    held: dict[str, list[str]] = {}
    for name, origin in origins.items():
        if course.lab(origin).is_open(now):
            held.setdefault(origin, []).append(name)
    return held


def hold_back_reason(course: Course, lab: Lab, origins: dict[str, list[str]], now: datetime) -> str:
    """The message for a held-back lab: both labs, why, and the two ways out."""
    short = lab.id.split("_")[0]
    parts = []
    for origin, names in origins.items():
        parts.append(f"{origin} ({', '.join(names)}), which is {course.lab(origin).state(now)}")
    which = " and ".join(origins)
    shorts = ",".join(origin.split("_")[0] for origin in origins)
    return (f"{lab.id} gives code from {'; and from '.join(parts)}: release {short} after {which} "
            f"close{'s' if len(origins) == 1 else ''}, or mark {which} closed in {COURSE_FILE} (closed: true, or "
            f"a due: date that has passed) or with --closed {shorts}")


def held_back(course: Course, labs: list[Lab], now: datetime, masters: Masters | None = None) -> dict[str, str]:
    """lab id -> why it is held back, for each of ``labs`` whose given code comes from an open lab; ``masters``: the
    run's masters, read once."""
    masters = masters or Masters(course)
    reasons = {}
    for lab in labs:
        origins = open_origins(course, lab, now, masters)
        if origins:
            reasons[lab.id] = hold_back_reason(course, lab, origins, now)
    return reasons
