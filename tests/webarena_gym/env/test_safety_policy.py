"""The origin policy, without a browser (the browser-side blocking is in test_safety_browser.py)."""

from __future__ import annotations

import re

import pytest

from webarena_gym.safety import NOWHERE_PROXY, Origin, OriginPolicy, parse_origin

POLICY = OriginPolicy(["http://127.0.0.1:7770", "http://localhost", "https://shop.example"])


def test_parse_origin() -> None:
    assert parse_origin("http://127.0.0.1:7770/a?b") == Origin("http", "127.0.0.1", 7770)
    assert parse_origin("HTTPS://Shop.Example/") == Origin("https", "shop.example", 443)
    assert parse_origin("file:///etc/passwd") is None
    assert parse_origin("http://[::1]:80/") == Origin("http", "::1", 80)
    assert parse_origin("http://host:99999/") is None


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:7770/admin", "http://localhost/", "http://localhost:80/x", "https://shop.example/p?q=1",
    "about:blank",
])
def test_allowed_navigation(url: str) -> None:
    assert POLICY.navigation_refusal(url) is None


@pytest.mark.parametrize(("url", "fragment"), [
    ("http://127.0.0.1:7771/", "origin http://127.0.0.1:7771 is outside"),
    ("https://127.0.0.1:7770/", "outside"),
    ("http://evil.example/", "outside"),
    ("file:///etc/passwd", "scheme 'file:'"),
    ("chrome://settings", "scheme 'chrome:'"),
    ("about:config", "scheme 'about:'"),
    ("data:text/html,hi", "scheme 'data:'"),
    ("javascript:alert(1)", "scheme 'javascript:'"),
    ("view-source:http://localhost/", "scheme 'view-source:'"),
    ("localhost/page", "refused"),
])
def test_refused_navigation_names_the_url(url: str, fragment: str) -> None:
    refusal = POLICY.navigation_refusal(url)
    assert refusal is not None and fragment in refusal and repr(url) in refusal


def test_requests() -> None:
    assert POLICY.allows_request("http://127.0.0.1:7770/static/app.js")
    assert POLICY.allows_request("data:image/png;base64,AAAA")
    assert not POLICY.allows_request("http://127.0.0.1:9999/beacon")
    assert not POLICY.allows_request("https://fonts.googleapis.com/css")


def test_blocked_pattern_matches_exactly_the_disallowed_urls() -> None:
    pattern = POLICY.blocked_url_pattern()
    for url in ["http://127.0.0.1:7770/", "http://127.0.0.1:7770", "http://localhost/a", "http://localhost:80/a",
                "https://shop.example/x", "data:text/plain,a", "about:blank"]:
        assert not pattern.match(url), url
    for url in ["http://127.0.0.1:77700/", "http://127.0.0.1:7770.evil.com/", "http://localhost:8080/",
                "http://localhost.evil/", "https://shop.example:444/", "http://shop.example/",
                "http://evil/?u=http://localhost/"]:
        assert pattern.match(url), url
    ws = POLICY.blocked_url_pattern(websocket=True)
    assert not ws.match("ws://127.0.0.1:7770/cable") and ws.match("ws://127.0.0.1:9/cable")


def test_pattern_is_valid_javascript_syntax() -> None:
    # Playwright sends the pattern to the driver as a JS regex: only JS-compatible syntax may appear.
    source = OriginPolicy(["http://a-b.example:81"]).blocked_url_pattern().pattern
    assert "(?P" not in source and "\\Z" not in source
    assert re.compile(source).match("http://a-b.example:82/")


def test_bad_origins_are_rejected() -> None:
    with pytest.raises(ValueError, match="'ftp://x'"):
        OriginPolicy(["ftp://x"])


def test_pages_a_tab_may_show() -> None:
    assert POLICY.allows_page("http://127.0.0.1:7770/a") and POLICY.allows_page("about:blank")
    assert POLICY.allows_page("blob:http://127.0.0.1:7770/0b6c-11")
    for url in ["http://127.0.0.1:7771/", "chrome-error://chromewebdata/", "data:text/html,x", "about:srcdoc",
                "blob:http://evil.example/0b6c", "file:///etc/passwd", "javascript:1"]:
        assert not POLICY.allows_page(url), url


def test_chromium_args_send_everything_else_nowhere() -> None:
    rules, proxy, bypass = POLICY.chromium_args()
    assert rules == ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost, "
                     "EXCLUDE shop.example")
    assert proxy == f"--proxy-server={NOWHERE_PROXY}" and NOWHERE_PROXY.endswith(".invalid:9")
    # <-loopback>: without it Chromium never proxies loopback, and another port of 127.0.0.1 is another origin
    assert bypass == "--proxy-bypass-list=<-loopback>;127.0.0.1:7770;localhost:80;shop.example:443"
    ipv6 = OriginPolicy(["http://[::1]:8080"]).chromium_args()
    assert ipv6[0].endswith("EXCLUDE [::1]") and ipv6[2].endswith(";[::1]:8080")
