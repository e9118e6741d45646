"""Which URLs the browser may reach: the configured site origins, nothing else.

An :class:`OriginPolicy` answers three questions: may the agent ``goto`` this URL (refusals become
``last_action_error``), may the page load this resource (refused requests are aborted by a context route), and
may a tab show this URL (a tab that ends up elsewhere, e.g. after a redirect, is taken back). Only
``http``/``https`` URLs of an allowed origin pass, plus ``about:blank`` for navigation; ``file:``,
``chrome:``, other ``about:`` pages, ``data:``, ``javascript:`` and every other scheme or host are refused.

Page-level checks see only what Playwright reports (its routes miss redirect hops, and Chromium's own traffic
never passes them), so :meth:`OriginPolicy.chromium_args` also closes the network below them: every host name
resolves to nothing but the allowed hosts, and every connection that is not to an allowed ``host:port`` goes
to a proxy that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["NOWHERE_PROXY", "Origin", "OriginPolicy", "parse_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_REGEX_SPECIALS = set("\\^$.|?*+()[]{}/")

NOWHERE_PROXY = "http://origin-policy.invalid:9"
"""The proxy every connection outside the allowed origins is sent to: ``.invalid`` never resolves (RFC 2606),
and the host resolver rules make it fail inside Chromium without a DNS query."""


@dataclass(frozen=True, order=True)
class Origin:
    """A web origin with its port made explicit."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def netloc(self) -> str:
        """``host:port``, with an IPv6 host in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_origin(url: str) -> Origin | None:
    """The origin of an ``http``/``https`` URL (or bare origin), or ``None`` for any other scheme or a bad
    URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return Origin(scheme, host, port if port is not None else _DEFAULT_PORTS[scheme])


def _js_escape(text: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIALS else c for c in text)


class OriginPolicy:
    """The set of origins the browser may reach.

    ``origins`` are URLs or bare origins (``http://127.0.0.1:7770``); each must be ``http``/``https`` with a
    host.
    """

    def __init__(self, origins: Iterable[str]) -> None:
        parsed: dict[Origin, None] = {}
        for text in origins:
            origin = parse_origin(text)
            if origin is None:
                raise ValueError(f"allowed origin {text!r} is not an http(s) URL with a host, "
                                 "expected e.g. 'http://127.0.0.1:7770'")
            parsed[origin] = None
        self.origins: frozenset[Origin] = frozenset(parsed)
        self._listed = tuple(parsed)

    def describe(self) -> str:
        """The allowed origins as a short comma-separated list, in the order they were given (messages then
        read the same in every process, whatever ports the sites got)."""
        return ", ".join(str(o) for o in self._listed) or "(none)"

    def allows_request(self, url: str) -> bool:
        """Whether the page may load this URL (``data:`` and ``blob:`` resources stay inside the page)."""
        lowered = url[:6].lower()
        if lowered.startswith(("data:", "blob:")) or url == "about:blank":
            return True
        origin = parse_origin(url)
        return origin is not None and origin in self.origins

    def allows_page(self, url: str) -> bool:
        """Whether a tab may show ``url``: ``about:blank``, a page of an allowed origin, or a ``blob:`` one of
        them made."""
        text = url.strip()
        if text == "about:blank":
            return True
        if text[:5].lower() == "blob:":
            text = text[5:]
        return parse_origin(text) in self.origins

    def chromium_args(self) -> tuple[str, ...]:
        """Chromium flags that keep all of the browser's traffic, its own included, on the allowed origins.

        Host names other than the allowed hosts resolve to nothing (no DNS query leaves the process), and
        every connection except to an allowed ``host:port`` goes to :data:`NOWHERE_PROXY`, loopback included
        (``<-loopback>``: another port of 127.0.0.1 is another origin). The first hop of a request is also
        checked by the context route; this covers redirect hops, Chromium's own services (updates, sign-in,
        autofill) and anything else no route sees.
        """
        listed = sorted(self.origins)
        hosts = sorted({o.host if ":" not in o.host else f"[{o.host}]" for o in listed})
        rules = ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {host}" for host in hosts)])
        bypass = ";".join(["<-loopback>", *dict.fromkeys(o.netloc for o in listed)])
        return (f"--host-resolver-rules={rules}", f"--proxy-server={NOWHERE_PROXY}",
                f"--proxy-bypass-list={bypass}")

    def navigation_refusal(self, url: str) -> str | None:
        """Why the agent may not navigate to ``url``, or ``None`` when it may."""
        if url.strip() == "about:blank":
            return None
        scheme = urlsplit(url.strip()).scheme.lower() if ":" in url else ""
        if scheme not in _DEFAULT_PORTS:
            shown = f"scheme {scheme + ':'!r}" if scheme else "a URL without scheme"
            return (f"{url!r} is not allowed: {shown} is refused; only the sites {self.describe()} "
                    "may be opened")
        origin = parse_origin(url)
        if origin is None:
            return f"{url!r} is not a valid URL"
        if origin not in self.origins:
            return (f"{url!r} is not allowed: origin {origin} is outside the sites of this task "
                    f"({self.describe()})")
        return None

    def blocked_url_pattern(self, *, websocket: bool = False) -> re.Pattern[str]:
        """A regex matching URLs that must be blocked, for ``BrowserContext.route`` (``route_web_socket`` with
        ``websocket=True``: then the allowed origins are matched with ``ws``/``wss`` schemes).

        Playwright evaluates it in the driver (JavaScript syntax), so allowed requests never cross into
        Python; the route handler re-checks with :meth:`allows_request` anyway.
        """
        alternatives = [] if websocket else ["about:", "data:", "blob:"]
        for origin in sorted(self.origins):
            scheme = {"http": "ws", "https": "wss"}[origin.scheme] if websocket else origin.scheme
            host = _js_escape(origin.host if ":" not in origin.host else f"[{origin.host}]")
            port = f":{origin.port}"
            if _DEFAULT_PORTS[origin.scheme] == origin.port:
                port = f"(?:{port})?"
            alternatives.append(f"{scheme}://{host}{port}(?:[/?#]|$)")
        if not alternatives:
            return re.compile(".*")
        return re.compile("^(?!(?:" + "|".join(alternatives) + ")).*")
