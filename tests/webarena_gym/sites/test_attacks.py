"""The embedded sites as web apps under attack, over real HTTP: cross-site requests, script links, stored
markup, oversized and malformed requests, path traversal, unknown REST search keys."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pytest

from webarena_gym.sites import EmbeddedSites, web
from webarena_gym.sites.data import SiteData, post_path
from webarena_gym.sites.db import DATABASES
from webarena_gym.sites.seed import pristine_paths
from webarena_gym.sites.server import SITE_KEYS, build_apps

EVIL = "http://evil.example"
REFUSED = "Cross-site request refused"
FORUM_USER = "MarvelsGrantMan136"
PAYLOAD = "<script>alert('x')</script><img src=x onerror=alert(1)>\"'"
SCRIPT_URLS = (
    "javascript:alert(document.cookie)",
    "  javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    "javascript&#58;alert(1)",
    "&#106;avascript:alert(1)",
    "java\tscript:alert(1)",
    "\x01javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
    "//evil.example/x",
    "http:/evil.example",
    "http://evil.example/a b",
    "https://",
)
# Fields every state-changing form of the three sites reads, with values that would be accepted.
FORM = {
    "firstname": "Mallory",
    "lastname": "Attacker",
    "title": "pwned",
    "body": "pwned",
    "comment": "pwned",
    "biography": "pwned",
    "choice": "1",
    "product_id": "1",
    "item_id": "1",
    "qty": "1",
    "rating": "5",
    "nickname": "m",
    "detail": "pwned",
    "name": "pwned",
    "email": "m@evil.example",
    "price": "1.00",
    "status": "1",
    "street": "1 Evil Way",
    "city": "X",
    "region": "X",
    "postcode": "1",
    "country": "X",
    "telephone": "1",
    "login[username]": "admin",
    "login[password]": "admin1234",
    "_username": FORUM_USER,
    "_password": "test1234",
}
ACCOUNT_PAGES = {"shopping": "/customer/account/", "shopping_admin": "/admin/", "reddit": "/submit"}
LOGOUT_PATHS = {
    "shopping": "/customer/account/logout/",
    "shopping_admin": "/admin/auth/logout/",
    "reddit": "/logout",
}


@pytest.fixture(scope="module")
def data(sites_cache: Path) -> SiteData:
    return SiteData(0, cache_dir=sites_cache)


@pytest.fixture
def state(tmp_path: Path, sites_cache: Path) -> Iterator[web.ServerState]:
    """A server state of this test's own (in process), for building the apps without serving them."""
    pristine = pristine_paths(0, sites_cache)
    server = web.ServerState({n: tmp_path / f"{n}.db" for n in DATABASES}, pristine, "token")
    yield server
    server.close()


def _origin(url: str) -> str:
    return "{0.scheme}://{0.netloc}".format(urlsplit(url))


def _fill(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: values[m[1]], path)


def _state_changing_routes(state: web.ServerState) -> dict[str, list[tuple[str, str]]]:
    """Per site: (method, path template) of every route that accepts anything but GET and HEAD."""
    apps = build_apps(state, {key: 1 for key in SITE_KEYS})
    found: dict[str, list[tuple[str, str]]] = {}
    for key, app in apps.items():
        for route in app.routes:  # type: ignore[attr-defined]
            for method in sorted(set(getattr(route, "methods", None) or ()) - {"GET", "HEAD"}):
                found.setdefault(key, []).append((method, route.path))
    return found


def _logged_in(client: Any, site: str) -> bool:
    page = client.get(_origin(client.base_url) + ACCOUNT_PAGES[site], follow=False)
    return page.status == 200


# -- cross-site requests -------------------------------------------------------------------------------------


