"""Read queries over the ``magento`` database, shared by the storefront, the admin panel and
:mod:`webarena_gym.sites.data` (so task answers are computed by the same code that renders the pages).

Rows come back as plain dicts. Money stays in integer cents; :func:`money` formats it."""

from __future__ import annotations

import sqlite3
from typing import Any, Literal

Period = Literal["day", "month", "year"]
ORDER_STATUSES: tuple[str, ...] = ("pending", "processing", "complete", "canceled", "holded")
STATUS_LABELS = {
    "pending": "Pending",
    "processing": "Processing",
    "complete": "Complete",
    "canceled": "Canceled",
    "holded": "On Hold",
}
REVIEW_STATUS_LABELS = {"approved": "Approved", "pending": "Pending", "not_approved": "Not Approved"}
PRODUCT_SORTS = {"position": "p.id", "name": "p.name", "price": "p.price_cents"}
_PERIOD_LEN = {"day": 10, "month": 7, "year": 4}


def money(cents: int | None) -> str:
    """``$1,234.50`` from cents."""
    value = (cents or 0) / 100
    return f"${value:,.2f}"


def rows(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """All rows of a cursor as dicts."""
    return [dict(row) for row in cursor.fetchall()]


def one(cursor: sqlite3.Cursor) -> dict[str, Any] | None:
    """The first row of a cursor as a dict, or None."""
    row = cursor.fetchone()
    return dict(row) if row is not None else None


# -- catalogue -----------------------------------------------------------------------------------------------


def category_tree(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Top categories in menu order, each with ``children`` (its subcategories)."""
    cats = rows(conn.execute("SELECT * FROM category ORDER BY parent_id IS NOT NULL, position, id"))
    tops = [dict(c, children=[]) for c in cats if c["parent_id"] is None]
    by_id = {c["id"]: c for c in tops}
    for cat in cats:
        if cat["parent_id"] is not None:
            by_id[cat["parent_id"]]["children"].append(cat)
    return tops


def category_by_path(conn: sqlite3.Connection, url_path: str) -> dict[str, Any] | None:
    """The category with this URL path (``electronics`` or ``electronics/headphones``)."""
    return one(conn.execute("SELECT * FROM category WHERE url_path = ?", (url_path,)))


def _category_filter(category_id: int) -> tuple[str, tuple[Any, ...]]:
    return (
        "p.category_id IN (SELECT id FROM category WHERE id = ? OR parent_id = ?)",
        (category_id, category_id),
    )


def list_products(
    conn: sqlite3.Connection,
    *,
    category_id: int | None = None,
    query: str | None = None,
    order: str = "position",
    direction: str = "asc",
    price_range: tuple[int, int] | None = None,
    limit: int | None = 12,
    offset: int = 0,
    include_disabled: bool = False,
    status: int | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Products (with ``category_name``, ``review_count``, ``rating_avg``) and the total count before paging.

    ``query`` matches every word against name, SKU or description; ``price_range`` is in cents, inclusive
    of the low end and exclusive of the high end like Magento's ``price=a-b`` filter. Disabled products
    (status 2) are left out unless ``include_disabled``; ``status`` keeps only one status."""
    where: list[str] = ["1 = 1"]
    args: list[Any] = []
    if not include_disabled:
        where.append("p.status = 1")
    if status is not None:
        where.append("p.status = ?")
        args.append(status)
    if category_id is not None:
        clause, extra = _category_filter(category_id)
        where.append(clause)
        args.extend(extra)
    for word in (query or "").split():
        where.append("(p.name LIKE ? OR p.sku LIKE ? OR p.description LIKE ?)")
        like = f"%{word}%"
        args.extend((like, like, like))
    if price_range is not None:
        where.append("p.price_cents >= ? AND p.price_cents < ?")
        args.extend(price_range)
    sort = PRODUCT_SORTS.get(order, "p.id")
    dir_sql = "DESC" if direction == "desc" else "ASC"
    sql_where = " AND ".join(where)
    total = conn.execute(f"SELECT COUNT(*) FROM product p WHERE {sql_where}", args).fetchone()[0]
    page_sql = " LIMIT ? OFFSET ?" if limit is not None else ""
    page_args = [limit, offset] if limit is not None else []
    items = rows(
        conn.execute(
            "SELECT p.*, c.name AS category_name,"
            " (SELECT COUNT(*) FROM review r WHERE r.product_id = p.id AND r.status = 'approved') AS "
            "review_count,"
            " (SELECT AVG(rating) FROM review r WHERE r.product_id = p.id AND r.status = 'approved') "
            "AS rating_avg"
            f" FROM product p JOIN category c ON c.id = p.category_id WHERE {sql_where}"
            f" ORDER BY {sort} {dir_sql}, p.id {dir_sql}{page_sql}",
            [*args, *page_args],
        )
    )
    return items, total


def product_by(
    conn: sqlite3.Connection, field: Literal["id", "sku", "url_key"], value: Any
) -> dict[str, Any] | None:
    """One product by id, SKU or URL key, with its category's name and path."""
    return one(
        conn.execute(
            "SELECT p.*, c.name AS category_name, c.url_path AS category_path FROM product p"
            f" JOIN category c ON c.id = p.category_id WHERE p.{field} = ?",
            (value,),
        )
    )


def product_reviews(
    conn: sqlite3.Connection,
    product_id: int,
    *,
    approved_only: bool = True,
) -> list[dict[str, Any]]:
    """Reviews of a product, oldest first (Magento's REST order: the last one is the latest)."""
    status = "AND status = 'approved'" if approved_only else ""
    return rows(
        conn.execute(
            f"SELECT * FROM review WHERE product_id = ? {status} ORDER BY created_at, id", (product_id,)
        )
    )


# -- orders --------------------------------------------------------------------------------------------------


def list_orders(
    conn: sqlite3.Connection,
    *,
    customer_id: int | None = None,
    customer: str | None = None,
    status: str | None = None,
    date_from: str | None = None,
    date_to: str | None = None,
    increment_id: str | None = None,
    limit: int | None = 20,
    offset: int = 0,
    newest_first: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """Orders matching the filters and the total count. ``customer`` matches name or e-mail (substring);
    ``date_from``/``date_to`` are inclusive ``YYYY-MM-DD`` days."""
    where: list[str] = ["1 = 1"]
    args: list[Any] = []
    if customer_id is not None:
        where.append("customer_id = ?")
        args.append(customer_id)
    if customer:
        where.append("(customer_email LIKE ? OR customer_firstname || ' ' || customer_lastname LIKE ?)")
        args.extend((f"%{customer}%", f"%{customer}%"))
    if status:
        where.append("status = ?")
        args.append(status)
    if date_from:
        where.append("created_at >= ?")
        args.append(f"{date_from} 00:00:00")
    if date_to:
        where.append("created_at <= ?")
        args.append(f"{date_to} 23:59:59")
    if increment_id:
        where.append("increment_id LIKE ?")
        args.append(f"%{increment_id}%")
    sql_where = " AND ".join(where)
    total = conn.execute(f"SELECT COUNT(*) FROM sales_order WHERE {sql_where}", args).fetchone()[0]
    direction = "DESC" if newest_first else "ASC"
    page_sql = " LIMIT ? OFFSET ?" if limit is not None else ""
    page_args = [limit, offset] if limit is not None else []
    items = rows(
        conn.execute(
            f"SELECT * FROM sales_order WHERE {sql_where}"
            f" ORDER BY created_at {direction}, id {direction}{page_sql}",
            [*args, *page_args],
        )
    )
    return items, total


def order_detail(conn: sqlite3.Connection, order_id: int) -> dict[str, Any] | None:
    """An order with its ``items`` and status ``history``."""
    order = one(conn.execute("SELECT * FROM sales_order WHERE id = ?", (order_id,)))
    if order is None:
        return None
    order["items"] = rows(
        conn.execute("SELECT * FROM sales_order_item WHERE order_id = ? ORDER BY id", (order_id,))
    )
    order["history"] = rows(
        conn.execute(
            "SELECT * FROM order_status_history WHERE order_id = ? ORDER BY created_at DESC, id DESC",
            (order_id,),
        )
    )
    return order


# -- reports -------------------------------------------------------------------------------------------------


def _period_expr(period: Period) -> str:
    if period not in _PERIOD_LEN:
        raise ValueError(f"period must be one of {tuple(_PERIOD_LEN)}, got {period!r}")
    return f"substr(o.created_at, 1, {_PERIOD_LEN[period]})"


def bestsellers(
    conn: sqlite3.Connection,
    period: Period = "month",
    *,
    date_from: str | None = None,
    date_to: str | None = None,
    limit_per_period: int | None = None,
) -> list[dict[str, Any]]:
    """Magento's bestsellers report: quantity ordered per product and period, canceled orders excluded.

    Rows: ``period`` (``2023``, ``2023-04`` or ``2023-04-17``), ``rank`` (1 = best; ties broken by product
    name then id, so check ``qty`` for ties), ``product_id``, ``sku``, ``name``, ``qty``,
    ``revenue_cents``."""
    expr = _period_expr(period)
    where, args = ["o.status != 'canceled'"], []
    if date_from:
        where.append("o.created_at >= ?")
        args.append(f"{date_from} 00:00:00")
    if date_to:
        where.append("o.created_at <= ?")
        args.append(f"{date_to} 23:59:59")
    found = rows(
        conn.execute(
            f"SELECT {expr} AS period, i.product_id, p.sku, p.name, SUM(i.qty) AS qty,"
            " SUM(i.row_total_cents) AS revenue_cents"
            " FROM sales_order_item i JOIN sales_order o ON o.id = i.order_id JOIN product p ON p.id "
            "= i.product_id"
            f" WHERE {' AND '.join(where)} GROUP BY period, i.product_id"
            " ORDER BY period, qty DESC, p.name, p.id",
            args,
        )
    )
    result: list[dict[str, Any]] = []
    rank, current = 0, None
    for row in found:
        rank = rank + 1 if row["period"] == current else 1
        current = row["period"]
        if limit_per_period is None or rank <= limit_per_period:
            result.append(dict(row, rank=rank))
    return result


def sales_totals(
    conn: sqlite3.Connection,
    period: Period = "month",
    *,
    date_from: str | None = None,
    date_to: str | None = None,
    statuses: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """Magento's sales (orders) report: per period ``orders``, ``items`` (quantity), ``subtotal_cents``,
    ``shipping_cents``, ``total_cents``. ``statuses`` limits the orders counted (default: all but
    canceled)."""
    expr = _period_expr(period)
    where: list[str] = []
    args: list[Any] = []
    if statuses:
        where.append(f"o.status IN ({', '.join('?' * len(statuses))})")
        args.extend(statuses)
    else:
        where.append("o.status != 'canceled'")
    if date_from:
        where.append("o.created_at >= ?")
        args.append(f"{date_from} 00:00:00")
    if date_to:
        where.append("o.created_at <= ?")
        args.append(f"{date_to} 23:59:59")
    return rows(
        conn.execute(
            f"SELECT {expr} AS period, COUNT(*) AS orders, SUM(o.total_qty) AS items,"
            " SUM(o.subtotal_cents) AS subtotal_cents, SUM(o.shipping_cents) AS shipping_cents,"
            f" SUM(o.grand_total_cents) AS total_cents FROM sales_order o WHERE {' AND '.join(where)}"
            " GROUP BY period ORDER BY period",
            args,
        )
    )
