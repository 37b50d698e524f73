"""Search a written question's answers (``search_page``): by words in the answer and by student (the name the marker
reads: an alias, or the file name when names are shown), optionally only the unmarked ones; each match listed with
its place, whether it is marked and the text around the first match, linking to the answer to mark. A GET form:
keyboard-only, and the address can be kept."""

from __future__ import annotations

from types import SimpleNamespace

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from attnlab.marking.pages import NOT_FOUND, written_keys
from attnlab.marking.views import Marking, current, marking_of
from attnlab.records.safe_text import escape_controls

MAX_QUERY_CHARS = 200
SNIPPET_CHARS = 90  # each side of the match


async def search_page(request: Request) -> Response:
    m = marking_of(request)
    lab, question = request.path_params["lab"], request.path_params["question"]
    keys = await run_in_threadpool(written_keys, m, lab, question)
    if not keys:
        return NOT_FOUND
    return await run_in_threadpool(_search, m, request, lab, question, keys)


def snippet(text: str, words: str) -> str:
    """The text around the first match of ``words`` (case-insensitive), or the answer's start when none."""
    at = text.casefold().find(words.casefold()) if words else -1
    start = max(at - SNIPPET_CHARS, 0) if at >= 0 else 0
    end = at + len(words) + SNIPPET_CHARS if at >= 0 else 2 * SNIPPET_CHARS
    return ("…" if start else "") + " ".join(text[start:end].split()) + ("…" if end < len(text) else "")


def _search(m: Marking, request: Request, lab: str, question: str, keys: list[str]) -> Response:
    params = request.query_params
    words = " ".join(str(params.get("q", "")).split())[:MAX_QUERY_CHARS]
    student = str(params.get("student", "")).strip()[:MAX_QUERY_CHARS]
    only = params.get("unmarked") == "1"
    answers = {a.key: a for a in m.store.answers(lab, question)}
    marks = m.store.marks(lab, question)
    who = m.who(request, lab)
    found = []
    for n, key in enumerate(keys, start=1):
        text, name, marked = answers[key].text, who(key), current(marks.get((key, question)), answers[key])
        if words and words.casefold() not in " ".join(text.split()).casefold():
            continue
        if student and student.casefold() not in name.casefold() or only and marked:
            continue
        found.append(SimpleNamespace(n=n, who=name, marked=marked,
                                     snippet=escape_controls(snippet(" ".join(text.split()), words)) or "(empty)"))
    return m.page(request, "search.html", lab=lab, question=question, words=words, student=student, only=only,
                  found=found, total=len(keys), searched=bool(words or student or only))
