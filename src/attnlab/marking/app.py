"""The marking web application (Starlette, server-rendered Jinja2 pages): ``create_app(gradebook, token)``, the
routes to the pages of ``views`` and ``pages``, behind ``security.Guard`` (the token, CSRF, the headers)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.routing import Route

from attnlab.marking import group_pages, markers, pages, regrade_pages, search_pages, security, views
from attnlab.marking.store import MarkStore
from attnlab.records.safe_text import escape_controls
from attnlab.records.score_text import format_score

TEMPLATES = Path(__file__).parent / "templates"


def create_app(gradebook, token: str, guides: dict | None = None, *, hosts, roster=None) -> security.Guard:
    """The application on ``gradebook`` (an open ``Gradebook``), guarded by ``token`` (the instructor's) and the
    markers' own tokens (``security.Guard``, ``markers.login``), answering to ``hosts`` only (``127.0.0.1:8888``);
    ``guides``: ``{(lab, question): (prompt, reference answer)}`` shown to markers (``serve.seed_rubrics``);
    ``roster``: the course's, to find the student a regrade request names (``regrade_csv.find_key``)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))
    env.filters["num"] = lambda x: "" if x is None else format_score(x)
    env.filters["visible"] = escape_controls  # text markers typed (a criterion, a comment), shown as it is
    routes = [
        Route("/", views.index),
        Route("/names", views.toggle_names, methods=["POST"]), Route("/undo", views.undo, methods=["POST"]),
        Route("/audit", views.audit_page), Route("/audit.csv", views.audit_download),
        Route("/l/{lab}/q/{question}/groups", group_pages.groups_page, methods=["GET", "POST"]),
        Route("/l/{lab}/q/{question}/empty", group_pages.mark_empty_answers, methods=["POST"]),
        Route("/l/{lab}/q/{question}/search", search_pages.search_page),
        Route("/l/{lab}/q/{question}/rubric", pages.edit_rubric, methods=["POST"]),
        Route("/l/{lab}/q/{question}/{n:int}", pages.question_page, methods=["GET", "POST"]),
        Route("/l/{lab}/students", pages.students_page), Route("/l/{lab}/s/{n:int}", pages.student_page),
        Route("/l/{lab}/s/{n:int}/change", pages.change_score, methods=["POST"]),
        *regrade_pages.ROUTES,
    ]
    app = Starlette(routes=routes, exception_handlers={security.Refused: security.refused})  # a form refused: 403
    store = MarkStore(gradebook)
    app.state.marking = views.Marking(store, env, guides or {})
    app.state.roster = roster
    return security.Guard(app, markers.login(store, token), hosts)

