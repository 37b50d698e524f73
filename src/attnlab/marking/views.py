"""What every page of the marking application shares (``Marking``: the store and the templates; the marker's name
and whether names are shown, from cookies), and the pages that are not about one question: the labs with each
written question's progress, the marker's name, names shown or not, the audit log and its CSV. Students are
``student-NNN`` (``report.load.Names``: the report's own aliases) unless a marker asks for names."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import SimpleNamespace
from urllib.parse import quote, unquote

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from attnlab.marking import security
from attnlab.marking.audit import audit_csv, audit_log
from attnlab.marking.store import WRITTEN, MarkingError, MarkStore
from attnlab.report.load import Names

MARKER_COOKIE = "attnlab_mark_marker"
NAMES_COOKIE = "attnlab_mark_names"


@dataclass
class Marking:
    """What every page reads: the store, the templates, the questions' prompts and reference answers."""

    store: MarkStore
    env: Environment
    guides: dict  # (lab, question) -> (prompt, reference answer), from the bundle; empty without one

    def keys(self, lab: str) -> list[str]:
        """The lab's submissions in the order markers see them: by their ``student-NNN`` alias."""
        keys = self.store.keys(lab)
        return sorted(keys, key=self._names(keys).alias)

    def names(self, lab: str) -> Names:
        return self._names(self.store.keys(lab))

    @staticmethod
    def _names(keys: list[str]) -> Names:
        return Names([SimpleNamespace(key=k, path="") for k in keys], anonymise=True)

    def page(self, request: Request, template: str, status: int = 200, **context) -> HTMLResponse:
        state = request.scope["state"]
        context |= {"csrf": state["csrf"], "nonce": state["nonce"], "marker": marker_of(request),
                    "show_names": showing_names(request), "path": request.url.path}
        return HTMLResponse(self.env.get_template(template).render(**context), status_code=status)

    def who(self, request: Request, lab: str):
        """``who(key)``: the name the marker reads for a submission of ``lab`` (its alias, or its key on request;
        ``(removed)`` for one no longer in the gradebook)."""
        if showing_names(request):
            return lambda key: key
        names = self.names(lab)

        def alias(key: str) -> str:
            try:
                return names.alias(key)
            except KeyError:  # a submission no longer in the gradebook's rows (the audit log keeps it)
                return "(removed)"
        return alias


def answer_id(key: str) -> str:
    """A submission's id in a form (not its name, not its place in a list that a new submission can shift): a POST
    for another submission than the page showed is refused instead of marking the wrong answer."""
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()[:16]


def current(mark, answer) -> bool:
    """A mark made on this answer as it is now (not on an earlier submission's)."""
    return mark is not None and mark.marks(answer)


def marker_of(request: Request) -> str:
    return unquote(request.cookies.get(MARKER_COOKIE, ""))


def showing_names(request: Request) -> bool:
    return request.cookies.get(NAMES_COOKIE) == "1"


def marking_of(request: Request) -> Marking:
    return request.app.state.marking


def set_cookie(response: Response, name: str, value: str) -> Response:
    response.set_cookie(name, value, path="/", httponly=True, samesite="strict")
    return response


def back_to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def refusal(exc: PermissionError) -> PlainTextResponse:
    return PlainTextResponse(str(exc), status_code=403)


def need_marker(request: Request) -> str:
    marker = marker_of(request)
    if not marker:
        raise MarkingError("say who you are first (the labs page asks for your name)")
    return marker


# -- the labs, the marker's name, names shown or not ---------------------------------------------------------
async def index(request: Request) -> Response:
    m = marking_of(request)
    labs = []
    for lab in m.store.gradebook.labs():
        answers = m.store.answers(lab)
        marks = m.store.marks(lab)
        questions = {}
        for a in answers:
            if a.kind == WRITTEN:
                q = questions.setdefault(a.question, {"name": a.question, "points": a.max_score, "marked": 0,
                                                      "total": 0})
                q["total"] += 1
                q["marked"] += current(marks.get((a.key, a.question)), a)
        labs.append({"name": lab, "students": len({a.key for a in answers}), "questions": list(questions.values())})
    return m.page(request, "index.html", labs=labs)


async def set_name(request: Request) -> Response:
    try:
        form = await security.checked_form(request)
    except PermissionError as exc:
        return refusal(exc)
    name = " ".join(str(form.get("name") or "").split())[:100]
    return set_cookie(back_to("/"), MARKER_COOKIE, quote(name)) if name else back_to("/")


async def toggle_names(request: Request) -> Response:
    try:
        form = await security.checked_form(request)
    except PermissionError as exc:
        return refusal(exc)
    back = str(form.get("back") or "/")
    return set_cookie(back_to(back if back.startswith("/") and not back.startswith("//") else "/"), NAMES_COOKIE,
                      "0" if showing_names(request) else "1")


# -- the audit log -----------------------------------------------------------------------------------------
async def audit_page(request: Request) -> Response:
    m = marking_of(request)
    rows = audit_log(m.store.gradebook)
    namers = {lab: m.who(request, lab) for lab in {r["lab"] for r in rows}}
    for r in rows:
        r["student"] = "" if r["key"] is None else namers[r["lab"]](r["key"])
    return m.page(request, "audit.html", rows=rows)


async def audit_download(request: Request) -> Response:
    return Response(audit_csv(marking_of(request).store.gradebook), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="marking-audit.csv"'})
