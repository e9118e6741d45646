"""The shop storefront ("One Stop Market"), stand-in for WebArena's Magento ``shopping`` site.

Routes (Magento's URL shapes):

- ``/``; ``/<category path>.html`` (``?p``, ``product_list_order``, ``product_list_dir``,
  ``product_list_limit``, ``price=a-b``); ``/<product url key>.html``; ``/catalogsearch/result/?q=``
- ``/customer/account/login/`` (+ ``loginPost/``), POST ``/customer/account/logout/`` (GET shows the
  button), ``/customer/account/``, ``/customer/account/edit/``, ``/customer/address/``
- ``/checkout/cart/`` (+ ``add/``, ``updatePost/``, ``delete/``), ``/checkout/``, ``/checkout/placeOrder/``,
  ``/checkout/onepage/success/``
- ``/sales/order/history/``, ``/sales/order/view/order_id/<n>/``; ``/wishlist/``; ``/contact/``;
  ``/review/product/post/id/<n>/``; the REST subset of :mod:`webarena_gym.sites.shop.rest`"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request

from webarena_gym.sites import web
from webarena_gym.sites.shop import account, catalog, checkout, rest
from webarena_gym.sites.shop import queries as q

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _base_context(request: Request) -> dict[str, Any]:
    conn = web.db(request)
    user_id = web.current_user_id(request)
    customer = None
    if user_id is not None:
        customer = q.one(
            conn.execute("SELECT id, firstname, lastname, email FROM customer WHERE id = ?", (user_id,))
        )
    return {
        "menu": q.category_tree(conn),
        "customer": customer,
        "cart_qty": checkout.cart_count(conn, user_id) if user_id is not None else 0,
    }


def build_app(server: web.ServerState, port: int) -> Starlette:
    """The storefront app of ``server``; ``port`` names its session cookie."""
    config = web.SiteConfig(
        name="shopping",
        db="magento",
        cookie=f"shop_session_{port}",
        template_dir=TEMPLATES,
        login_url="/customer/account/login/",
        base_context=_base_context,
    )
    routes = [*catalog.routes, *account.routes, *checkout.routes, *rest.routes, catalog.catch_all]
    return web.build_app(config, server, routes)
