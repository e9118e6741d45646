"""Cart and checkout: add to cart, update quantities, remove, shipping address, place order."""

from __future__ import annotations

import sqlite3
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import tick
from webarena_gym.sites.seed.shop import FLAT_RATE_CENTS
from webarena_gym.sites.shop import queries as q

MAX_QTY = 10_000
ADDRESS_FIELDS = ("firstname", "lastname", "street", "city", "region", "postcode", "country", "telephone")


def cart_items(conn: sqlite3.Connection, customer_id: int) -> list[dict[str, Any]]:
    """The customer's cart lines with product data and ``row_total_cents``."""
    return q.rows(
        conn.execute(
            "SELECT i.id, i.qty, i.product_id, p.name, p.sku, p.url_key, p.price_cents, p.qty AS stock,"
            " p.price_cents * i.qty AS row_total_cents FROM quote_item i JOIN product p ON p.id = "
            "i.product_id"
            " WHERE i.customer_id = ? ORDER BY i.id",
            (customer_id,),
        )
    )


def cart_count(conn: sqlite3.Connection, customer_id: int) -> int:
    """Total quantity in the customer's cart."""
    return conn.execute(
        "SELECT COALESCE(SUM(qty), 0) FROM quote_item WHERE customer_id = ?", (customer_id,)
    ).fetchone()[0]


def _totals(items: list[dict[str, Any]]) -> dict[str, int]:
    subtotal = sum(i["row_total_cents"] for i in items)
    qty = sum(i["qty"] for i in items)
    return {
        "subtotal": subtotal,
        "shipping": FLAT_RATE_CENTS * qty,
        "grand_total": subtotal + FLAT_RATE_CENTS * qty,
        "qty": qty,
    }


async def cart(request: Request) -> Response:
    user_id = web.require_user(request)
    items = cart_items(web.db(request), user_id)
    return web.render(request, "cart.html", items=items, totals=_totals(items))


