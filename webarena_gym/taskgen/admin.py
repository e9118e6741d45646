"""Templates on the shop's admin panel (``shopping_admin``), logged in as WebArena's admin account."""

from __future__ import annotations

import calendar
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import quote_plus

from webarena_gym.taskgen import locators, phrases
from webarena_gym.taskgen.spec import (
    Instance,
    TemplateSet,
    click,
    exact_answer,
    html_answer,
    html_check,
    must_include_answer,
    select,
    stop,
    type_,
    url_answer,
)
from webarena_gym.taskgen.world import ADMIN, SHOP, amount, status_label, unique_products

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData
    from webarena_gym.taskgen.spec import Step

TEMPLATES = TemplateSet()
SITES = ("shopping_admin",)


def month_span(period: str) -> tuple[str, str, str]:
    """``"2023-03"`` -> (``"March 2023"``, first day, last day) as the report filters take them."""
    year, month = (int(part) for part in period.split("-"))
    last = calendar.monthrange(year, month)[1]
    return f"{calendar.month_name[month]} {year}", f"{period}-01", f"{period}-{last:02d}"


def report_steps(report: str, period: str) -> tuple[Step, ...]:
    """Open a report (``Bestsellers Report`` or ``Sales Report``) for one month, by month."""
    _, first, last = month_span(period)
    return (
        click("link", report),
        type_("textbox", "From", first),
        type_("textbox", "To", last),
        click("button", "Show Report"),
    )


def monthly_bestsellers(data: SiteData) -> list[tuple[str, dict[str, Any]]]:
    """(month, its best seller) for every month whose best seller sold strictly more than the runner-up."""
    rows = data.bestsellers("month")
    out = []
    for period in sorted({r["period"] for r in rows}):
        ranked = [r for r in rows if r["period"] == period]
        if len(ranked) == 1 or ranked[0]["qty"] > ranked[1]["qty"]:
            out.append((period, ranked[0]))
    return out


def _find_order(increment_id: str) -> tuple[Step, ...]:
    return (
        click("link", "Orders"),
        type_("textbox", "Order ID", increment_id),
        click("button", "Apply Filters"),
    )


def _unique_customers(data: SiteData) -> list[dict[str, Any]]:
    customers = data.customers()
    names = Counter(f"{c['firstname']} {c['lastname']}" for c in customers)
    return [c for c in customers if names[f"{c['firstname']} {c['lastname']}"] == 1]


@TEMPLATES.add(
    201,
    "bestseller-of-month",
    sites=SITES,
    start_url=ADMIN,
    kind="string_match",
    intent="What was the best-selling product in {{month}}?",
)
def bestseller_of_month(data: SiteData) -> list[Instance]:
    out = []
    for period, best in monthly_bestsellers(data):
        month = month_span(period)[0]
        out.append(
            Instance(
                {"month": month},
                must_include_answer(best["name"]),
                (*report_steps("Bestsellers Report", period), stop(best["name"])),
            )
        )
    return out


@TEMPLATES.add(
    202,
    "orders-with-status",
    sites=SITES,
    start_url=ADMIN,
    kind="string_match",
    intent="How many orders have the status {{status}}?",
)
def orders_with_status(data: SiteData) -> list[Instance]:
    counts = Counter(o["status"] for o in data.orders())
    out = []
    for status in sorted(counts):
        label, count = status_label(status), str(counts[status])
        out.append(
            Instance(
                {"status": label},
                exact_answer(count),
                (
                    click("link", "Orders"),
                    select("Status", label),
                    click("button", "Apply Filters"),
                    stop(count),
                ),
            )
        )
    return out