def test_every_state_changing_route_refuses_a_cross_site_request(
    client: Callable, sites: EmbeddedSites, state: web.ServerState, data: SiteData
) -> None:
    own_post = data.posts(username=FORUM_USER)[0]
    values = {
        "forum": own_post["forum_name"],
        "post_id": str(own_post["id"]),
        "id": "1",
        "order_id": "1",
        "username": FORUM_USER,
        "action": "hold",
        "sku": "x",
    }
    routes = _state_changing_routes(state)
    assert set(routes) == set(SITE_KEYS) and sum(map(len, routes.values())) >= 30
    for site, site_routes in routes.items():
        c = client(site, login=True)
        before = sites.state_digest()  # logging in is a change of its own
        origin = _origin(c.base_url)
        for method, path in site_routes:
            for headers in ({"Origin": EVIL}, {"Origin": "null"}, {"Referer": EVIL + "/attack.html"}):
                page = c.request(
                    method, origin + _fill(path, values), dict(FORM), headers=headers, follow=False
                )
                assert page.status == 403 and REFUSED in page.text, (site, method, path, headers, page.status)
        assert sites.state_digest() == before, f"a cross-site request changed the state of {site}"
        assert _logged_in(c, site), f"a cross-site request logged the user out of {site}"


def test_origin_must_match_scheme_host_and_port(client: Callable, sites: EmbeddedSites) -> None:
    shop = client("shopping", login=True)
    own = _origin(shop.base_url)
    forum = _origin(sites.urls["reddit"])
    for headers in (
        {"Origin": forum},  # another site of the same host: another origin
        {"Origin": own + ".evil.example"},
        {"Origin": own.replace("http://", "https://")},
        {"Origin": own.replace("127.0.0.1", "localhost")},
        {"Referer": own + ".evil.example/customer/account/edit/"},
        {"Referer": forum + "/customer/account/edit/"},
        {"Origin": EVIL, "Referer": own + "/customer/account/edit/"},  # the Origin decides
        {"Referer": "not a url"},
    ):
        page = shop.post(
            "/customer/account/editPost/", {"firstname": "Mal", "lastname": "Lory"}, headers=headers
        )
        assert page.status == 403 and REFUSED in page.text, headers
        assert "Mal Lory" not in shop.get("/customer/account/edit/").text
    allowed = (
        {"Origin": own},
        {"Referer": own + "/customer/account/edit/"},
        {},  # neither header: not a browser (see web.same_origin_guard)
    )
    for n, headers in enumerate(allowed):
        page = shop.post(
            "/customer/account/editPost/", {"firstname": f"Ann{n}", "lastname": "Lee"}, headers=headers
        )
        assert page.status == 200 and f"Welcome, Ann{n} Lee!" in page.text, headers


def test_a_foreign_host_header_is_refused(client: Callable) -> None:
    shop = client("shopping")
    for host in ("evil.example", "rebind.evil.example:80"):
        page = shop.get("/", headers={"Host": host})
        assert page.status == 400 and "Host" in page.text, host
    port = urlsplit(shop.base_url).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert shop.get("/", headers={"Host": host}).status == 200, host


def test_logout_is_a_same_origin_post_and_get_only_asks(client: Callable) -> None:
    for site, path in LOGOUT_PATHS.items():
        c = client(site, login=True)
        origin = _origin(c.base_url)
        page = c.get(origin + path)
        assert page.status == 200 and re.search(
            rf'<form method="post" action="{re.escape(path)}"', page.text
        ), site
        assert _logged_in(c, site), f"GET {path} logged out of {site}"
        page = c.get(origin + path, headers={"Referer": EVIL + "/"})
        assert _logged_in(c, site), f"a cross-site GET {path} logged out of {site}"
        c.post(origin + path, headers={"Origin": origin})
        assert not _logged_in(c, site), f"POST {path} did not log out of {site}"


def test_every_page_links_logout_as_a_form(client: Callable) -> None:
    for site in LOGOUT_PATHS:
        c = client(site, login=True)
        text = c.get(_origin(c.base_url) + ACCOUNT_PAGES[site]).text
        assert not re.search(r'<a [^>]*href="[^"]*log_?out', text, re.IGNORECASE), site
        assert re.search(rf'<form method="post" action="{re.escape(LOGOUT_PATHS[site])}"', text), site


# -- links and stored markup ---------------------------------------------------------------------------------


