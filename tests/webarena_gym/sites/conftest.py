"""Fixtures for the embedded sites' tests: one running instance per session (reset before each test that
asks for it) and a small cookie-keeping HTTP client."""

from __future__ import annotations

import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import Any

import pytest

from webarena_gym.sites import EmbeddedSites


@dataclass
class Page:
    """One HTTP answer."""

    status: int
    url: str
    headers: Message
    text: str

    def json(self) -> Any:
        import json

        return json.loads(self.text)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Client:
    """A browser-like HTTP client for one site: keeps cookies, follows redirects unless told not to."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")
        self.origin = "{0.scheme}://{0.netloc}".format(urllib.parse.urlsplit(base_url))
        self.jar = http.cookiejar.CookieJar()
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect()
        )

    def request(
        self,
        method: str,
        path: str,
        data: dict[str, Any] | bytes | None = None,
        headers: dict[str, str] | None = None,
        follow: bool = True,
    ) -> Page:
        url = path if path.startswith("http") else self.base_url + path
        body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
        for _ in range(10):
            req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
            try:
                with self._opener.open(req, timeout=30) as resp:
                    return Page(resp.status, url, resp.headers, resp.read().decode())
            except urllib.error.HTTPError as error:
                page = Page(error.code, url, error.headers, error.read().decode())
                if error.code not in (301, 302, 303, 307) or not follow:
                    return page
                url = urllib.parse.urljoin(url, error.headers["location"])
                method, body = "GET", None
        raise AssertionError("too many redirects")

    def get(self, path: str, **kwargs: Any) -> Page:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, data: dict[str, Any] | bytes | None = None, **kwargs: Any) -> Page:
        return self.request("POST", path, data if data is not None else {}, **kwargs)


LOGINS = {
    "shopping": (
        "/customer/account/loginPost/",
        "login[username]",
        "login[password]",
        "emma.lopez@gmail.com",
        "Password.123",
    ),
    "shopping_admin": ("/auth/loginPost/", "login[username]", "login[password]", "admin", "admin1234"),
    "reddit": ("/login_check", "_username", "_password", "MarvelsGrantMan136", "test1234"),
}


@pytest.fixture(name="Client", scope="session")
def client_class() -> type[Client]:
    """The :class:`Client` class (test modules get helpers through fixtures, not imports)."""
    return Client


@pytest.fixture(scope="session")
def sites_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private cache of pristine databases for this test session."""
    return tmp_path_factory.mktemp("sites-cache")


@pytest.fixture(scope="session")
def running_sites(sites_cache: Path) -> Iterator[EmbeddedSites]:
    """One running instance for the whole session (tests that change state use ``sites``, which resets it)."""
    with EmbeddedSites(cache_dir=sites_cache) as sites:
        yield sites


@pytest.fixture
def sites(running_sites: EmbeddedSites) -> EmbeddedSites:
    """The session's instance, reset to pristine state."""
    running_sites.reset()
    return running_sites


@pytest.fixture
def client(sites: EmbeddedSites) -> Callable[..., Client]:
    """``client(site, login=False)``: a fresh HTTP client for a site, optionally logged in as its default
    user."""

    def make(site: str, login: bool = False, user: str | None = None) -> Client:
        c = Client(sites.urls[site])
        if login:
            path, user_field, password_field, default_user, password = LOGINS[site]
            page = c.post(path, {user_field: user or default_user, password_field: password})
            assert page.status == 200, page.text[:500]
        return c

    return make


def _call_app(
    app: Any, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b""
) -> tuple[int, bytes]:
    """One request to an in-process ASGI app (from the loopback address, ``Host: 127.0.0.1:1``)."""
    import asyncio
    import concurrent.futures
    import contextlib

    raw_path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (k.lower().encode(), v.encode()) for k, v in {"host": "127.0.0.1:1", **(headers or {})}.items()
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 1),
    }
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    async def run() -> None:
        with contextlib.suppress(RuntimeError):  # Starlette re-raises after answering, for the server to log
            await app(scope, receive, send)

    # In a thread of its own: the main thread may hold another test's running event loop (Playwright's).
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()
    status = next(m["status"] for m in messages if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


@pytest.fixture(name="call_app", scope="session")
def call_app_fixture() -> Callable[..., tuple[int, bytes]]:
    """``call_app(app, method, path, headers=None, body=b"") -> (status, body)``: an in-process request."""
    return _call_app
