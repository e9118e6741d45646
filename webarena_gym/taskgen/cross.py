"""Cross-site templates (two tabs: the admin panel and the store or the forum) and unachievable templates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from webarena_gym.taskgen import locators, phrases
from webarena_gym.taskgen.admin import month_span, monthly_bestsellers, report_steps
from webarena_gym.taskgen.forum import forum_names, post_checks, submit_steps
from webarena_gym.taskgen.spec import (
    Instance,
    TemplateSet,
    click,
    html_answer,
    html_check,
    must_include_answer,
    na_answer,
    stop,
    tab_focus,
    type_,
)
from webarena_gym.taskgen.world import ADMIN, FORUM, SHOP, amount, money, searchable_products

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData

TEMPLATES = TemplateSet()


def _sold_in_store(data: SiteData, minimum_stock: int) -> list[tuple[str, dict]]:
    """(month, best seller) pairs whose product the store lists and has in stock."""
    products = {p["id"]: p for p in searchable_products(data) if p["qty"] >= minimum_stock}
    return [
        (period, products[best["product_id"]])
        for period, best in monthly_bestsellers(data)
        if best["product_id"] in products
    ]


@TEMPLATES.add(
    401,
    "bestseller-to-cart",
    sites=("shopping_admin", "shopping"),
    kind="program_html",
    start_url=f"{ADMIN} |AND| {SHOP}",
    state_changing=True,
    intent="Find the best-selling product of {{month}} in the admin's bestsellers report and add one "
    "to my shopping cart in the store",
)
def bestseller_to_cart(data: SiteData) -> list[Instance]:
    out = []
    for period, product in _sold_in_store(data, 1):
        name = product["name"]
        check = html_check(f"{SHOP}/checkout/cart/", locators.CART_LINES, must=[f"{name} x 1"])
        out.append(
            Instance(
                {"month": month_span(period)[0]},
                html_answer(check),
                (
                    *report_steps("Bestsellers Report", period),
                    tab_focus(1),
                    type_("searchbox", "Search", name, enter=True),
                    click("button", f"Add {name} to Cart"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    402,
    "order-total-to-forum",
    sites=("shopping_admin", "reddit"),
    kind="program_html",
    start_url=f"{ADMIN} |AND| {FORUM}",
    state_changing=True,
    intent="Look up the grand total of order #{{order}} in the shop admin, then submit a post to "
    'f/{{forum}} with the title "Order {{order}}" and the grand total as its text',
)
def order_total_to_forum(data: SiteData) -> list[Instance]:
    forums = forum_names(data)
    out = []
    for index, order in enumerate(data.orders()[3::11]):
        forum = forums[index % len(forums)]
        title, total = f"Order {order['increment_id']}", money(order["grand_total_cents"])
        out.append(
            Instance(
                {"order": order["increment_id"], "forum": forum},
                html_answer(*post_checks(title, forum, amount(order["grand_total_cents"]))),
                (
                    click("link", "Orders"),
                    type_("textbox", "Order ID", order["increment_id"]),
                    click("button", "Apply Filters"),
                    tab_focus(1),
                    *submit_steps(forum, title, total),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    403,
    "bestseller-store-price",
    sites=("shopping_admin", "shopping"),
    kind="string_match",
    start_url=f"{ADMIN} |AND| {SHOP}",
    unseen=True,
    intent="What is the price in the store of the product that sold the most units in {{month}}?",
)
def bestseller_store_price(data: SiteData) -> list[Instance]:
    out = []
    for period, product in _sold_in_store(data, 0):
        price = amount(product["price_cents"])
        out.append(
            Instance(
                {"month": month_span(period)[0]},
                must_include_answer(price),
                (
                    *report_steps("Bestsellers Report", period),
                    tab_focus(1),
                    type_("searchbox", "Search", product["name"], enter=True),
                    click("link", product["name"]),
                    stop(f"${price}"),
                ),
            )
        )
    return out


# -------------------------------------------------------------------------------------------- unachievable


@TEMPLATES.add(
    501,
    "na-product-price",
    sites=("shopping",),
    start_url=SHOP,
    kind="string_match (N/A)",
    intent="What is the price of {{product}} in the store?",
)
def na_product_price(data: SiteData) -> list[Instance]:
    return [
        Instance(
            {"product": name},
            na_answer("The store does not sell this product."),
            (type_("searchbox", "Search", name, enter=True), stop("N/A")),
        )
        for name in phrases.FAKE_PRODUCTS
        if not data.products(query=name, include_disabled=True)
    ]


@TEMPLATES.add(
    502,
    "na-customer-email",
    sites=("shopping_admin",),
    start_url=ADMIN,
    kind="string_match (N/A)",
    intent="Show me the email address of the customer {{customer}}",
)
def na_customer_email(data: SiteData) -> list[Instance]:
    known = {f"{c['firstname']} {c['lastname']}" for c in data.customers()}
    return [
        Instance(
            {"customer": name},
            na_answer("There is no customer with this name."),
            (
                click("link", "All Customers"),
                type_("searchbox", "Search by keyword", name, enter=True),
                stop("N/A"),
            ),
        )
        for name in phrases.FAKE_CUSTOMERS
        if name not in known
    ]


@TEMPLATES.add(
    503,
    "na-forum-latest",
    sites=("reddit",),
    start_url=FORUM,
    kind="string_match (N/A)",
    intent="What is the title of the most recent post in f/{{forum}}?",
)
def na_forum_latest(data: SiteData) -> list[Instance]:
    known = {name.lower() for name in forum_names(data)}
    return [
        Instance(
            {"forum": name},
            na_answer("There is no forum with this name."),
            (click("link", "Forums"), stop("N/A")),
        )
        for name in phrases.FAKE_FORUMS
        if name not in known
    ]
