"""Every request and navigation stays on the allowed origins: redirects, scripts, frames, popups, forms,
sub-resources, and Chromium's own traffic.

Two loopback servers: the *gate* (an allowed origin) serves pages that try to leave, and answers
``/go?to=URL`` with a redirect; the *forbidden* server (another port of 127.0.0.1) counts every TCP connection
it accepts, so a test sees a preconnect or an aborted request as well as a page load, and its pages would
report that their script ran by requesting ``/ran``.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from .conftest import make_task

pytestmark = pytest.mark.browser

FindId = Callable[[dict[str, str], str], int]


@dataclass
class Server:
    """A loopback HTTP server: its URL, the request lines it answered and the connections it accepted."""

    url: str
    requests: list[str] = field(default_factory=list)
    connections: int = 0

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


class _CountingServer(http.server.ThreadingHTTPServer):
    record: Server

    def get_request(self) -> Any:
        conn = super().get_request()
        self.record.connections += 1
        return conn


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _CountingServer
    pages: Callable[[str], str | None] = staticmethod(lambda path: None)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self._answer()

    def _answer(self) -> None:
        self.server.record.requests.append(f"{self.command} {self.headers.get('Host')} {self.path}")
        parts = urlsplit(self.path)
        if parts.path == "/go":
            target = parse_qs(parts.query)["to"][0]
            self.send_response(307 if self.command == "POST" else 302)
            self.send_header("Location", target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = self.pages(parts.path)
        if body is None:
            body = ("<!doctype html><title>Forbidden page</title><h1>forbidden</h1>"
                    "<script>fetch('/ran')</script>")
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _serve(pages: Callable[[str], str | None]) -> Iterator[Server]:
    handler = type("Handler", (_Handler,), {"pages": staticmethod(pages)})
    server = _CountingServer(("127.0.0.1", 0), handler)
    server.record = Server(f"http://127.0.0.1:{server.server_port}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.record
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def forbidden() -> Iterator[Server]:
    """Another port of 127.0.0.1: an origin the browser must never connect to."""
    yield from _serve(lambda path: None)


def _go(target: str) -> str:
    return "/go?to=" + quote(target, safe="")


def _gate_pages(forbidden_url: str, gate_url: str) -> Callable[[str], str | None]:
    away = forbidden_url
    ws_away = away.replace("http://", "ws://")
    alias = gate_url.replace("127.0.0.1", "localhost")
    home = f"""<!doctype html><title>Gate</title><h1>Gate</h1>
<a href="{_go(away + '/x')}">Redirect link</a>
<a href="{_go(_go(away + '/chain'))}">Redirect chain</a>
<a href="{_go(away + _go(gate_url + '/home'))}">Round trip</a>
<a href="{_go(alias + '/home')}">Alias of the gate</a>
<a href="{_go(away + '/blank')}" target="_blank">Blank target</a>
<button onclick="location.href='{away}/script'">Script navigation</button>
<button onclick="location.href='{_go(away + '/script2')}'">Script redirect</button>
<button onclick="window.open('{_go(away + '/popup')}')">Popup redirect</button>
<button onclick="window.open('{away}/popup2')">Popup</button>
<button onclick="setTimeout(() => location.replace('{_go(away + '/later')}'), 0)">Later</button>
<form action="{away}/post" method="post"><input name="q" value="1"><button>Post away</button></form>
<form action="{_go(away + '/post2')}" method="post"><input name="q" value="1">
  <button>Post redirect</button></form>
"""
    subresources = f"""<!doctype html><title>Sub</title><h1>Sub</h1><p id="status">pending</p>
<link rel="preconnect" href="{away}"><link rel="dns-prefetch" href="{away}">
<link rel="prefetch" href="{_go(away + '/prefetch')}"><link rel="stylesheet" href="{_go(away + '/css')}">
<img src="{_go(away + '/img')}"><img src="{away}/img2">
<iframe src="{_go(away + '/frame')}"></iframe><iframe src="{away}/frame2"></iframe>
<script>
  const tries = [fetch('{_go(away + '/fetch')}'), fetch('{away}/fetch2', {{mode: 'no-cors'}})];
  try {{ new EventSource('{away}/events'); }} catch (e) {{}}
  try {{ new WebSocket('{ws_away}/ws'); }} catch (e) {{}}
  try {{ navigator.sendBeacon('{away}/beacon', 'x'); }} catch (e) {{}}
  const xhr = new XMLHttpRequest(); xhr.open('GET', '{_go(away + '/xhr')}'); xhr.send();
  Promise.allSettled(tries).then(() => {{ document.getElementById('status').textContent = 'done'; }});
