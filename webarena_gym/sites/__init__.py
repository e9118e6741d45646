"""Embedded stand-ins for WebArena's sites: a shop, its admin panel and a forum, on real 127.0.0.1 ports.

>>> from webarena_gym.sites import EmbeddedSites
>>> with EmbeddedSites() as sites:
...     urls = sites.urls                    # {"shopping": ..., "shopping_admin": ..., "reddit": ...}
...     state = sites.login_state("shopping")  # Playwright storage state of emma.lopez@gmail.com
...     sites.reset()

Importing this package starts nothing; the web stack is imported by the server process only. Seeded accounts:
see :data:`ACCOUNTS`. Reference answers for tasks: :class:`webarena_gym.sites.data.SiteData`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webarena_gym.lazy import lazy_exports

_LAZY = {
    "EmbeddedSites": "webarena_gym.sites.lifecycle",
    "SiteStartError": "webarena_gym.sites.lifecycle",
    "login_state": "webarena_gym.sites.login",
    "LoginError": "webarena_gym.sites.login",
    "ACCOUNTS": "webarena_gym.sites.login",
    "SiteData": "webarena_gym.sites.data",
    "pristine_paths": "webarena_gym.sites.seed",
    "DEFAULT_SEED": "webarena_gym.sites.seed",
}

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData
    from webarena_gym.sites.lifecycle import EmbeddedSites, SiteStartError
    from webarena_gym.sites.login import ACCOUNTS, LoginError, login_state
    from webarena_gym.sites.seed import DEFAULT_SEED, pristine_paths


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "ACCOUNTS",
    "DEFAULT_SEED",
    "EmbeddedSites",
    "LoginError",
    "SiteData",
    "SiteStartError",
    "login_state",
    "pristine_paths",
]
