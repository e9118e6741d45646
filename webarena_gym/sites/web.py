"""Web plumbing shared by the embedded apps: server state, sessions, forms, paging, rendering, error pages.

Each app is a Starlette application whose handlers are ``async`` and run SQLite synchronously on the event
loop: all three apps of a server process share one loop, so every request is atomic with respect to the others
and to :meth:`ServerState.reset`. Sessions are rows of the site's database (cookie = random token), so a reset
clears them with the rest of the state. Cookie names carry the port, so sites of several instances never
collide in one browser even though cookies ignore ports.

:class:`RequestGuard`, in front of every app, refuses what a real site refuses: a ``Host`` that is not a
loopback name (DNS rebinding), a body over :data:`MAX_BODY_BYTES` (413) and a cross-site state change (403,
see :func:`cross_site_reason`)."""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.datastructures import Headers, UploadFile
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from webarena_gym.sites.db import connect
from webarena_gym.sites.shop.queries import REVIEW_STATUS_LABELS, STATUS_LABELS, money

log = logging.getLogger("webarena_gym.sites")
COMMON_DIR = Path(__file__).resolve().parent / "common"
CONTROL_PREFIX = "/__esopt"
TOKEN_HEADER = "x-esopt-token"
MAX_HEAD_BYTES = 32 * 1024
"""Largest request head (request line and headers) the sites read (431 beyond)."""
MAX_BODY_BYTES = 1024 * 1024
"""Largest request body the sites read (413 beyond); the longest form, a 40,000-character post, is far
below."""
DRAIN_BYTES = 16 * 1024 * 1024
"""How much of a refused body is still read (and dropped) so that the client gets the answer, not a reset."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]"})
CROSS_SITE = "Cross-site request refused"


class ServerState:
    """The live databases of one server process and in-memory pristine copies to restore them from."""

    def __init__(self, live: dict[str, Path], pristine: dict[str, Path], token: str) -> None:
        self.token = token
        self.pristine: dict[str, sqlite3.Connection] = {}
        self.conns: dict[str, sqlite3.Connection] = {}
        for name, source in pristine.items():
            memory = sqlite3.connect(":memory:", check_same_thread=False)
            disk = connect(source, readonly=True)
            try:
                disk.backup(memory)
            finally:
                disk.close()
            self.pristine[name] = memory
            self.conns[name] = connect(live[name])
        self.reset()

    def reset(self) -> float:
        """Overwrite every live database with its pristine copy (sessions and clock included); seconds
        taken."""
        start = time.perf_counter()
        for name, conn in self.conns.items():
            if conn.in_transaction:
                conn.rollback()
            self.pristine[name].backup(conn)
        return time.perf_counter() - start

    def close(self) -> None:
        """Close every connection."""
        for conn in [*self.conns.values(), *self.pristine.values()]:
            conn.close()


@dataclass
class SiteConfig:
    """What distinguishes one embedded app from another."""

    name: str
    """WebArena site key: ``shopping``, ``shopping_admin`` or ``reddit``."""
    db: str
    """Logical database the app uses (``magento`` or ``postmill``)."""
    cookie: str
    """Name of the session cookie."""
    template_dir: Path
    """The app's own templates (searched before :data:`COMMON_DIR`)."""
    login_url: str
    """Where :class:`LoginRequired` redirects (``?referer=`` is appended)."""
    base_context: Callable[[Request], dict[str, Any]] = field(default=lambda request: {})
    """Extra template variables every page of the app needs (menus, the user's name)."""
    templates: jinja2.Environment = field(init=False)

    def __post_init__(self) -> None:
        loader = jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(self.template_dir), jinja2.FileSystemLoader(COMMON_DIR)]
        )
        self.templates = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
        self.templates.tests["web_url"] = is_web_url
        self.templates.filters["money"] = money
        self.templates.filters["status_label"] = lambda s: STATUS_LABELS.get(s, s)
        self.templates.filters["review_status_label"] = lambda s: REVIEW_STATUS_LABELS.get(s, s)


