"""The read-only query API agrees with the raw data (reference answers are computed through it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from webarena_gym.sites.data import SiteData, post_path


@pytest.fixture(scope="module")
def data(sites_cache: Path) -> Iterator[SiteData]:
    with SiteData(0, cache_dir=sites_cache) as site_data:
        yield site_data


def test_bestsellers_are_quantities_of_non_canceled_orders(data: SiteData) -> None:
    expected: dict[tuple[str, str], int] = defaultdict(int)
    for order in data.orders(date_from="2023-01-01", date_to="2023-12-31"):
        if order["status"] != "canceled":
            for item in data.order(order["id"])["items"]:
                expected[(order["created_at"][:7], item["sku"])] += item["qty"]
    rows = data.bestsellers("month", date_from="2023-01-01", date_to="2023-12-31")
    assert {(r["period"], r["sku"]): r["qty"] for r in rows} == dict(expected)
    first = [r for r in rows if r["period"] == "2023-03"]
    assert [r["rank"] for r in first] == list(range(1, len(first) + 1))
    assert all(a["qty"] >= b["qty"] for a, b in zip(first, first[1:], strict=False))


def test_sales_totals_add_up(data: SiteData) -> None:
    totals = data.sales_totals("year")
    orders = [o for o in data.orders() if o["status"] != "canceled"]
    assert [t["period"] for t in totals] == ["2022", "2023"]
    assert sum(t["orders"] for t in totals) == len(orders)
    assert sum(t["total_cents"] for t in totals) == sum(o["grand_total_cents"] for o in orders)
    complete = data.sales_totals("year", statuses=("complete",))
    assert sum(t["orders"] for t in complete) == len(data.orders(status="complete"))


def test_catalogue_queries(data: SiteData) -> None:
    tree = data.categories()
    assert len(tree) == 8 and all(top["children"] for top in tree)
    top = tree[0]
    in_top = data.products(top["url_path"])
    in_children = [p for child in top["children"] for p in data.products(child["url_path"])]
    assert sorted(p["id"] for p in in_top) == sorted(p["id"] for p in in_children)
    product = data.product(in_top[0]["sku"])
    assert product["name"] == in_top[0]["name"]
    assert all(r["status"] == "approved" for r in product["reviews"])
    assert data.products(query=product["sku"])[0]["sku"] == product["sku"]
    with pytest.raises(ValueError, match="no category"):
        data.products("no-such-category")


def test_orders_of_a_customer(data: SiteData) -> None:
    emma = data.orders(customer_email="emma.lopez@gmail.com")
    assert emma and all(o["customer_email"] == "emma.lopez@gmail.com" for o in emma)
    assert [o["created_at"] for o in emma] == sorted(o["created_at"] for o in emma)
    assert data.order(emma[-1]["id"])["increment_id"] == emma[-1]["increment_id"]


def test_forum_queries(data: SiteData) -> None:
    forums = {f["name"]: f for f in data.forums()}
    assert "books" in forums
    posts = data.posts("books", sort="top")
    assert len(posts) == forums["books"]["post_count"]
    assert all(a["score"] >= b["score"] for a, b in zip(posts, posts[1:], strict=False))
    new = data.posts("books", sort="new")
    assert all(a["created_at"] >= b["created_at"] for a, b in zip(new, new[1:], strict=False))
    post = data.post(posts[0]["id"])
    assert len(post["comments"]) == post["comment_count"]
    assert post_path(post).startswith(f"/f/books/{post['id']}/")
    mine = data.posts(username="MarvelsGrantMan136")
    assert all(p["username"] == "MarvelsGrantMan136" for p in mine)
    assert all(c["username"] == "MarvelsGrantMan136" for c in data.comments(username="MarvelsGrantMan136"))
