"""Read-only query API over the seeded world, for computing task reference answers from the data.

>>> with SiteData(seed=0) as data:
...     top = data.bestsellers("year", limit_per_period=1)   # [{"period": "2022", "name": ..., "qty": ...}]
...     emma = data.orders(customer_email="emma.lopez@gmail.com")

The queries are the very functions the sites use to render their pages
(:mod:`webarena_gym.sites.shop.queries`, :mod:`webarena_gym.sites.forum.queries`), so an answer computed here
is what the agent can read there. Rows are plain dicts; money is in integer cents (``*_cents``), time stamps
are ``YYYY-MM-DD HH:MM:SS`` text."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any

from webarena_gym.sites.db import DATABASES, connect
from webarena_gym.sites.forum import queries as fq
from webarena_gym.sites.seed import DEFAULT_SEED, pristine_paths
from webarena_gym.sites.shop import queries as sq
from webarena_gym.sites.shop.queries import Period


class SiteData:
    """Read-only access to the pristine databases of ``seed`` (or to explicit database files via
    ``paths``)."""

    def __init__(
        self,
        seed: int = DEFAULT_SEED,
        *,
        cache_dir: str | Path | None = None,
        paths: dict[str, Path] | None = None,
    ) -> None:
        chosen = paths if paths is not None else pristine_paths(seed, cache_dir)
        missing = [name for name in DATABASES if name not in chosen]
        if missing:
            raise ValueError(f"paths lacks databases {missing}; expected keys {DATABASES}")
        self.seed = seed
        self._conns = {name: connect(chosen[name], readonly=True) for name in DATABASES}

    def connection(self, name: str) -> sqlite3.Connection:
        """The read-only connection to ``magento`` or ``postmill``, for queries not covered below."""
        if name not in self._conns:
            raise ValueError(f"unknown database {name!r}; expected one of {DATABASES}")
        return self._conns[name]

    @property
    def _shop(self) -> sqlite3.Connection:
        return self._conns["magento"]

    @property
    def _forum(self) -> sqlite3.Connection:
        return self._conns["postmill"]

    # -- shop ------------------------------------------------------------------------------------------------

    def categories(self) -> list[dict[str, Any]]:
        """Top categories with their ``children``; each has ``name`` and ``url_path`` (page:
        ``/<url_path>.html``)."""
        return sq.category_tree(self._shop)

    def products(
        self, category: str | None = None, *, query: str | None = None, include_disabled: bool = False
    ) -> list[dict[str, Any]]:
        """Products of a category (``url_path`` or name, subcategories included) and/or matching a search."""
        category_id = None
        if category is not None:
            row = self._shop.execute(
                "SELECT id FROM category WHERE url_path = ? OR name = ?", (category, category)
            ).fetchone()
            if row is None:
                raise ValueError(f"no category {category!r}")
            category_id = row["id"]
        found, _ = sq.list_products(
            self._shop, category_id=category_id, query=query, limit=None, include_disabled=include_disabled
        )
        return found

    def product(self, sku: str) -> dict[str, Any]:
        """One product by SKU with its approved ``reviews`` (oldest first)."""
        product = sq.product_by(self._shop, "sku", sku)
        if product is None:
            raise ValueError(f"no product with SKU {sku!r}")
        product["reviews"] = sq.product_reviews(self._shop, product["id"])
        return product

    def reviews(self, *, approved_only: bool = False) -> list[dict[str, Any]]:
        """All reviews (oldest first) with ``product_name`` and ``sku``."""
        status = "WHERE r.status = 'approved'" if approved_only else ""
        return sq.rows(
            self._shop.execute(
                "SELECT r.*, p.name AS product_name, p.sku FROM review r JOIN product p ON p.id = "
                "r.product_id"
                f" {status} ORDER BY r.created_at, r.id"
            )
        )

    def customers(self) -> list[dict[str, Any]]:
        """Customer accounts (without password hashes)."""
        return sq.rows(
            self._shop.execute(
                "SELECT id, email, firstname, lastname, created_at, street, city, region, postcode, "
                "country, telephone"
                " FROM customer ORDER BY id"
            )
        )

    def orders(
        self,
        *,
        customer_email: str | None = None,
        status: str | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
    ) -> list[dict[str, Any]]:
        """Orders, oldest first (``date_from``/``date_to`` are inclusive ``YYYY-MM-DD`` days)."""
        customer_id = None
        if customer_email is not None:
            row = self._shop.execute("SELECT id FROM customer WHERE email = ?", (customer_email,)).fetchone()
            if row is None:
                raise ValueError(f"no customer {customer_email!r}")
            customer_id = row["id"]
        found, _ = sq.list_orders(
            self._shop,
            customer_id=customer_id,
            status=status,
            date_from=date_from,
            date_to=date_to,
            limit=None,
            newest_first=False,
        )
        return found

    def order(self, order_id: int) -> dict[str, Any]:
        """One order (``id`` = ``int(increment_id)``) with ``items`` and status ``history``."""
        order = sq.order_detail(self._shop, order_id)
        if order is None:
            raise ValueError(f"no order {order_id}")
        return order

    def bestsellers(
        self,
        period: Period = "month",
        *,
        date_from: str | None = None,
        date_to: str | None = None,
        limit_per_period: int | None = None,
    ) -> list[dict[str, Any]]:
        """The admin's bestsellers report rows (see :func:`webarena_gym.sites.shop.queries.bestsellers`)."""
        return sq.bestsellers(
            self._shop, period, date_from=date_from, date_to=date_to, limit_per_period=limit_per_period
        )

    def sales_totals(
        self,
        period: Period = "month",
        *,
        date_from: str | None = None,
        date_to: str | None = None,
        statuses: tuple[str, ...] | None = None,
    ) -> list[dict[str, Any]]:
        """The admin's sales report rows (see :func:`webarena_gym.sites.shop.queries.sales_totals`)."""
        return sq.sales_totals(self._shop, period, date_from=date_from, date_to=date_to, statuses=statuses)

    # -- forum -----------------------------------------------------------------------------------------------

    def forums(self) -> list[dict[str, Any]]:
        """Forums by name with ``post_count``."""
        return fq.forums(self._forum)

    def forum_users(self) -> list[dict[str, Any]]:
        """Forum accounts (without password hashes)."""
        return sq.rows(
            self._forum.execute("SELECT id, username, biography, created_at FROM users ORDER BY id")
        )

    def posts(
        self,
        forum: str | None = None,
        *,
        username: str | None = None,
        sort: fq.Sort = "new",
    ) -> list[dict[str, Any]]:
        """Posts in listing order with ``score``, vote and comment counts (page: :func:`post_path`)."""
        forum_id = user_id = None
        if forum is not None:
            found = fq.forum_by_name(self._forum, forum)
            if found is None:
                raise ValueError(f"no forum {forum!r}")
            forum_id = found["id"]
        if username is not None:
            user = fq.user_by_name(self._forum, username)
            if user is None:
                raise ValueError(f"no forum user {username!r}")
            user_id = user["id"]
        return fq.posts(self._forum, forum_id=forum_id, user_id=user_id, sort=sort)

    def post(self, post_id: int) -> dict[str, Any]:
        """One post with its comments (flat, oldest first) under ``comments``."""
        post = fq.post(self._forum, post_id)
        if post is None:
            raise ValueError(f"no post {post_id}")
        post["comments"] = fq.comments(self._forum, submission_id=post_id)
        return post

    def comments(self, *, username: str | None = None) -> list[dict[str, Any]]:
        """Comments, oldest first, optionally of one user."""
        user_id = None
        if username is not None:
            user = fq.user_by_name(self._forum, username)
            if user is None:
                raise ValueError(f"no forum user {username!r}")
            user_id = user["id"]
        return fq.comments(self._forum, user_id=user_id)

    # -- resources -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections."""
        for conn in self._conns.values():
            conn.close()

    def __enter__(self) -> SiteData:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


post_path = fq.post_path
"""The path of a post's page on the forum (``/f/<forum>/<id>/<slug>``)."""
