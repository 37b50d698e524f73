"""The report per student: who needs help, and where to read what they were told.

The Students view has one row per submission, lowest total first (the page has no script, so the order is
fixed; an index by name links to each row): the total, the points lost per question with ``not written yet``
marked, the diagnosed mistakes by catalogue name, the problems of the grading (``categories.problems``) and a
link to the feedback file the student got (written again with the marks, or a late penalty, where a submission has any:
``refresh_feedback``). The feedback files are found where ``attnlab grade --out`` wrote
them (``OUT/<stem>/feedback.md``, ``grading/scale/batch.py: output_folders``); an anonymised page links none (the
path names the student).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from attnlab.grading.core.written_answers import KIND, REASON, STATUS, WRITTEN, awaiting_note, change_text, total_text
from attnlab.grading.outputs.gradebook import row_notes
from attnlab.grading.outputs.late_work import late_note
from attnlab.records.safe_text import cap_messages, clip
from attnlab.records.score_text import format_score

from .categories import SHORT, diagnosed, problems, unwritten
from .load import Submission

if TYPE_CHECKING:
    from .model import ClassReport

NOTE_CHARS, MAX_NOTES = 240, 3  # a row's notes: each clipped, the rest counted
FEEDBACK = "feedback.md"


def feedback_files(target, subs: list[Submission]) -> dict[str, Path]:
    """Key -> its feedback file, for the submissions whose file exists in the grading output folder (``target``,
    or the folder of a ``.db`` target); none for a ``postgresql://`` gradebook."""
    if "://" in str(target):
        return {}
    from attnlab.grading.outputs.files import output_folders
    from attnlab.grading.scale.submissions import output_stem

    out = Path(target) if Path(target).is_dir() else Path(target).parent
    stems = {s.key: output_stem(s.key, Path(s.path or s.key)) for s in subs}
    try:
        folders = output_folders(stems, out)
    except ValueError:  # two keys sharing a folder: the batch refused them, so there is nothing to link
        folders = {}
    found = {}
    for s in subs:
        stem = stems[s.key]  # OUT/submissions/<stem>/; a gradebook from before it: OUT/<stem>/, OUT/<stem>.results/
        for folder in (folders.get(s.key), out / stem, out / f"{stem}.results"):
            if folder is not None and (folder / FEEDBACK).is_file():
                found[s.key] = folder / FEEDBACK
                break
    return found


def refresh_feedback(target, subs: list[Submission]) -> int:
    """Write again, from the marked gradebook row (``load.py``), the feedback file of each submission that has a
    written question or a mark (``marking/marks_applied.py``): the student then reads the marks, the rubric items
    applied, the marker's comment and a changed score's reason. Other files stay as the grade wrote them. Returns
    how many were written."""
    from attnlab.grading.outputs.feedback import write_feedback

    marked = {s.key: s for s in subs if s.late or s.regrades or any(
        q.get(STATUS) in ("marked", "changed") or q.get(KIND) == WRITTEN for q in s.questions.values())}
    files = feedback_files(target, list(marked.values()))
    for key, path in files.items():
        s = marked[key]
        write_feedback({"submission": s.path or s.key, "score": s.score, "max_score": s.max_score,
                        "questions": s.questions, "errors": s.errors, "review": s.review, "late": s.late,
                        "regrades": s.regrades}, path)
    return len(files)


def marking_lines(subs: list[Submission], refreshed: int) -> list[str]:
    """What ``attnlab report`` says of the marking: the points still awaiting it, the feedback files written again."""
    waiting = [s for s in subs if s.awaiting_points > 0]
    lines = [f"{awaiting_note(sum(s.awaiting_points for s in waiting))} in {len(waiting)} submission(s): mark them "
             "with `attnlab mark`"] if waiting else []
    return lines + ([f"{refreshed} feedback file(s) written again with the marks"] if refreshed else [])


def feedback_links(target, subs: list[Submission], html: Path) -> dict[str, str]:
    """Key -> the href of its feedback page (``feedback.html``, written by ``handback.write_pages``; else the
    ``feedback.md`` file), relative to the page ``html`` (URL-quoted)."""
    base = Path(html).resolve().parent
    pages = {key: path.with_name("feedback.html") if path.with_name("feedback.html").is_file() else path
             for key, path in feedback_files(target, subs).items()}
    return {key: quote(Path(os.path.relpath(path.resolve(), base)).as_posix()) for key, path in pages.items()}


def by_total(subs: list[Submission], names) -> list[Submission]:
    """Lowest share of the points first (who needs help), then by shown name."""
    return sorted(subs, key=lambda s: (s.score / s.max_score if s.max_score > 0 else 0.0, names(s.key)))


