"""What every page of the marking application shares (``Marking``: the store and the templates; the marker and whether
names are shown, from the server-side session), and the pages that are not about one question: the labs with each
written question's progress, names shown or not, the audit log (with its hash chain checked) and its CSV. Students
are ``student-NNN`` (``records/student_names.py``: the report's aliases too) unless a marker asks for names."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import SimpleNamespace

from jinja2 import Environment
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from attnlab.marking import security
from attnlab.marking.audit import audit_csv, audit_log, check_chain, readable
from attnlab.marking.records import WRITTEN, MarkConflict, MarkingError
from attnlab.marking.store import MarkStore
from attnlab.records.safe_text import escape_controls
from attnlab.records.student_names import Names


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
        undone = whole_number(request.query_params.get("undone") or "-", "undone", otherwise=-1)
        if undone >= 0 and not context.get("message"):
            kept = whole_number(request.query_params.get("kept"), "kept", otherwise=0)
            context |= {"message": f"Undone: {undone} changes put back" + (
                f"; {kept} left as another marker changed them since" if kept else "") + "."}
        undo = state["session"].undo
        context |= {"undo": undo[0] if undo else None}
        context |= {"csrf": state["csrf"], "nonce": state["nonce"], "marker": marker_of(request),
                    "show_names": showing_names(request), "path": request.url.path}
        return HTMLResponse(self.env.get_template(template).render(**context), status_code=status)

    def who(self, request: Request, lab: str):
        """``who(key)``: the name the marker reads for a submission of ``lab`` (its alias, or its key on request;
        ``(removed)`` for one no longer in the gradebook)."""
        if showing_names(request):
            return escape_controls  # a file name: alice\u200b.ipynb never reads as alice.ipynb
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
    """The marker the session's token names (``markers``): the audit log's ``who``."""
    return request.scope["state"]["session"].marker


def showing_names(request: Request) -> bool:
    return request.scope["state"]["session"].show_names


def marking_of(request: Request) -> Marking:
    return request.app.state.marking


def back_to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def whole_number(text, what: str = "version", *, otherwise: int | None = None) -> int:
    """A form's or address's whole number (``version``, ``back``: ASCII digits only, empty for 0), the one parse of
    them all; else ``otherwise`` where given, or ``MarkingError`` naming the value."""
    text = str(text or "0")
    if not (text.isascii() and text.isdigit()):
        if otherwise is not None:
            return otherwise
        raise MarkingError(f"the form's {what} {text!r} is not a whole number: reload the page")
    return int(text)


def local_path(back) -> str:
    """``back``, a path on this server (``/...``), else ``/``: a form's way back never leads elsewhere."""
    back = str(back or "/")
    return back if back.startswith("/") and not back.startswith("//") and "\\" not in back else "/"


def need_marker(request: Request) -> str:
    return marker_of(request)


def remember(request: Request, what: str, lab: str, question: str, done: list) -> None:
    """The session's last marking action, for its Undo button (``done``: ``[(key, mark before, version saved)]``,
    or ``[(None, (item, points before), points saved)]`` for a rubric item's points; points before None: an item
    added)."""
    if done:
        request.scope["state"]["session"].undo = (what, lab, question, list(done))


async def undo(request: Request) -> Response:
    """Undo the session's last marking action: each mark it saved put back as it was, unless changed since."""
    form = await security.checked_form(request)
    session = request.scope["state"]["session"]
    back = local_path(form.get("back"))
    if session.undo is None:
        return back_to(back)
    _, lab, question, done = session.undo
    session.undo, kept = None, 0
    store = marking_of(request).store
    for key, before, version in done:
        try:
            if key is None and before[1] is None:  # an item added: taken back unless marked or changed since
                store.remove_rubric_item(lab, question, before[0], marker=marker_of(request), expected=version)
            elif key is None:  # a rubric item's points, put back unless changed since
                store.set_item_points(lab, question, before[0], before[1], marker=marker_of(request),
                                      expected=version)
            else:
                store.undo_mark(lab, key, question, before=before, version=version, marker=marker_of(request))
        except MarkConflict:
            kept += 1
    return back_to(f"{back.split('?')[0]}?undone={len(done) - kept}&kept={kept}")


# -- the labs, names shown or not ---------------------------------------------------------
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


async def toggle_names(request: Request) -> Response:
    form = await security.checked_form(request)
    session = request.scope["state"]["session"]
    session.show_names = not session.show_names
    return back_to(local_path(form.get("back")))


# -- the audit log -----------------------------------------------------------------------------------------
async def audit_page(request: Request) -> Response:
    m = marking_of(request)
    every = audit_log(m.store.gradebook)
    who, lab = request.query_params.get("who", ""), request.query_params.get("lab", "")
    rows = [r for r in every if (not who or r["who"] == who) and (not lab or r["lab"] == lab)]
    namers = {name: m.who(request, name) for name in {r["lab"] for r in rows} if name}
    criteria = {}
    for name, question in {(r["lab"], r["question"]) for r in rows if r["question"]}:
        criteria[(name, question)] = {i.id: (i.criterion, i.points) for i in m.store.rubric(name, question)}
    for r in rows:
        r["student"] = "" if r["key"] is None else namers[r["lab"]](r["key"])
        found = criteria.get((r["lab"], r["question"]), {})
        r["before"], r["after"] = readable(r["before"], found), readable(r["after"], found)
    return m.page(request, "audit.html", rows=rows, chain=check_chain(m.store.gradebook), who=who, lab=lab,
                  markers=sorted({r["who"] for r in every}), labs=sorted({r["lab"] for r in every if r["lab"]}))


async def audit_download(request: Request) -> Response:
    return Response(audit_csv(marking_of(request).store.gradebook), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="marking-audit.csv"'})
