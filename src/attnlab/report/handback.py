"""Feedback handed back: each student's feedback page (``grading/outputs/feedback_page.py``), from the marked
gradebook (marks, changed scores and late penalty applied), in one folder per student.

``hand_back(target, to, ...)`` (``attnlab feedback OUT --to DIR``) writes ``DIR/<id>/<lab>.html``, ``<id>`` the
student's roster id (their ``login``, else the roster's ``submission``), ready to upload to an LMS (nbgrader's
feedback exchange: ``nbgrader_feedback.py``); without a roster, the submission's stem. A submission a roster that
exists does not list is never dropped: its page goes to ``DIR/NOT-ON-ROSTER/<stem>/``. ``write_pages`` writes the
same page as ``feedback.html`` beside each ``feedback.md`` of a grading output folder, which the report links to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from attnlab.grading.outputs.feedback_page import feedback_page
from attnlab.grading.outputs.files import folder_name, write_text_atomic
from attnlab.records.safe_text import readable_name

from .load import Submission, load_submissions
from .students import feedback_files

PAGE = "feedback.html"
NOT_ON_ROSTER_FOLDER = "NOT-ON-ROSTER"


@dataclass
class HandBack:
    lab: str
    pages: dict[str, Path] = field(default_factory=dict)  # key -> the page written for its student
    not_on_roster: list[str] = field(default_factory=list)  # keys a roster that exists does not list


def page_of(s: Submission, lab: str) -> str:
    """The feedback page of one marked submission."""
    result = {"submission": s.path or s.key, "score": s.score, "max_score": s.max_score, "questions": s.questions,
              "errors": s.errors, "review": s.review, "late": s.late, "awaiting_points": s.awaiting_points,
              "regrades": s.regrades}
    return feedback_page(result, title=f"Feedback on {lab}: {readable_name(Path(s.key).name)}")


def write_pages(target, subs: list[Submission], lab: str) -> dict[str, Path]:
    """``feedback.html`` beside each submission's ``feedback.md`` in the grading output folder; key -> page."""
    pages = {}
    for key, md in feedback_files(target, subs).items():
        s = next(s for s in subs if s.key == key)
        pages[key] = write_text_atomic(md.with_name(PAGE), page_of(s, lab))
    return pages


def _folders(subs: list[Submission], roster) -> tuple[dict[str, Path], list[str]]:
    """Key -> its folder under DIR (see the module docstring), and the keys not on the roster; two submissions in one
    folder are an error naming both."""
    folders, missing, taken = {}, [], {}
    for s in subs:
        who = roster.find(s.key) if roster else None
        stem = folder_name(Path(s.key).stem)
        if who is not None:
            rel = Path(folder_name(who.login or who.submission))
        elif roster:
            rel, _ = Path(NOT_ON_ROSTER_FOLDER) / stem, missing.append(s.key)
        else:
            rel = Path(stem)
        other = taken.setdefault(rel, s.key)
        if other != s.key:
            raise ValueError(f"the submissions {other} and {s.key} are both {rel.as_posix()}'s: keep one of them "
                             "(attnlab grade --student-from grades each student's newest) or fix the roster")
        folders[s.key] = rel
    return folders, missing


def hand_back(target, to, *, lab: str | None = None, roster=None) -> HandBack:
    """Write each student's page of ``lab`` (the gradebook's only lab by default) into ``to`` (see the module
    docstring), and ``feedback.html`` beside the feedback files of a grading output folder ``target``."""
    lab, subs = load_submissions(target, lab)
    folders, missing = _folders(subs, roster)
    done = HandBack(lab, not_on_roster=missing)
    for s in subs:
        done.pages[s.key] = write_text_atomic(Path(to) / folders[s.key] / f"{lab}.html", page_of(s, lab))
    write_pages(target, subs, lab)
    return done