</script>"""
    meta = f'<!doctype html><title>Meta</title><meta http-equiv="refresh" content="0;url={away}/meta">'
    meta_hop = ('<!doctype html><title>Meta hop</title>'
                f'<meta http-equiv="refresh" content="0;url={_go(away + "/m")}">')
    pages = {"/home": home, "/sub": subresources, "/meta": meta, "/meta-hop": meta_hop}
    return lambda path: pages.get(path, "<!doctype html><title>Gate page</title><h1>gate page</h1>")


@dataclass
class Gate:
    """The allowed site, with pages that try to reach ``forbidden``."""

    server: Server
    forbidden: Server

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def gate(forbidden: Server) -> Iterator[Gate]:
    box: dict[str, str] = {}

    def lazy(path: str) -> str | None:  # the pages name the gate's own URL, known once it listens
        return _gate_pages(forbidden.url, box["url"])(path)

    for server in _serve(lazy):
        box["url"] = server.url
        yield Gate(server, forbidden)


@pytest.fixture(scope="module")
def gate_env(env_factory: Callable[..., Any], gate: Gate) -> Any:
    tasks = [make_task(0, "home"), make_task(1, "sub"), make_task(2, "meta"),
             make_task(3, _go(gate.forbidden.url + "/start")), make_task(4, "meta-hop")]
    return env_factory(task_file=tasks, sites={"shopping": gate.url})


@pytest.fixture()
def untouched(gate: Gate) -> Iterator[Gate]:
    """Asserts after the test that the forbidden server saw no connection and the gate no alias request."""
    before = gate.forbidden.connections
    yield gate
    assert gate.forbidden.connections == before, gate.forbidden.requests
    assert not [r for r in gate.server.requests if " localhost:" in r], gate.server.requests


def test_goto_redirect_to_a_forbidden_origin_is_refused(env_factory: Callable[..., Any], site: Any,
                                                        untouched: Gate) -> None:
    """The issue's case: R is an extra allowed origin and answers 302 to the forbidden T."""
    env = env_factory(allowed_origins=[untouched.url])
    obs, _ = env.reset(options={"task_id": 0})
    start = obs["url"]
    target = f"{untouched.forbidden.url}/x"
    obs, *_ = env.step(f"goto [{untouched.url}{_go(target)}]")
    error = obs["last_action_error"]
    assert f"navigation to {target!r} was blocked" in error
    assert f"only the sites {env.policy.describe()} may be opened" in error and untouched.url in error
    assert obs["url"] == start and obs["tabs"] == "Tab 0 (current): Fixture Home"
    obs, *_ = env.step("scroll [down]")  # the episode goes on
    assert obs["last_action_error"] == "" and obs["url"] == start


@pytest.mark.parametrize(("control", "blocked"), [
    ("link 'Redirect link'", "/x"),
    ("link 'Redirect chain'", "/chain"),
    ("link 'Round trip'", "/go?to="),
    ("link 'Alias of the gate'", "localhost:"),
    ("link 'Blank target'", "/blank"),
    ("button 'Script navigation'", "/script"),
    ("button 'Script redirect'", "/script2"),
    ("button 'Popup redirect'", "/popup"),
    ("button 'Popup'", "/popup2"),
    ("button 'Later'", "/later"),
    ("button 'Post away'", "/post"),
    ("button 'Post redirect'", "/post2"),
])
def test_page_navigation_off_the_origins_is_refused(gate_env: Any, untouched: Gate, find_id: FindId,
                                                    control: str, blocked: str) -> None:
    obs, _ = gate_env.reset(options={"task_id": 0})
    start = obs["url"]
    obs, *_ = gate_env.step(f"click [{find_id(obs, control)}]")
    if "was blocked" not in obs["last_action_error"]:  # a timer may fire after the action: one more step
        obs, *_ = gate_env.step("scroll [down]")
    error = obs["last_action_error"]
    assert "was blocked: only the sites" in error and blocked in error, error
    assert obs["url"] == start and obs["tabs"] == "Tab 0 (current): Gate"
    assert gate_env.step("scroll [up]")[0]["last_action_error"] == ""


