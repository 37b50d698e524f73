"""The answer-groups page of a written question (``groups_page``): its answers in groups (``groups.answer_groups``),
each with the members already marked shown with their items and left out unless the marker ticks them, one Apply
per group; and "mark the unmarked empty answers 0" (``mark_empty_answers``, then back to this page). The grouping
and the writes run in a worker thread: a class of 1,000 answers never holds up another marker's request."""

from __future__ import annotations

from types import SimpleNamespace

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from attnlab.marking import security
from attnlab.marking.groups import answer_groups, mark_empty, mark_group
from attnlab.marking.pages import NOT_FOUND, written_keys
from attnlab.marking.records import AWAITING, WRITTEN, MarkingError
from attnlab.marking.render import snippet_html
from attnlab.marking.views import Marking, answer_id, back_to, current, marking_of, need_marker, remember, whole_number


async def groups_page(request: Request) -> Response:
    m = marking_of(request)
    lab, question = request.path_params["lab"], request.path_params["question"]
    keys = await run_in_threadpool(written_keys, m, lab, question)
    if not keys:
        return NOT_FOUND
    if request.method != "POST":
        done = whole_number(request.query_params.get("empty") or "-", otherwise=-1)
        return await run_in_threadpool(_groups, m, request, lab, question, keys,
                                       message=f"Marked {done} empty answers 0." if done >= 0 else None)
    form = await security.checked_form(request)
    return await run_in_threadpool(_apply, m, request, lab, question, keys, form)


def _apply(m: Marking, request: Request, lab: str, question: str, keys: list[str], form) -> Response:
    """Apply the ticked items to the ticked members, each from the mark version the page showed."""
    try:
        by_id, seen = {answer_id(k): k for k in keys}, {}
        for member in form.getlist("member"):
            member_id, _, version = str(member).partition(":")
            if member_id not in by_id:
                raise MarkingError("an answer of this group is no longer in the gradebook: nothing was saved; reload")
            seen[by_id[member_id]] = whole_number(version, "member's version")
        if not seen:
            raise MarkingError("no answer of the group was ticked: nothing was saved")
        done: list = []
        saved, conflicts = mark_group(m.store, lab, question, seen, form.getlist("item"), marker=need_marker(request),
                                      done=done)
        remember(request, f"the group apply to {len(done)} answers", lab, question, done)
    except MarkingError as exc:  # a bad item, a member gone, none ticked
        return _groups(m, request, lab, question, keys, status=400, message=str(exc), message_class="error")
    text = f"Applied to {len(saved)} answers."
    if conflicts:
        text += (f" Not applied to {len(conflicts)} that another marker changed meanwhile (their mark kept): "
                 + ", ".join(map(m.who(request, lab), conflicts)))
    return _groups(m, request, lab, question, keys, status=409 if conflicts else 200, message=text,
                   message_class="conflict" if conflicts else "saved")


async def mark_empty_answers(request: Request) -> Response:
    m = marking_of(request)
    lab, question = request.path_params["lab"], request.path_params["question"]
    await security.checked_form(request)
    if not await run_in_threadpool(written_keys, m, lab, question):
        return NOT_FOUND
    try:
        record: list = []
        done = await run_in_threadpool(lambda: mark_empty(m.store, lab, question, marker=need_marker(request),
                                                          done=record))
        remember(request, f"marking {done} empty answers 0", lab, question, record)
    except MarkingError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    return back_to(f"/l/{lab}/q/{question}/groups?empty={done}")


def _groups(m: Marking, request: Request, lab: str, question: str, keys: list[str], *, status: int = 200,
            **context) -> Response:
    answers = {a.key: a for a in m.store.answers(lab, question) if a.kind == WRITTEN}
    texts = {k: a.text for k, a in answers.items()}
    marks = m.store.marks(lab, question)
    rubric = m.store.rubric(lab, question)
    criteria = {i.id: i.criterion for i in rubric}
    position = {k: i for i, k in enumerate(keys, start=1)}
    groups, who = [], m.who(request, lab)
    for g in answer_groups(texts):
        members = []
        for k in g.keys:
            mark = marks.get((k, question))
            marked = current(mark, answers[k])
            members.append(SimpleNamespace(
                n=position[k], id=answer_id(k), who=who(k), snippet=snippet_html(texts[k]),
                status="marked" if marked else AWAITING, marked=marked,
                items="; ".join(criteria.get(i, i) for i in mark.items) if marked else "",
                version=mark.version if mark else 0))
        groups.append(SimpleNamespace(members=members, terms=g.terms, empty=g.empty,
                                      marked=sum(x.marked for x in members)))
    return m.page(request, "groups.html", status, lab=lab, question=question, groups=groups, rubric=rubric,
                  total=len(keys), marked=sum(current(marks.get((k, question)), a) for k, a in answers.items()),
                  **context)