_Choice = TypeVar("_Choice", bound=str)


class LoginRequired(Exception):
    """Raised by :func:`require_user`; answered with a redirect to the site's login page."""


def site(request: Request) -> SiteConfig:
    """The app's :class:`SiteConfig`."""
    return request.app.state.site


def db(request: Request) -> sqlite3.Connection:
    """The app's live database connection."""
    return request.app.state.server.conns[site(request).db]


# -- sessions ------------------------------------------------------------------------------------------------


def _session(request: Request) -> dict[str, Any] | None:
    if not hasattr(request.state, "session"):
        token = request.cookies.get(site(request).cookie)
        row = None
        if token:
            row = (
                db(request)
                .execute("SELECT * FROM session WHERE token = ? AND site = ?", (token, site(request).name))
                .fetchone()
            )
        request.state.session = dict(row) if row is not None else None
    return request.state.session


def current_user_id(request: Request) -> int | None:
    """Id of the logged-in user, or None."""
    sess = _session(request)
    return sess["user_id"] if sess is not None else None


def require_user(request: Request) -> int:
    """Id of the logged-in user; raises :class:`LoginRequired` for anonymous requests."""
    user_id = current_user_id(request)
    if user_id is None:
        raise LoginRequired()
    return user_id


def _new_session(request: Request, user_id: int | None, flash: str = "[]") -> None:
    token = secrets.token_urlsafe(24)
    conn = db(request)
    with conn:
        conn.execute(
            "INSERT INTO session (token, site, user_id, flash, created_at) VALUES (?, ?, ?, ?, "
            "(SELECT now FROM site_clock WHERE id = 1))",
            (token, site(request).name, user_id, flash),
        )
    request.state.session = {"token": token, "user_id": user_id, "flash": flash}
    request.state.set_cookie = token


def log_in(request: Request, user_id: int) -> None:
    """Start a fresh session for ``user_id`` (a new token: no session fixation), keeping pending messages."""
    old = _session(request)
    flash = old["flash"] if old is not None else "[]"
    if old is not None:
        with db(request) as conn:
            conn.execute("DELETE FROM session WHERE token = ?", (old["token"],))
    _new_session(request, user_id, flash)


def log_out(request: Request) -> None:
    """End the session (the cookie is dropped with the response)."""
    old = _session(request)
    if old is not None:
        with db(request) as conn:
            conn.execute("DELETE FROM session WHERE token = ?", (old["token"],))
    request.state.session = None
    request.state.set_cookie = ""


def logout_page(request: Request, action: str, label: str) -> Response:
    """The GET side of a logout URL: a page with the POST button (a GET never changes state, so a link or
    an image of another site cannot sign the user out)."""
    signed_in = current_user_id(request) is not None
    return render(request, "logout.html", signed_in=signed_in, action=action, label=label)


def flash(request: Request, text: str, kind: str = "success") -> None:
    """Queue a message for the next rendered page (``kind``: success, error, notice)."""
    sess = _session(request)
    if sess is None:
        _new_session(request, None)
        sess = request.state.session
    messages = [*json.loads(sess["flash"]), {"kind": kind, "text": text}]
    sess["flash"] = json.dumps(messages)
    with db(request) as conn:
        conn.execute("UPDATE session SET flash = ? WHERE token = ?", (sess["flash"], sess["token"]))


def _pop_flashes(request: Request) -> list[dict[str, str]]:
    sess = _session(request)
    if sess is None or sess["flash"] == "[]":
        return []
    messages = json.loads(sess["flash"])
    sess["flash"] = "[]"
    with db(request) as conn:
        conn.execute("UPDATE session SET flash = '[]' WHERE token = ?", (sess["token"],))
    return messages


def _finish(request: Request, response: Response) -> Response:
    token = getattr(request.state, "set_cookie", None)
    if token:
        response.set_cookie(site(request).cookie, token, httponly=True, samesite="lax", path="/")
    elif token == "":
        response.delete_cookie(site(request).cookie, path="/")
    return response