def test_forum_refuses_links_that_are_not_http(client: Callable, sites: EmbeddedSites) -> None:
    forum = client("reddit", login=True)
    before = sites.state_digest()
    for url in SCRIPT_URLS:
        page = forum.post("/submit", {"forum": "books", "title": "A link", "url": url})
        assert page.status == 422 and "'url' must be an http" in unescape(page.text), repr(url)
    assert sites.state_digest() == before
    for url in ("https://example.com/a?b=c&d=1", "http://localhost:7770/x.html", "HTTP://Example.com"):
        page = forum.post("/submit", {"forum": "books", "title": "A fine link", "url": url})
        assert page.status == 200, url
        assert f'href="{url.replace("&", "&amp;")}"' in page.text


def test_a_stored_script_link_is_shown_as_text(
    state: web.ServerState, data: SiteData, call_app: Callable
) -> None:
    post = data.posts("books")[0]
    conn = state.conns["postmill"]
    with conn:
        conn.execute("UPDATE submission SET url = ? WHERE id = ?", ("javascript:alert(1)", post["id"]))
    app = build_apps(state, {key: 1 for key in SITE_KEYS})["reddit"]
    status, body = call_app(app, "GET", post_path(post))
    assert status == 200 and b"javascript:alert(1)" in body
    assert not re.search(rb"href=\"\s*javascript", body, re.IGNORECASE)


def _no_markup(text: str, where: str) -> None:
    assert "<script>alert" not in text and "<img src=x" not in text, where
    assert "&lt;script&gt;alert" in text, where


def test_user_text_is_escaped_everywhere_it_is_shown(client: Callable, data: SiteData) -> None:
    forum = client("reddit", login=True)
    page = forum.post("/submit", {"forum": "books", "title": PAYLOAD, "body": PAYLOAD})
    assert page.status == 200
    _no_markup(page.text, "post page")
    found = re.search(r"/f/(\w+)/(\d+)", page.url)
    assert found is not None, page.url
    _no_markup(forum.post(f"/f/{found[1]}/{found[2]}/-/comment", {"body": PAYLOAD}).text, "comment")
    _no_markup(forum.get("/f/books?sort=new").text, "listing")
    _no_markup(forum.post(f"/user/{FORUM_USER}/edit_biography", {"biography": PAYLOAD}).text, "biography")
    shop = client("shopping", login=True)
    _no_markup(shop.post("/customer/account/editPost/", {"firstname": PAYLOAD, "lastname": "x"}).text, "name")
    product = data.products()[0]
    shop.post(
        f"/review/product/post/id/{product['id']}/",
        {"rating": "5", "nickname": PAYLOAD, "title": PAYLOAD, "detail": PAYLOAD},
    )
    admin = client("shopping_admin", login=True)
    _no_markup(admin.get("/review/product/?status=pending").text, "admin review grid")
    order = data.orders()[0]
    page = admin.post(f"/sales/order/addComment/order_id/{order['id']}/", {"comment": PAYLOAD})
    _no_markup(page.text, "admin order comment")
    _no_markup(admin.get(f"/customer/index/?search={quote(PAYLOAD)}").text, "admin customer search")


# -- oversized and malformed requests ------------------------------------------------------------------------


