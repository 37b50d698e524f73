"""Written questions in a grade: each student's answer read from the notebook, recorded as awaiting marking.

A written question (``manual: true`` in the master, listed in the bundle's manifest: ``bundle.written_questions``)
is marked by a person (``attnlab mark``), never by the grader. ``add_written`` gives a grading result one entry per
written question: ``{"kind": "written", "status": "awaiting marking", "score": None, "max_score": points,
"messages": [], "answer": text}`` (never 0, never full marks). A code question's entry has no ``kind`` (absent:
``"code"``), so a result, a gradebook row and a test of a lab without written questions stay as they were; the
gradebook's ``questions.kind`` column says ``code`` or ``written``. The result's ``score`` counts only what is
marked; its ``max_score`` includes the written points, and ``awaiting_points`` (present where the lab has written
questions) says how many of them wait for a person.

The answer is the text of the Markdown cell whose metadata says ``attnlab.written == NAME``; where no cell has it
(metadata lost), the first Markdown cell after the prompt cell. It is read here, in the grader, from the notebook's
JSON (plain text: no student code runs for it); it is untrusted: kept as text, never rendered as HTML, and cut to
``MAX_ANSWER_CHARS`` with a note. An unchanged placeholder or whitespace is an empty answer. Metadata that is not
as the build wrote it is never taken silently (``answer_notes``, in the entry's ``messages``, which the marker and
the feedback show): an answer marked on a code cell (not read), on more than one written-in cell (the others added
below the first, so the marker reads them all), or for a question the lab does not have; an answer found by the
prompt because no cell is marked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from attnlab.grading.core.bundle import written_questions
from attnlab.records import result_fields as fields
from attnlab.records.score_text import format_score
from attnlab.records.stub_text import PLACEHOLDER  # the build's answer cell: one owner

AWAITING = "awaiting marking"  # a written question's status until a person marks it
KIND, STATUS, ANSWER = "kind", "status", "answer"
CODE, WRITTEN = "code", "written"
RUBRIC, COMMENT, REASON = "rubric", "comment", "reason"  # a marked question's (``marks_applied``)
CHANGED_FROM, CHANGED_BY = "changed_from", "changed_by"  # a changed score's: the score before, the marker
STATUSES = ("graded", "marked", "changed", AWAITING)  # marking.store.Effective.status
AWAITING_POINTS = "awaiting_points"  # a result's (and a gradebook row's) points awaiting marking
MAX_ANSWER_CHARS = 20_000


@dataclass(frozen=True)
class Question:
    """What grading needs of a written question: its name, points and prompt (to find an answer cell whose
    metadata was lost)."""

    name: str
    points: float
    prompt: str = ""


def written_of(bundle) -> list[Question]:
    """The written questions of a ``Bundle`` or a manifest dict (``bundle.written_questions``); ``[]`` for a bundle
    built before written questions existed or a broken list (a grade must still be written: the build's own check
    names a broken list)."""
    manifest = bundle if isinstance(bundle, dict) else getattr(bundle, "manifest", {})
    try:
        return [Question(w.name, float(w.points), w.prompt) for w in written_questions(manifest)]
    except (ValueError, AttributeError):
        return []


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _marked_as(cell: dict) -> object:
    meta = cell.get("metadata")
    inner = meta.get("attnlab") if isinstance(meta, dict) else None
    return inner.get("written") if isinstance(inner, dict) else None


def notebook_cells(data: bytes | None) -> list[dict]:
    """The cells of a notebook's bytes (already within ``notebook_code``'s size limits); ``[]`` when unreadable."""
    try:
        cells = json.loads(data).get("cells", []) if data else []
    except (ValueError, AttributeError, TypeError, RecursionError):
        return []
    return [c for c in cells if isinstance(c, dict)] if isinstance(cells, list) else []


def _normal(text: str) -> str:
    return " ".join(text.split())


def find_answer(cells: list[dict], question: Question) -> str:
    """The student's answer to ``question`` in ``cells`` (see the module docstring): bounded, ``""`` when empty."""
    marked = [c for c in cells if c.get("cell_type") == "markdown" and _marked_as(c) == question.name]
    # a copied answer cell carries the metadata too: the first one the student wrote in
    cell = next((c for c in marked if _normal(_text(c)) not in ("", _normal(PLACEHOLDER))), None)
    if not marked and _normal(question.prompt):
        prompt = next((i for i, c in enumerate(cells) if c.get("cell_type") == "markdown"
                       and _normal(question.prompt) in _normal(_text(c))), None)
        if prompt is not None:
            cell = next((c for c in cells[prompt + 1:] if c.get("cell_type") == "markdown"
                         and _marked_as(c) is None), None)
    text = _text(cell) if cell is not None else ""
    if _normal(text) in ("", _normal(PLACEHOLDER)):
        return ""
    if len(text) > MAX_ANSWER_CHARS:
        text = (f"{text[:MAX_ANSWER_CHARS]}\n\n[... {len(text) - MAX_ANSWER_CHARS:,} more characters cut by the "
                f"grader: an answer keeps its first {MAX_ANSWER_CHARS:,}]")
    return text


