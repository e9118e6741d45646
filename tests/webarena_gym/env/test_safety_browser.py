"""The browser reaches only the configured origins: refused gotos, blocked links, blocked page requests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.browser

FindId = Callable[[dict[str, str], str], int]


@pytest.mark.parametrize(("url", "fragment"), [
    ("http://example.com/", "origin http://example.com:80 is outside the sites of this task"),
    ("OTHER/index.html", "is outside the sites of this task"),
    ("file:///etc/passwd", "scheme 'file:' is refused"),
    ("chrome://version", "scheme 'chrome:' is refused"),
    ("about:config", "scheme 'about:' is refused"),
    ("data:text/html,<h1>hi</h1>", "scheme 'data:' is refused"),
    ("javascript:document.title='x'", "scheme 'javascript:' is refused"),
    ("view-source:SITE/index.html", "scheme 'view-source:' is refused"),
])
def test_goto_outside_the_sites_is_refused(env: Any, site: Any, other_site: Any, url: str,
                                           fragment: str) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    start = obs["url"]
    url = url.replace("OTHER", other_site.url).replace("SITE", site.url)
    obs, reward, terminated, truncated, _ = env.step(f"goto [{url}]")
    assert fragment in obs["last_action_error"]
    assert obs["url"] == start and not terminated and not truncated
    obs, *_ = env.step("scroll [down]")  # the episode goes on
    assert obs["last_action_error"] == ""


def test_goto_about_blank_is_allowed(env: Any) -> None:
    env.reset(options={"task_id": 0})
    obs, *_ = env.step("goto [about:blank]")
    assert obs["url"] == "about:blank" and obs["last_action_error"] == ""


def test_page_requests_to_other_origins_are_blocked(env: Any, other_site: Any) -> None:
    other_site.requests.clear()
    obs, _ = env.reset(options={"task_id": 2})  # leak.html loads an image and fetches from other_site
    env.step("scroll [down]")
    assert "StaticText 'fetch: blocked'" in env.step("scroll [up]")[0]["axtree"]
    assert other_site.requests == []


def test_clicking_a_link_to_another_origin_stays_and_reports(env: Any, other_site: Any,
                                                             find_id: FindId) -> None:
    other_site.requests.clear()
    obs, _ = env.reset(options={"task_id": 2})
    start = obs["url"]
    obs, *_ = env.step("click [{}]".format(find_id(obs, "link 'Other origin link'")))
    assert f"navigation to '{other_site.url}/landing.html' was blocked" in obs["last_action_error"]
    assert obs["url"] == start and obs["tabs"] == "Tab 0 (current): Leak"
    assert other_site.requests == []


def test_unresolvable_link_is_blocked_before_dns(env: Any, find_id: FindId) -> None:
    obs, _ = env.reset(options={"task_id": 0})
    obs, *_ = env.step("click [{}]".format(find_id(obs, "link 'Elsewhere'")))
    assert "'http://outside.invalid/page.html' was blocked" in obs["last_action_error"]
    assert obs["url"].endswith("/index.html")


def test_extra_allowed_origins(env_factory: Callable[..., Any], other_site: Any, find_id: FindId) -> None:
    other_site.requests.clear()
    env = env_factory(allowed_origins=[other_site.url])
    obs, _ = env.reset(options={"task_id": 2})
    obs, *_ = env.step("click [{}]".format(find_id(obs, "link 'Other origin link'")))
    assert obs["url"] == f"{other_site.url}/landing.html" and obs["last_action_error"] == ""
    assert "/beacon" in other_site.requests
    env.close()
