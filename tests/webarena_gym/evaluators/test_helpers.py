"""The func: helper whitelist: the safe parser, and every helper against real local servers / a real page."""

from __future__ import annotations

import json

import pytest

from webarena_gym.errors import EvaluatorError, SiteConfigError
from webarena_gym.evaluators import EvalContext, build_evaluator
from webarena_gym.evaluators.helpers import (
    HELPERS,
    HelperCallError,
    HelperEnv,
    PageArg,
    parse_helper_call,
    reddit_get_post_url,
    run_helper,
)
from webarena_gym.tasks import SiteURLs

TOKEN = "tok-123"


# ---------------------------------------------------------------------------------------------- parser


def test_parse_valid_calls():
    call = parse_helper_call("func:reddit_get_post_url('__last_url__')")
    assert (call.name, call.args) == ("reddit_get_post_url", ("__last_url__",))
    call = parse_helper_call("func:gitlab_get_project_memeber_role(__page__, 'byteblaze')")
    assert call.args == (PageArg(), "byteblaze")
    assert parse_helper_call("func:shopping_get_latest_order_url()").args == ()
    assert parse_helper_call("func:shopping_get_sku_latest_review_rating('B07X')").args == ("B07X",)


@pytest.mark.parametrize(("text", "message"), [
    ("func:__import__('os').system('true')", "plain call"),
    ("func:os.system('true')", "plain call"),
    ("func:exec('1')", "not in the whitelist"),
    ("func:shopping_get_orders()", "not in the whitelist"),
    ("func:reddit_get_post_url(__last_url__)", "neither a string constant"),
    ("func:reddit_get_post_url('a' + 'b')", "neither a string constant"),
    ("func:reddit_get_post_url(url='x')", "keyword"),
    ("func:reddit_get_post_url()", "takes arguments"),
    ("func:gitlab_get_project_memeber_role('byteblaze', __page__)", "takes arguments"),
    ("func:reddit_get_post_url('x'", "cannot parse"),
    ("reddit_get_post_url('x')", "not a func:"),
])
def test_parse_rejects(text, message):
    with pytest.raises(HelperCallError, match=message):
        parse_helper_call(text)


def test_whitelist_names():
    assert set(HELPERS) == {"shopping_get_latest_order_url", "shopping_get_sku_latest_review_author",
                            "shopping_get_sku_latest_review_rating", "reddit_get_post_url",
                            "gitlab_get_project_memeber_role"}


@pytest.mark.parametrize(("url", "expected"), [
    ("http://r:9999/f/books/59421/friendly-reminder/comment/1", "http://r:9999/f/books/59421/"),
    ("http://r:9999/f/books/59421", "http://r:9999/f/books/59421/"),
    ("http://r:9999/f/books", "http://r:9999/f/books"),        # not a post: unchanged
    ("http://r:9999/u/someone/x", "http://r:9999/u/someone/x"),
])
def test_reddit_get_post_url(url, expected):
    assert reddit_get_post_url(HelperEnv(page=None, sites=SiteURLs()), url) == expected


def test_run_helper_needs_page_for_markers():
    call = parse_helper_call("func:reddit_get_post_url('__last_url__')")
    with pytest.raises(EvaluatorError, match="__last_url__"):
        run_helper(call, HelperEnv(page=None, sites=SiteURLs()))


def test_rest_helper_needs_shopping_site():
    call = parse_helper_call("func:shopping_get_latest_order_url()")
    with pytest.raises(SiteConfigError, match="shopping"):
        run_helper(call, HelperEnv(page=None, sites=SiteURLs(reddit="http://127.0.0.1:1")))


# ---------------------------------------------------------------------------------------- Magento REST


def install_magento(shop, *, orders, reviews=None, password="admin1234"):
    """The REST shape WebArena's helpers use: admin token, orders search, product reviews."""

    def token(req):
        body = json.loads(req.body)
        if body != {"username": "admin", "password": password}:
            return 401, "application/json", json.dumps({"message": "The account sign-in was incorrect"})
        return 200, "application/json", json.dumps(TOKEN)

    def authorised(req):
        return req.headers.get("Authorization") == f"Bearer {TOKEN}"

    def orders_route(req):
        if not authorised(req):
            return 401, "application/json", "{}"
        assert req.query["searchCriteria[sortOrders][0][field]"] == ["created_at"]
        assert req.query["searchCriteria[sortOrders][0][direction]"] == ["DESC"]
        assert req.query["searchCriteria[pageSize]"] == ["1"]
        latest = sorted(orders, key=lambda o: o["created_at"], reverse=True)[:1]
        return 200, "application/json", json.dumps({"items": latest, "total_count": len(orders)})

    shop.routes["/rest/default/V1/integration/admin/token"] = token
    shop.routes["/rest/V1/orders"] = orders_route
    for sku, items in (reviews or {}).items():
        shop.routes[f"/rest/V1/products/{sku}/reviews"] = (
            lambda req, items=items: (200, "application/json", json.dumps(items)) if authorised(req)
            else (401, "application/json", "{}"))


