"""The embedded sites in a real Chromium: pages render with a useful accessibility tree, and the flows an
agent
performs (buy something, change an order's status, post, comment and vote) work through forms and links."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from webarena_gym.sites import EmbeddedSites
from webarena_gym.sites.data import SiteData, post_path

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
CONTROL_ROLES = {"textbox", "searchbox", "combobox", "button", "link", "checkbox", "radio", "spinbutton"}


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    from webarena_gym.browser import shared_playwright

    with shared_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, sites: EmbeddedSites) -> Iterator[Any]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def _unnamed_controls(page: Any) -> list[str]:
    """Interactive nodes of the accessibility tree without an accessible name."""
    session = page.context.new_cdp_session(page)
    nodes = session.send("Accessibility.getFullAXTree")["nodes"]
    session.detach()
    missing = []
    for node in nodes:
        role = node.get("role", {}).get("value")
        name = (node.get("name") or {}).get("value", "")
        if role in CONTROL_ROLES and not node.get("ignored") and not str(name).strip():
            missing.append(f"{role} {node.get('backendDOMNodeId')}")
    return missing


def test_pages_render_with_named_controls(page: Any, sites: EmbeddedSites, sites_cache: Path) -> None:
    data = SiteData(0, cache_dir=sites_cache)
    product = data.products("electronics")[0]
    post = data.posts("books")[0]
    urls = sites.urls
    for url, title in (
        (urls["shopping"] + "/", "Home Page"),
        (urls["shopping"] + "/electronics.html", "Electronics"),
        (urls["shopping"] + f"/{product['url_key']}.html", product["name"]),
        (urls["shopping"] + "/catalogsearch/result/?q=case", "Search results"),
        (urls["shopping"] + "/customer/account/login/", "Customer Login"),
        (urls["shopping_admin"] + "/", "Sign in"),
        (urls["reddit"] + "/", "All posts"),
        (urls["reddit"] + post_path(post), post["title"]),
        (urls["reddit"] + "/user/MarvelsGrantMan136", "MarvelsGrantMan136"),
        (urls["shopping"] + "/no-such-page.html", "404"),
    ):
        response = page.goto(url)
        assert response is not None
        assert title in page.title(), url
        assert _unnamed_controls(page) == [], url
    data.close()


def test_shop_login_add_to_cart_and_checkout(page: Any, sites: EmbeddedSites) -> None:
    base = sites.urls["shopping"]
    page.goto(base + "/customer/account/login/")
    page.get_by_label("Email", exact=True).fill("emma.lopez@gmail.com")
    page.get_by_label("Password").fill("Password.123")
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url(base + "/customer/account/")
    expect(page.locator("body")).to_contain_text("Welcome, Emma Lopez!")
    page.get_by_role("link", name="Video Games").first.click()
    page.get_by_role("button", name=re.compile(r"^Add .* to Cart$")).first.click()
    assert "You added" in page.get_by_role("status").inner_text()
    page.get_by_role("link", name=re.compile(r"My Cart \(1 items\)")).click()
    page.get_by_role("link", name="Proceed to Checkout").click()
    page.get_by_label("City").fill("Pittsburgh")
    page.get_by_role("button", name="Place Order").click()
    expect(page.get_by_role("heading", name="Thank you for your purchase!")).to_be_visible()
    page.get_by_role("link", name=re.compile(r"^0000")).click()
    expect(page.locator("body")).to_contain_text("Pittsburgh")
    expect(page.locator("body")).to_contain_text("Pending")


def test_admin_changes_an_order_status(page: Any, sites: EmbeddedSites, sites_cache: Path) -> None:
    base = sites.urls["shopping_admin"]
    with SiteData(0, cache_dir=sites_cache) as data:
        order = data.orders(status="pending")[0]
    page.goto(base + "/")
    page.get_by_placeholder("user name").fill("admin")
    page.get_by_placeholder("password").fill("admin1234")
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Orders").click()
    page.get_by_label("Order ID").fill(order["increment_id"])
    page.get_by_role("button", name="Apply Filters").click()
    page.get_by_role("link", name=f"View order {order['increment_id']}").click()
    page.get_by_label("Status").select_option("processing")
    page.get_by_label("Comment").fill("Packed and ready.")
    page.get_by_role("button", name="Submit Comment").click()
    assert "You saved the order status and comment." in page.get_by_role("status").inner_text()
    expect(page.locator("body")).to_contain_text("Packed and ready.")


def test_forum_post_comment_and_vote(page: Any, sites: EmbeddedSites) -> None:
    base = sites.urls["reddit"]
    page.goto(base + "/login")
    page.get_by_label("Username").fill("MarvelsGrantMan136")
    page.get_by_label("Password").fill("test1234")
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Submit").click()
    page.get_by_label("Title").fill("Browser-made post")
    page.get_by_label("Body").fill("Written through Chromium.")
    page.get_by_label("Forum").select_option("books")
    page.get_by_role("button", name="Create submission").click()
    expect(page.get_by_role("heading", name="Browser-made post")).to_be_visible()
    page.get_by_role("textbox", name="Comment").fill("First!")
    page.get_by_role("button", name="Post comment").click()
    assert "Your comment was posted." in page.get_by_role("status").inner_text()
    page.get_by_role("button", name="Upvote this post").click()
    assert page.get_by_role("button", name="Upvote this post").get_attribute("aria-pressed") == "true"
    page.get_by_text("Reply").first.click()
    page.get_by_label("Reply to MarvelsGrantMan136").fill("Replying to myself.")
    page.get_by_role("button", name="Post reply").click()
    expect(page.locator("body")).to_contain_text("Replying to myself.")


def test_storage_state_logs_in(browser: Any, sites: EmbeddedSites) -> None:
    context = browser.new_context(storage_state=sites.login_state("shopping"))
    try:
        page = context.new_page()
        page.goto(sites.urls["shopping"] + "/customer/account/")
        expect(page.locator("body")).to_contain_text("Welcome, Emma Lopez!")
    finally:
        context.close()


@pytest.fixture
def attacker_page() -> Iterator[Callable[[str], str]]:
    """``serve(html) -> url``: a page of another origin (another loopback port), as an attacker hosts it."""
    import http.server
    import threading

    pages: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def serve(html: str) -> str:
        pages["/attack.html"] = html.encode()
        return f"http://127.0.0.1:{server.server_address[1]}/attack.html"

    yield serve
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_a_page_of_another_origin_cannot_change_the_account(
    browser: Any, sites: EmbeddedSites, attacker_page: Callable[[str], str]
) -> None:
    shop = sites.urls["shopping"]
    url = attacker_page(
        f'<form id="f" method="post" action="{shop}/customer/account/editPost/">'
        '<input name="firstname" value="Mallory"><input name="lastname" value="Attacker"></form>'
        '<script>document.getElementById("f").submit()</script>'
    )
    context = browser.new_context(storage_state=sites.login_state("shopping"))
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(url)
        page.wait_for_url(f"{shop}/customer/account/editPost/")
        expect(page.locator("body")).to_contain_text("Cross-site request refused")
        page.goto(shop + "/customer/account/")
        expect(page.locator("body")).to_contain_text("Welcome, Emma Lopez!")
    finally:
        context.close()


def test_sign_out_buttons_work_in_the_browser(browser: Any, sites: EmbeddedSites) -> None:
    for site, account_page, label in (
        ("shopping", "/customer/account/", "Sign Out"),
        ("shopping_admin", "/", "Sign Out"),
        ("reddit", "/submit", "Log out"),
    ):
        context = browser.new_context(storage_state=sites.login_state(site))
        try:
            page = context.new_page()
            page.set_default_timeout(15_000)
            page.goto(sites.urls[site] + account_page)
            page.get_by_role("button", name=label).click()
            page.goto(sites.urls[site] + account_page)
            assert "login" in page.url, (site, page.url)
        finally:
            context.close()