def answer_position(cells: list[dict], question: Question) -> int | None:
    """The place in ``cells`` of the cell ``find_answer`` reads ``question``'s answer from (the first Markdown cell
    marked for it, else the first unmarked one after its prompt), or None where there is none."""
    marked = [i for i, c in enumerate(cells) if c.get("cell_type") == "markdown" and _marked_as(c) == question.name]
    if marked or not _normal(question.prompt):
        return marked[0] if marked else None
    prompt = next((i for i, c in enumerate(cells) if c.get("cell_type") == "markdown"
                   and _normal(question.prompt) in _normal(_text(c))), None)
    if prompt is None:
        return None
    return next((i for i in range(prompt + 1, len(cells)) if cells[i].get("cell_type") == "markdown"
                 and _marked_as(cells[i]) is None), None)


def _written_in(cells: list[dict], name: str) -> list[dict]:
    return [c for c in cells if c.get("cell_type") == "markdown" and _marked_as(c) == name
            and _normal(_text(c)) not in ("", _normal(PLACEHOLDER))]


def answer_notes(cells: list[dict], question: Question, names: set[str]) -> tuple[str, list[str]]:
    """What ``find_answer`` found, with what the marker must know of the notebook's metadata: ``(text, notes)``;
    ``names``: the lab's written questions (a cell marked for another name is pointed out, once, by the first)."""
    text, notes = find_answer(cells, question), []
    name = question.name
    if any(c.get("cell_type") != "markdown" and _marked_as(c) == name for c in cells):
        notes.append(f"a code cell is marked as the answer to {name}: its text is not read (an answer is a "
                     "Markdown cell)")
    written = _written_in(cells, name)
    if len(written) > 1:
        notes.append(f"{len(written)} Markdown cells are marked as the answer to {name}: all are shown, in "
                     "the notebook's order")
        extra = "\n\n".join(f"[another cell marked as this answer:]\n\n{_text(c)}" for c in written[1:])
        text = (text + "\n\n" + extra)[:MAX_ANSWER_CHARS + 200]
    elif not any(c.get("cell_type") == "markdown" and _marked_as(c) == name for c in cells) and text:
        notes.append(f"no cell is marked as the answer to {name} (its metadata was lost): the first Markdown cell "
                     "after the question is shown")
    if name == min(names, default=name):
        strays = sorted({str(m) for c in cells if (m := _marked_as(c)) is not None and m not in names})
        notes += [f"a cell is marked as the answer to {m!r}, which is no written question of this lab: not read"
                  for m in strays[:5]]
    return text, notes


def awaiting_entry(points: float, answer: str, notes: list[str] | None = None) -> dict:
    """A written question's entry in a result, before a person marks it; ``notes``: ``answer_notes``'s."""
    return {"score": None, "max_score": float(points), "messages": list(notes or []), KIND: WRITTEN,
            STATUS: AWAITING, ANSWER: answer}


def add_written(result: dict, bundle, data: bytes | None) -> dict:
    """``result`` with an awaiting entry per written question of ``bundle`` (a ``Bundle`` or its manifest), each
    answer read from the notebook's bytes ``data`` (None: unreadable, every answer empty), ``max_score`` including
    the written points and ``awaiting_points`` set. A name the result has already (a code question's: the build
    refuses the clash; or a second call) is left as it is."""
    questions = result.setdefault("questions", {})
    cells = notebook_cells(data)
    written = written_of(bundle)
    for w in written:
        if w.name not in questions:
            questions[w.name] = awaiting_entry(w.points, *answer_notes(cells, w, {q.name for q in written}))
            result["max_score"] = float(result.get("max_score", 0.0)) + w.points
    return set_awaiting(result)


