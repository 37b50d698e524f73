"""What keeps the marking application to the people it was started for, on a host shared with other users' servers
(a JupyterHub: any user's page on another 127.0.0.1 port is *same site* to a browser, and cookies ignore ports).

- **Tokens, then a server-side session**: ``attnlab mark`` prints ``http://127.0.0.1:PORT/?token=...`` (the
  instructor's token; each marker has a token of their own, ``marking.markers``). A request that carries a right
  token gets a new random session id in a cookie (``HttpOnly``, ``SameSite=Strict``) and is redirected at once to the
  same address without the token (it leaves the address bar and the history). The session, held in this process
  only, names the marker and holds the CSRF value: nothing a cookie says is adopted but the session id, which a
  neighbour can neither read nor guess. The cookie's name is new for each server, so two servers on one host never
  overwrite each other's session.
- **This server exactly**: a request whose ``Host`` is not this server's (``hosts``: DNS rebinding) is refused; a
  POST whose ``Origin`` is not ``http://`` + that host (scheme, host *and* port) or whose ``Sec-Fetch-Site`` is not
  ``same-origin`` is refused before it is read; and every form carries the session's CSRF value.
- **Bounded requests**: a POST needs a ``Content-Length`` of at most ``MAX_BODY_BYTES``, and a form at most
  ``MAX_FIELDS`` fields.
- **What it cannot stop**: a browser sends this server's session cookie to every port of the host, so a neighbour
  whose page the marker opens in the same browser receives the session id in that request and can replay it from
  outside a browser until this server stops. Markers should use the browser (or profile) for marking only, as
  with Jupyter; a session lives as long as the server.
- **Headers**: a Content-Security-Policy with no source but this server (no remote image, no inline script
  except the page's own, by nonce), no framing, no referrer to another origin (none carries a token anyway).
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse

CSRF_FIELD = "csrf"
MAX_BODY_BYTES = 1 << 20  # a form: comments and criteria are 5,000 characters; a group of 1,000 members ~20 KB
MAX_FIELDS = 4000  # a group apply names each member and each item
MAX_SESSIONS = 1000  # the oldest session is forgotten beyond this (its marker opens their URL again)
SAFE_METHODS = frozenset({"GET", "HEAD"})
REFUSED_TOKEN = "refused: open the URL `attnlab mark` printed, or your own marker URL (it carries the token)"
REFUSED_CSRF = "refused: the form's CSRF field is missing or wrong; reload the page and submit it again"
REFUSED_HOST = "refused: this server answers only to the address `attnlab mark` printed (Host {host!r})"
REFUSED_ORIGIN = "refused: a form from another site or port ({origin}) cannot change marks here"
REFUSED_LENGTH = "refused: a form needs a Content-Length header"
REFUSED_SIZE = f"refused: a form is at most {MAX_BODY_BYTES:,} bytes"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _same(a: str | None, b: str) -> bool:
    return bool(a) and secrets.compare_digest(a.encode(), b.encode())


@dataclass
class Session:
    marker: str  # the name the audit log records, from the token (never typed in)
    csrf: str
    show_names: bool = False  # students' keys instead of their aliases
    undo: tuple | None = None  # the marker's last marking action: (what, lab, question, [(key, before, version)])


def _refuse(text: str, status: int = 403) -> PlainTextResponse:
    return PlainTextResponse(text, status_code=status)


class Guard:
    """ASGI middleware: the Host allow-list, the token or session, the origin and size checks of a POST, the
    security headers; ``scope["state"]`` gets the ``session``, its ``csrf`` and a ``nonce`` for the pages.

    ``login(token)``: the marker a token belongs to, or None; ``hosts``: this server's ``Host`` values
    (``127.0.0.1:8888``)."""

    def __init__(self, app, login: Callable[[str], str | None], hosts: Iterable[str]):
        self.app, self.login, self.hosts = app, login, frozenset(h.lower() for h in hosts)
        self.cookie = f"attnlab_mark_{secrets.token_hex(6)}"  # one name per server: neighbours never collide
        self.sessions: OrderedDict[str, Session] = OrderedDict()

    def _session(self, marker: str) -> str:
        sid = new_token()
        self.sessions[sid] = Session(marker, new_token())
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)
        return sid

    def _refusal(self, request: Request):
        """Why ``request`` is refused before anything reads it, or None."""
        host = request.headers.get("host", "").lower()
        if host not in self.hosts:
            return _refuse(REFUSED_HOST.format(host=host), 421)
        if request.method in SAFE_METHODS:
            return None
        origin, fetch_site = request.headers.get("origin"), request.headers.get("sec-fetch-site")
        if (origin is not None and origin.lower() != f"http://{host}") or fetch_site not in (None, "same-origin"):
            return _refuse(REFUSED_ORIGIN.format(origin=origin or fetch_site))
        length = request.headers.get("content-length")
        if length is None or not length.isdigit():
            return _refuse(REFUSED_LENGTH, 411)
        return _refuse(REFUSED_SIZE, 413) if int(length) > MAX_BODY_BYTES else None

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":  # no websocket here
            return await send({"type": "websocket.close", "code": 1008})
        request = Request(scope)
        refused = self._refusal(request)
        if refused is None and "token" in request.query_params:
            refused = self._sign_in(request)
        if refused is not None:
            return await self._with_headers(refused, "")(scope, receive, send)
        session = self.sessions.get(request.cookies.get(self.cookie, ""))
        if session is None:
            return await self._with_headers(_refuse(REFUSED_TOKEN), "")(scope, receive, send)
        nonce = new_token()
        scope.setdefault("state", {}).update(csrf=session.csrf, nonce=nonce, session=session)
        return await self.app(scope, receive, self._sender(send, nonce))

    def _sign_in(self, request: Request):
        """A right token: a new session and a redirect to the same address without the token; a wrong one: 403."""
        marker = self.login(request.query_params["token"]) if request.method in SAFE_METHODS else None
        if marker is None:
            return _refuse(REFUSED_TOKEN)
        rest = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "token"])
        path = "/" + request.url.path.lstrip("/\\")  # never //host: a redirect stays on this server
        response = RedirectResponse(path + (f"?{rest}" if rest else ""), status_code=303)
        response.headers.append("Set-Cookie", f"{self.cookie}={self._session(marker)}; Path=/; HttpOnly; "
                                              "SameSite=Strict")
        return response

    def _with_headers(self, response, nonce: str):
        async def app(scope, receive, send):
            await response(scope, receive, self._sender(send, nonce))
        return app

    @staticmethod
    def _sender(send, nonce: str):
        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                script = f"'nonce-{nonce}'" if nonce else "'none'"
                headers["Content-Security-Policy"] = (
                    f"default-src 'none'; script-src {script}; style-src 'unsafe-inline'; img-src data:; "
                    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
                headers["X-Frame-Options"] = "DENY"
                headers["Referrer-Policy"] = "same-origin"  # no-referrer would send this server's own forms as Origin: null
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Cache-Control"] = "no-store"
            await send(message)
        return send_with_headers


class Refused(PermissionError):
    """A POST refused before anything is read from it or written (the app answers 403 with the text: ``refused``)."""


async def checked_form(request: Request):
    """The POSTed form, once its CSRF field matches the session's; else ``Refused`` (the app answers 403 with
    ``refused``, for every route at once). The origin, session and size checks ran before (``Guard``)."""
    form = await request.form(max_files=0, max_fields=MAX_FIELDS)
    if not _same(str(form.get(CSRF_FIELD) or ""), request.scope["state"]["csrf"]):
        raise Refused(REFUSED_CSRF)
    return form


async def refused(request: Request, exc: Refused) -> PlainTextResponse:
    """The app's answer to ``Refused`` (registered once in ``app.create_app``): 403 with the reason."""
    return _refuse(str(exc))