def lost(s: Submission) -> list[tuple[str, float, float, bool]]:
    """``(question, score, max_score, not written yet)`` of each question that lost points, in result order."""
    blank = set(unwritten(s))
    return [(q, float(r["score"]), float(r["max_score"]), q in blank) for q, r in s.questions.items()
            if r["score"] is not None and (float(r["score"]) < float(r["max_score"]) or q in blank)]


def total(s: Submission) -> str:
    """``"6 / 10"``, with ``(2 points awaiting marking)`` while written answers wait for a person."""
    return total_text(s.score, s.max_score, s.awaiting_points)


def mistake_names(s: Submission, mutants=()) -> list[str]:
    """The diagnosed mistakes of ``s`` by catalogue name (``question: hint`` where no entry has that hint)."""
    out = []
    for q, hint in diagnosed(s):
        entries = [m.name for m in mutants if m.question == q and m.hint == hint]
        out.append(", ".join(entries) if entries else f"{q}: {hint}")
    return out


def anchors(r: ClassReport) -> dict[str, str]:
    """Key -> the id of its row (by position in key order: no student text in an id)."""
    return {key: f"student-{i}" for i, key in enumerate(sorted(s.key for s in r.submissions), start=1)}


def display_name(r: ClassReport, key: str) -> str:
    """The student as the Students view names them (``Names.shown``: ``Alice Smith (alice.ipynb)`` with a roster,
    else the submission as the gradebook has it, or its alias)."""
    return r.names.shown(key)


def changes(s: Submission, esc, scrub) -> list[str]:
    """Each question whose score a marker changed (``attnlab mark``): the old score, the new, who and why (``scrub``:
    the student's name taken out of the reason on an anonymised page)."""
    return [f"<b class='changed'>{esc(q)}: score {esc(change_text(r))}</b>: "
            f"{esc(clip(scrub(str(r.get(REASON) or '')), NOTE_CHARS))}" for q, r in s.questions.items()
            if change_text(r)]


def render(r: ClassReport, esc, table) -> str:
    """The Students section; ``esc`` and ``table`` are the page's escaping and table helpers."""
    rows, ids = [], anchors(r)
    for i, s in enumerate(by_total(r.submissions, r.names), start=1):
        losses = [f"<span class='nw'>{esc(q)} {format_score(sc)}/{format_score(mx)}</span>"
                  + (" <b class='blank nw'>not written yet</b>" if blank else "") for q, sc, mx, blank in lost(s)]
        found = problems(s)
        trouble = [f"<b class='bad'>{SHORT[p.category]}</b>: {esc(clip(r.names.scrub(s.key, p.text), NOTE_CHARS))}"
                   for p in found]
        shown = {p.text for p in found}  # the problems' own lines, and the review items a rule breach lists
        review = [] if any(p.category == "rule_breach" for p in found) else s.review
        notes = cap_messages([n for n in row_notes({"review": review, "errors": s.errors}) if n not in shown],
                             MAX_NOTES)
        trouble += [esc(clip(r.names.scrub(s.key, n), NOTE_CHARS)) for n in notes]
        trouble += [esc(n) for n in [late_note(s.late)] if n]  # the total shown is after the penalty
        trouble = changes(s, esc, lambda text, key=s.key: r.names.scrub(key, text)) + trouble
        link = r.feedback.get(s.key)
        rows.append([str(i), f"<span id='{ids[s.key]}'>{esc(display_name(r, s.key))}</span>",
                     f"<span class='nw'>{esc(total(s))}</span>",
                     "<br>".join(losses) or "-", "<br>".join(map(esc, mistake_names(s, r.mutants))) or "-",
                     f"<div class='any'>{'<br>'.join(trouble)}</div>" if trouble else "-",
                     f"<a href='{esc(link)}'>feedback</a>" if link else "<i>not found</i>"])
    index = " · ".join(f"<a href='#{ids[s.key]}'>{esc(display_name(r, s.key))}</a>"
                       for s in sorted(r.submissions, key=lambda s: display_name(r, s.key)))
    links = ("feedback links left out (anonymised: a path names its student)" if r.names.anonymise
             else f"{len(r.feedback)} of {len(r.submissions)} feedback files found beside the gradebook")
    return ("<section id='students' class='fit'><h2>Students</h2>"
            "<p>Lowest total first: who needs help. Per question: the points lost (<b class='blank'>not written "
            "yet</b> marked); the mistakes the grader diagnosed, by catalogue name; scores changed by a marker, "
            "with why; what went wrong in grading; "
            f"the feedback the student read ({links}).</p>"
            f"<p class='index'>By name: {index}</p>"
            + table(["#", "student", "total", "lost", "diagnosed mistakes", "problems and notes", "feedback"], rows,
                    numeric=(0, 2))
            + "</section>")
