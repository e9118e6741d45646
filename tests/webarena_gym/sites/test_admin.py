"""The admin panel over real HTTP: login, grids and filters, order status changes, edits, reports."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from webarena_gym.sites.data import SiteData


@pytest.fixture(scope="module")
def data(sites_cache: Path) -> SiteData:
    return SiteData(0, cache_dir=sites_cache)


def _records(text: str) -> int:
    match = re.search(r"(\d+) records found", text)
    assert match is not None, text[:2000]
    return int(match[1])


def test_login_and_main_pages(client: Callable) -> None:
    anonymous = client("shopping_admin")
    page = anonymous.get("/sales/order/")
    assert "Welcome, please sign in" in page.text and "referer=/admin/sales/order/" in page.url
    assert (
        "incorrect"
        in anonymous.post("/auth/loginPost/", {"login[username]": "admin", "login[password]": "nope"}).text
    )
    admin = client("shopping_admin", login=True)
    for path in (
        "/",
        "/dashboard/",
        "/sales/order/",
        "/catalog/product/",
        "/customer/index/",
        "/review/product/",
        "/reports/report_sales/bestsellers/",
        "/reports/report_sales/sales/",
        "/catalog/product/edit/id/1/",
        "/customer/index/edit/id/1/",
        "/review/product/edit/id/1/",
        "/sales/order/view/order_id/1/",
    ):
        page = admin.get(path)
        assert page.status == 200 and "<h1>" in page.text, path
    assert "Signed in as admin" in admin.get("/").text
    root = client("shopping_admin").get(admin.origin + "/", follow=False)
    assert root.status == 302 and root.headers["location"] == "/admin/"
    assert "signed in as" not in admin.post("/auth/logout/").text.lower()


def test_order_grid_filters(client: Callable, data: SiteData) -> None:
    admin = client("shopping_admin", login=True)
    assert _records(admin.get("/sales/order/").text) == len(data.orders())
    assert _records(admin.get("/sales/order/?status=canceled").text) == len(data.orders(status="canceled"))
    in_march = data.orders(date_from="2023-03-01", date_to="2023-03-31")
    assert _records(admin.get("/sales/order/?date_from=03/01/2023&date_to=2023-03-31").text) == len(in_march)
    emma = data.orders(customer_email="emma.lopez@gmail.com")
    page = admin.get("/sales/order/?customer=emma.lopez").text
    assert _records(page) == len(emma) and emma[-1]["increment_id"] in page
    page2 = admin.get("/sales/order/?p=2").text
    newest_first = sorted(data.orders(), key=lambda o: (o["created_at"], o["id"]), reverse=True)
    assert newest_first[20]["increment_id"] in page2 and newest_first[0]["increment_id"] not in page2
    assert admin.get("/sales/order/?status=bogus").status == 400
    assert admin.get("/sales/order/?date_from=yesterday").status == 400


def test_order_status_changes(client: Callable, data: SiteData) -> None:
    admin = client("shopping_admin", login=True)
    order = data.orders(status="pending")[0]
    view = f"/sales/order/view/order_id/{order['id']}/"
    page = admin.post(
        f"/sales/order/addComment/order_id/{order['id']}/", {"status": "processing", "comment": ""}
    )
    assert "You changed the order status." in page.text and "Order Status</th><td>Processing" in page.text
    page = admin.post(f"/sales/order/hold/order_id/{order['id']}/")
    assert "On Hold" in page.text and "Unhold" in page.text
    page = admin.post(f"/sales/order/unhold/order_id/{order['id']}/")
    assert "Order Status</th><td>Processing" in page.text
    page = admin.post(
        f"/sales/order/addComment/order_id/{order['id']}/", {"status": "pending", "comment": ""}
    )
    assert "cannot change" in page.text
    page = admin.post(
        f"/sales/order/addComment/order_id/{order['id']}/",
        {"status": "complete", "comment": "Shipped by courier"},
    )
    assert "Shipped by courier" in page.text and "Order Status</th><td>Complete" in page.text
    assert (
        "cancel an order whose status is Complete"
        in admin.post(f"/sales/order/cancel/order_id/{order['id']}/").text
    )
    assert admin.post(f"/sales/order/explode/order_id/{order['id']}/").status == 404
    assert admin.post(f"/sales/order/addComment/order_id/{order['id']}/", {"status": "weird"}).status == 422
    assert admin.get("/sales/order/view/order_id/999999/").status == 404
    # The customer sees the new status too.
    if order["customer_email"] == "emma.lopez@gmail.com":
        assert "Complete" in client("shopping", login=True).get(view).text


def test_product_edit_reaches_the_storefront(client: Callable, data: SiteData) -> None:
    admin = client("shopping_admin", login=True)
    product = data.products("office-products")[0]
    form = {"name": product["name"], "price": "12.34", "qty": "7", "status": "1", "description": "New text."}
    page = admin.post(f"/catalog/product/save/id/{product['id']}/", form)
    assert "You saved the product." in page.text
    assert "$12.34" in client("shopping").get(f"/{product['url_key']}.html").text
    assert admin.post(f"/catalog/product/save/id/{product['id']}/", dict(form, price="cheap")).status == 422
    assert admin.post(f"/catalog/product/save/id/{product['id']}/", dict(form, status="2")).status == 200
    assert (
        client("shopping").get(f"/{product['url_key']}.html").status == 404
    )  # disabled: gone from the store
    grid = admin.get(f"/catalog/product/?search={product['sku']}").text
    assert _records(grid) == 1 and "Disabled" in grid
    assert (
        _records(admin.get("/catalog/product/?status=2").text)
        == len([p for p in data.products(include_disabled=True) if p["status"] == 2]) + 1
    )


def test_customers_and_reviews(client: Callable, data: SiteData) -> None:
    admin = client("shopping_admin", login=True)
    assert _records(admin.get("/customer/index/").text) == len(data.customers())
    page = admin.get("/customer/index/?search=Lopez").text
    assert "emma.lopez@gmail.com" in page
    pending = [r for r in data.reviews() if r["status"] == "pending"]
    assert _records(admin.get("/review/product/?status=pending").text) == len(pending)
    review = pending[0]
    form = {
        "status": "approved",
        "nickname": review["nickname"],
        "title": review["title"],
        "detail": "Approved by the admin test.",
    }
    assert "You saved the review." in admin.post(f"/review/product/save/id/{review['id']}/", form).text
    product = data.product(review["sku"])
    assert "Approved by the admin test." in client("shopping").get(f"/{product['url_key']}.html").text
    assert "has been deleted" in admin.post(f"/review/product/delete/id/{review['id']}/").text
    assert admin.get(f"/review/product/edit/id/{review['id']}/").status == 404


def test_reports_match_the_data(client: Callable, data: SiteData) -> None:
    admin = client("shopping_admin", login=True)
    page = admin.get("/reports/report_sales/bestsellers/?period=year&from=2022-01-01&to=2022-12-31").text
    top = data.bestsellers("year", date_from="2022-01-01", date_to="2022-12-31", limit_per_period=1)[0]
    assert f"<td>2022</td><td>1</td><td>{top['name']}</td><td>{top['sku']}</td><td>{top['qty']}</td>" in page
    page = admin.get("/reports/report_sales/sales/?period=month&from=2023-01-01&to=2023-12-31&show=1").text
    months = data.sales_totals("month", date_from="2023-01-01", date_to="2023-12-31")
    assert len(months) == 12
    assert f"<td>2023-05</td><td>{months[4]['orders']}</td>" in page
    assert admin.get("/reports/report_sales/sales/?period=week").status == 400