# -- responses -----------------------------------------------------------------------------------------------


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """Render a page of the app with its base context, the user's pending messages and ``context``."""
    full = {
        "request": request,
        **site(request).base_context(request),
        "messages": _pop_flashes(request),
        **context,
    }
    html = site(request).templates.get_template(template).render(full)
    return _finish(request, HTMLResponse(html, status_code=status_code))


def redirect(request: Request, url: str) -> Response:
    """303 See Other (POST-redirect-GET), carrying any session cookie change."""
    return _finish(request, RedirectResponse(url, status_code=303))


def safe_referer(value: str | None, default: str) -> str:
    """``value`` if it is a local absolute path (no open redirects), else ``default``."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return default


def is_web_url(value: str) -> bool:
    """Whether ``value`` is an absolute ``http(s)://host`` URL without spaces or control characters: the only
    links the sites store and render (no ``javascript:``, ``data:``, ``vbscript:``, scheme-relative ...)."""
    if not value or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return False
    return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)


class ApiError(HTTPException):
    """A REST error with Magento's body: ``{"message": "... %name ...", "parameters": {"name": value}}``."""

    def __init__(self, status_code: int, message: str, parameters: dict[str, str]) -> None:
        super().__init__(status_code, message)
        self.parameters = parameters


# -- input ---------------------------------------------------------------------------------------------------


async def read_form(request: Request) -> dict[str, str]:
    """The submitted form's text fields (first value of each); 400 when the body cannot be parsed."""
    try:
        form = await request.form()
    except (MultiPartException, ValueError, UnicodeDecodeError) as error:
        raise HTTPException(400, f"Malformed form data: {error}") from error
    result: dict[str, str] = {}
    for key, value in form.multi_items():
        if key not in result and not isinstance(value, UploadFile):
            result[key] = value
    return result


def form_text(form: dict[str, str], name: str, *, required: bool = True, max_len: int = 10_000) -> str:
    """A stripped text field; 422 when required and empty, or longer than ``max_len``."""
    value = form.get(name, "").strip()
    if required and not value:
        raise HTTPException(422, f"The field '{name}' is required.")
    if len(value) > max_len:
        raise HTTPException(422, f"The field '{name}' is longer than {max_len} characters.")
    return value


def parse_int(
    value: str | None,
    name: str,
    *,
    default: int | None = None,
    minimum: int = 0,
    maximum: int = 10**9,
    status: int = 422,
) -> int:
    """An integer within bounds; ``status`` (422 for forms, 400 for query strings) names the bad value."""
    if value is None or value.strip() == "":
        if default is None:
            raise HTTPException(status, f"The field '{name}' is required.")
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise HTTPException(status, f"'{name}' must be a whole number, got {value!r}.") from None
    if not minimum <= number <= maximum:
        raise HTTPException(status, f"'{name}' must be between {minimum} and {maximum}, got {number}.")
    return number


def query_int(request: Request, name: str, default: int, *, minimum: int = 1, maximum: int = 100_000) -> int:
    """An integer query parameter (400 when malformed)."""
    return parse_int(
        request.query_params.get(name), name, default=default, minimum=minimum, maximum=maximum, status=400
    )


def query_choice(request: Request, name: str, choices: tuple[_Choice, ...], default: _Choice) -> _Choice:
    """A query parameter restricted to ``choices`` (400 for anything else), typed as they are."""
    value = request.query_params.get(name) or default
    for choice in choices:
        if choice == value:
            return choice
    raise HTTPException(400, f"'{name}' must be one of {', '.join(choices)}, got {value!r}.")


