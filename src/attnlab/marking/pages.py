"""The marking pages about one question or one student: a written question marked answer by answer across students
(``question_page``; its rubric edited in place, ``edit_rubric``), its answer groups (``groups_page``,
``mark_empty_answers``), the students with their scores (``students_page``) and one student's questions with a score
change for any of them (``student_page``, ``change_score``). A write that another marker beat is answered 409 with
both edits shown; a bad value 400 with the reason; a form without its CSRF field 403."""

from __future__ import annotations

from types import SimpleNamespace

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from attnlab.grading.outputs.gradebook import format_score
from attnlab.grading.outputs.safe_text import clip
from attnlab.marking import security
from attnlab.marking.groups import answer_groups, mark_empty, mark_group
from attnlab.marking.render import answer_html
from attnlab.marking.store import AWAITING, WRITTEN, Effective, MarkConflict, MarkingError
from attnlab.marking.views import Marking, answer_id, back_to, current, marking_of, need_marker, refusal

NOT_FOUND = PlainTextResponse("no such page: go back to the labs page", status_code=404)


def _written_keys(m: Marking, lab: str, question: str) -> list[str]:
    """The keys with a written answer to ``question``, in the markers' order (by alias)."""
    names = m.names(lab)
    return sorted({a.key for a in m.store.answers(lab, question) if a.kind == WRITTEN}, key=names.alias)


def _score_text(e: Effective) -> str:
    if e.status == AWAITING:
        return f"awaiting marking ({format_score(e.max_score)} points)"
    return f"{format_score(e.score)} / {format_score(e.max_score)} ({e.status})"


def _same_answer(form, key: str) -> None:
    if form.get("answer") != answer_id(key):
        raise MarkingError("the list of answers changed since this page was loaded (a new submission graded): "
                           "nothing was saved; reload the page")


def _version(form, field: str = "version") -> int:
    try:
        return int(str(form.get(field) or "0"))
    except ValueError:
        raise MarkingError(f"the form's {field} {form.get(field)!r} is not a whole number: reload the page") from None


# -- one question, answer by answer ----------------------------------------------------------------------------
async def question_page(request: Request) -> Response:
    m = marking_of(request)
    lab, question, n = request.path_params["lab"], request.path_params["question"], request.path_params["n"]
    keys = _written_keys(m, lab, question)
    if not 1 <= n <= len(keys):
        return NOT_FOUND
    if request.method != "POST":
        saved = "Saved." if request.query_params.get("saved") else None
        return _question(m, request, lab, question, keys, n, message=saved)
    try:
        form = await security.checked_form(request)
    except PermissionError as exc:
        return refusal(exc)
    try:
        _same_answer(form, keys[n - 1])
        m.store.save_mark(lab, keys[n - 1], question, items=form.getlist("item"),
                          adjustment=form.get("adjustment") or 0, comment=str(form.get("comment") or ""),
                          marker=need_marker(request), version=_version(form))
    except MarkConflict as exc:
        yours = SimpleNamespace(items=form.getlist("item"), adjustment=form.get("adjustment"),
                                comment=form.get("comment"))
        return _question(m, request, lab, question, keys, n, status=409, conflict=_conflict(str(exc), exc.current,
                                                                                              yours))
    except MarkingError as exc:
        return _question(m, request, lab, question, keys, n, status=400, message=str(exc), message_class="error")
    return back_to(f"/l/{lab}/q/{question}/{min(n + 1, len(keys))}?saved=1")


def _conflict(text: str, current, yours) -> SimpleNamespace:
    return SimpleNamespace(text=text, current=current, yours=yours,
                           current_items=", ".join(current.items) if current else "", yours_items=", ".join(yours.items))


def _question(m: Marking, request: Request, lab: str, question: str, keys: list[str], n: int, *, status: int = 200,
              **context) -> Response:
    key = keys[n - 1]
    answers = {a.key: a for a in m.store.answers(lab, question)}
    marks = m.store.marks(lab, question)
    mark = marks.get((key, question))
    if mark is not None and not mark.marks(answers[key]) and "message" not in context:
        context |= {"message": f"{mark.marker} marked an earlier submission's answer; this one differs: mark it "
                               "again (their mark is in the form)", "message_class": "conflict"}
    effective = m.store.effective(lab)[key][question]
    return m.page(request, "question.html", status, lab=lab, question=question, n=n, total=len(keys), id=answer_id(key),
                  marked=sum(current(marks.get((k, question)), answers[k]) for k in keys), who=m.who(request, lab)(key),
                  answer_html=answer_html(answers[key].text), rubric=m.store.rubric(lab, question),
                  max_score=effective.max_score,
                  applied=set(mark.items) if mark else set(), adjustment=mark.adjustment if mark else 0,
                  comment=mark.comment if mark else "", version=mark.version if mark else 0,
                  score_text=_score_text(effective), guide=[answer_html(t) for t in m.guides.get((lab, question), ())],
                  **context)