def has_written(questions: dict) -> bool:
    return any(q.get(KIND) == WRITTEN for q in questions.values())


def set_awaiting(holder: dict) -> dict:
    """A result or gradebook row with ``awaiting_points`` set from its questions where it has a written one."""
    if has_written(holder.get("questions") or {}):
        holder[AWAITING_POINTS] = awaiting_points(holder["questions"])
    return holder


def points_awaiting(holder) -> float:
    """The ``awaiting_points`` of a result or row (0 where the lab has no written question)."""
    return float(holder.get(AWAITING_POINTS) or 0.0)


def is_awaiting(q: dict) -> bool:
    return q.get(STATUS) == AWAITING or q.get("score") is None


def awaiting_points(questions: dict) -> float:
    """The points of the questions of a result or gradebook row that wait for a person."""
    return float(sum(q["max_score"] for q in questions.values() if is_awaiting(q)))


def awaiting_note(points: float) -> str:
    """``"3 points awaiting marking"`` (``""`` for none): the words every total that has some shows."""
    if points <= 0:
        return ""
    return f"{format_score(points)} point{'' if points == 1 else 's'} {AWAITING}"


def total_text(score: float, max_score: float, awaiting: float) -> str:
    """``"6 / 10 (2 points awaiting marking)"``, or ``"6 / 10"`` when nothing waits."""
    note = awaiting_note(awaiting)
    return f"{format_score(score)} / {format_score(max_score)}" + (f" ({note})" if note else "")


def clean_marks(q: dict, *, awaiting: bool) -> dict:
    """The marking fields of a question's entry, well-formed only: ``status`` (``AWAITING`` when ``awaiting``),
    ``rubric`` (``[[criterion, points], ...]``: the items a marker applied), ``comment``, ``reason`` and
    ``changed_by`` (text), a changed score's ``changed_from`` (a number, or None: it awaited marking)."""
    out: dict = {}
    status = AWAITING if awaiting else q.get(STATUS)
    if status in STATUSES and (status == AWAITING) == awaiting:
        out[STATUS] = status
    rubric = q.get(RUBRIC)
    if isinstance(rubric, (list, tuple)):
        out[RUBRIC] = [[str(c), float(p)] for c, p in (i for i in rubric if isinstance(i, (list, tuple))
                                                      and len(i) == 2)
                       if isinstance(p, (int, float)) and not isinstance(p, bool)]
    for key in (COMMENT, REASON, CHANGED_BY):
        if isinstance(q.get(key), str) and q[key]:
            out[key] = q[key][:MAX_ANSWER_CHARS]
    was = q.get(CHANGED_FROM)
    if out.get(STATUS) == "changed" and CHANGED_FROM in q and (was is None or isinstance(was, (int, float))
                                                              and not isinstance(was, bool)):
        out[CHANGED_FROM] = None if was is None else float(was)
    return out


def change_text(q: dict) -> str:
    """``"changed from 1 to 2 by ann"`` for a changed score (``"changed to 2"`` where the rest is not known), or
    ``""``: the words the report and the feedback use."""
    if q.get(STATUS) != "changed" or q.get("score") is None:
        return ""
    was = (f" from {AWAITING}" if q[CHANGED_FROM] is None else f" from {format_score(q[CHANGED_FROM])}") \
        if CHANGED_FROM in q else ""
    by = f" by {q[CHANGED_BY]}" if q.get(CHANGED_BY) else ""
    return f"changed{was} to {format_score(q['score'])}{by}"


def from_row(score, max_score, messages: str, details: str | None, kind: str | None, answer: str | None) -> dict:
    """A gradebook ``questions`` row as a result's entry: a NULL kind (a row from before written questions) is a
    code question; a written one carries its answer, and its status while its score is NULL."""
    q = {"score": score, "max_score": max_score, "messages": json.loads(messages),
         **fields.clean_question_fields(json.loads(details or "{}"))}
    if kind == WRITTEN:
        q[KIND], q[ANSWER] = WRITTEN, answer or ""
        if score is None:
            q[STATUS] = AWAITING
    return q
