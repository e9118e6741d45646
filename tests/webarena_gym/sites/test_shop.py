"""The shop storefront over real HTTP: pages, the buying flow, the account, REST, and malformed requests."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from webarena_gym.sites import EmbeddedSites
from webarena_gym.sites.data import SiteData


@pytest.fixture(scope="module")
def data(sites_cache: Path) -> SiteData:
    return SiteData(0, cache_dir=sites_cache)


def test_main_pages_render(client: Callable, data: SiteData) -> None:
    shop = client("shopping")
    product = data.products("electronics/headphones")[0]
    for path in (
        "/",
        "/electronics.html",
        "/electronics/headphones.html",
        f"/{product['url_key']}.html",
        "/catalogsearch/result/?q=headphones",
        "/catalogsearch/result/index/?q=case&p=2",
        "/contact/",
        "/customer/account/login/",
    ):
        page = shop.get(path)
        assert page.status == 200, path
        assert page.headers["content-type"].startswith("text/html")
        assert "<h1>" in page.text and "<nav" in page.text
    assert product["name"] in shop.get(f"/{product['url_key']}.html").text


def test_category_listing_pages_and_sorts(client: Callable, data: SiteData) -> None:
    shop = client("shopping")
    expected = sorted(data.products("electronics"), key=lambda p: (p["price_cents"], p["id"]))
    first = shop.get("/electronics.html?product_list_order=price&product_list_dir=asc").text
    assert expected[0]["name"] in first and f"{len(expected)} items" in first
    second = shop.get("/electronics.html?product_list_order=price&p=2").text
    assert expected[12]["name"] in second and expected[0]["name"] not in second
    cheap = shop.get("/electronics.html?price=0-10").text
    assert all(p["name"] in cheap for p in expected if p["price_cents"] < 1000)


def test_product_page_shows_reviews(client: Callable, data: SiteData) -> None:
    reviewed = next(p for p in data.products() if data.product(p["sku"])["reviews"])
    page = client("shopping").get(f"/{reviewed['url_key']}.html").text
    for review in data.product(reviewed["sku"])["reviews"]:
        assert review["nickname"] in page


def test_login_required_redirects_to_the_login_page(client: Callable) -> None:
    page = client("shopping").get("/checkout/cart/", follow=False)
    assert page.status == 303
    assert page.headers["location"] == "/customer/account/login/?referer=/checkout/cart/"
    wrong = client("shopping").post(
        "/customer/account/loginPost/", {"login[username]": "emma.lopez@gmail.com", "login[password]": "nope"}
    )
    assert "sign-in was incorrect" in wrong.text


def test_cart_checkout_and_order_history(client: Callable, sites: EmbeddedSites, data: SiteData) -> None:
    shop = client("shopping", login=True)
    products = [p for p in data.products("video-games") if p["qty"] >= 5][:2]
    for product in products:
        page = shop.post("/checkout/cart/add/", {"product_id": product["id"], "qty": 2})
        assert f"You added {product['name']}" in page.text
    cart = shop.get("/checkout/cart/").text
    assert "My Cart (4 items)" in cart
    item_ids = re.findall(r'name="qty_(\d+)"', cart)
    page = shop.post("/checkout/cart/updatePost/", {f"qty_{item_ids[0]}": 3})
    assert "My Cart (5 items)" in page.text
    page = shop.post("/checkout/cart/delete/", {"item_id": item_ids[1]})
    assert "My Cart (3 items)" in page.text and products[1]["name"] not in page.text.split("<main>")[1]
    checkout = shop.get("/checkout/").text
    assert "101 S San Mateo Dr" in checkout  # the default address is prefilled
    address = {
        "firstname": "Emma",
        "lastname": "Lopez",
        "street": "1 Test Way",
        "city": "Pittsburgh",
        "region": "Pennsylvania",
        "postcode": "15213",
        "country": "United States",
        "telephone": "555",
    }
    success = shop.post("/checkout/placeOrder/", address)
    assert "Thank you for your purchase!" in success.text
    number = re.search(
        r"Your order number is: <a href=\"/sales/order/view/order_id/(\d+)/\">(\d+)</a>", success.text
    )
    assert number is not None and int(number[2]) == int(number[1]) == len(data.orders()) + 1
    view = shop.get(f"/sales/order/view/order_id/{number[1]}/").text
    assert products[0]["name"] in view and "1 Test Way" in view and "Pending" in view
    expected_total = 3 * products[0]["price_cents"] + 3 * 500
    assert f"${expected_total / 100:,.2f}" in view
    assert number[2] in shop.get("/sales/order/history/").text
    assert "My Cart (0 items)" in view
    product_page = shop.get(f"/{products[0]['url_key']}.html").text
    assert "In stock" in product_page
    # Someone else's order is not visible.
    other = data.orders(customer_email="alex.martin@gmail.com")[0]
    assert shop.get(f"/sales/order/view/order_id/{other['id']}/").status == 404


def test_stock_is_enforced(client: Callable, data: SiteData) -> None:
    shop = client("shopping", login=True)
    product = next(p for p in data.products() if 0 < p["qty"] < 50)
    page = shop.post("/checkout/cart/add/", {"product_id": product["id"], "qty": product["qty"] + 1})
    assert "not available" in page.text and "My Cart (0 items)" in page.text
    out_of_stock = next(p for p in data.products() if p["qty"] == 0)
    assert "Out of stock" in shop.get(f"/{out_of_stock['url_key']}.html").text


def test_account_edits_wishlist_review_and_contact(client: Callable, data: SiteData) -> None:
    shop = client("shopping", login=True)
    page = shop.post("/customer/account/editPost/", {"firstname": "Emmy", "lastname": "Lopez-Diaz"})
    assert "Welcome, Emmy Lopez-Diaz!" in page.text
    fields = {
        "street": "5 Elm St",
        "city": "Boston",
        "region": "Massachusetts",
        "postcode": "02110",
        "country": "United States",
        "telephone": "555-0100",
    }
    assert "5 Elm St" in shop.post("/customer/address/formPost/", fields).text
    product = data.products("beauty-personal-care")[0]
    page = shop.post("/wishlist/index/add/", {"product_id": product["id"]})
    assert "added to your Wish List" in page.text and product["name"] in page.text
    item_id = re.search(r'name="item_id" value="(\d+)"', page.text)[1]  # type: ignore[index]
    assert "no items in your wish list" in shop.post("/wishlist/index/remove/", {"item_id": item_id}).text
    review = {"rating": 4, "nickname": "Emmy", "title": "Nice", "detail": "Works well."}
    page = shop.post(f"/review/product/post/id/{product['id']}/", review)
    assert "submitted your review for moderation" in page.text
    assert "Works well." not in page.text  # pending reviews are not shown
    page = client("shopping").post("/contact/index/post/", {"name": "A", "email": "a@b.c", "comment": "Hi"})
    assert "Thanks for contacting us" in page.text


def _token(shop: object) -> str:
    page = shop.post(
        "/rest/default/V1/integration/admin/token",  # type: ignore[attr-defined]
        json.dumps({"username": "admin", "password": "admin1234"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    assert page.status == 200
    token = page.json()
    assert isinstance(token, str) and token
    return token


def test_rest_api_has_magento_shapes(client: Callable, data: SiteData) -> None:
    shop = client("shopping")
    token = _token(shop)
    auth = {"Authorization": f"Bearer {token}"}
    params = (
        "searchCriteria[sortOrders][0][field]=created_at&searchCriteria[sortOrders][0][direction]=DESC"
        "&searchCriteria[pageSize]=1"
    )
    latest = shop.get(f"/rest/V1/orders?{params}", headers=auth).json()
    assert latest["total_count"] == len(data.orders())
    newest = max(data.orders(), key=lambda o: (o["created_at"], o["id"]))
    item = latest["items"][0]
    assert {"entity_id", "increment_id", "customer_email", "created_at", "grand_total", "status"} <= set(item)
    assert (
        item["increment_id"] == newest["increment_id"]
        and item["grand_total"] == newest["grand_total_cents"] / 100
    )
    email = "emma.lopez@gmail.com"
    filtered = shop.get(
        "/rest/V1/orders?searchCriteria[filterGroups][0][filters][0][field]=customer_email"
        f"&searchCriteria[filterGroups][0][filters][0][value]={email}"
        "&searchCriteria[filterGroups][0][filters][0][conditionType]=eq",
        headers=auth,
    ).json()
    assert filtered["total_count"] == len(data.orders(customer_email=email))
    assert {o["customer_email"] for o in filtered["items"]} == {email}
    one = shop.get(f"/rest/V1/orders/{newest['id']}", headers=auth).json()
    assert one["increment_id"] == newest["increment_id"] and one["items"]
    reviewed = next(p for p in data.products() if data.product(p["sku"])["reviews"])
    reviews = shop.get(f"/rest/V1/products/{reviewed['sku']}/reviews", headers=auth).json()
    assert isinstance(reviews, list) and reviews
    assert reviews[-1]["ratings"][0]["rating_name"] == "Rating"
    assert reviews[-1]["ratings"][0]["percent"] == 20 * reviews[-1]["ratings"][0]["value"]
    assert [r["created_at"] for r in reviews] == sorted(r["created_at"] for r in reviews)
    assert "nickname" in reviews[-1]
    assert shop.get(f"/rest/V1/products/{reviewed['sku']}", headers=auth).json()["sku"] == reviewed["sku"]
    assert shop.get("/rest/V1/products/NOPE/reviews", headers=auth).status == 404
    assert shop.get("/rest/V1/orders", headers={"Authorization": "Bearer wrong"}).status == 401
    assert shop.get("/rest/V1/orders").status == 401
    bad = shop.post("/rest/V1/integration/admin/token", b'{"username": "admin", "password": "x"}')
    assert bad.status == 401 and "message" in bad.json()


def test_malformed_requests_get_error_pages(client: Callable, sites: EmbeddedSites) -> None:
    shop = client("shopping")
    cases = [
        ("GET", "/electronics.html?p=abc", 400),
        ("GET", "/electronics.html?p=0", 400),
        ("GET", "/electronics.html?product_list_order=bogus", 400),
        ("GET", "/electronics.html?price=abc", 400),
        ("GET", "/electronics.html?product_list_limit=7", 400),
        ("GET", "/no-such-thing.html", 404),
        ("GET", "/sales/order/view/order_id/abc/", 404),
        ("GET", "/catalogsearch/result/?q=" + "x" * 300, 400),
        ("PUT", "/", 405),
        ("DELETE", "/checkout/cart/", 405),
        ("GET", "/rest/V1/orders?searchCriteria[pageSize]=x", 401),
    ]
    for method, path, status in cases:
        page = shop.request(method, path)
        assert page.status == status, (method, path, page.status)
        if page.headers["content-type"].startswith("text/html"):
            assert str(status) in page.text
    logged_in = client("shopping", login=True)
    assert logged_in.post("/checkout/cart/add/", {"product_id": "abc"}).status == 422
    assert logged_in.post("/checkout/cart/add/", {"product_id": 1, "qty": -1}).status == 422
    assert logged_in.post("/checkout/cart/add/", {"product_id": 999999}).status == 404
    assert logged_in.post("/checkout/placeOrder/", {"firstname": "x"}).status in (303, 200, 422)
    garbage = logged_in.post(
        "/checkout/cart/add/", b"--xx\r\nbroken", headers={"Content-Type": "multipart/form-data; boundary=xx"}
    )
    assert garbage.status in (400, 422)
    assert logged_in.post("/customer/account/editPost/", {"firstname": ""}).status == 422
    token = _token(shop)
    bad_json = shop.post("/rest/V1/integration/admin/token", b"{not json")
    assert bad_json.status == 400
    auth = {"Authorization": f"Bearer {token}"}
    assert shop.get("/rest/V1/orders?searchCriteria[sortOrders][0][field]=bogus", headers=auth).status == 400
    # What browsers send routinely is fine.
    assert shop.get("/favicon.ico").status in (204, 404)
    assert shop.request("HEAD", "/").status == 200
    assert shop.get("/?utm_source=x&fbclid=y", headers={"X-Weird": "\u00e9", "Accept": "*/*"}).status == 200
    assert shop.get("/static/style.css").headers["content-type"].startswith("text/css")
    assert _server_healthy(sites)


def _server_healthy(sites: EmbeddedSites) -> bool:
    """The server is still up after the bad requests."""
    import urllib.request

    with urllib.request.urlopen(sites.urls["shopping"] + "/__esopt/health", timeout=5) as resp:
        return resp.status == 200
