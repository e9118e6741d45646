"""Queries over the seeded world that several templates share: what a page shows, and where.

Everything here is computed from :class:`~webarena_gym.sites.data.SiteData` with the rules the sites use to
render their pages (page sizes, default sort orders), so a reference answer is what the agent can read.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from webarena_gym.sites.shop.queries import STATUS_LABELS, money

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData

SHOP = "__SHOPPING__"
ADMIN = "__SHOPPING_ADMIN__"
FORUM = "__REDDIT__"
CUSTOMER_EMAIL = "emma.lopez@gmail.com"
"""The storefront account of the tasks (WebArena's shopping account)."""
FORUM_USER = "MarvelsGrantMan136"
"""The forum account of the tasks (WebArena's reddit account)."""

SEARCH_PAGE_SIZE = 12
"""Products per storefront listing page."""
ORDERS_PER_PAGE = 10
"""Orders per page of the storefront's order history."""
POSTS_PER_PAGE = 20
"""Posts per forum listing page."""

__all__ = [
    "ADMIN",
    "CUSTOMER_EMAIL",
    "FORUM",
    "FORUM_USER",
    "SHOP",
    "STATUS_LABELS",
    "amount",
    "money",
]


def amount(cents: int) -> str:
    """Money without the currency sign (``1,234.50``): what a reference answer must include."""
    return money(cents).lstrip("$")


def unique_products(data: SiteData) -> list[dict[str, Any]]:
    """Enabled products whose name no other product shares, by id."""
    products = data.products()
    counts = Counter(p["name"] for p in data.products(include_disabled=True))
    return [p for p in products if counts[p["name"]] == 1]


def found_by_search(data: SiteData, name: str) -> bool:
    """Whether searching the storefront for the full product name lists it on the first results page."""
    results = sorted(data.products(query=name), key=lambda p: (p["name"], p["id"]))
    names = [p["name"] for p in results[:SEARCH_PAGE_SIZE]]
    return name in names


def searchable_products(data: SiteData) -> list[dict[str, Any]]:
    """Products with a unique name that a search for that name shows on its first page."""
    return [p for p in unique_products(data) if found_by_search(data, p["name"])]


def subcategories(data: SiteData) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(top category, subcategory) pairs in menu order."""
    return [(top, sub) for top in data.categories() for sub in top["children"]]


def history_page(data: SiteData, order_id: int) -> int:
    """1-based page of the customer's order history (newest first) that lists ``order_id``."""
    newest = sorted(
        data.orders(customer_email=CUSTOMER_EMAIL), key=lambda o: (o["created_at"], o["id"]), reverse=True
    )
    index = [o["id"] for o in newest].index(order_id)
    return index // ORDERS_PER_PAGE + 1


def forum_page(data: SiteData, forum: str, post_id: int, sort: str) -> int:
    """1-based page of the forum listing (``sort``) that shows ``post_id``."""
    ids = [p["id"] for p in data.posts(forum, sort=sort)]  # type: ignore[arg-type]
    return ids.index(post_id) // POSTS_PER_PAGE + 1


def status_label(status: str) -> str:
    """The label an order status has on the pages (``holded`` -> ``On Hold``)."""
    return STATUS_LABELS[status]
