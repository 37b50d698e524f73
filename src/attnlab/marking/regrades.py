"""Regrade requests: a student asks a marker to look again at one question; the request waits in a queue until a
marker decides, with a reason, either a score change (``MarkStore.change_score_in``, in the same transaction, so
the change is audited as any other) or no change. The table is ``regrade_requests`` (``schema``); every request
added and every decision is a row of the audit log (``store.audit``), with the marker named by their token.

A request is ``(lab, key, question, text, asked_at)``: entered on the requests page or imported from a CSV
(``regrade_csv``). The same request twice (same student, question, time and text) is kept once (``fingerprint``).
``feedback_entries`` gives each student's requests and decisions to the feedback they read."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone

from attnlab.marking.records import MarkConflict, MarkingError
from attnlab.marking.store import MAX_NAME_CHARS, MAX_TEXT_CHARS, MarkStore
from attnlab.records.safe_text import escape_controls

NO_CHANGE, SCORE_CHANGE = "no change", "score change"
DECISIONS = (NO_CHANGE, SCORE_CHANGE)
OPEN, RESOLVED = "open", "resolved"
_COLUMNS = ("id", "lab", "key", "question", "text", "asked_at", "source", "entered_by", "entered_at", "decision",
            "reason", "decided_by", "decided_at", "score", "change_version")


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Request:
    id: int
    lab: str
    key: str
    question: str
    text: str
    asked_at: str  # when the student asked (UTC, ISO 8601)
    source: str  # "entered", or "imported from <file>"
    entered_by: str
    entered_at: str
    decision: str  # "" while open, else one of DECISIONS
    reason: str
    decided_by: str
    decided_at: str
    score: float | None  # the new score of a score change
    change_version: int | None  # the score_changes version it wrote (the audit log's "score change" row)

    @property
    def status(self) -> str:
        return RESOLVED if self.decision else OPEN


@dataclass(frozen=True)
class NewRequest:
    """A request before it is stored: checked (``checked_request``), not yet given an id."""

    lab: str
    key: str
    question: str
    text: str
    asked_at: str


def questions_by_key(store: MarkStore, lab: str) -> dict[str, set[str]]:
    """``{key: {question}}``: what a request of ``lab`` may be about."""
    out: dict[str, set[str]] = {}
    for a in store.answers(lab):
        out.setdefault(a.key, set()).add(a.question)
    return out


def checked_request(asked: dict[str, set[str]], lab: str, key: str, question: str, text: str,
                    asked_at: str) -> NewRequest:
    """The request, or ``MarkingError`` naming what is wrong: a submission or question not in ``asked``
    (``questions_by_key``), no text, a text over ``MAX_TEXT_CHARS``."""
    answers = asked.get(key, set())
    if not answers:
        raise MarkingError(f"the gradebook has no submission {key!r} in {lab}")
    if question not in answers:
        raise MarkingError(f"{key} has no question {question!r} in {lab} (its questions: {', '.join(sorted(answers))})")
    text = _required_text(text, "the request's text",
                          "the request's text is empty: give what the student asked, in their words")
    return NewRequest(lab, key, question, text, asked_at)


def _required_text(value, what: str, empty: str) -> str:
    """``value`` stripped; ``MarkingError`` with ``empty`` when nothing is left, or naming ``what`` when it is over
    ``MAX_TEXT_CHARS`` (refused, never clipped: the student's words and the decision are kept whole)."""
    text = str(value or "").strip()
    if not text:
        raise MarkingError(empty)
    if len(text) > MAX_TEXT_CHARS:
        raise MarkingError(f"{what} is {len(text):,} characters; at most {MAX_TEXT_CHARS:,}: shorten it")
    return text


def _fingerprint(r: NewRequest) -> str:
    body = json.dumps([r.lab, r.key, r.question, r.asked_at, r.text], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def _who(marker: str) -> str:
    who = escape_controls(str(marker or "").strip())
    if not who or len(who) > MAX_NAME_CHARS:
        raise MarkingError("a request needs the marker's name, from their token")
    return who


def add_requests(store: MarkStore, requests: list[NewRequest], *, marker: str, source: str) -> tuple[int, int]:
    """Store ``requests`` (checked) in one transaction, each audited; ``(added, already there)``."""
    who = _who(marker)

    def write(ex):
        added = 0
        for r in requests:
            now = now_utc()
            found = ex("INSERT INTO regrade_requests (lab, key, question, text, asked_at, source, entered_by, "
                       "entered_at, fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (fingerprint) DO "
                       "NOTHING RETURNING id", (r.lab, r.key, r.question, r.text, r.asked_at, source, who, now,
                                                _fingerprint(r))).fetchall()
            if found:
                added += 1
                store.audit(ex, who, r.lab, r.key, r.question, "regrade request", None,
                            json.dumps({"request": int(found[0][0]), "asked_at": r.asked_at, "source": source,
                                        "text": r.text}, ensure_ascii=False), None)
        return added, len(requests) - added
    return store.gradebook.transaction(write, write=True)


def _rows(ex, where: str, params) -> list[Request]:
    rows = ex(f"SELECT {', '.join(_COLUMNS)} FROM regrade_requests {where} ORDER BY asked_at, id", params).fetchall()
    return [Request(int(r[0]), *r[1:13], None if r[13] is None else float(r[13]),
                    None if r[14] is None else int(r[14])) for r in rows]


def requests_of(store: MarkStore, lab: str, key: str | None = None) -> list[Request]:
    """The requests of ``lab`` (of one submission), oldest asked first."""
    where, params = ("WHERE lab = ?", (lab,)) if key is None else ("WHERE lab = ? AND key = ?", (lab, key))
    return store.gradebook.transaction(lambda ex: _rows(ex, where, params))


def one_request(store: MarkStore, lab: str, request_id: int) -> Request | None:
    found = store.gradebook.transaction(lambda ex: _rows(ex, "WHERE lab = ? AND id = ?", (lab, int(request_id))))
    return found[0] if found else None


def resolve(store: MarkStore, lab: str, request_id: int, *, decision: str, reason: str, marker: str,
            score=None, version: int = 0) -> Request:
    """Decide an open request: ``SCORE_CHANGE`` to ``score`` (``version``: the question's score change the marker
    saw, as ``change_score``) or ``NO_CHANGE``, with a required ``reason``. A request decided since (by anyone) is
    ``MarkConflict``; nothing is written then, nor on any error."""
    if decision not in DECISIONS:
        raise MarkingError(f"decision {decision!r}: choose {' or '.join(map(repr, DECISIONS))}")
    reason = _required_text(reason, "the reason",
                            "a decision needs a reason: say why, in a sentence the student will read")
    who = _who(marker)

    def write(ex):
        found = _rows(ex, "WHERE lab = ? AND id = ?", (lab, int(request_id)))
        if not found:
            raise MarkingError(f"{lab} has no regrade request {request_id}: reload the page")
        r = found[0]
        if r.decision:
            raise MarkConflict(f"{r.decided_by} decided request {r.id} at {r.decided_at} ({r.decision}): yours was "
                               "not saved", r)
        change = None
        if decision == SCORE_CHANGE:
            change = store.change_score_in(ex, lab, r.key, r.question, score, reason=f"{reason} (regrade request "
                                           f"{r.id})", marker=who, version=version)
        new_score, new_version = (change.score, change.version) if change else (None, None)
        done = ex("UPDATE regrade_requests SET decision = ?, reason = ?, decided_by = ?, decided_at = ?, score = ?, "
                  "change_version = ? WHERE id = ? AND decision = ''",
                  (decision, reason, who, now_utc(), new_score, new_version, r.id)).rowcount
        if done != 1:
            raise MarkConflict(f"another marker decided request {r.id} at the same moment: yours was not saved")
        after = {"request": r.id, "decision": decision} | ({"score": new_score, "change_version": new_version}
                                                            if change else {})
        store.audit(ex, who, lab, r.key, r.question, "regrade request resolved",
                    json.dumps({"request": r.id, "status": OPEN}), json.dumps(after), reason)
        return _rows(ex, "WHERE id = ?", (r.id,))[0]
    return store.gradebook.transaction(write, write=True)


def feedback_entries(gradebook, lab: str) -> dict[str, list[dict]]:
    """``{key: [entry]}``: each student's requests as their feedback shows them (``question``, ``text``,
    ``asked_at``, ``status``, ``decision``, ``reason``, ``decided_at``, ``score``); who decided stays in the audit
    log."""
    out: dict[str, list[dict]] = {}
    for r in requests_of(MarkStore(gradebook), lab):
        out.setdefault(r.key, []).append({"question": r.question, "text": r.text, "asked_at": r.asked_at,
                                          "status": r.status, "decision": r.decision, "reason": r.reason,
                                          "decided_at": r.decided_at, "score": r.score})
    return out
