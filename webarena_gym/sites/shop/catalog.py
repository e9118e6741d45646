"""Storefront catalogue pages: home, category listings, search, product pages, reviews, contact form."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import tick
from webarena_gym.sites.shop import queries as q

PAGE_SIZES = ("12", "24", "36")
SORT_CHOICES = ("position", "name", "price")
DIR_CHOICES = ("asc", "desc")


def _price_filter(request: Request) -> tuple[int, int] | None:
    """Magento's ``price=10-20`` (dollars; an empty end is open) as a cents range; 400 when malformed."""
    raw = request.query_params.get("price")
    if not raw:
        return None
    low, sep, high = raw.partition("-")
    try:
        lo = round(float(low or 0) * 100)
        hi = round(float(high) * 100) if high else 10**12
    except ValueError:
        raise HTTPException(400, f"'price' must look like 10-20, got {raw!r}.") from None
    if not sep or lo < 0 or hi < lo:
        raise HTTPException(400, f"'price' must look like 10-20, got {raw!r}.")
    return lo, hi


def _listing(request: Request, **filters: Any) -> dict[str, Any]:
    order = web.query_choice(
        request, "product_list_order", SORT_CHOICES, "name" if "query" in filters else "position"
    )
    direction = web.query_choice(request, "product_list_dir", DIR_CHOICES, "asc")
    size = int(web.query_choice(request, "product_list_limit", PAGE_SIZES, "12"))
    price = _price_filter(request)
    page = web.pager(request, 0, size)
    products, total = q.list_products(
        web.db(request),
        order=order,
        direction=direction,
        price_range=price,
        limit=size,
        offset=page.offset,
        **filters,
    )
    page.total = total
    return {
        "products": products,
        "total": total,
        "page": page,
        "links": page.links(request),
        "order": order,
        "direction": direction,
        "limit": size,
    }


async def home(request: Request) -> Response:
    products, _ = q.list_products(web.db(request), order="position", limit=8)
    return web.render(request, "home.html", featured=products)


async def search(request: Request) -> Response:
    query = request.query_params.get("q", "").strip()
    if len(query) > 200:
        raise HTTPException(400, "The search query is too long.")
    listing = (
        _listing(request, query=query)
        if query
        else {"products": [], "total": 0, "links": [], "order": "name", "direction": "asc", "limit": 12}
    )
    return web.render(request, "search.html", query=query, **listing)


async def catalog_page(request: Request) -> Response:
    """``/<category path>.html`` or ``/<product url key>.html``."""
    path = request.path_params["path"]
    conn = web.db(request)
    category = q.category_by_path(conn, path)
    if category is not None:
        parent = (
            q.one(conn.execute("SELECT * FROM category WHERE id = ?", (category["parent_id"],)))
            if category["parent_id"]
            else None
        )
        children = q.rows(
            conn.execute("SELECT * FROM category WHERE parent_id = ? ORDER BY position", (category["id"],))
        )
        return web.render(
            request,
            "category.html",
            category=category,
            parent=parent,
            children=children,
            **_listing(request, category_id=category["id"]),
        )
    product = q.product_by(conn, "url_key", path)
    if product is None or product["status"] != 1:
        raise HTTPException(404, f"No product or category at /{path}.html.")
    reviews = q.product_reviews(conn, product["id"])
    average = sum(r["rating"] for r in reviews) / len(reviews) if reviews else None
    return web.render(
        request,
        "product.html",
        product=product,
        reviews=reviews,
        average=average,
        logged_in=web.current_user_id(request) is not None,
    )


async def review_post(request: Request) -> Response:
    user_id = web.require_user(request)
    conn = web.db(request)
    product = q.product_by(conn, "id", request.path_params["id"])
    if product is None or product["status"] != 1:
        raise HTTPException(404, "No such product.")
    form = await web.read_form(request)
    rating = web.parse_int(form.get("rating"), "rating", minimum=1, maximum=5)
    nickname = web.form_text(form, "nickname", max_len=100)
    title = web.form_text(form, "title", max_len=255)
    detail = web.form_text(form, "detail", max_len=5000)
    with conn:
        now = tick(conn)
        conn.execute(
            "INSERT INTO review (product_id, customer_id, nickname, title, detail, rating, status, "
            "created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
            (product["id"], user_id, nickname, title, detail, rating, now),
        )
    web.flash(request, "You submitted your review for moderation.")
    return web.redirect(request, f"/{product['url_key']}.html")


async def contact(request: Request) -> Response:
    return web.render(request, "contact.html")


async def contact_post(request: Request) -> Response:
    form = await web.read_form(request)
    name = web.form_text(form, "name", max_len=200)
    email = web.form_text(form, "email", max_len=200)
    if "@" not in email:
        raise HTTPException(422, f"'email' must be an e-mail address, got {email!r}.")
    telephone = web.form_text(form, "telephone", required=False, max_len=50)
    comment = web.form_text(form, "comment", max_len=5000)
    conn = web.db(request)
    with conn:
        now = tick(conn)
        conn.execute(
            "INSERT INTO contact_message (name, email, telephone, comment, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (name, email, telephone, comment, now),
        )
    web.flash(
        request, "Thanks for contacting us with your comments and questions. We'll respond to you very soon."
    )
    return web.redirect(request, "/contact/")


routes = [
    Route("/", home, methods=["GET"]),
    Route("/catalogsearch/result/", search, methods=["GET"]),
    Route("/catalogsearch/result/index/", search, methods=["GET"]),
    Route("/review/product/post/id/{id:int}/", review_post, methods=["POST"]),
    Route("/contact/", contact, methods=["GET"]),
    Route("/contact/index/post/", contact_post, methods=["POST"]),
]
catch_all = Route("/{path:path}.html", catalog_page, methods=["GET"])
"""Must come last: category and product URLs share the ``/<key>.html`` shape."""
