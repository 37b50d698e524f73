"""The marks, in the gradebook's own database (SQLite or PostgreSQL, through ``Gradebook.transaction``).

Tables (primary keys in brackets), created beside the grader's ``submissions`` and ``questions``:

- ``rubric_items`` [lab, question, item]: position, criterion, points. The points are editable and a mark stores
  item ids, never points, so an item's points edited once apply to every answer that has it (a dynamic rubric).
- ``marks`` [lab, key, question]: items (JSON list of item ids), adjustment, comment, marker, marked_at, version,
  answer_sha (the SHA-256 of the answer it marks: a resubmission whose answer differs is awaiting marking again).
  A write names the version it was based on (0: no mark yet); a stale one is refused with ``MarkConflict``
  (optimistic concurrency: two markers never overwrite each other silently).
- ``score_changes`` [lab, key, question]: score, reason (required), marker, changed_at, version, basis: a changed
  score for ANY question, code included (an appeal, a similarity finding); ``basis`` is what it was changed on (the
  written answer's SHA-256, or the submission's for a code question): a resubmission that changed it resets it.
- ``audit`` [id]: at, who, lab, key, question, action, before_value, after_value (JSON), reason, digest;
  append-only and hash-chained (``schema``, ``chain``). Read and exported by ``marking.audit``.
- ``markers`` [name]: the digest of each marker's own token (``markers``).
- ``regrade_requests`` [id]: a student's request to look again at a question, and its decision (``regrades``).

Tables and triggers: ``schema``.
A written question is a ``questions`` row with ``kind = 'written'`` and its text in ``answer`` (columns the grade side
adds; a gradebook without them holds code questions only). ``effective_scores`` is the one function the rest reads.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

from attnlab.marking import chain, schema
from attnlab.marking.records import (
    AWAITING,
    CHANGED,
    GRADED,
    MARKED,
    WRITTEN,
    Answer,
    Change,
    Effective,
    Mark,
    MarkConflict,
    MarkingError,
    RubricItem,
    answer_sha,
    mark_score,
)
from attnlab.records.safe_text import clip
from attnlab.records.score_text import format_score

MAX_TEXT_CHARS = 5000  # a comment or a reason
MAX_NAME_CHARS = 100  # a marker's name, a criterion


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _number(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise MarkingError(f"{what} {value!r} is not a number: give one such as 1 or -0.5") from None
    if not math.isfinite(number):
        raise MarkingError(f"{what} {value!r} is not a finite number: give one such as 1 or -0.5")
    return number


def _text(value, what: str, limit: int, *, required: bool = False) -> str:
    text = str(value or "").strip()
    if required and not text:
        raise MarkingError(f"{what} is required: say why, in a sentence")
    return clip(text, limit)


def _mark_json(mark: Mark | None) -> str | None:
    return None if mark is None else json.dumps({"items": list(mark.items), "adjustment": mark.adjustment,
                                                 "comment": mark.comment})


class MarkStore:
    """The marks of one gradebook (``open_gradebook``); creates its tables on first use."""

    def __init__(self, gradebook):
        self.gradebook = gradebook
        self.postgres = gradebook.dialect == "postgresql"
        # a read first: no DDL (no lock) once the tables are there
        if not gradebook.transaction(lambda ex: schema.ready(ex, self.postgres)):
            gradebook.transaction(lambda ex: schema.create(ex, self.postgres), write=True)

    def audit(self, ex, who, lab, key, question, action, before, after, reason) -> None:
        """One row at the end of the audit log's hash chain, in the caller's transaction ``ex``."""
        chain.append(ex, self.postgres, (_now(), who, lab, key, question, action, before, after, reason))

    # -- reading ----------------------------------------------------------------------------------------
    def answers(self, lab: str, question: str | None = None) -> list[Answer]:
        """The ``questions`` rows of ``lab`` (of one question), by key then position."""
        return self.gradebook.transaction(lambda ex: _answers(ex, lab, question))

    def keys(self, lab: str) -> list[str]:
        """The submissions of ``lab`` that have question rows, sorted."""
        return [r[0] for r in self.gradebook.transaction(lambda ex: ex(
            "SELECT DISTINCT key FROM questions WHERE lab = ? ORDER BY key", (lab,)).fetchall())]

    def rubric(self, lab: str, question: str) -> list[RubricItem]:
        return self.gradebook.transaction(lambda ex: _rubric(ex, lab, question))

    def marks(self, lab: str, question: str | None = None) -> dict[tuple[str, str], Mark]:
        """``{(key, question): Mark}`` of ``lab`` (of one question)."""
        return self.gradebook.transaction(lambda ex: _marks(ex, lab, question))

    def changes(self, lab: str) -> dict[tuple[str, str], Change]:
        return self.gradebook.transaction(lambda ex: _changes(ex, lab))

    def effective(self, lab: str) -> dict[str, dict[str, Effective]]:
        """``effective_scores`` on this store: one snapshot of the rows, rubric, marks and changes."""
        def read(ex):
            rubrics: dict[str, dict[str, RubricItem]] = {}
            for item_row in ex("SELECT question, item, criterion, points, position FROM rubric_items WHERE lab = ?",
                               (lab,)).fetchall():
                rubrics.setdefault(item_row[0], {})[item_row[1]] = RubricItem(*item_row[1:])
            return _answers(ex, lab, None), rubrics, _marks(ex, lab, None), _changes(ex, lab)

        answers, rubrics, marks, changes = self.gradebook.transaction(read)
        out: dict[str, dict[str, Effective]] = {}
        for a in answers:
            out.setdefault(a.key, {})[a.question] = _effective(a, rubrics.get(a.question, {}),
                                                               marks.get((a.key, a.question)),
                                                               changes.get((a.key, a.question)))
        return out

    # -- writing ----------------------------------------------------------------------------------------
    def ensure_rubric(self, lab: str, question: str, items) -> None:
        """Add the items ``[(id, criterion, points)]`` (the bundle's rubric) that are not there yet; an item already
        there keeps its points, which a marker may have edited."""
        def write(ex):
            for position, (item_id, criterion, points) in enumerate(items):
                ex("INSERT INTO rubric_items (lab, question, item, position, criterion, points) VALUES "
                   "(?, ?, ?, ?, ?, ?) ON CONFLICT (lab, question, item) DO NOTHING",
                   (lab, question, str(item_id), position, _text(criterion, "a criterion", MAX_TEXT_CHARS,
                                                                 required=True), _number(points, "points")))
        self.gradebook.transaction(write, write=True)

    def add_rubric_item(self, lab: str, question: str, criterion: str, points, *, marker: str) -> RubricItem:
        """A new item at the end of the question's rubric, id ``<question>.<n>``."""
        criterion = _text(criterion, "the criterion", MAX_TEXT_CHARS, required=True)
        points, who = _number(points, "the points"), _text(marker, "the marker's name", MAX_NAME_CHARS, required=True)

        def write(ex):
            _written_question(ex, lab, question)
            rubric = _rubric(ex, lab, question)
            position = max((i.position for i in rubric), default=-1) + 1
            taken, n = {i.id for i in rubric}, len(rubric)
            while f"{question}.{n}" in taken:  # the bundle's ids need not be 0..n-1
                n += 1
            item = RubricItem(f"{question}.{n}", criterion, points, position)
            if ex("INSERT INTO rubric_items (lab, question, item, position, criterion, points) VALUES "
                  "(?, ?, ?, ?, ?, ?) ON CONFLICT (lab, question, item) DO NOTHING",
                  (lab, question, item.id, position, criterion, points)).rowcount != 1:
                raise MarkConflict("another marker added a rubric item at the same moment: reload and add it again")
            self.audit(ex, who, lab, None, question, "rubric item added", None,
                       json.dumps({"item": item.id, "criterion": criterion, "points": points}), None)
            return item
        return self.gradebook.transaction(write, write=True)

    def remove_rubric_item(self, lab: str, question: str, item_id: str, *, marker: str, expected: float) -> None:
        """Take back an item just added (an undo): ``MarkConflict`` where a mark applies it or another marker changed
        its points (``expected``: the points it was added with) since."""
        who = _text(marker, "the marker's name", MAX_NAME_CHARS, required=True)

        def write(ex):
            current = {i.id: i for i in _rubric(ex, lab, question)}.get(item_id)
            if current is None or current.points != float(expected):
                raise MarkConflict(f"{item_id} was changed or removed since it was added: kept", current)
            if any(item_id in m.items for m in _marks(ex, lab, question).values()):
                raise MarkConflict(f"a mark applies {item_id} since it was added: kept", current)
            ex("DELETE FROM rubric_items WHERE lab = ? AND question = ? AND item = ?", (lab, question, item_id))
            self.audit(ex, who, lab, None, question, "rubric item removed", json.dumps(
                {"item": item_id, "criterion": current.criterion, "points": current.points}), None, None)
        self.gradebook.transaction(write, write=True)

    def set_item_points(self, lab: str, question: str, item_id: str, points, *, marker: str,
                        expected: float | None = None) -> RubricItem:
        """Change an item's points (every answer that has it follows). ``expected``: the points the marker saw;
        if another marker changed them since, ``MarkConflict``."""
        points, who = _number(points, "the points"), _text(marker, "the marker's name", MAX_NAME_CHARS, required=True)

        def write(ex):
            _written_question(ex, lab, question)
            current = {i.id: i for i in _rubric(ex, lab, question)}.get(item_id)
            if current is None:
                raise MarkingError(f"no rubric item {item_id!r} in question {question!r} of {lab}: reload the page")
            if expected is not None and current.points != float(expected):
                raise MarkConflict(f"another marker changed {item_id}'s points to {format_score(current.points)} "
                                   f"(you saw {format_score(expected)}): yours were not saved", current)
            ex("UPDATE rubric_items SET points = ? WHERE lab = ? AND question = ? AND item = ?",
               (points, lab, question, item_id))
            self.audit(ex, who, lab, None, question, "rubric points",
                       json.dumps({"item": item_id, "points": current.points}),
                       json.dumps({"item": item_id, "points": points}), None)
            return RubricItem(item_id, current.criterion, points, current.position)
        return self.gradebook.transaction(write, write=True)

    def save_mark(self, lab: str, key: str, question: str, *, items, adjustment=0.0, comment: str = "",
                  marker: str, version: int) -> Mark:
        """Mark one written answer; ``version``: the mark's version the marker started from (0: none). A stale
        version raises ``MarkConflict`` with the mark that is there now; nothing is written."""
        items = tuple(dict.fromkeys(str(i) for i in items))
        adjustment = _number(adjustment, "the adjustment")
        comment = _text(comment, "the comment", MAX_TEXT_CHARS)
        who = _text(marker, "the marker's name", MAX_NAME_CHARS, required=True)

        def write(ex):
            answer = _one_answer(ex, lab, key, question)
            if answer.kind != WRITTEN:
                raise MarkingError(f"{question} of {key} is a code question: change its score with a reason instead")
            unknown = set(items) - {i.id for i in _rubric(ex, lab, question)}
            if unknown:
                raise MarkingError(f"unknown rubric item(s) {sorted(unknown)} for {question}: reload the page")
            before = _marks(ex, lab, question, key).get((key, question))
            new = Mark(items, adjustment, comment, who, _now(), int(version) + 1, answer_sha(answer.text))
            values = (json.dumps(list(items)), adjustment, comment, who, new.marked_at, new.version, new.answer_sha)
            if int(version) == 0:
                done = ex("INSERT INTO marks (lab, key, question, items, adjustment, comment, marker, marked_at, "
                          "version, answer_sha) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                          "ON CONFLICT (lab, key, question) DO NOTHING",
                          (lab, key, question, *values)).rowcount
            else:
                done = ex("UPDATE marks SET items = ?, adjustment = ?, comment = ?, marker = ?, marked_at = ?, "
                          "version = ?, answer_sha = ? WHERE lab = ? AND key = ? AND question = ? AND version = ?",
                          (*values, lab, key, question, int(version))).rowcount
            if done != 1:  # read again: what the other marker committed (a new snapshot per statement in PostgreSQL)
                now = _marks(ex, lab, question, key).get((key, question))
                raise MarkConflict(f"{now.marker if now else 'another marker'} saved a mark for this answer first: "
                                   "yours was not saved; compare and save again", now)
            self.audit(ex, who, lab, key, question, "mark", _mark_json(before), _mark_json(new), None)
            return new
        return self.gradebook.transaction(write, write=True)

    def undo_mark(self, lab: str, key: str, question: str, *, before: Mark | None, version: int,
                  marker: str) -> None:
        """Put back ``before`` (None: no mark at all) over the mark an action saved at ``version``; if anyone changed
        it since, ``MarkConflict`` and nothing is written. The audit log records the undo."""
        who = _text(marker, "the marker's name", MAX_NAME_CHARS, required=True)

        def write(ex):
            now = _marks(ex, lab, question, key).get((key, question))
            if now is None or now.version != int(version):
                raise MarkConflict(f"{now.marker if now else 'another marker'} changed this mark since: not undone",
                                   now)
            restored = None if before is None else Mark(before.items, before.adjustment, before.comment,
                                                         before.marker, _now(), now.version + 1, before.answer_sha)
            if restored is None:
                ex("DELETE FROM marks WHERE lab = ? AND key = ? AND question = ? AND version = ?",
                   (lab, key, question, now.version))
            else:
                ex("UPDATE marks SET items = ?, adjustment = ?, comment = ?, marker = ?, marked_at = ?, version = ?, "
                   "answer_sha = ? WHERE lab = ? AND key = ? AND question = ? AND version = ?",
                   (json.dumps(list(restored.items)), restored.adjustment, restored.comment, restored.marker,
                    restored.marked_at, restored.version, restored.answer_sha, lab, key, question, now.version))
            self.audit(ex, who, lab, key, question, "mark undone", _mark_json(now), _mark_json(restored), None)
        self.gradebook.transaction(write, write=True)

    def change_score(self, lab: str, key: str, question: str, score, *, reason: str, marker: str,
                     version: int) -> Change:
        """Change the score of any question (code included) with a required reason; ``version`` as for marks."""
        return self.gradebook.transaction(lambda ex: self.change_score_in(
            ex, lab, key, question, score, reason=reason, marker=marker, version=version), write=True)

    def change_score_in(self, ex, lab: str, key: str, question: str, score, *, reason: str, marker: str,
                        version: int) -> Change:
        """``change_score`` in the caller's write transaction ``ex`` (with what else it writes, or nothing)."""
        score = _number(score, "the score")
        reason = _text(reason, "a reason for the change", MAX_TEXT_CHARS, required=True)
        who = _text(marker, "the marker's name", MAX_NAME_CHARS, required=True)
        answer = _one_answer(ex, lab, key, question)
        if not 0 <= score <= answer.max_score:
            raise MarkingError(f"score {format_score(score)} is outside 0 to {format_score(answer.max_score)} "
                               f"for {question}")
        before = _changes(ex, lab, key).get((key, question))
        new = Change(score, reason, who, _now(), int(version) + 1, answer.basis)
        values = (score, reason, who, new.changed_at, new.version, new.basis)
        if int(version) == 0:
            done = ex("INSERT INTO score_changes (lab, key, question, score, reason, marker, changed_at, version, "
                      "basis) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (lab, key, question) DO NOTHING",
                      (lab, key, question, *values)).rowcount
        else:
            done = ex("UPDATE score_changes SET score = ?, reason = ?, marker = ?, changed_at = ?, version = ?, "
                      "basis = ? WHERE lab = ? AND key = ? AND question = ? AND version = ?",
                      (*values, lab, key, question, int(version))).rowcount
        if done != 1:
            raise MarkConflict("another marker changed this score first: yours was not saved",
                               _changes(ex, lab, key).get((key, question)))
        old = before.score if before and before.counts(answer) else answer.score
        self.audit(ex, who, lab, key, question, "score change", json.dumps({"score": old}),
                   json.dumps({"score": score}), reason)
        return new


def effective_scores(gradebook, lab: str) -> dict[str, dict[str, Effective]]:
    """``{key: {question: Effective}}`` for every graded question of ``lab``: a code question's grader score (or its
    changed score), a written question's mark (rubric items at their current points plus the adjustment, within 0
    and its points; a mark made on an earlier submission's different answer does not count), its changed score, or
    ``awaiting marking`` with score None: never 0, never full marks."""
    return MarkStore(gradebook).effective(lab)


def _effective(a: Answer, rubric: dict[str, RubricItem], mark: Mark | None, change: Change | None) -> Effective:
    note = None
    if change is not None and not change.counts(a):  # changed on an earlier submission: reset by this one
        note = f"{change.marker}'s score change ({change.reason}) was on an earlier submission: reset"
        change = None
    if mark is not None and not mark.marks(a):
        note = note or f"{mark.marker}'s mark was on an earlier submission's answer: reset, awaiting marking again"
        mark = None
    applied = [(rubric[i].criterion, rubric[i].points) for i in (mark.items if mark else ()) if i in rubric]
    comment = mark.comment or None if mark else None
    if change is not None:
        was = _effective(a, rubric, mark, None).score
        return Effective(change.score, a.max_score, CHANGED, applied, comment, change.reason, was=was,
                         changed_by=change.marker)
    if a.kind != WRITTEN:
        return Effective(a.score, a.max_score, GRADED, [], None, None, note)
    if mark is None:
        return Effective(None, a.max_score, AWAITING, [], None, None, note)
    return Effective(mark_score(mark, rubric, a.max_score), a.max_score, MARKED, applied, comment, None, note)


def _answers(ex, lab: str, question: str | None, key: str | None = None) -> list[Answer]:
    where, params = "questions.lab = ?", [lab]
    for column, value in (("question", question), ("key", key)):
        if value is not None:
            where, params = f"{where} AND questions.{column} = ?", params + [value]
    cursor = ex("SELECT questions.*, submissions.sha256 AS submission_sha FROM questions LEFT JOIN submissions ON "
                "submissions.lab = questions.lab AND submissions.key = questions.key "
                f"WHERE {where} ORDER BY questions.key, questions.position", tuple(params))
    names = [d[0] for d in cursor.description]
    out = []
    for values in cursor.fetchall():
        row = dict(zip(names, values))
        kind = WRITTEN if row.get("kind") == WRITTEN else "code"
        out.append(Answer(row["key"], row["question"], kind, str(row.get("answer") or ""),
                          row["score"], float(row["max_score"]), row.get("submission_sha") or "",
                          _notes(row.get("messages"))))
    return out


def _written_question(ex, lab: str, question: str) -> None:
    """Refuse a rubric edit for a question that no submission of ``lab`` answers as a written question."""
    if not ex("SELECT 1 FROM questions WHERE lab = ? AND question = ? AND kind = ? LIMIT 1",
              (lab, question, WRITTEN)).fetchall():
        raise MarkingError(f"{lab} has no written question {question!r} in the gradebook: nothing was saved")


def _notes(messages) -> tuple[str, ...]:
    try:
        found = json.loads(messages or "[]")
    except ValueError:
        return ()
    return tuple(str(m) for m in found) if isinstance(found, list) else ()


def _one_answer(ex, lab: str, key: str, question: str) -> Answer:
    found = _answers(ex, lab, question, key)
    if not found:
        raise MarkingError(f"the gradebook has no question {question!r} for {key!r} in {lab}: reload the page")
    return found[0]


def _rubric(ex, lab: str, question: str) -> list[RubricItem]:
    return [RubricItem(*r) for r in ex("SELECT item, criterion, points, position FROM rubric_items WHERE lab = ? AND "
                                       "question = ? ORDER BY position, item", (lab, question)).fetchall()]


def _marks(ex, lab: str, question: str | None, key: str | None = None) -> dict[tuple[str, str], Mark]:
    sql = ("SELECT key, question, items, adjustment, comment, marker, marked_at, version, answer_sha FROM marks "
           "WHERE lab = ?")
    params = [lab]
    for column, value in (("question", question), ("key", key)):
        if value is not None:
            sql, params = f"{sql} AND {column} = ?", params + [value]
    return {(r[0], r[1]): Mark(tuple(json.loads(r[2])), *r[3:]) for r in ex(sql, tuple(params)).fetchall()}


def _changes(ex, lab: str, key: str | None = None) -> dict[tuple[str, str], Change]:
    sql = "SELECT key, question, score, reason, marker, changed_at, version, basis FROM score_changes WHERE lab = ?"
    params = [lab]
    if key is not None:
        sql, params = sql + " AND key = ?", params + [key]
    return {(r[0], r[1]): Change(*r[2:]) for r in ex(sql, tuple(params)).fetchall()}
