"""The marking pages about one question or one student: a written question marked answer by answer across students
(``question_page``; its rubric edited in place, ``edit_rubric``; its answer groups are ``group_pages``), the
students with their scores (``students_page``) and one student's questions with a score change for any of them
(``student_page``, ``change_score``). A write that another marker beat is answered 409 with both edits shown; a bad
value 400 with the reason; a form without its CSRF field 403."""

from __future__ import annotations

import re
from types import SimpleNamespace

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from attnlab.grading.core.written_answers import Question
from attnlab.marking import security
from attnlab.marking.own_outputs import own_outputs
from attnlab.marking.records import AWAITING, WRITTEN, Effective, MarkConflict, MarkingError
from attnlab.marking.render import answer_html
from attnlab.marking.views import Marking, answer_id, back_to, current, marking_of, need_marker, remember, whole_number
from attnlab.records.score_text import format_score

NOT_FOUND = PlainTextResponse("no such page: go back to the labs page", status_code=404)


def written_keys(m: Marking, lab: str, question: str) -> list[str]:
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


# -- one question, answer by answer ----------------------------------------------------------------------------
async def question_page(request: Request) -> Response:
    m = marking_of(request)
    lab, question, n = request.path_params["lab"], request.path_params["question"], request.path_params["n"]
    keys = written_keys(m, lab, question)
    if not 1 <= n <= len(keys):
        return NOT_FOUND
    if request.method != "POST":
        saved = "Saved." if request.query_params.get("saved") else None
        return _question(m, request, lab, question, keys, n, message=saved)
    form = await security.checked_form(request)
    try:
        _same_answer(form, keys[n - 1])
        before, version = m.store.marks(lab, question).get((keys[n - 1], question)), whole_number(form.get("version"))
        new = m.store.save_mark(lab, keys[n - 1], question, items=form.getlist("item"),
                                adjustment=form.get("adjustment") or 0, comment=str(form.get("comment") or ""),
                                marker=need_marker(request), version=version)
        remember(request, f"the mark of answer {n}", lab, question,
                 [(keys[n - 1], before if before and before.version == version else None, new.version)])
    except MarkConflict as exc:
        yours = SimpleNamespace(items=form.getlist("item"), adjustment=form.get("adjustment"),
                                comment=form.get("comment"))
        return _question(m, request, lab, question, keys, n, status=409, conflict=_conflict(str(exc), exc.current,
                                                                                              yours))
    except MarkingError as exc:
        return _question(m, request, lab, question, keys, n, status=400, message=str(exc), message_class="error")
    go = str(form.get("go") or "")
    if re.fullmatch(rf"/l/{re.escape(lab)}/q/{re.escape(question)}/(\d+(\?unmarked=1)?|search)", go):  # moving on
        return back_to(go + ("&" if "?" in go else "?") + "saved=1")
    if form.get("unmarked") == "1":  # only the unmarked ones: on to the next of them
        after = next_unmarked(unmarked_positions(m, lab, question, keys), n)
        return back_to(f"/l/{lab}/q/{question}/{after or n}?saved=1&unmarked=1")
    return back_to(f"/l/{lab}/q/{question}/{min(n + 1, len(keys))}?saved=1")


def unmarked_positions(m: Marking, lab: str, question: str, keys: list[str]) -> list[int]:
    """The places (1-based, in the markers' order) of the answers with no mark of their own as they are now."""
    answers = {a.key: a for a in m.store.answers(lab, question)}
    marks = m.store.marks(lab, question)
    return [i for i, k in enumerate(keys, start=1) if not current(marks.get((k, question)), answers[k])]