def _raw(url: str, request: bytes) -> bytes:
    """Send ``request`` on a fresh connection; everything answered until the server closes."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_an_oversized_cookie_header_gets_431(sites: EmbeddedSites) -> None:
    url = sites.urls["shopping"]
    host = urlsplit(url).netloc.encode()
    for size in (200_000, 40_000):
        request = b"GET / HTTP/1.1\r\nHost: " + host + b"\r\nCookie: a=" + b"x" * size
        request += b"\r\nConnection: close\r\n\r\n"
        try:
            answer = _raw(url, request)
        except ConnectionResetError:
            pytest.fail(f"a {size}-byte Cookie header reset the connection instead of an answer")
        assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    small = (
        b"GET / HTTP/1.1\r\nHost: "
        + host
        + b"\r\nCookie: a="
        + b"x" * 8000
        + b"\r\nConnection: close\r\n\r\n"
    )
    assert _raw(url, small).startswith(b"HTTP/1.1 200 ")


def test_an_oversized_form_body_gets_413(client: Callable, sites: EmbeddedSites) -> None:
    forum = client("reddit", login=True)
    before = sites.state_digest()
    big = {"forum": "books", "title": "Big", "body": "x", "filler": "y" * (2 * 1024 * 1024)}
    page = forum.post("/submit", big)
    assert page.status == 413 and "too large" in page.text.lower()
    cookie = "; ".join(f"{c.name}={c.value}" for c in forum.jar)
    host = urlsplit(sites.urls["reddit"]).netloc.encode()
    chunk = b"filler=" + b"y" * 500_000
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(4)) + b"0\r\n\r\n"
    head = (
        b"POST /submit HTTP/1.1\r\nHost: "
        + host
        + b"\r\nCookie: "
        + cookie.encode()
        + b"\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n"
        b"Connection: close\r\n\r\n"
    )
    assert _raw(sites.urls["reddit"], head + chunked).startswith(b"HTTP/1.1 413 ")
    assert sites.state_digest() == before


def test_static_paths_do_not_traverse(client: Callable) -> None:
    for site in SITE_KEYS:
        c = client(site)
        origin = _origin(c.base_url)
        for path in (
            "/static/../../../../../../etc/passwd",
            "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
            "/static/..%2f..%2f..%2f..%2fetc%2fpasswd",
            "/static/%2e%2e%2fweb.py",
            "/static/style.css/../../web.py",
            "/..%2f..%2f..%2f..%2fetc%2fpasswd.html",
            "/static/....//....//etc/passwd",
        ):
            page = c.get(origin + path)
            assert page.status in (400, 404), (site, path, page.status)
            assert "root:" not in page.text and "import " not in page.text, (site, path)


def _token(shop: Any) -> dict[str, str]:
    page = shop.post(
        "/rest/default/V1/integration/admin/token",
        json.dumps({"username": "admin", "password": "admin1234"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    return {"Authorization": f"Bearer {page.json()}"}


def test_rest_search_takes_magentos_snake_case_and_refuses_unknown_keys(
    client: Callable, data: SiteData
) -> None:
    shop = client("shopping")
    auth = _token(shop)
    order = data.orders()[0]
    for group, filters, cond in (
        ("filterGroups", "filters", "conditionType"),
        ("filter_groups", "filters", "condition_type"),
    ):
        prefix = f"searchCriteria[{group}][0][{filters}][0]"
        query = f"{prefix}[field]=increment_id&{prefix}[value]={order['increment_id']}&{prefix}[{cond}]=eq"
        found = shop.get(f"/rest/V1/orders?{query}", headers=auth).json()
        assert found["total_count"] == 1 and found["items"][0]["increment_id"] == order["increment_id"], group
    paged = shop.get(
        "/rest/V1/orders?searchCriteria[page_size]=2&searchCriteria[current_page]=1", headers=auth
    )
    assert len(paged.json()["items"]) == 2
    for key in (
        "searchCriteria[filterGroup][0][filters][0][field]",
        "searchCriteria[filter_groups][0][filters][0][fields]",
        "searchCriteria[filterGroups][x][filters][0][field]",
        "searchCriteria[sortOrder][0][field]",
        "searchCriteria[pagesize]",
        "searchCriteria",
    ):
        page = shop.get(f"/rest/V1/orders?{quote(key)}=increment_id", headers=auth)
        assert page.status == 400, key
        body = page.json()
        assert body["parameters"] == {"fieldName": key} and "%fieldName" in body["message"], body


def test_rest_api_still_answers_a_client_without_origin(client: Callable) -> None:
    shop = client("shopping")
    auth = _token(shop)
    assert shop.get("/rest/V1/orders?searchCriteria[pageSize]=1", headers=auth).status == 200
    page = shop.post(
        "/rest/V1/integration/admin/token",
        b'{"username": "admin", "password": "admin1234"}',
        headers={"Content-Type": "application/json", "Origin": EVIL},
    )
    assert page.status == 403 and page.json()["message"].startswith(REFUSED)
