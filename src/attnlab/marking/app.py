"""The marking web application (Starlette, server-rendered Jinja2 pages): ``create_app(gradebook, token)``, the
routes to the pages of ``views`` and ``pages``, behind ``security.Guard`` (the token, CSRF, the headers)."""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.routing import Route

from attnlab.grading.outputs.gradebook import format_score
from attnlab.marking import pages, security, views
from attnlab.marking.store import MarkStore

TEMPLATES = Path(__file__).parent / "templates"


def create_app(gradebook, token: str, guides: dict | None = None) -> security.Guard:
    """The application on ``gradebook`` (an open ``Gradebook``), guarded by ``token`` (``security.Guard``);
    ``guides``: ``{(lab, question): (prompt, reference answer)}`` shown to markers (``serve.seed_rubrics``)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))
    env.filters["num"] = lambda x: "" if x is None else format_score(x)
    routes = [
        Route("/", views.index), Route("/name", views.set_name, methods=["POST"]),
        Route("/names", views.toggle_names, methods=["POST"]),
        Route("/audit", views.audit_page), Route("/audit.csv", views.audit_download),
        Route("/l/{lab}/q/{question}/groups", pages.groups_page, methods=["GET", "POST"]),
        Route("/l/{lab}/q/{question}/empty", pages.mark_empty_answers, methods=["POST"]),
        Route("/l/{lab}/q/{question}/rubric", pages.edit_rubric, methods=["POST"]),
        Route("/l/{lab}/q/{question}/{n:int}", pages.question_page, methods=["GET", "POST"]),
        Route("/l/{lab}/students", pages.students_page), Route("/l/{lab}/s/{n:int}", pages.student_page),
        Route("/l/{lab}/s/{n:int}/change", pages.change_score, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.state.marking = views.Marking(MarkStore(gradebook), env, guides or {})
    return security.Guard(app, token)

