"""What keeps the marking application to the people it was started for, as Jupyter does.

- **A token in the URL**: ``attnlab mark`` prints ``http://127.0.0.1:PORT/?token=...`` (a random
  ``secrets.token_urlsafe``). A request that carries it gets two cookies (``HttpOnly``, ``SameSite=Strict``): the
  session (the token again, so the links need not carry it) and a random CSRF value. Any request with neither a
  right token nor the session cookie is refused (403).
- **CSRF**: every form carries the CSRF value in a hidden ``csrf`` field; a POST whose field is missing or differs
  from the cookie is refused (403): another site can neither read the cookie nor send it (``SameSite=Strict``).
- **Headers**: a Content-Security-Policy with no source but this server (no remote image, no inline script
  except the page's own, by nonce), no framing, no referrer (the token never leaves in a ``Referer``).
"""

from __future__ import annotations

import secrets

from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.responses import PlainTextResponse

SESSION_COOKIE = "attnlab_mark_session"
CSRF_COOKIE = "attnlab_mark_csrf"
CSRF_FIELD = "csrf"
REFUSED_TOKEN = "refused: open the URL `attnlab mark` printed (it carries the token)"
REFUSED_CSRF = "refused: the form's CSRF field is missing or wrong; reload the page and submit it again"


def new_token() -> str:
    return secrets.token_urlsafe(24)


def _same(a: str | None, b: str) -> bool:
    return bool(a) and secrets.compare_digest(a.encode(), b.encode())


class Guard:
    """ASGI middleware: the token check, the cookies, the security headers (``scope["state"]["nonce"]`` for the
    page's script)."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        by_url = _same(request.query_params.get("token"), self.token)
        if not (by_url or _same(request.cookies.get(SESSION_COOKIE), self.token)):
            return await PlainTextResponse(REFUSED_TOKEN, status_code=403)(scope, receive, send)
        csrf = request.cookies.get(CSRF_COOKIE) or new_token()
        nonce = new_token()
        scope.setdefault("state", {}).update(csrf=csrf, nonce=nonce)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = (
                    f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; img-src 'none'; "
                    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
                headers["X-Frame-Options"] = "DENY"
                headers["Referrer-Policy"] = "no-referrer"
                headers["X-Content-Type-Options"] = "nosniff"
                if by_url or CSRF_COOKIE not in request.cookies:
                    for name, value in ((SESSION_COOKIE, self.token), (CSRF_COOKIE, csrf)):
                        headers.append("Set-Cookie", f"{name}={value}; Path=/; HttpOnly; SameSite=Strict")
            await send(message)

        return await self.app(scope, receive, send_with_headers)


async def checked_form(request: Request):
    """The POSTed form, once its CSRF field matches the cookie; else ``PermissionError`` (the app answers 403)."""
    form = await request.form()
    if not _same(str(form.get(CSRF_FIELD) or ""), request.cookies.get(CSRF_COOKIE) or "\0"):
        raise PermissionError(REFUSED_CSRF)
    return form
