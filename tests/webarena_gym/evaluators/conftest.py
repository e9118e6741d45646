"""Fixtures for the evaluator tests: real local HTTP servers (one per fake site, separate origins), a real
Chromium through Playwright, task builders and a recording stub judge."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from webarena_gym.tasks import SiteURLs, TaskConfig, load_tasks

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


@dataclass
class Request:
    """One request as the fake site saw it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes


Response = tuple[int, str, bytes | str]
"""(status, content type, body)."""
Route = Callable[[Request], Response]


@dataclass
class FakeSite:
    """A real HTTP server on 127.0.0.1 (random port) whose routes the tests set; it records every request."""

    server: ThreadingHTTPServer
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def page(self, path: str, html: str) -> None:
        """Serve ``html`` at ``path``."""
        self.routes[path] = lambda _req: (200, "text/html; charset=utf-8", html)

    def json(self, path: str, payload: Any, status: int = 200) -> None:
        """Serve ``payload`` as JSON at ``path``."""
        self.routes[path] = lambda _req: (status, "application/json", json.dumps(payload))

    def reset(self) -> None:
        self.routes.clear()
        self.requests.clear()


def _handler(site_ref: list[FakeSite]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            site = site_ref[0]
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            req = Request(self.command, parts.path, parse_qs(parts.query), dict(self.headers.items()),
                          self.rfile.read(length) if length else b"")
            site.requests.append(req)
            route = site.routes.get(parts.path)
            status, ctype, body = route(req) if route else (404, "text/html", "<h1>not found</h1>")
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = _serve
        do_POST = _serve

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def _start_site() -> FakeSite:
    ref: list[FakeSite] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(ref))
    site = FakeSite(server)
    ref.append(site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return site


@dataclass
class FakeSites:
    shopping: FakeSite
    reddit: FakeSite
    gitlab: FakeSite

    @property
    def urls(self) -> SiteURLs:
        return SiteURLs(shopping=self.shopping.url, shopping_admin=self.shopping.url + "/admin",
                        reddit=self.reddit.url, gitlab=self.gitlab.url)


@pytest.fixture(scope="session")
def _fake_sites_session() -> Iterator[FakeSites]:
    sites = FakeSites(_start_site(), _start_site(), _start_site())
    yield sites
    for site in (sites.shopping, sites.reddit, sites.gitlab):
        site.server.shutdown()
        site.server.server_close()


@pytest.fixture
def fake_sites(_fake_sites_session: FakeSites) -> FakeSites:
    """Three fake sites (shopping incl. admin under /admin, reddit, gitlab), routes cleared for each test."""
    for site in (_fake_sites_session.shopping, _fake_sites_session.reddit, _fake_sites_session.gitlab):
        site.reset()
    return _fake_sites_session


@pytest.fixture(scope="session")
def eval_browser(chromium_path: str) -> Iterator[Any]:
    """One real Chromium for the evaluator tests."""
    from webarena_gym.browser import shared_playwright

    with shared_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def eval_page(eval_browser: Any) -> Iterator[Any]:
    """A fresh page in a fresh context (the 'episode' page)."""
    context = eval_browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def make_task(eval_block: dict[str, Any], *, intent: str = "What is the answer?", task_id: int = 1,
              **extra: Any) -> TaskConfig:
    """A task entry in WebArena's format, loaded through the real loader."""
    entry = {
        "sites": ["shopping"], "task_id": task_id, "require_login": False, "storage_state": None,
        "start_url": "__SHOPPING__", "geolocation": None, "intent_template": intent, "instantiation_dict": {},
        "intent": intent, "require_reset": False, "intent_template_id": 0,
        "eval": {"reference_answers": None, "reference_url": "", "program_html": [], **eval_block},
        **extra,
    }
    return load_tasks([entry])[0]


@dataclass
class StubJudge:
    """A scripted judge that records its calls (unit isolation for the evaluators)."""

    fuzzy: Callable[[str, str, str], float] = lambda pred, ref, q: 1.0
    na: Callable[[str, str, str], float] = lambda pred, reason, q: 1.0
    name: str = "stub"
    calls: list[tuple[str, str, str, str]] = field(default_factory=list)

    def fuzzy_match(self, pred: str, reference: str, question: str) -> float:
        self.calls.append(("fuzzy", pred, reference, question))
        return self.fuzzy(pred, reference, question)

    def na_reason(self, pred: str, reference_reason: str, question: str) -> float:
        self.calls.append(("na", pred, reference_reason, question))
        return self.na(pred, reference_reason, question)


@pytest.fixture
def task_factory() -> Callable[..., TaskConfig]:
    """``make_task(eval_block, intent=..., task_id=..., **top_level_fields)``."""
    return make_task


@pytest.fixture
def stub_judge() -> StubJudge:
    """A judge answering 1.0 to everything unless its ``fuzzy`` / ``na`` callables are replaced."""
    return StubJudge()
