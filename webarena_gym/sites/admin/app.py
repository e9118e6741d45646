"""The shop's admin panel, stand-in for WebArena's Magento ``shopping_admin`` (base URL ``<origin>/admin``).

Routes (all under ``/admin``):

- ``/admin/`` (dashboard), ``/admin/auth/login/`` (+ ``loginPost/``), POST ``/admin/auth/logout/`` (GET shows
  the button)
- ``/admin/sales/order/`` (``status``, ``date_from``, ``date_to``, ``customer``, ``increment_id``, ``p``),
  ``/admin/sales/order/view/order_id/<n>/``, POST ``/admin/sales/order/addComment/order_id/<n>/``, POST
  ``/admin/sales/order/{cancel,hold,unhold}/order_id/<n>/``
- ``/admin/catalog/product/`` (``search``, ``status``, ``p``), ``/admin/catalog/product/edit/id/<n>/`` (+ POST
  ``/admin/catalog/product/save/id/<n>/``)
- ``/admin/customer/index/`` (``search``, ``p``), ``/admin/customer/index/edit/id/<n>/``
- ``/admin/review/product/`` (``status``, ``search``, ``p``), ``/admin/review/product/edit/id/<n>/`` (+ POST
  ``save/id/<n>/``, ``delete/id/<n>/``)
- ``/admin/reports/report_sales/bestsellers/`` and ``/admin/reports/report_sales/sales/`` (``period`` =
  day|month|year, ``from``, ``to``; sales also ``order_status``)"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.admin import catalog, reports, sales
from webarena_gym.sites.db import check_password
from webarena_gym.sites.shop import queries as q

TEMPLATES = Path(__file__).resolve().parent / "templates"
LOGOUT_PATH = "/admin/auth/logout/"


def _base_context(request: Request) -> dict[str, Any]:
    user_id = web.current_user_id(request)
    admin = None
    if user_id is not None:
        admin = q.one(
            web.db(request).execute(
                "SELECT id, username, firstname, lastname FROM admin_user WHERE id = ?", (user_id,)
            )
        )
    return {"admin": admin}


async def root(request: Request) -> Response:
    return RedirectResponse("/admin/", status_code=302)


async def login_form(request: Request) -> Response:
    referer = web.safe_referer(request.query_params.get("referer"), "/admin/")
    return web.render(request, "login.html", referer=referer)


async def login_post(request: Request) -> Response:
    form = await web.read_form(request)
    referer = web.safe_referer(form.get("referer"), "/admin/")
    row = (
        web.db(request)
        .execute(
            "SELECT id, password_hash FROM admin_user WHERE username = ?",
            (form.get("login[username]", "").strip(),),
        )
        .fetchone()
    )
    if row is None or not check_password(form.get("login[password]", ""), row["password_hash"]):
        web.flash(
            request,
            "The account sign-in was incorrect or your account is disabled temporarily. "
            "Please wait and try again later.",
            "error",
        )
        return web.redirect(request, f"/admin/auth/login/?referer={quote(referer)}")
    web.log_in(request, row["id"])
    return web.redirect(request, referer)


async def logout_page(request: Request) -> Response:
    return web.logout_page(request, LOGOUT_PATH, "Sign Out")


async def logout(request: Request) -> Response:
    web.log_out(request)
    web.flash(request, "You have logged out.", "notice")
    return web.redirect(request, "/admin/auth/login/")


async def dashboard(request: Request) -> Response:
    web.require_user(request)
    conn = web.db(request)
    lifetime = conn.execute(
        "SELECT COALESCE(SUM(grand_total_cents), 0), COUNT(*) FROM sales_order WHERE status != 'canceled'"
    ).fetchone()
    last_orders, _ = q.list_orders(conn, limit=5)
    top = q.bestsellers(conn, "year", date_from="1970-01-01")
    totals: dict[int, dict[str, Any]] = {}
    for row in top:
        entry = totals.setdefault(row["product_id"], {"name": row["name"], "sku": row["sku"], "qty": 0})
        entry["qty"] += row["qty"]
    bestsellers = sorted(totals.values(), key=lambda e: (-e["qty"], e["name"]))[:5]
    customers = conn.execute("SELECT COUNT(*) FROM customer").fetchone()[0]
    return web.render(
        request,
        "dashboard.html",
        lifetime_cents=lifetime[0],
        order_count=lifetime[1],
        average_cents=lifetime[0] // max(lifetime[1], 1),
        last_orders=last_orders,
        bestsellers=bestsellers,
        customer_count=customers,
    )


routes = [
    Route("/", root, methods=["GET"]),
    Route("/admin/", dashboard, methods=["GET"]),
    Route("/admin/dashboard/", dashboard, methods=["GET"]),
    Route("/admin/auth/login/", login_form, methods=["GET"]),
    Route("/admin/auth/loginPost/", login_post, methods=["POST"]),
    Route(LOGOUT_PATH, logout_page, methods=["GET"]),
    Route(LOGOUT_PATH, logout, methods=["POST"]),
]


def build_app(server: web.ServerState, port: int) -> Starlette:
    """The admin app of ``server``; ``port`` names its session cookie."""
    config = web.SiteConfig(
        name="shopping_admin",
        db="magento",
        cookie=f"admin_session_{port}",
        template_dir=TEMPLATES,
        login_url="/admin/auth/login/",
        base_context=_base_context,
    )
    return web.build_app(config, server, [*routes, *sales.routes, *catalog.routes, *reports.routes])