def next_unmarked(unmarked: list[int], n: int) -> int | None:
    """The first unmarked place after ``n``, wrapping round to the start; None when no other is unmarked."""
    return next((i for i in unmarked if i > n), next((i for i in unmarked if i < n), None))


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
    unmarked = [i for i, k in enumerate(keys, start=1) if not current(marks.get((k, question)), answers[k])]
    only = request.query_params.get("unmarked") == "1" or context.pop("only_unmarked", False)
    steps = SimpleNamespace(
        only=only, next_unmarked=next_unmarked(unmarked, n),
        prev=max((i for i in unmarked if i < n), default=None) if only else (n - 1 if n > 1 else None),
        next=min((i for i in unmarked if i > n), default=None) if only else (n + 1 if n < len(keys) else None))
    return m.page(request, "question.html", status, lab=lab, question=question, n=n, total=len(keys), id=answer_id(key),
                  steps=steps,
                  marked=sum(current(marks.get((k, question)), answers[k]) for k in keys), who=m.who(request, lab)(key),
                  answer_html=answer_html(answers[key].text), rubric=m.store.rubric(lab, question),
                  max_score=effective.max_score,
                  applied=set(mark.items) if mark else set(), adjustment=mark.adjustment if mark else 0,
                  comment=mark.comment if mark else "", version=mark.version if mark else 0,
                  score_text=_score_text(effective), note=effective.note,
                  notes=answers[key].notes,
                  guide=[answer_html(t) for t in m.guides.get((lab, question), ())],
                  outputs=own_outputs(m.store.gradebook, lab, key,
                                      Question(question, 0.0, m.guides.get((lab, question), ("", ""))[0])),
                  **context)


async def edit_rubric(request: Request) -> Response:
    """Set an item's points (``item``, ``points``, ``expected``: the points the marker saw) or add one
    (``criterion``, ``points``); back to answer ``back``."""
    m = marking_of(request)
    lab, question = request.path_params["lab"], request.path_params["question"]
    form = await security.checked_form(request)
    keys = written_keys(m, lab, question)
    if not keys:  # no such lab or question: nothing is written
        return NOT_FOUND
    try:
        n = min(max(whole_number(form.get("back"), "back"), 1), len(keys))
        if form.get("item"):
            item = str(form["item"])
            was = {i.id: i.points for i in m.store.rubric(lab, question)}.get(item)
            new = m.store.set_item_points(lab, question, item, form.get("points"), marker=need_marker(request),
                                          expected=float(form["expected"]) if form.get("expected") else None)
            remember(request, f"the points of {item}", lab, question, [(None, (item, was), new.points)])
        else:
            added = m.store.add_rubric_item(lab, question, str(form.get("criterion") or ""), form.get("points"),
                                            marker=need_marker(request))
            remember(request, f"adding {added.id}", lab, question, [(None, (added.id, None), added.points)])
    except ValueError as exc:  # MarkingError included; a bad expected value or back
        n = min(max(whole_number(form.get("back"), otherwise=1), 1), len(keys))
        return _question(m, request, lab, question, keys, n, status=409 if isinstance(exc, MarkConflict) else 400,
                         message=str(exc), message_class="error")
    return back_to(f"/l/{lab}/q/{question}/{n}?saved=1")


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
    form = await security.checked_form(request)
    try:
        _same_answer(form, keys[n - 1])
        m.store.change_score(lab, keys[n - 1], str(form.get("question") or ""), form.get("score"),
                             reason=str(form.get("reason") or ""), marker=need_marker(request),
                             version=whole_number(form.get("version")))
    except MarkingError as exc:
        return _student(m, request, lab, keys, n, status=409 if isinstance(exc, MarkConflict) else 400,
                        message=str(exc), message_class="error")
    return back_to(f"/l/{lab}/s/{n}?saved=1")


def _student(m: Marking, request: Request, lab: str, keys: list[str], n: int, *, status: int = 200,
             **context) -> Response:
    key = keys[n - 1]
    changes = m.store.changes(lab)
    questions = [SimpleNamespace(name=q, score_text=_score_text(e), status=e.status, reason=e.reason, note=e.note,
                                 version=changes[(key, q)].version if (key, q) in changes else 0)
                 for q, e in m.store.effective(lab)[key].items()]
    return m.page(request, "student.html", status, lab=lab, n=n, id=answer_id(key), who=m.who(request, lab)(key),
                  questions=questions, **context)
