"""URLDisplay: the fixed addresses the agent sees for sites on changing ports, and the way back."""

from __future__ import annotations

import pytest

from webarena_gym.display import EMBEDDED_SHOWN_SITES, URLDisplay
from webarena_gym.errors import SiteConfigError

REAL = {"shopping": "http://127.0.0.1:41234", "shopping_admin": "http://127.0.0.1:4123",
        "reddit": "http://127.0.0.1:39001", "gitlab": None}


def test_show_replaces_every_real_location_and_only_whole_ports() -> None:
    d = URLDisplay.from_sites(REAL, EMBEDDED_SHOWN_SITES)
    text = ("URL: http://127.0.0.1:41234/catalog?q=1\nsee 127.0.0.1:4123/admin and HTTP://127.0.0.1:39001/f/x;"
            " not 127.0.0.1:412345 or 127.0.0.1:5000")
    assert d.show(text) == ("URL: http://localhost:7770/catalog?q=1\nsee localhost:7780/admin and "
                            "HTTP://localhost:9999/f/x; not 127.0.0.1:412345 or 127.0.0.1:5000")


def test_unshow_maps_shown_addresses_back_and_leaves_others() -> None:
    d = URLDisplay.from_sites(REAL, EMBEDDED_SHOWN_SITES)
    assert d.unshow("http://localhost:7780/admin/sales?x=1#top") == "http://127.0.0.1:4123/admin/sales?x=1#top"
    assert d.unshow("http://LOCALHOST:9999/f/news") == "http://127.0.0.1:39001/f/news"
    for url in ("/relative/path", "http://localhost:7771/", "http://example.com/", "about:blank"):
        assert d.unshow(url) == url
    for url in ("http://127.0.0.1:41234/a", "http://localhost:7770/b?c=d"):
        assert d.unshow(d.show(url)) == d.unshow(url)


def test_identity_shows_everything_as_it_is() -> None:
    d = URLDisplay.identity()
    assert d.show("http://127.0.0.1:41234/") == "http://127.0.0.1:41234/"
    assert d.unshow("http://localhost:7770/") == "http://localhost:7770/"
    same = URLDisplay.from_sites({"shopping": "http://localhost:7770"}, EMBEDDED_SHOWN_SITES)
    assert same.pairs == ()


def test_mappings_that_could_not_be_undone_are_refused() -> None:
    with pytest.raises(SiteConfigError, match="same address"):
        URLDisplay.from_sites(REAL, {"shopping": "http://localhost:7770", "reddit": "http://localhost:7770"})
    with pytest.raises(SiteConfigError, match="also real site addresses"):
        URLDisplay.from_sites({"shopping": "http://127.0.0.1:5000", "reddit": "http://localhost:7770"},
                              {"shopping": "http://localhost:7770"})
    with pytest.raises(SiteConfigError, match="expected an http"):
        URLDisplay.from_sites({"shopping": "127.0.0.1"}, EMBEDDED_SHOWN_SITES)