@dataclass
class Pager:
    """One page of a listing: 1-based ``number``, ``size`` items per page, ``total`` items."""

    number: int
    size: int
    total: int
    param: str = "p"

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size

    def links(self, request: Request) -> list[dict[str, Any]]:
        """Links for Previous, each page number (windowed) and Next."""

        def url(n: int) -> str:
            params = {**dict(request.query_params), self.param: str(n)}
            return f"{request.url.path}?{urlencode(params)}"

        out = []
        if self.number > 1:
            out.append(
                {"label": "Previous", "aria": "Previous page", "url": url(self.number - 1), "current": False}
            )
        for n in range(max(1, self.number - 3), min(self.pages, self.number + 3) + 1):
            out.append({"label": str(n), "aria": f"Page {n}", "url": url(n), "current": n == self.number})
        if self.number < self.pages:
            out.append({"label": "Next", "aria": "Next page", "url": url(self.number + 1), "current": False})
        return out


def pager(request: Request, total: int, size: int, param: str = "p") -> Pager:
    """The page the request asks for (400 when the number is not an integer; past-the-end pages are empty)."""
    return Pager(query_int(request, param, 1), size, total, param)


# -- application ---------------------------------------------------------------------------------------------


async def _health(request: Request) -> Response:
    return JSONResponse({"ok": True, "site": site(request).name})


async def _reset(request: Request) -> Response:
    server: ServerState = request.app.state.server
    if not secrets.compare_digest(request.headers.get(TOKEN_HEADER, ""), server.token):
        raise HTTPException(403, "Forbidden.")
    return JSONResponse({"ok": True, "seconds": server.reset()})


async def _favicon(request: Request) -> Response:
    return Response(status_code=204)