def review(nickname, percent):
    return {"id": 1, "title": "t", "detail": "d", "nickname": nickname,
            "ratings": [{"rating_id": 4, "rating_name": "Rating", "percent": percent,
                         "value": percent // 20}]}


ORDERS = [{"increment_id": "000000188", "created_at": "2023-03-01 10:00:00"},
          {"increment_id": "000000190", "created_at": "2023-05-01 10:00:00"},
          {"increment_id": "000000189", "created_at": "2023-04-01 10:00:00"}]


def test_latest_order_url_via_rest(fake_sites):
    install_magento(fake_sites.shopping, orders=ORDERS)
    env = HelperEnv(page=None, sites=fake_sites.urls)
    url = run_helper(parse_helper_call("func:shopping_get_latest_order_url()"), env)
    assert url == f"{fake_sites.shopping.url}/sales/order/view/order_id/190/"
    token_request = fake_sites.shopping.requests[0]
    assert token_request.method == "POST" and token_request.path.endswith("/integration/admin/token")


def test_credentials_are_configurable(fake_sites):
    install_magento(fake_sites.shopping, orders=ORDERS, password="s3cret")
    call = parse_helper_call("func:shopping_get_latest_order_url()")
    with pytest.raises(EvaluatorError, match="HTTP 401"):
        run_helper(call, HelperEnv(page=None, sites=fake_sites.urls))
    accounts = {"shopping_site_admin": {"username": "admin", "password": "s3cret"}}
    assert run_helper(call, HelperEnv(page=None, sites=fake_sites.urls, accounts=accounts)).endswith("/190/")


def test_sku_review_helpers(fake_sites):
    install_magento(fake_sites.shopping, orders=ORDERS,
                    reviews={"B07X": [review("Alice", 60), review("Bob", 80)], "EMPTY": []})
    env = HelperEnv(page=None, sites=fake_sites.urls)
    rating = parse_helper_call("func:shopping_get_sku_latest_review_rating('B07X')")
    author = parse_helper_call("func:shopping_get_sku_latest_review_author('B07X')")
    assert run_helper(rating, env) == "80"
    assert run_helper(author, env) == "Bob"
    assert run_helper(parse_helper_call("func:shopping_get_sku_latest_review_author('EMPTY')"), env) == ""


def test_rest_failures_raise(fake_sites):
    call = parse_helper_call("func:shopping_get_latest_order_url()")
    # server answers 404 for everything
    with pytest.raises(EvaluatorError, match="HTTP 404"):
        run_helper(call, HelperEnv(page=None, sites=fake_sites.urls))
    # nothing listens
    with pytest.raises(EvaluatorError, match="failed"):
        run_helper(call, HelperEnv(page=None, sites=SiteURLs(shopping="http://127.0.0.1:9"), timeout_s=5))
    # no orders at all
    install_magento(fake_sites.shopping, orders=[])
    with pytest.raises(EvaluatorError, match="no latest order"):
        run_helper(call, HelperEnv(page=None, sites=fake_sites.urls))
    # non-JSON
    token_path = "/rest/default/V1/integration/admin/token"
    fake_sites.shopping.routes[token_path] = lambda r: (200, "text/html", "<p>")
    with pytest.raises(EvaluatorError, match="non-JSON"):
        run_helper(call, HelperEnv(page=None, sites=fake_sites.urls))


# -------------------------------------------------------------------------------------------- in tasks

ORDER_PAGE = """<html><body><h1>Order # 000000190</h1>
<table id="my-orders-table"><tr><td class="col name">Tazrigo dental pens</td>
<td class="col qty">2</td></tr></table>
</body></html>"""

MEMBERS_PAGE = """<html><body><table><tbody>
<tr><td data-label="Account"><span class="gl-avatar-labeled-sublabel">@byteblaze</span></td>
    <td class="col-max-role"><span>Owner</span></td></tr>
<tr><td data-label="Account"><span class="gl-avatar-labeled-sublabel">@yjlou</span></td>
    <td class="col-max-role"><span>Developer</span></td></tr>
</tbody></table></body></html>"""


def _run(task, page, sites, rules="webarena"):
    return build_evaluator(task)(EvalContext(answer=None, page=page, context=page.context, sites=sites,
                                             rules=rules))


@pytest.mark.browser
def test_latest_order_url_in_program_html(fake_sites, eval_page, task_factory):
    shop = fake_sites.shopping
    install_magento(shop, orders=ORDERS)
    shop.page("/sales/order/view/order_id/190/", ORDER_PAGE)
    shop.page("/checkout/onepage/success/", "<p>Thank you</p>")
    eval_page.goto(f"{shop.url}/checkout/onepage/success/")
    task = task_factory({"eval_types": ["program_html"], "program_html": [{
        "url": "func:shopping_get_latest_order_url()",
        "locator": "document.querySelector('#my-orders-table').outerText",
        "required_contents": {"must_include": ["Tazrigo |OR| dental", "2"]}}]})
    result = _run(task, eval_page, fake_sites.urls)
    assert result.score == 1.0
    assert eval_page.url == f"{shop.url}/sales/order/view/order_id/190/"


@pytest.mark.browser
def test_reddit_post_url_with_last_url(fake_sites, eval_page, task_factory):
    forum = fake_sites.reddit
    forum.page("/f/books/59421/friendly-reminder", "<p>the post, with a comment form</p>")
    forum.page("/f/books/59421/", "<div class='comment'>I agree with this</div>")
    eval_page.goto(f"{forum.url}/f/books/59421/friendly-reminder")
    task = task_factory({"eval_types": ["program_html"], "program_html": [{
        "url": "func:reddit_get_post_url('__last_url__')",
        "locator": "document.querySelector('.comment').outerText",
        "required_contents": {"exact_match": "I agree with this"}}]})
    assert _run(task, eval_page, fake_sites.urls).score == 1.0
    assert eval_page.url == f"{forum.url}/f/books/59421/"


@pytest.mark.browser
@pytest.mark.parametrize(("account", "expected", "score"), [
    ("yjlou", "Developer", 1.0), ("byteblaze", "Developer", 0.0), ("nobody", "", 1.0)])
def test_gitlab_member_role(fake_sites, eval_page, task_factory, account, expected, score):
    gitlab = fake_sites.gitlab
    gitlab.page("/byteblaze/dotfiles/-/project_members", MEMBERS_PAGE)
    eval_page.goto(f"{gitlab.url}/byteblaze/dotfiles")
    task = task_factory({"eval_types": ["program_html"], "program_html": [{
        "url": "__GITLAB__/byteblaze/dotfiles/-/project_members",
        "locator": f"func:gitlab_get_project_memeber_role(__page__, '{account}')",
        "required_contents": {"exact_match": expected}}]})
    assert _run(task, eval_page, fake_sites.urls).score == score
    assert _run(task, eval_page, fake_sites.urls, rules="webarena_lite").score == score


@pytest.mark.browser
def test_sku_review_helpers_in_program_html(fake_sites, eval_page, task_factory):
    reviews = {"B07X": [review("Alice", 60), review("Bob", 80)]}
    install_magento(fake_sites.shopping, orders=ORDERS, reviews=reviews)
    fake_sites.shopping.page("/admin/review/", "<p>reviews</p>")
    eval_page.goto(f"{fake_sites.shopping.url}/admin/review/")
    task = task_factory({"eval_types": ["program_html"], "program_html": [
        {"url": "last", "locator": "func:shopping_get_sku_latest_review_rating('B07X')",
         "required_contents": {"must_include": ["80"]}},
        {"url": "last", "locator": "func:shopping_get_sku_latest_review_author('B07X')",
         "required_contents": {"must_include": ["Bob"]}},
    ]})
    assert _run(task, eval_page, fake_sites.urls).score == 1.0


@pytest.mark.browser
def test_helper_network_failure_is_not_a_zero(fake_sites, eval_page, task_factory):
    fake_sites.shopping.page("/x", "<p>x</p>")
    eval_page.goto(f"{fake_sites.shopping.url}/x")
    task = task_factory({"eval_types": ["program_html"], "program_html": [{
        "url": "func:shopping_get_latest_order_url()", "locator": "",
        "required_contents": {"must_include": ["x"]}}]})
    with pytest.raises(EvaluatorError, match="HTTP 404"):
        _run(task, eval_page, fake_sites.urls)