async def cart_add(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    product_id = web.parse_int(form.get("product_id"), "product_id", minimum=1)
    qty = web.parse_int(form.get("qty"), "qty", default=1, minimum=1, maximum=MAX_QTY)
    conn = web.db(request)
    product = q.product_by(conn, "id", product_id)
    if product is None or product["status"] != 1:
        raise HTTPException(404, f"No product with id {product_id}.")
    back = f"/{product['url_key']}.html"
    in_cart = conn.execute(
        "SELECT qty FROM quote_item WHERE customer_id = ? AND product_id = ?", (user_id, product_id)
    ).fetchone()
    wanted = qty + (in_cart["qty"] if in_cart else 0)
    if wanted > product["qty"]:
        web.flash(request, f"The requested qty is not available (in stock: {product['qty']}).", "error")
        return web.redirect(request, back)
    with conn:
        conn.execute(
            "INSERT INTO quote_item (customer_id, product_id, qty) VALUES (?, ?, ?)"
            " ON CONFLICT (customer_id, product_id) DO UPDATE SET qty = excluded.qty",
            (user_id, product_id, wanted),
        )
    web.flash(request, f"You added {product['name']} to your shopping cart.")
    return web.redirect(request, web.safe_referer(form.get("return_to"), back))


async def cart_update(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    conn = web.db(request)
    items = cart_items(conn, user_id)
    updates = []
    for item in items:
        key = f"qty_{item['id']}"
        if key in form:
            qty = web.parse_int(form[key], f"quantity of {item['name']}", minimum=0, maximum=MAX_QTY)
            if qty > item["stock"]:
                web.flash(request, f"The requested qty of {item['name']} is not available.", "error")
                return web.redirect(request, "/checkout/cart/")
            updates.append((qty, item["id"]))
    with conn:
        for qty, item_id in updates:
            if qty == 0:
                conn.execute("DELETE FROM quote_item WHERE id = ?", (item_id,))
            else:
                conn.execute("UPDATE quote_item SET qty = ? WHERE id = ?", (qty, item_id))
    web.flash(request, "Your shopping cart has been updated.")
    return web.redirect(request, "/checkout/cart/")


async def cart_delete(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    item_id = web.parse_int(form.get("item_id"), "item_id", minimum=1)
    conn = web.db(request)
    with conn:
        deleted = conn.execute("DELETE FROM quote_item WHERE id = ? AND customer_id = ?", (item_id, user_id))
    if deleted.rowcount == 0:
        raise HTTPException(404, f"No cart item {item_id}.")
    web.flash(request, "The item was removed from your shopping cart.")
    return web.redirect(request, "/checkout/cart/")


async def checkout(request: Request) -> Response:
    user_id = web.require_user(request)
    conn = web.db(request)
    items = cart_items(conn, user_id)
    if not items:
        web.flash(request, "You have no items in your shopping cart.", "notice")
        return web.redirect(request, "/checkout/cart/")
    customer = q.one(conn.execute("SELECT * FROM customer WHERE id = ?", (user_id,)))
    return web.render(request, "checkout.html", items=items, totals=_totals(items), address=customer)


async def place_order(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    address = {name: web.form_text(form, name, max_len=255) for name in ADDRESS_FIELDS}
    conn = web.db(request)
    items = cart_items(conn, user_id)
    if not items:
        web.flash(request, "You have no items in your shopping cart.", "notice")
        return web.redirect(request, "/checkout/cart/")
    short = [i["name"] for i in items if i["qty"] > i["stock"]]
    if short:
        web.flash(request, f"Not enough stock for: {', '.join(short)}.", "error")
        return web.redirect(request, "/checkout/cart/")
    customer = q.one(conn.execute("SELECT * FROM customer WHERE id = ?", (user_id,)))
    assert customer is not None
    totals = _totals(items)
    with conn:
        now = tick(conn)
        order_id = conn.execute(
            "INSERT INTO sales_order (increment_id, customer_id, customer_email, customer_firstname,"
            " customer_lastname, status, created_at, updated_at, subtotal_cents, shipping_cents, "
            "grand_total_cents,"
            " total_qty, ship_firstname, ship_lastname, ship_street, ship_city, ship_region, ship_postcode,"
            " ship_country, ship_telephone, shipping_method, payment_method)"
            " VALUES ('', ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                user_id,
                customer["email"],
                customer["firstname"],
                customer["lastname"],
                now,
                now,
                totals["subtotal"],
                totals["shipping"],
                totals["grand_total"],
                totals["qty"],
                *(address[f] for f in ADDRESS_FIELDS),
                "Flat Rate - Fixed",
                "Check / Money order",
            ),
        ).lastrowid
        conn.execute("UPDATE sales_order SET increment_id = ? WHERE id = ?", (f"{order_id:09d}", order_id))
        for item in items:
            conn.execute(
                "INSERT INTO sales_order_item (order_id, product_id, sku, name, price_cents, qty, "
                "row_total_cents)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    order_id,
                    item["product_id"],
                    item["sku"],
                    item["name"],
                    item["price_cents"],
                    item["qty"],
                    item["row_total_cents"],
                ),
            )
            conn.execute("UPDATE product SET qty = qty - ? WHERE id = ?", (item["qty"], item["product_id"]))
        conn.execute(
            "INSERT INTO order_status_history (order_id, status, comment, created_at)"
            " VALUES (?, 'pending', 'Order placed.', ?)",
            (order_id, now),
        )
        conn.execute("DELETE FROM quote_item WHERE customer_id = ?", (user_id,))
    return web.redirect(request, f"/checkout/onepage/success/?order_id={order_id}")


async def success(request: Request) -> Response:
    user_id = web.require_user(request)
    order_id = web.query_int(request, "order_id", 0, minimum=0)
    order = q.one(
        web.db(request).execute(
            "SELECT * FROM sales_order WHERE id = ? AND customer_id = ?", (order_id, user_id)
        )
    )
    if order is None:
        raise HTTPException(404, "No such order.")
    return web.render(request, "success.html", order=order)


routes = [
    Route("/checkout/cart/", cart, methods=["GET"]),
    Route("/checkout/cart/add/", cart_add, methods=["POST"]),
    Route("/checkout/cart/updatePost/", cart_update, methods=["POST"]),
    Route("/checkout/cart/delete/", cart_delete, methods=["POST"]),
    Route("/checkout/", checkout, methods=["GET"]),
    Route("/checkout/placeOrder/", place_order, methods=["POST"]),
    Route("/checkout/onepage/success/", success, methods=["GET"]),
]
