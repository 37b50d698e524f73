"""Feedback handed back through nbgrader: each student's feedback page (``handback.page_of``) where ``nbgrader
release_feedback`` takes it, so ``nbgrader fetch_feedback`` gives the student our page.

``to_nbgrader(target, course_root, ...)`` (``attnlab feedback OUT --nbgrader COURSE_ROOT``) writes
``COURSE_ROOT/feedback/<student id>/<lab>/<notebook>.html`` beside copies of the submission's ``timestamp.txt`` and
``submission_secret.txt`` (release_feedback names the released page by the MD5 of the secret and the notebook's name;
fetch_feedback finds it by the same hash). The student id is the first of the roster ``login``, the roster
``submission``, the submission's top folder and its stem that nbgrader has a submission of the lab for
(``autograded/<id>/<lab>/``, else ``submitted/<id>/<lab>/``); the notebook is that folder's only ``.ipynb`` (or
``<lab>.ipynb``). A submission nbgrader does not know, or one without the two files, gets no page and a line in
``NbgraderHandBack.refused`` saying why and what to do.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from attnlab.grading.outputs.files import write_text_atomic

from .handback import page_of
from .load import load_submissions

STAMPS = ("timestamp.txt", "submission_secret.txt")  # what release_feedback reads beside each page


@dataclass
class NbgraderHandBack:
    lab: str
    pages: dict[str, Path] = field(default_factory=dict)  # key -> COURSE_ROOT/feedback/<id>/<lab>/<notebook>.html
    refused: list[str] = field(default_factory=list)  # one line per submission that got no page, with the fix


def _candidates(key: str, roster) -> list[str]:
    """The ids the submission ``key`` may have in nbgrader, in the order tried (see the module docstring)."""
    who = roster.find(key) if roster else None
    path = PurePosixPath(str(key).replace("\\", "/"))
    ids = [who.login, who.submission] if who else []
    ids += [path.parts[0] if len(path.parts) > 1 else None, path.stem]
    return list(dict.fromkeys(i for i in ids if i))


def _submission(course: Path, ids: list[str], lab: str) -> Path | None:
    for sid in ids:
        for kind in ("autograded", "submitted"):
            if (course / kind / sid / lab).is_dir():
                return course / kind / sid / lab
    return None


def _notebook(folder: Path, lab: str) -> str | None:
    names = sorted(p.stem for p in folder.glob("*.ipynb"))
    return lab if lab in names else (names[0] if len(names) == 1 else None)


def to_nbgrader(target, course_root, *, lab: str | None = None, roster=None) -> NbgraderHandBack:
    """Write each student's page of ``lab`` (the gradebook's only lab by default) into the nbgrader course at
    ``course_root``'s ``feedback/`` (see the module docstring)."""
    course = Path(course_root)
    if not (course / "submitted").is_dir() and not (course / "autograded").is_dir():
        raise FileNotFoundError(f"{course} has no submitted/ or autograded/ folder: pass the nbgrader course root "
                                "(the folder of nbgrader_config.py where you ran nbgrader collect and autograde)")
    lab, subs = load_submissions(target, lab)
    done = NbgraderHandBack(lab)
    for s in subs:
        ids = _candidates(s.key, roster)
        folder = _submission(course, ids, lab)
        if folder is None:
            done.refused.append(f"{s.key}: nbgrader has no submission of {lab} by {' or '.join(ids)} in {course}/"
                                "submitted/: add the student to nbgrader (their id as their roster login) and "
                                "collect, or hand this page out with --to")
            continue
        notebook, missing = _notebook(folder, lab), [n for n in STAMPS if not (folder / n).is_file()]
        if notebook is None or missing:
            what = f"no {' or '.join(missing)}" if missing else "not one notebook"
            done.refused.append(f"{s.key}: {folder} has {what}, which nbgrader release_feedback needs (a submission "
                                "made through nbgrader submit and collect has them): hand this page out with --to")
            continue
        dest = course / "feedback" / folder.parent.name / lab
        done.pages[s.key] = write_text_atomic(dest / f"{notebook}.html", page_of(s, lab))
        for name in STAMPS:
            shutil.copyfile(folder / name, dest / name)
    return done