@TEMPLATES.add(
    203,
    "orders-of-customer",
    sites=SITES,
    start_url=ADMIN,
    kind="url_match",
    intent="Show me the orders of the customer {{customer}} in the order grid",
)
def orders_of_customer(data: SiteData) -> list[Instance]:
    out = []
    for customer in _unique_customers(data):
        name = f"{customer['firstname']} {customer['lastname']}"
        urls = []
        for value in (quote_plus(name), quote_plus(customer["email"])):
            urls.append(f"{ADMIN}/sales/order/?customer={value}")
            urls.append(f"{ADMIN}/sales/order/?status=&date_from=&date_to=&customer={value}&increment_id=")
        out.append(
            Instance(
                {"customer": name},
                url_answer(*urls),
                (
                    click("link", "Orders"),
                    type_("textbox", "Customer name or email", name),
                    click("button", "Apply Filters"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    204,
    "order-customer-email",
    sites=SITES,
    start_url=ADMIN,
    kind="string_match",
    intent="What is the email address of the customer who placed order #{{order}}?",
)
def order_customer_email(data: SiteData) -> list[Instance]:
    out = []
    for order in data.orders()[::7]:
        email = order["customer_email"]
        out.append(
            Instance(
                {"order": order["increment_id"]},
                must_include_answer(email),
                (*_find_order(order["increment_id"]), stop(email)),
            )
        )
    return out


@TEMPLATES.add(
    205,
    "sales-total-of-month",
    sites=SITES,
    start_url=ADMIN,
    kind="string_match",
    unseen=True,
    intent="According to the sales report, what was the total of all orders (canceled ones excluded, "
    "shipping included) in {{month}}?",
)
def sales_total_of_month(data: SiteData) -> list[Instance]:
    out = []
    for row in data.sales_totals("month"):
        total = amount(row["total_cents"])
        out.append(
            Instance(
                {"month": month_span(row["period"])[0]},
                must_include_answer(total),
                (*report_steps("Sales Report", row["period"]), stop(f"${total}")),
            )
        )
    return out


@TEMPLATES.add(
    206,
    "customer-phone",
    sites=SITES,
    start_url=ADMIN,
    kind="string_match",
    intent="What is the phone number of the customer {{customer}}?",
)
def customer_phone(data: SiteData) -> list[Instance]:
    out = []
    for customer in _unique_customers(data):
        name = f"{customer['firstname']} {customer['lastname']}"
        out.append(
            Instance(
                {"customer": name},
                must_include_answer(customer["telephone"]),
                (
                    click("link", "All Customers"),
                    type_("searchbox", "Search by keyword", name, enter=True),
                    stop(customer["telephone"]),
                ),
            )
        )
    return out


def _open_orders(data: SiteData) -> list[dict[str, Any]]:
    return [o for o in data.orders() if o["status"] in ("pending", "processing")]


@TEMPLATES.add(
    207,
    "cancel-order",
    sites=SITES,
    start_url=ADMIN,
    kind="program_html",
    state_changing=True,
    intent="Cancel order #{{order}}",
)
def cancel_order(data: SiteData) -> list[Instance]:
    out = []
    for order in _open_orders(data)[::2]:
        check = html_check(
            f"{ADMIN}/sales/order/view/order_id/{order['id']}/", locators.ADMIN_ORDER_STATUS, exact="Canceled"
        )
        out.append(
            Instance(
                {"order": order["increment_id"]},
                html_answer(check),
                (
                    *_find_order(order["increment_id"]),
                    click("link", f"View order {order['increment_id']}"),
                    click("button", "Cancel"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    208,
    "order-status-comment",
    sites=SITES,
    start_url=ADMIN,
    kind="program_html",
    state_changing=True,
    intent='Change the status of order #{{order}} to {{status}} and add the comment "{{comment}}"',
)
def order_status_comment(data: SiteData) -> list[Instance]:
    out = []
    for index, order in enumerate(_open_orders(data)[1::2]):
        status = "processing" if order["status"] == "pending" and index % 2 == 0 else "complete"
        label = status_label(status)
        comment = phrases.ORDER_COMMENTS[index % len(phrases.ORDER_COMMENTS)]
        url = f"{ADMIN}/sales/order/view/order_id/{order['id']}/"
        checks = (
            html_check(url, locators.ADMIN_ORDER_STATUS, exact=label),
            html_check("last", locators.ADMIN_ORDER_HISTORY, must=[f"| {label} | {comment}"]),
        )
        out.append(
            Instance(
                {"order": order["increment_id"], "status": label, "comment": comment},
                html_answer(*checks),
                (
                    *_find_order(order["increment_id"]),
                    click("link", f"View order {order['increment_id']}"),
                    select("Status", label),
                    type_("textbox", "Comment", comment),
                    click("button", "Submit Comment"),
                    stop(),
                ),
            )
        )
    return out


def _product_search(name: str) -> tuple[Step, ...]:
    return (
        click("link", "Products"),
        type_("searchbox", "Search by keyword", name, enter=True),
        click("link", f"Edit {name}"),
    )


@TEMPLATES.add(
    209,
    "update-price",
    sites=SITES,
    start_url=ADMIN,
    kind="program_html",
    state_changing=True,
    intent="Change the price of {{product}} to ${{price}}",
)
def update_price(data: SiteData) -> list[Instance]:
    out = []
    for product in unique_products(data)[::5]:
        cents = product["price_cents"] * 9 // 10 // 100 * 100 + 99
        if cents == product["price_cents"] or cents < 100:
            continue
        price = f"{cents / 100:.2f}"
        check = html_check(
            f"{ADMIN}/catalog/product/edit/id/{product['id']}/", locators.ADMIN_PRODUCT_PRICE, exact=price
        )
        out.append(
            Instance(
                {"product": product["name"], "price": price},
                html_answer(check),
                (
                    *_product_search(product["name"]),
                    type_("textbox", "Price ($)", price),
                    click("button", "Save"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    210,
    "disable-product",
    sites=SITES,
    start_url=ADMIN,
    kind="program_html",
    state_changing=True,
    intent="Disable the product {{product}} so that it is no longer sold",
)
def disable_product(data: SiteData) -> list[Instance]:
    out = []
    for product in unique_products(data)[2::5]:
        check = html_check(
            f"{ADMIN}/catalog/product/edit/id/{product['id']}/",
            locators.ADMIN_PRODUCT_STATUS,
            exact="Disabled",
        )
        out.append(
            Instance(
                {"product": product["name"]},
                html_answer(check),
                (
                    *_product_search(product["name"]),
                    select("Enable Product", "Disabled"),
                    click("button", "Save"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    211,
    "approve-review",
    sites=SITES,
    start_url=ADMIN,
    kind="program_html",
    state_changing=True,
    unseen=True,
    intent="Approve the pending review of {{product}} written by {{nickname}}",
)
def approve_review(data: SiteData) -> list[Instance]:
    products = {p["sku"]: p for p in unique_products(data)}
    reviews = data.reviews()
    pending = Counter((r["sku"], r["nickname"]) for r in reviews if r["status"] == "pending")
    out = []
    for review in reviews:
        product = products.get(review["sku"])
        if (
            review["status"] != "pending"
            or product is None
            or pending[(review["sku"], review["nickname"])] > 1
        ):
            continue
        line = f"Review by {review['nickname']} | {review['title']}"
        shown = {f"Review by {r['nickname']} | {r['title']}" for r in data.product(review["sku"])["reviews"]}
        if line in shown:
            continue
        check = html_check(f"{SHOP}/{product['url_key']}.html", locators.PRODUCT_REVIEW_LINES, must=[line])
        out.append(
            Instance(
                {"product": product["name"], "nickname": review["nickname"]},
                html_answer(check),
                (
                    click("link", "Reviews"),
                    type_("searchbox", "Product, SKU, nickname or title", product["name"]),
                    select("Status", "Pending"),
                    click("button", "Search"),
                    click("link", f"Edit review {review['id']}"),
                    select("Status", "Approved"),
                    click("button", "Save Review"),
                    stop(),
                ),
            )
        )
    return out