async def _stylesheet(request: Request) -> Response:
    css = (COMMON_DIR / "style.css").read_text(encoding="utf-8")
    return Response(css, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if request.url.path.startswith(("/rest/", CONTROL_PREFIX)):
        body: dict[str, Any] = {"message": exc.detail}
        if isinstance(exc, ApiError):
            body["parameters"] = exc.parameters
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    try:
        response = render(
            request, "error.html", status_code=exc.status_code, status=exc.status_code, detail=exc.detail
        )
    except (sqlite3.Error, jinja2.TemplateError):
        log.exception("error page failed to render")
        response = PlainTextResponse(f"{exc.status_code} {exc.detail}", status_code=exc.status_code)
    response.headers.update(headers)
    return response


async def _login_required(request: Request, exc: Exception) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":  # come back to the page the form was on, not to a POST-only URL
        referer = urlsplit(request.headers.get("referer", ""))
        same_origin = referer.netloc == request.url.netloc
        target = (referer.path + (f"?{referer.query}" if referer.query else "")) if same_origin else "/"
    return redirect(request, f"{site(request).login_url}?referer={quote(target)}")


async def _id_too_large(request: Request, exc: Exception) -> Response:
    """An id in the path beyond SQLite's integer range names nothing: 404, like any unknown id."""
    return await _http_error(request, HTTPException(404, "There is nothing with this id."))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return PlainTextResponse("500 Internal Server Error: the error was logged.", status_code=500)


# -- request guard -------------------------------------------------------------------------------------------


def cross_site_reason(method: str, headers: Headers, scheme: str) -> str | None:
    """Why a request must be refused as a cross-site state change, or None when it may proceed.

    Safe methods (GET, HEAD, OPTIONS) always proceed: no route changes state on them. Any other method must
    come from the request's own origin, ``scheme://Host`` (the port included: the three sites of one host
    are three origins): its ``Origin`` header must equal that, ``Origin: null`` included; without ``Origin``,
    its ``Referer`` must start with it. A request with neither header proceeds: browsers send ``Origin``
    with every POST (Chromium since version 80, Firefox since 70), so such a request comes from a program
    (the env's login and reset helpers, WebArena's evaluation helpers, ``curl``), not from a page a victim
    was lured onto; refusing it would protect nobody and break those clients."""
    if method in SAFE_METHODS:
        return None
    own = f"{scheme}://{headers.get('host', '')}".lower()
    origin = headers.get("origin")
    if origin is not None:
        return None if origin.strip().lower() == own else f"its Origin {origin!r} is not {own!r}"
    referer = headers.get("referer")
    if referer is not None:
        try:
            parts = urlsplit(referer.strip())
        except ValueError:
            parts = urlsplit("")
        sender = f"{parts.scheme}://{parts.netloc}".lower()
        return None if sender == own else f"its Referer {referer!r} is not a page of {own!r}"
    return None


def host_problem(headers: Headers) -> str | None:
    """Why the ``Host`` header is refused (it must name the loopback interface the sites listen on: a
    foreign name means DNS rebinding), or None."""
    host = headers.get("host")
    if host is None:
        return None  # HTTP/1.0 without Host: the request reached our loopback socket
    name = host.strip().lower()
    name = name.rsplit(":", 1)[0] if not name.endswith("]") and ":" in name else name
    if name in LOOPBACK_HOSTS:
        return None
    return f"Invalid Host header {host!r}: the sites answer on loopback only."


class BodyTooLarge(HTTPException):
    """The request body is over :data:`MAX_BODY_BYTES` (answered 413)."""

    def __init__(self) -> None:
        super().__init__(413, f"Request body too large: at most {MAX_BODY_BYTES} bytes.")


async def _drain(receive: Receive, limit: int = DRAIN_BYTES) -> None:
    """Read and drop the rest of the body (at most ``limit`` bytes), so that the answer is not lost to a
    reset."""
    read = 0
    while read <= limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


class RequestGuard:
    """ASGI middleware in front of an app: a head over :data:`MAX_HEAD_BYTES` (431), a bad Host (400), a body
    over :data:`MAX_BODY_BYTES` (413) and cross-site state changes (403) are answered with the app's own error
    page before any handler runs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await _drain(receive)
            response = await _http_error(Request(scope), refusal)
            response.headers["connection"] = "close"
            await response(scope, receive, send)
            return
        await self.app(scope, _limited(receive), send)

    @staticmethod
    def _refusal(scope: Scope, headers: Headers) -> HTTPException | None:
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string", b"")) + 16
        head += sum(len(name) + len(value) + 4 for name, value in scope["headers"])
        if head > MAX_HEAD_BYTES:
            return HTTPException(431, f"Request header fields too large: at most {MAX_HEAD_BYTES} bytes.")
        problem = host_problem(headers)
        if problem is not None:
            return HTTPException(400, problem)
        length = headers.get("content-length", "")
        if length.strip().isdigit() and int(length) > MAX_BODY_BYTES:
            return BodyTooLarge()
        reason = cross_site_reason(scope["method"], headers, scope["scheme"])
        if reason is not None:
            return HTTPException(403, f"{CROSS_SITE}: {reason}.")
        return None


def _limited(receive: Receive) -> Receive:
    """``receive`` that raises :class:`BodyTooLarge` (after draining the rest) once the body passes the
    limit: a chunked body has no Content-Length to check up front."""
    read = 0

    async def limited() -> Message:
        nonlocal read
        message = await receive()
        if message["type"] == "http.request":
            read += len(message.get("body", b""))
            if read > MAX_BODY_BYTES:
                if message.get("more_body", False):
                    await _drain(receive)
                raise BodyTooLarge()
        return message

    return limited


def build_app(config: SiteConfig, server: ServerState, routes: Sequence[BaseRoute]) -> Starlette:
    """A Starlette app with ``routes`` plus the shared routes (health, reset, favicon, stylesheet) and
    handlers."""
    common: list[BaseRoute] = [
        Route(f"{CONTROL_PREFIX}/health", _health, methods=["GET"]),
        Route(f"{CONTROL_PREFIX}/reset", _reset, methods=["POST"]),
        Route("/favicon.ico", _favicon, methods=["GET"]),
        Route("/static/style.css", _stylesheet, methods=["GET"]),
    ]
    app = Starlette(
        routes=[*common, *routes],
        middleware=[Middleware(RequestGuard)],
        exception_handlers={
            HTTPException: _http_error,
            LoginRequired: _login_required,
            OverflowError: _id_too_large,
            Exception: _server_error,
        },
    )
    app.state.site = config
    app.state.server = server
    return app
