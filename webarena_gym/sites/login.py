"""Playwright storage states for logged-in users of the embedded sites (for tasks with ``require_login``).

Logs in by POSTing the site's own login form with :mod:`urllib` and keeps the session cookie, like WebArena's
``auto_login.py`` does through a browser."""

from __future__ import annotations

import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from webarena_gym.errors import LoginError
from webarena_gym.sites.seed.forum import FIRST_USER, USER_PASSWORD
from webarena_gym.sites.seed.shop import ADMIN_PASSWORD, ADMIN_USERNAME, CUSTOMER_PASSWORD

ACCOUNTS: dict[str, tuple[str, str]] = {
    "shopping": ("emma.lopez@gmail.com", CUSTOMER_PASSWORD),
    "shopping_admin": (ADMIN_USERNAME, ADMIN_PASSWORD),
    "reddit": (FIRST_USER, USER_PASSWORD),
}
"""Per site: WebArena's default account, and the password every seeded account of that site shares."""

_LOGIN_FORMS = {
    "shopping": ("/customer/account/loginPost/", "login[username]", "login[password]"),
    "shopping_admin": ("/auth/loginPost/", "login[username]", "login[password]"),
    "reddit": ("/login_check", "_username", "_password"),
}


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def login_state(
    site: str,
    base_url: str,
    username: str,
    password: str,
    *,
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Log in to ``site`` (``shopping``, ``shopping_admin`` or ``reddit``) at ``base_url``; return the
    Playwright
    storage state ``{"cookies": [...], "origins": []}`` holding the session cookie."""
    if site not in _LOGIN_FORMS:
        raise ValueError(f"site must be one of {tuple(_LOGIN_FORMS)}, got {site!r}")
    path, user_field, password_field = _LOGIN_FORMS[site]
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar), _NoRedirect())
    body = urllib.parse.urlencode({user_field: username, password_field: password}).encode()
    location = ""
    try:
        opener.open(urllib.request.Request(base_url.rstrip("/") + path, data=body), timeout=timeout)
    except urllib.error.HTTPError as error:
        if error.code != 303:
            raise LoginError(f"login to {site} at {base_url} answered HTTP {error.code}") from error
        location = error.headers.get("location", "")
    except (urllib.error.URLError, OSError) as error:
        raise LoginError(f"login to {site} at {base_url} failed: {error}") from error
    if not location or "login" in urllib.parse.urlsplit(location).path:  # failures go back to the login form
        raise LoginError(f"login to {site} as {username!r} was refused")
    host = urllib.parse.urlsplit(base_url).hostname or ""
    cookies = [
        {
            "name": c.name,
            "value": c.value or "",
            "domain": host,
            "path": c.path or "/",
            "expires": -1,
            "httpOnly": True,
            "secure": False,
            "sameSite": "Lax",
        }
        for c in jar
        if "_session_" in c.name
    ]
    if not cookies:
        raise LoginError(f"login to {site} as {username!r} set no session cookie")
    return {"cookies": cookies, "origins": []}
