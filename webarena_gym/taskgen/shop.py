"""Templates on the storefront (``shopping``), logged in as WebArena's customer (emma.lopez@gmail.com)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

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
from webarena_gym.taskgen.world import (
    CUSTOMER_EMAIL,
    SHOP,
    amount,
    history_page,
    searchable_products,
    subcategories,
)

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData
    from webarena_gym.taskgen.spec import Step

TEMPLATES = TemplateSet()
SITES = ("shopping",)


def _search(name: str) -> tuple[Step, ...]:
    """Search the store for a product by its full name and open its page."""
    return (type_("searchbox", "Search", name, enter=True), click("link", name))


def _to_history_page(page: int) -> tuple[Step, ...]:
    steps: tuple[Step, ...] = (click("link", "My Orders"),)
    return steps if page == 1 else (*steps, click("link", f"Page {page}"))


@TEMPLATES.add(
    101,
    "cheapest-in-category",
    sites=SITES,
    start_url=SHOP,
    kind="string_match",
    intent="What is the cheapest product in the {{category}} category?",
)
def cheapest_in_category(data: SiteData) -> list[Instance]:
    out = []
    for top, sub in subcategories(data):
        ranked = sorted(data.products(sub["url_path"]), key=lambda p: (p["price_cents"], p["id"]))
        if len(ranked) < 2 or ranked[0]["price_cents"] == ranked[1]["price_cents"]:
            continue
        name = ranked[0]["name"]
        out.append(
            Instance(
                {"category": sub["name"]},
                must_include_answer(name),
                (
                    click("link", top["name"]),
                    click("link", sub["name"]),
                    select("Sort By", "Price"),
                    click("button", "Apply"),
                    stop(name),
                ),
            )
        )
    return out


@TEMPLATES.add(
    102,
    "latest-review-author",
    sites=SITES,
    start_url=SHOP,
    kind="string_match",
    intent="Who wrote the most recent review of {{product}}? Answer with the reviewer's nickname.",
)
def latest_review_author(data: SiteData) -> list[Instance]:
    out = []
    for product in searchable_products(data):
        reviews = data.product(product["sku"])["reviews"]
        if not reviews or (
            len(reviews) > 1 and reviews[-1]["created_at"][:10] == reviews[-2]["created_at"][:10]
        ):
            continue
        nickname = reviews[-1]["nickname"]
        out.append(
            Instance(
                {"product": product["name"]},
                exact_answer(nickname),
                (*_search(product["name"]), stop(nickname)),
            )
        )
    return out


@TEMPLATES.add(
    103,
    "product-page",
    sites=SITES,
    start_url=SHOP,
    kind="url_match",
    intent="Open the product page of {{product}}",
)
def product_page(data: SiteData) -> list[Instance]:
    return [
        Instance(
            {"product": p["name"]}, url_answer(f"{SHOP}/{p['url_key']}.html"), (*_search(p["name"]), stop())
        )
        for p in searchable_products(data)
    ]


@TEMPLATES.add(
    104,
    "category-by-price",
    sites=SITES,
    start_url=SHOP,
    kind="url_match",
    intent="Show me the products of the {{category}} category sorted by price, {{order}} first",
)
def category_by_price(data: SiteData) -> list[Instance]:
    out = []
    for direction, order, label in (
        ("asc", "cheapest", "Ascending"),
        ("desc", "most expensive", "Descending"),
    ):
        for top, sub in subcategories(data):
            url = f"{SHOP}/{sub['url_path']}.html?product_list_order=price&product_list_dir={direction}"
            steps = [click("link", top["name"]), click("link", sub["name"]), select("Sort By", "Price")]
            if direction == "desc":
                steps.append(select("Direction", label))
            out.append(
                Instance(
                    {"category": sub["name"], "order": order},
                    url_answer(url),
                    (*steps, click("button", "Apply"), stop()),
                )
            )
    return out


_PRICE_RANGES = (
    ("0-10", "under $10", "$0.00 - $9.99"),
    ("10-50", "from $10 to $49.99", "$10.00 - $49.99"),
    ("50-100", "from $50 to $99.99", "$50.00 - $99.99"),
    ("100-", "$100 or more", "$100.00 and above"),
)


@TEMPLATES.add(
    105,
    "category-price-range",
    sites=SITES,
    start_url=SHOP,
    kind="url_match",
    unseen=True,
    intent="Show me the products in the {{category}} category that cost {{range}}",
)
def category_price_range(data: SiteData) -> list[Instance]:
    out = []
    for index, (top, sub) in enumerate(subcategories(data)):
        value, words, label = _PRICE_RANGES[index % len(_PRICE_RANGES)]
        out.append(
            Instance(
                {"category": sub["name"], "range": words},
                url_answer(f"{SHOP}/{sub['url_path']}.html?price={value}"),
                (click("link", top["name"]), click("link", sub["name"]), click("link", label), stop()),
            )
        )
    return out


def _in_stock(data: SiteData, minimum: int) -> list[dict[str, Any]]:
    return [p for p in searchable_products(data) if p["qty"] >= minimum]


@TEMPLATES.add(
    106,
    "add-to-cart",
    sites=SITES,
    start_url=SHOP,
    kind="program_html",
    state_changing=True,
    intent="Add {{qty}} of {{product}} to my shopping cart",
)
def add_to_cart(data: SiteData) -> list[Instance]:
    out = []
    for index, product in enumerate(_in_stock(data, 5)):
        qty = 2 + index % 3
        check = html_check(f"{SHOP}/checkout/cart/", locators.CART_LINES, must=[f"{product['name']} x {qty}"])
        out.append(
            Instance(
                {"qty": qty, "product": product["name"]},
                html_answer(check),
                (
                    *_search(product["name"]),
                    type_("spinbutton", "Qty", str(qty)),
                    click("button", "Add to Cart"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    107,
    "add-to-wishlist",
    sites=SITES,
    start_url=SHOP,
    kind="program_html",
    state_changing=True,
    intent="Add {{product}} to my wish list",
)
def add_to_wishlist(data: SiteData) -> list[Instance]:
    out = []
    for product in searchable_products(data):
        check = html_check(f"{SHOP}/wishlist/", locators.WISHLIST_LINES, must=[product["name"]])
        out.append(
            Instance(
                {"product": product["name"]},
                html_answer(check),
                (*_search(product["name"]), click("button", "Add to Wish List"), stop()),
            )
        )
    return out


@TEMPLATES.add(
    108,
    "place-order",
    sites=SITES,
    start_url=SHOP,
    kind="program_html",
    state_changing=True,
    intent="Buy {{qty}} of {{product}}, shipped to my default address",
)
def place_order(data: SiteData) -> list[Instance]:
    out = []
    for index, product in enumerate(_in_stock(data, 5)):
        qty = 1 + index % 3
        check = html_check(
            "func:shopping_get_latest_order_url()",
            locators.ORDER_ITEM_LINES,
            must=[f"{product['name']} x Ordered: {qty}"],
        )
        cart = f"My Cart ({qty} items)"  # the header says "items" whatever the count
        out.append(
            Instance(
                {"qty": qty, "product": product["name"]},
                html_answer(check),
                (
                    *_search(product["name"]),
                    type_("spinbutton", "Qty", str(qty)),
                    click("button", "Add to Cart"),
                    click("link", cart),
                    click("link", "Proceed to Checkout"),
                    click("button", "Place Order"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    109,
    "change-street",
    sites=SITES,
    start_url=SHOP,
    kind="program_html",
    state_changing=True,
    intent="Change the street of my default shipping address to {{street}}",
)
def change_street(data: SiteData) -> list[Instance]:
    out = []
    for street in phrases.STREETS:
        check = html_check(f"{SHOP}/customer/account/", locators.ACCOUNT_ADDRESS, must=[street])
        out.append(
            Instance(
                {"street": street},
                html_answer(check),
                (
                    click("link", "My Account"),
                    click("link", "Address Book"),
                    type_("textbox", "Street Address", street),
                    click("button", "Save Address"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    110,
    "rename-account",
    sites=SITES,
    start_url=SHOP,
    kind="program_html",
    state_changing=True,
    intent="Change the name on my account to {{name}}",
)
def rename_account(data: SiteData) -> list[Instance]:
    out = []
    for first, last in phrases.PERSON_NAMES:
        name = f"{first} {last}"
        check = html_check(f"{SHOP}/customer/account/", locators.ACCOUNT_CONTACT, must=[name])
        out.append(
            Instance(
                {"name": name},
                html_answer(check),
                (
                    click("link", "My Account"),
                    click("link", "Account Information"),
                    type_("textbox", "First Name", first),
                    type_("textbox", "Last Name", last),
                    click("button", "Save"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    111,
    "write-review",
    sites=SITES,
    start_url=SHOP,
    kind="program_html",
    state_changing=True,
    unseen=True,
    intent="Write a {{stars}}-star review of {{product}} with the nickname {{nickname}}, the summary "
    '"{{title}}" and the text "{{text}}"',
)
def write_review(data: SiteData) -> list[Instance]:
    out = []
    for index, product in enumerate(searchable_products(data)):
        stars = 1 + index % 5
        nickname = phrases.REVIEW_NICKNAMES[index % len(phrases.REVIEW_NICKNAMES)]
        title = phrases.REVIEW_TITLES[index % len(phrases.REVIEW_TITLES)]
        text = phrases.REVIEW_TEXTS[(index // 2) % len(phrases.REVIEW_TEXTS)]
        sku = product["sku"]
        checks = (
            html_check("last", f"func:shopping_get_sku_latest_review_author('{sku}')", exact=nickname),
            html_check("last", f"func:shopping_get_sku_latest_review_rating('{sku}')", exact=str(stars * 20)),
        )
        values = {
            "stars": stars,
            "product": product["name"],
            "nickname": nickname,
            "title": title,
            "text": text,
        }
        out.append(
            Instance(
                values,
                html_answer(*checks),
                (
                    *_search(product["name"]),
                    click("radio", f"{stars} star{'' if stars == 1 else 's'}"),
                    type_("textbox", "Nickname", nickname),
                    type_("textbox", "Summary", title),
                    type_("textbox", "Review", text),
                    click("button", "Submit Review"),
                    stop(),
                ),
            )
        )
    return out


def _recent_orders(data: SiteData, pages: int = 2) -> list[dict[str, Any]]:
    """The customer's orders shown on the first ``pages`` pages of the order history, newest first."""
    orders = sorted(
        data.orders(customer_email=CUSTOMER_EMAIL), key=lambda o: (o["created_at"], o["id"]), reverse=True
    )
    return [o for o in orders if history_page(data, o["id"]) <= pages]


