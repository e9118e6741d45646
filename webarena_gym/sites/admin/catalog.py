"""Admin grids and edit forms for products, customers and reviews."""

from __future__ import annotations

import re

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.shop import queries as q

PER_PAGE = 20
_PRICE = re.compile(r"\$?\s*(\d{1,7})(?:\.(\d{1,2}))?")


def _search(request: Request) -> str:
    value = request.query_params.get("search", "").strip()
    if len(value) > 200:
        raise HTTPException(400, "The search text is too long.")
    return value


async def product_grid(request: Request) -> Response:
    web.require_user(request)
    search = _search(request)
    status = web.query_choice(request, "status", ("", "1", "2"), "")
    page = web.pager(request, 0, PER_PAGE)
    products, total = q.list_products(
        web.db(request),
        query=search or None,
        include_disabled=True,
        status=int(status) if status else None,
        limit=page.size,
        offset=page.offset,
    )
    page.total = total
    return web.render(
        request,
        "products.html",
        products=products,
        total=total,
        links=page.links(request),
        search=search,
        status=status,
    )


def _product_or_404(request: Request) -> dict:
    product = q.product_by(web.db(request), "id", request.path_params["id"])
    if product is None:
        raise HTTPException(404, "This product no longer exists.")
    return product


async def product_edit(request: Request) -> Response:
    web.require_user(request)
    return web.render(request, "product_edit.html", product=_product_or_404(request))


def parse_price(value: str) -> int:
    """Dollars (``12``, ``12.5``, ``$12.50``) as cents; 422 otherwise."""
    match = _PRICE.fullmatch(value.strip().replace(",", ""))
    if match is None:
        raise HTTPException(422, f"'price' must be an amount like 12.50, got {value!r}.")
    return int(match[1]) * 100 + int((match[2] or "0").ljust(2, "0"))


async def product_save(request: Request) -> Response:
    web.require_user(request)
    product = _product_or_404(request)
    form = await web.read_form(request)
    name = web.form_text(form, "name", max_len=255)
    price = parse_price(form.get("price", ""))
    qty = web.parse_int(form.get("qty"), "qty", minimum=0, maximum=10**7)
    status = web.parse_int(form.get("status"), "status", minimum=1, maximum=2)
    description = web.form_text(form, "description", required=False, max_len=20_000)
    with web.db(request) as conn:
        conn.execute(
            "UPDATE product SET name = ?, price_cents = ?, qty = ?, status = ?, description = ? WHERE id = ?",
            (name, price, qty, status, description, product["id"]),
        )
    web.flash(request, "You saved the product.")
    return web.redirect(request, f"/admin/catalog/product/edit/id/{product['id']}/")


async def customer_grid(request: Request) -> Response:
    web.require_user(request)
    search = _search(request)
    like = f"%{search}%"
    conn = web.db(request)
    where = "(firstname || ' ' || lastname LIKE ? OR email LIKE ? OR telephone LIKE ? OR city LIKE ?)"
    total = conn.execute(f"SELECT COUNT(*) FROM customer WHERE {where}", (like,) * 4).fetchone()[0]
    page = web.pager(request, total, PER_PAGE)
    customers = q.rows(
        conn.execute(
            f"SELECT * FROM customer WHERE {where} ORDER BY id LIMIT ? OFFSET ?",
            (*(like,) * 4, page.size, page.offset),
        )
    )
    return web.render(
        request, "customers.html", customers=customers, total=total, links=page.links(request), search=search
    )


async def customer_view(request: Request) -> Response:
    web.require_user(request)
    conn = web.db(request)
    customer = q.one(conn.execute("SELECT * FROM customer WHERE id = ?", (request.path_params["id"],)))
    if customer is None:
        raise HTTPException(404, "This customer no longer exists.")
    orders, total = q.list_orders(conn, customer_id=customer["id"], limit=None)
    return web.render(request, "customer_view.html", customer=customer, orders=orders, total=total)


async def review_grid(request: Request) -> Response:
    web.require_user(request)
    status = web.query_choice(request, "status", ("", *q.REVIEW_STATUS_LABELS), "")
    search = _search(request)
    where, args = (
        ["(p.name LIKE ? OR p.sku LIKE ? OR r.nickname LIKE ? OR r.title LIKE ?)"],
        [f"%{search}%"] * 4,
    )
    if status:
        where.append("r.status = ?")
        args.append(status)
    conn = web.db(request)
    sql = f"FROM review r JOIN product p ON p.id = r.product_id WHERE {' AND '.join(where)}"
    total = conn.execute(f"SELECT COUNT(*) {sql}", args).fetchone()[0]
    page = web.pager(request, total, PER_PAGE)
    reviews = q.rows(
        conn.execute(
            f"SELECT r.*, p.name AS product_name, p.sku {sql}"
            " ORDER BY r.created_at DESC, r.id DESC LIMIT ? OFFSET ?",
            (*args, page.size, page.offset),
        )
    )
    return web.render(
        request,
        "reviews.html",
        reviews=reviews,
        total=total,
        links=page.links(request),
        status=status,
        search=search,
        statuses=q.REVIEW_STATUS_LABELS,
    )


def _review_or_404(request: Request) -> dict:
    review = q.one(
        web.db(request).execute(
            "SELECT r.*, p.name AS product_name, p.sku FROM review r JOIN product p ON p.id = r.product_id"
            " WHERE r.id = ?",
            (request.path_params["id"],),
        )
    )
    if review is None:
        raise HTTPException(404, "This review no longer exists.")
    return review


async def review_edit(request: Request) -> Response:
    web.require_user(request)
    return web.render(
        request, "review_edit.html", review=_review_or_404(request), statuses=q.REVIEW_STATUS_LABELS
    )


async def review_save(request: Request) -> Response:
    web.require_user(request)
    review = _review_or_404(request)
    form = await web.read_form(request)
    status = form.get("status", "")
    if status not in q.REVIEW_STATUS_LABELS:
        raise HTTPException(422, f"Unknown review status {status!r}.")
    nickname = web.form_text(form, "nickname", max_len=100)
    title = web.form_text(form, "title", max_len=255)
    detail = web.form_text(form, "detail", max_len=5000)
    with web.db(request) as conn:
        conn.execute(
            "UPDATE review SET status = ?, nickname = ?, title = ?, detail = ? WHERE id = ?",
            (status, nickname, title, detail, review["id"]),
        )
    web.flash(request, "You saved the review.")
    return web.redirect(request, "/admin/review/product/")


async def review_delete(request: Request) -> Response:
    web.require_user(request)
    review = _review_or_404(request)
    with web.db(request) as conn:
        conn.execute("DELETE FROM review WHERE id = ?", (review["id"],))
    web.flash(request, "The review has been deleted.")
    return web.redirect(request, "/admin/review/product/")


routes = [
    Route("/admin/catalog/product/", product_grid, methods=["GET"]),
    Route("/admin/catalog/product/edit/id/{id:int}/", product_edit, methods=["GET"]),
    Route("/admin/catalog/product/save/id/{id:int}/", product_save, methods=["POST"]),
    Route("/admin/customer/index/", customer_grid, methods=["GET"]),
    Route("/admin/customer/index/edit/id/{id:int}/", customer_view, methods=["GET"]),
    Route("/admin/review/product/", review_grid, methods=["GET"]),
    Route("/admin/review/product/edit/id/{id:int}/", review_edit, methods=["GET"]),
    Route("/admin/review/product/save/id/{id:int}/", review_save, methods=["POST"]),
    Route("/admin/review/product/delete/id/{id:int}/", review_delete, methods=["POST"]),
]
