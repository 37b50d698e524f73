"""The "Regrade requests" page of a lab (``/l/<lab>/requests``): the queue, open and resolved, filtered by status and
question; a form to add a request a student sent (``requests_page`` POST), a CSV pasted from an LMS form
(``import_csv``, ``regrade_csv``), and per open request a decision with its reason (``resolve_request``): a score
change (through ``MarkStore.change_score_in``) or no change. The protections are the app's (``security``: the
session, the CSRF field, the origin and size checks); an unknown lab or request is 404 before anything is read or
stored; a bad value is 400 with the reason, a decision another marker made first 409."""

from __future__ import annotations

from types import SimpleNamespace

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from attnlab.marking import security
from attnlab.marking.records import MarkConflict, MarkingError
from attnlab.marking.regrade_csv import asked_time, find_key, import_requests
from attnlab.marking.regrades import (
    DECISIONS,
    OPEN,
    RESOLVED,
    add_requests,
    checked_request,
    now_utc,
    one_request,
    questions_by_key,
    requests_of,
    resolve,
)
from attnlab.marking.views import Marking, back_to, marking_of, need_marker, whole_number
from attnlab.records.score_text import format_score

NOT_FOUND = PlainTextResponse("no such lab or regrade request: go back to the labs page", status_code=404)
STATUSES = (OPEN, RESOLVED)


def _score_text(e) -> str:
    if e is None:
        return ""
    if e.score is None:
        return f"{e.status} ({format_score(e.max_score)} points)"
    return f"{format_score(e.score)} / {format_score(e.max_score)} ({e.status})"


def _rows(m: Marking, request: Request, lab: str, status: str, question: str) -> list[SimpleNamespace]:
    who, keys = m.who(request, lab), m.keys(lab)
    place = {k: n for n, k in enumerate(keys, start=1)}
    scores, changes = m.store.effective(lab), m.store.changes(lab)
    rows = []
    for r in requests_of(m.store, lab):
        if (status and r.status != status) or (question and r.question != question):
            continue
        change = changes.get((r.key, r.question))
        rows.append(SimpleNamespace(
            r=r, who=who(r.key), n=place.get(r.key), score_text=_score_text(scores.get(r.key, {}).get(r.question)),
            version=change.version if change else 0,
            decision_text=(f"score changed to {format_score(r.score)}" if r.score is not None else r.decision)))
    return rows


def _page(m: Marking, request: Request, lab: str, *, status: int = 200, **context) -> Response:
    shown = request.query_params.get("status", "")
    shown = shown if shown in STATUSES else ""
    question = request.query_params.get("question", "")
    names = sorted({q for qs in questions_by_key(m.store, lab).values() for q in qs})
    question = question if question in names else ""
    every = requests_of(m.store, lab)
    return m.page(request, "regrades.html", status, lab=lab, rows=_rows(m, request, lab, shown, question),
                  shown=shown, question=question, questions=names, statuses=STATUSES, decisions=DECISIONS,
                  open_count=sum(r.status == OPEN for r in every), total=len(every), **context)


def _known_lab(m: Marking, lab: str) -> bool:
    return lab in m.store.gradebook.labs()


async def requests_page(request: Request) -> Response:
    """The queue (GET); a request a marker enters (POST: ``student``, ``question``, ``text``, ``asked_at``)."""
    m, lab = marking_of(request), request.path_params["lab"]
    if not _known_lab(m, lab):
        return NOT_FOUND
    if request.method != "POST":
        return _page(m, request, lab, message=_saved(request.query_params.get("saved", "")))
    form = await security.checked_form(request)
    try:
        asked = questions_by_key(m.store, lab)
        key = find_key(str(form.get("student") or ""), sorted(asked), request.app.state.roster)
        when = str(form.get("asked_at") or "").strip()
        new = checked_request(asked, lab, key, str(form.get("question") or ""), str(form.get("text") or ""),
                              asked_time(when) if when else now_utc())
        added, _ = add_requests(m.store, [new], marker=need_marker(request), source="entered")
    except MarkingError as exc:
        return _page(m, request, lab, status=400, message=f"Not added: {exc}", message_class="error")
    return back_to(f"/l/{lab}/requests?saved={'added' if added else 'there'}")


def _saved(what: str) -> str | None:
    if whole_number(what or "-", otherwise=-1) >= 0:
        return f"Imported {what} request(s)."
    return {"added": "Request added.", "there": "That request was already in the queue.",
            "resolved": "Decision saved."}.get(what)


async def import_csv(request: Request) -> Response:
    """The CSV of an LMS form pasted in the ``csv`` field: every row checked, then all stored, or none."""
    m, lab = marking_of(request), request.path_params["lab"]
    if not _known_lab(m, lab):
        return NOT_FOUND
    form = await security.checked_form(request)
    try:
        added, _ = import_requests(m.store, str(form.get("csv") or ""), marker=need_marker(request),
                                   source="imported on the requests page", lab=lab, roster=request.app.state.roster)
    except MarkingError as exc:
        return _page(m, request, lab, status=400, message=f"Not imported: {exc}", message_class="error")
    return back_to(f"/l/{lab}/requests?saved={added}")


async def resolve_request(request: Request) -> Response:
    """A decision (``decision``, ``reason``, ``score`` and ``version`` for a score change) on one request."""
    m, lab, rid = marking_of(request), request.path_params["lab"], request.path_params["rid"]
    if not _known_lab(m, lab) or one_request(m.store, lab, rid) is None:
        return NOT_FOUND
    form = await security.checked_form(request)
    try:
        resolve(m.store, lab, rid, decision=str(form.get("decision") or ""), reason=str(form.get("reason") or ""),
                score=form.get("score"), version=whole_number(form.get("version")), marker=need_marker(request))
    except MarkingError as exc:
        return _page(m, request, lab, status=409 if isinstance(exc, MarkConflict) else 400,
                     message=f"Not saved: {exc}", message_class="error")
    return back_to(f"/l/{lab}/requests?saved=resolved")


ROUTES = (
    Route("/l/{lab}/requests", requests_page, methods=["GET", "POST"]),
    Route("/l/{lab}/requests/import", import_csv, methods=["POST"]),
    Route("/l/{lab}/requests/{rid:int}", resolve_request, methods=["POST"]),
)