@TEMPLATES.add(
    112,
    "order-items",
    sites=SITES,
    start_url=SHOP,
    kind="string_match",
    intent="Which products did I buy in my order number {{order}}?",
)
def order_items(data: SiteData) -> list[Instance]:
    out = []
    for order in _recent_orders(data):
        names = [item["name"] for item in data.order(order["id"])["items"]]
        if len(set(names)) != len(names) or len(names) > 3:
            continue
        steps = (
            *_to_history_page(history_page(data, order["id"])),
            click("link", f"View Order {order['increment_id']}"),
            stop("; ".join(names)),
        )
        out.append(Instance({"order": order["increment_id"]}, must_include_answer(*names), steps))
    return out


@TEMPLATES.add(
    113,
    "count-under-10",
    sites=SITES,
    start_url=SHOP,
    kind="string_match",
    intent="How many products in the {{category}} category cost less than $10?",
)
def count_under_10(data: SiteData) -> list[Instance]:
    out = []
    for top, sub in subcategories(data):
        count = sum(1 for p in data.products(sub["url_path"]) if p["price_cents"] < 1000)
        if count < 2:  # small counts are what a constant answer would guess
            continue
        out.append(
            Instance(
                {"category": sub["name"]},
                exact_answer(str(count)),
                (
                    click("link", top["name"]),
                    click("link", sub["name"]),
                    click("link", "$0.00 - $9.99"),
                    stop(str(count)),
                ),
            )
        )
    return out


@TEMPLATES.add(
    114,
    "order-total-on-date",
    sites=SITES,
    start_url=SHOP,
    kind="string_match",
    unseen=True,
    intent="How much did I pay in total for the order I placed on {{date}}?",
)
def order_total_on_date(data: SiteData) -> list[Instance]:
    orders = data.orders(customer_email=CUSTOMER_EMAIL)
    per_day: dict[str, int] = {}
    for order in orders:
        per_day[order["created_at"][:10]] = per_day.get(order["created_at"][:10], 0) + 1
    out = []
    for order in _recent_orders(data):
        day = order["created_at"][:10]
        if per_day[day] != 1:
            continue
        moment = datetime.strptime(day, "%Y-%m-%d")
        date = f"{moment:%B} {moment.day}, {moment.year}"
        total = amount(order["grand_total_cents"])
        steps = (*_to_history_page(history_page(data, order["id"])), stop(f"${total}"))
        out.append(Instance({"date": date}, must_include_answer(total), steps))
    return out