def test_subresources_frames_sockets_and_prefetches_stay_home(gate_env: Any, untouched: Gate) -> None:
    obs, _ = gate_env.reset(options={"task_id": 1})
    for _ in range(3):
        if "StaticText 'done'" in obs["axtree"]:
            break
        obs, *_ = gate_env.step("scroll [down]")
    assert "StaticText 'done'" in obs["axtree"]
    assert obs["url"] == f"{untouched.url}/sub"


def test_meta_refresh_off_the_origins_stays(gate_env: Any, untouched: Gate) -> None:
    obs, _ = gate_env.reset(options={"task_id": 2})
    obs, *_ = gate_env.step("scroll [down]")
    assert obs["url"] == f"{untouched.url}/meta"


def test_meta_refresh_through_a_redirect_reaches_nothing(gate_env: Any, untouched: Gate) -> None:
    """The refresh fires again each time the tab is taken back, so a tab may show Chromium's error page of
    the refused hop between two actions; never the forbidden page."""
    gate_env.reset(options={"task_id": 4})
    for _ in range(2):
        obs, *_ = gate_env.step("scroll [down]")
        assert obs["url"].startswith((untouched.url, "chrome-error://")), obs["url"]


def test_start_url_that_redirects_away_is_a_config_error(gate_env: Any, untouched: Gate) -> None:
    from webarena_gym.errors import SiteConfigError

    refused = f"'{untouched.forbidden.url}/start'"
    with pytest.raises(SiteConfigError, match=f"{refused}, outside the allowed origins"):
        gate_env.reset(options={"task_id": 3})
    obs, _ = gate_env.reset(options={"task_id": 0})  # the env stays usable
    assert obs["url"] == f"{untouched.url}/home"


def test_the_browser_is_relaunched_when_the_origins_change(chromium_path: str, site: Any, gate: Gate) -> None:
    """The network flags are fixed at launch: a session whose policy changes (the embedded sites get their
    ports at the first reset) relaunches the browser with flags for the new origins."""
    from webarena_gym.browser import BrowserConfig, BrowserSession
    from webarena_gym.safety import OriginPolicy

    session = BrowserSession(BrowserConfig(executable_path=chromium_path), OriginPolicy([site.url]))
    try:
        session.new_episode()
        assert session.open(f"{site.url}/index.html").title() == "Fixture Home"
        session.policy = OriginPolicy([gate.url])
        session.new_episode()
        assert session.open(f"{gate.url}/home").title() == "Gate"
        assert session.relaunches == 0  # not a crash
    finally:
        session.close()


# ----- Chromium's own traffic ------------------------------------------------------------------------------
def _netlog_events(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event type, params)`` of a Chromium net log (``--log-net-log``), also one cut short."""
    text = path.read_text().rstrip()
    try:
        log = json.loads(text)
    except ValueError:
        log = json.loads(text.rstrip(",") + "]}")
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    for event in log["events"]:
        yield names.get(event["type"], str(event["type"])), event.get("params") or {}


def test_the_browser_contacts_nothing_but_the_allowed_origins(env_factory: Callable[..., Any], site: Any,
                                                              chromium_path: str, tmp_path: Path) -> None:
    """Chromium's net log of a reset and a few steps names no host lookup and no connection outside the
    allowed origins: its own services (updates, sign-in, autofill) never get a packet out."""
    netlog = tmp_path / "net.json"
    env = env_factory(browser={"executable_path": chromium_path, "extra_args": (f"--log-net-log={netlog}",)})
    obs, _ = env.reset(options={"task_id": 1})  # a form: autofill wants to ask its server about it
    for action in ["scroll [down]", f"goto [{site.url}/index.html]", "go_back", "scroll [up]"]:
        env.step(action)
    env._session.page.wait_for_timeout(3000)  # time for background services to try (no timing asserted)
    env.close()
    allowed = {urlsplit(site.url).hostname, "~notfound"}
    addresses = {urlsplit(site.url).netloc}
    lookups, connects = set(), set()
    for kind, params in _netlog_events(netlog):
        if kind in ("HOST_RESOLVER_MANAGER_REQUEST", "HOST_RESOLVER_MANAGER_JOB") and "host" in params:
            lookups.add(urlsplit(params["host"]).hostname or params["host"])
        if kind == "TCP_CONNECT_ATTEMPT" and "address" in params:
            connects.add(params["address"])
    assert lookups and lookups <= allowed, sorted(lookups - allowed)
    assert connects and connects <= addresses, sorted(connects - addresses)
