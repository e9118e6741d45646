"""Customer account pages: sign in/out, account dashboard, name and address, order history, wish list."""

from __future__ import annotations

from urllib.parse import quote

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import check_password, tick
from webarena_gym.sites.shop import queries as q

ORDERS_PER_PAGE = 10
LOGOUT_PATH = "/customer/account/logout/"
ADDRESS_FIELDS = ("street", "city", "region", "postcode", "country", "telephone")


async def login_form(request: Request) -> Response:
    referer = web.safe_referer(request.query_params.get("referer"), "/customer/account/")
    return web.render(request, "login.html", referer=referer)


async def login_post(request: Request) -> Response:
    form = await web.read_form(request)
    email = form.get("login[username]", "").strip()
    password = form.get("login[password]", "")
    referer = web.safe_referer(form.get("referer"), "/customer/account/")
    row = (
        web.db(request)
        .execute("SELECT id, password_hash FROM customer WHERE lower(email) = lower(?)", (email,))
        .fetchone()
    )
    if row is None or not check_password(password, row["password_hash"]):
        web.flash(
            request,
            "The account sign-in was incorrect or your account is disabled temporarily. "
            "Please wait and try again later.",
            "error",
        )
        return web.redirect(request, f"/customer/account/login/?referer={quote(referer)}")
    web.log_in(request, row["id"])
    return web.redirect(request, referer)


async def logout_page(request: Request) -> Response:
    return web.logout_page(request, LOGOUT_PATH, "Sign Out")


async def logout(request: Request) -> Response:
    web.log_out(request)
    return web.render(request, "signed_out.html")


async def account(request: Request) -> Response:
    user_id = web.require_user(request)
    conn = web.db(request)
    customer = q.one(conn.execute("SELECT * FROM customer WHERE id = ?", (user_id,)))
    recent, _ = q.list_orders(conn, customer_id=user_id, limit=5)
    return web.render(request, "account.html", customer=customer, recent=recent)


async def account_edit(request: Request) -> Response:
    user_id = web.require_user(request)
    customer = q.one(web.db(request).execute("SELECT * FROM customer WHERE id = ?", (user_id,)))
    return web.render(request, "account_edit.html", customer=customer)


async def account_edit_post(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    first = web.form_text(form, "firstname", max_len=255)
    last = web.form_text(form, "lastname", max_len=255)
    with web.db(request) as conn:
        conn.execute("UPDATE customer SET firstname = ?, lastname = ? WHERE id = ?", (first, last, user_id))
    web.flash(request, "You saved the account information.")
    return web.redirect(request, "/customer/account/")


async def address(request: Request) -> Response:
    user_id = web.require_user(request)
    customer = q.one(web.db(request).execute("SELECT * FROM customer WHERE id = ?", (user_id,)))
    return web.render(request, "address.html", customer=customer)


async def address_post(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    values = [web.form_text(form, name, max_len=255) for name in ADDRESS_FIELDS]
    with web.db(request) as conn:
        conn.execute(
            f"UPDATE customer SET {', '.join(f'{n} = ?' for n in ADDRESS_FIELDS)} WHERE id = ?",
            (*values, user_id),
        )
    web.flash(request, "You saved the address.")
    return web.redirect(request, "/customer/address/")


async def order_history(request: Request) -> Response:
    user_id = web.require_user(request)
    page = web.pager(request, 0, ORDERS_PER_PAGE)
    orders, total = q.list_orders(web.db(request), customer_id=user_id, limit=page.size, offset=page.offset)
    page.total = total
    return web.render(request, "order_history.html", orders=orders, total=total, links=page.links(request))


async def order_view(request: Request) -> Response:
    user_id = web.require_user(request)
    order = q.order_detail(web.db(request), request.path_params["order_id"])
    if order is None or order["customer_id"] != user_id:
        raise HTTPException(404, "This order does not exist or is not yours.")
    return web.render(request, "order_view.html", order=order)


async def wishlist(request: Request) -> Response:
    user_id = web.require_user(request)
    items = q.rows(
        web.db(request).execute(
            "SELECT w.id, w.added_at, p.id AS product_id, p.name, p.sku, p.url_key, p.price_cents "
            "FROM wishlist_item w"
            " JOIN product p ON p.id = w.product_id WHERE w.customer_id = ? ORDER BY w.id",
            (user_id,),
        )
    )
    return web.render(request, "wishlist.html", items=items)


async def wishlist_add(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    product_id = web.parse_int(form.get("product_id"), "product_id", minimum=1)
    conn = web.db(request)
    product = q.product_by(conn, "id", product_id)
    if product is None or product["status"] != 1:
        raise HTTPException(404, f"No product with id {product_id}.")
    with conn:
        now = tick(conn)
        conn.execute(
            "INSERT OR IGNORE INTO wishlist_item (customer_id, product_id, added_at) VALUES (?, ?, ?)",
            (user_id, product_id, now),
        )
    web.flash(request, f"{product['name']} has been added to your Wish List.")
    return web.redirect(request, "/wishlist/")


async def wishlist_remove(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    item_id = web.parse_int(form.get("item_id"), "item_id", minimum=1)
    with web.db(request) as conn:
        deleted = conn.execute(
            "DELETE FROM wishlist_item WHERE id = ? AND customer_id = ?", (item_id, user_id)
        )
    if deleted.rowcount == 0:
        raise HTTPException(404, f"No wish list item {item_id}.")
    web.flash(request, "The item was removed from your Wish List.")
    return web.redirect(request, "/wishlist/")


routes = [
    Route("/customer/account/login/", login_form, methods=["GET"]),
    Route("/customer/account/loginPost/", login_post, methods=["POST"]),
    Route(LOGOUT_PATH, logout_page, methods=["GET"]),
    Route(LOGOUT_PATH, logout, methods=["POST"]),
    Route("/customer/account/", account, methods=["GET"]),
    Route("/customer/account/edit/", account_edit, methods=["GET"]),
    Route("/customer/account/editPost/", account_edit_post, methods=["POST"]),
    Route("/customer/address/", address, methods=["GET"]),
    Route("/customer/address/formPost/", address_post, methods=["POST"]),
    Route("/sales/order/history/", order_history, methods=["GET"]),
    Route("/sales/order/view/order_id/{order_id:int}/", order_view, methods=["GET"]),
    Route("/wishlist/", wishlist, methods=["GET"]),
    Route("/wishlist/index/add/", wishlist_add, methods=["POST"]),
    Route("/wishlist/index/remove/", wishlist_remove, methods=["POST"]),
]
