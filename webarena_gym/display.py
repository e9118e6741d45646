"""How the agent sees the sites' addresses.

The embedded sites listen on free ports chosen at start, and every address in an observation (the ``URL:``
line, page texts, error messages) would carry them: the same agent on the same task would then read a
different prompt in every process, so a Ray worker, a resumed run or an evaluation would act differently
from the run that trained it. :class:`URLDisplay` shows each site under a fixed address instead (the
embedded world uses WebArena's conventional ``localhost:7770`` / ``:7780`` / ``:9999``) and maps the
addresses the agent writes (``goto [url]``) back. Real deployments have stable addresses and are shown as
they are (:meth:`URLDisplay.identity`).

>>> d = URLDisplay.from_sites({"shopping": "http://127.0.0.1:41234"}, {"shopping": "http://localhost:7770"})
>>> d.show("URL: http://127.0.0.1:41234/checkout")
'URL: http://localhost:7770/checkout'
>>> d.unshow("http://localhost:7770/checkout")
'http://127.0.0.1:41234/checkout'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from webarena_gym.errors import SiteConfigError

EMBEDDED_SHOWN_SITES: Mapping[str, str] = {
    "shopping": "http://localhost:7770",
    "shopping_admin": "http://localhost:7780",
    "reddit": "http://localhost:9999",
}
"""The addresses the embedded sites are shown under (WebArena's conventional ports)."""


@dataclass(frozen=True)
class URLDisplay:
    """A fixed, two-way mapping between the sites' real network locations (``host:port``) and the ones shown
    to the agent. ``pairs`` holds ``(real, shown)`` netlocs; the identity mapping has none."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def identity(cls) -> URLDisplay:
        """Addresses shown as they are."""
        return cls()

    @classmethod
    def from_sites(cls, real: Mapping[str, str | None], shown: Mapping[str, str]) -> URLDisplay:
        """Map each site of ``real`` (``{name: base URL}``) that ``shown`` names to its shown address; sites
        without a shown address are shown as they are. Raises :class:`SiteConfigError` when two sites would
        be shown alike, or a shown address is another site's real one (the mapping could not be undone)."""
        pairs: list[tuple[str, str]] = []
        for name, url in real.items():
            if url is None or name not in shown:
                continue
            real_loc, shown_loc = _netloc(url, name), _netloc(shown[name], name)
            if real_loc != shown_loc:
                pairs.append((real_loc, shown_loc))
        real_locs = {_netloc(u, n) for n, u in real.items() if u is not None}
        shown_locs = [s for _, s in pairs]
        if len(set(shown_locs)) != len(shown_locs):
            raise SiteConfigError(f"two sites would be shown under the same address: {sorted(shown_locs)}")
        clash = sorted(set(shown_locs) & real_locs)
        if clash:
            raise SiteConfigError(f"shown address(es) {clash} are also real site addresses; pick others")
        return cls(tuple(pairs))

    def show(self, text: str) -> str:
        """``text`` with every real site location replaced by its shown one."""
        return _replace(text, self.pairs)

    def unshow(self, url: str) -> str:
        """A URL the agent wrote, with a shown site location at its start mapped back to the real one (other
        URLs unchanged: relative ones are resolved against the real page URL later)."""
        if not self.pairs:
            return url
        parts = urlsplit(url)
        for real, shown in self.pairs:
            if parts.netloc.lower() == shown:
                return urlunsplit(parts._replace(netloc=real))
        return url


def _netloc(url: str, name: str) -> str:
    parts = urlsplit(url)
    if not parts.netloc:
        raise SiteConfigError(f"site {name!r}: expected an http(s) URL ('http://host:port'), got {url!r}")
    return parts.netloc.lower()


def _replace(text: str, pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs or not text:
        return text
    lookup = dict(pairs)
    alternatives = "|".join(re.escape(r) for r in sorted(lookup, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.-])(?:{alternatives})(?!\d)", re.I)
    return pattern.sub(lambda m: lookup[m.group(0).lower()], text)
