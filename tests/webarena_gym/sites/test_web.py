"""The shared web plumbing in process: error pages for crashes, input parsing, paging."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import DATABASES
from webarena_gym.sites.seed import pristine_paths
from webarena_gym.sites.shop.app import build_app


def test_a_crashing_handler_gets_a_logged_500_page(
    tmp_path: Path, sites_cache: Path, caplog: pytest.LogCaptureFixture, call_app: Callable
) -> None:
    pristine = pristine_paths(0, sites_cache)
    state = web.ServerState({n: tmp_path / f"{n}.db" for n in DATABASES}, pristine, "token")

    async def boom(request: Request) -> Response:
        raise RuntimeError("kaboom")

    app = build_app(state, 1)
    app.router.routes.insert(0, Route("/boom", boom))
    try:
        with caplog.at_level(logging.ERROR, logger="webarena_gym.sites"):
            status, body = call_app(app, "GET", "/boom")
        assert status == 500 and b"Internal Server Error" in body
        assert any("unhandled error on GET /boom" in r.getMessage() for r in caplog.records)
        assert call_app(app, "GET", "/")[0] == 200  # still serving
        assert call_app(app, "POST", "/__esopt/reset")[0] == 403  # the control endpoint wants the token
    finally:
        state.close()


def test_parse_int_names_the_bad_value() -> None:
    assert web.parse_int(" 7 ", "qty", minimum=1) == 7
    assert web.parse_int(None, "qty", default=1) == 1
    with pytest.raises(HTTPException, match="'qty' must be a whole number, got 'x'") as info:
        web.parse_int("x", "qty")
    assert info.value.status_code == 422
    with pytest.raises(HTTPException, match="between 1 and 5"):
        web.parse_int("9", "rating", minimum=1, maximum=5, status=400)


def test_safe_referer_refuses_other_origins() -> None:
    assert web.safe_referer("/checkout/cart/", "/") == "/checkout/cart/"
    for bad in ("//evil.example/", "http://evil.example/", "", None, "/\\evil"):
        assert web.safe_referer(bad, "/home") == "/home"


def test_pager_counts_pages() -> None:
    pager = web.Pager(number=2, size=20, total=41)
    assert pager.pages == 3 and pager.offset == 20
    assert web.Pager(number=1, size=20, total=0).pages == 1


def test_cross_site_reason_compares_the_whole_origin() -> None:
    from starlette.datastructures import Headers

    def reason(method: str, **headers: str) -> str | None:
        return web.cross_site_reason(method, Headers({"host": "127.0.0.1:7770", **headers}), "http")

    own = "http://127.0.0.1:7770"
    for method in ("GET", "HEAD", "OPTIONS"):
        assert reason(method, origin="http://evil.example") is None
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert reason(method, origin=own) is None and reason(method, origin=own.upper()) is None
        assert reason(method, referer=own + "/a?b") is None
        assert reason(method) is None  # not a browser: see the docstring
        for bad in ("null", "http://evil.example", own + "0", "https://127.0.0.1:7770", "http://127.0.0.1"):
            assert reason(method, origin=bad) is not None, (method, bad)
        for bad in ("http://evil.example/", own + ".evil.example/", "http://[::1", "/relative"):
            assert reason(method, referer=bad) is not None, (method, bad)


def test_is_web_url_takes_only_absolute_http_links() -> None:
    for good in (
        "http://a.example",
        "https://a.example:8443/p?q=1#f",
        "HTTPS://A.example",
        "http://[::1]:80/",
    ):
        assert web.is_web_url(good), good
    for bad in ("", "javascript:alert(1)", "data:,x", "//a.example", "http://", "http://a b", "http://a:x/"):
        assert not web.is_web_url(bad), bad