async def edit_rubric(request: Request) -> Response:
    """Set an item's points (``item``, ``points``, ``expected``: the points the marker saw) or add one
    (``criterion``, ``points``); back to answer ``back``."""
    m = marking_of(request)
    lab, question = request.path_params["lab"], request.path_params["question"]
    try:
        form = await security.checked_form(request)
    except PermissionError as exc:
        return refusal(exc)
    keys = _written_keys(m, lab, question)
    n = min(max(_version(form, "back"), 1), len(keys)) if keys else 0
    try:
        if form.get("item"):
            m.store.set_item_points(lab, question, str(form["item"]), form.get("points"),
                                    marker=need_marker(request),
                                    expected=float(form["expected"]) if form.get("expected") else None)
        else:
            m.store.add_rubric_item(lab, question, str(form.get("criterion") or ""), form.get("points"),
                                    marker=need_marker(request))
    except ValueError as exc:  # MarkingError included; a bad expected value
        if not keys:
            return PlainTextResponse(str(exc), status_code=400)
        return _question(m, request, lab, question, keys, n, status=409 if isinstance(exc, MarkConflict) else 400,
                         message=str(exc), message_class="error")
    return back_to(f"/l/{lab}/q/{question}/{n}?saved=1") if keys else NOT_FOUND


# -- answer groups ------------------------------------------------------------------------------------------
async def groups_page(request: Request) -> Response:
    m = marking_of(request)
    lab, question = request.path_params["lab"], request.path_params["question"]
    keys = _written_keys(m, lab, question)
    if not keys:
        return NOT_FOUND
    if request.method != "POST":
        return _groups(m, request, lab, question, keys)
    try:
        form = await security.checked_form(request)
        by_id, seen = {answer_id(k): k for k in keys}, {}
        for member in form.getlist("member"):
            member_id, _, version = str(member).partition(":")
            if member_id not in by_id:
                raise MarkingError("an answer of this group is no longer in the gradebook: nothing was saved; reload")
            seen[by_id[member_id]] = int(version)
        saved, conflicts = mark_group(m.store, lab, question, seen, form.getlist("item"), marker=need_marker(request))
    except PermissionError as exc:
        return refusal(exc)
    except ValueError as exc:  # MarkingError included: a bad item, no marker, a member gone
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
    try:
        await security.checked_form(request)
        done = mark_empty(m.store, lab, question, marker=need_marker(request))
    except PermissionError as exc:
        return refusal(exc)
    except MarkingError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    return _groups(m, request, lab, question, _written_keys(m, lab, question),
                   message=f"Marked {done} empty answers 0.")


def _groups(m: Marking, request: Request, lab: str, question: str, keys: list[str], *, status: int = 200,
            **context) -> Response:
    answers = {a.key: a for a in m.store.answers(lab, question) if a.kind == WRITTEN}
    texts = {k: a.text for k, a in answers.items()}
    marks = m.store.marks(lab, question)
    position = {k: i for i, k in enumerate(keys, start=1)}
    groups, who = [], m.who(request, lab)
    for g in answer_groups(texts):
        members = [SimpleNamespace(n=position[k], id=answer_id(k), who=who(k), snippet=clip(texts[k], 160),
                                   status="marked" if current(marks.get((k, question)), answers[k]) else AWAITING,
                                   version=marks[(k, question)].version if (k, question) in marks else 0)
                   for k in g.keys]
        groups.append(SimpleNamespace(members=members, terms=g.terms, empty=g.empty))
    return m.page(request, "groups.html", status, lab=lab, question=question, groups=groups,
                  rubric=m.store.rubric(lab, question), total=len(keys),
                  marked=sum(current(marks.get((k, question)), a) for k, a in answers.items()), **context)


# -- students and score changes -------------------------------------------------------------------------------
async def students_page(request: Request) -> Response:
    m = marking_of(request)
    lab = request.path_params["lab"]
    scores = m.store.effective(lab)
    who = m.who(request, lab)
    students = [SimpleNamespace(n=n, who=who(key),
                                score=sum(e.score for e in scores[key].values() if e.score is not None),
                                max_score=sum(e.max_score for e in scores[key].values()),
                                awaiting=sum(e.max_score for e in scores[key].values() if e.status == AWAITING))
                for n, key in enumerate(m.keys(lab), start=1)]
    return m.page(request, "students.html", lab=lab, students=students)


async def student_page(request: Request) -> Response:
    m = marking_of(request)
    keys = m.keys(request.path_params["lab"])
    if not 1 <= request.path_params["n"] <= len(keys):
        return NOT_FOUND
    return _student(m, request, request.path_params["lab"], keys, request.path_params["n"],
                    message="Saved." if request.query_params.get("saved") else None)


async def change_score(request: Request) -> Response:
    m = marking_of(request)
    lab, n = request.path_params["lab"], request.path_params["n"]
    keys = m.keys(lab)
    if not 1 <= n <= len(keys):
        return NOT_FOUND
    try:
        form = await security.checked_form(request)
    except PermissionError as exc:
        return refusal(exc)
    try:
        _same_answer(form, keys[n - 1])
        m.store.change_score(lab, keys[n - 1], str(form.get("question") or ""), form.get("score"),
                             reason=str(form.get("reason") or ""), marker=need_marker(request), version=_version(form))
    except MarkingError as exc:
        return _student(m, request, lab, keys, n, status=409 if isinstance(exc, MarkConflict) else 400,
                        message=str(exc), message_class="error")
    return back_to(f"/l/{lab}/s/{n}?saved=1")


def _student(m: Marking, request: Request, lab: str, keys: list[str], n: int, *, status: int = 200,
             **context) -> Response:
    key = keys[n - 1]
    changes = m.store.changes(lab)
    questions = [SimpleNamespace(name=q, score_text=_score_text(e), status=e.status, reason=e.reason,
                                 version=changes[(key, q)].version if (key, q) in changes else 0)
                 for q, e in m.store.effective(lab)[key].items()]
    return m.page(request, "student.html", status, lab=lab, n=n, id=answer_id(key), who=m.who(request, lab)(key),
                  questions=questions, **context)
