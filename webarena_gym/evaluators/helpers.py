"""The ``func:`` helpers of WebArena task files, resolved through an explicit whitelist.

Task files write some ``program_html`` URLs and locators as Python-looking calls, e.g.
``func:reddit_get_post_url('__last_url__')`` or ``func:gitlab_get_project_memeber_role(__page__,
'byteblaze')``. WebArena ``eval()``s them; here they are parsed with :func:`ast.parse` into a
:class:`HelperCall` (a whitelisted name, string constants and the ``__page__`` marker, nothing else) and run
by :func:`run_helper`. Markers: ``'__last_url__'`` inside a string argument becomes the page's current URL,
``__page__`` becomes the page.

The REST helpers follow WebArena's ``evaluation_harness/helper_functions.py``: an admin token from ``POST
{shopping}/rest/default/V1/integration/admin/token``, then ``GET {shopping}/rest/V1/...`` with it. A network
or protocol failure raises :class:`~webarena_gym.errors.EvaluatorError` (never a silent score of 0).
"""

from __future__ import annotations

import ast
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from webarena_gym.errors import EvaluatorError, HelperCallError, SiteConfigError

if TYPE_CHECKING:  # pragma: no cover
    from playwright.sync_api import Page

    from webarena_gym.tasks import SiteURLs

LAST_URL_MARKER = "__last_url__"
PAGE_MARKER = "__page__"

DEFAULT_ACCOUNTS: dict[str, dict[str, str]] = {
    "shopping_site_admin": {"username": "admin", "password": "admin1234"},
}
"""WebArena's public default accounts (``browser_env/env_config.py``); override: ``EvalContext.accounts``."""


@dataclass(frozen=True)
class PageArg:
    """The ``__page__`` marker in a helper call: replaced by the live page when the helper runs."""


@dataclass(frozen=True)
class HelperCall:
    """A parsed ``func:`` call: whitelisted helper name and literal arguments."""

    name: str
    args: tuple[str | PageArg, ...]
    source: str
    """The text after ``func:``, as written in the task file."""

    def bind(self, page: Page | None, resolve: Callable[[str], str] = str) -> list[Any]:
        """Arguments with markers replaced: ``__page__`` -> page, ``'__last_url__'`` -> ``page.url``;
        ``resolve`` (e.g. :meth:`SiteURLs.resolve`) is applied to string arguments."""
        out: list[Any] = []
        for arg in self.args:
            if isinstance(arg, PageArg):
                if page is None:
                    raise EvaluatorError(f"helper {self.name} needs the page, but the episode has none")
                out.append(page)
                continue
            if LAST_URL_MARKER in arg:
                if page is None:
                    raise EvaluatorError(f"helper {self.name} needs {LAST_URL_MARKER}, but there is no page")
                arg = arg.replace(LAST_URL_MARKER, page.url)
            out.append(resolve(arg))
        return out


@dataclass(frozen=True)
class HelperEnv:
    """What a helper may use: the live page, the site URLs, the accounts and a network timeout."""

    page: Page | None
    sites: SiteURLs
    accounts: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    timeout_s: float = 30.0


ParamKind = Literal["page", "str"]


@dataclass(frozen=True)
class HelperSpec:
    """A whitelisted helper: the function (called as ``fn(env, *args)``) and its parameter kinds."""

    fn: Callable[..., str]
    params: tuple[ParamKind, ...]


# ---------------------------------------------------------------------------------------------------- parsing


def parse_helper_call(text: str) -> HelperCall:
    """Parse ``func:name(arg, ...)`` without evaluating anything; raise :class:`HelperCallError` naming the
    problem (unknown helper, wrong arity, an argument that is not a string constant or ``__page__``)."""
    if not text.startswith("func:"):
        raise HelperCallError(f"not a func: helper call: {text!r}")
    source = text[len("func:"):].strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise HelperCallError(f"cannot parse helper call {source!r}: {exc.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise HelperCallError(f"helper expression must be a plain call name(...), got {source!r}")
    name = call.func.id
    spec = HELPERS.get(name)
    if spec is None:
        raise HelperCallError(f"helper {name!r} is not in the whitelist {sorted(HELPERS)}")
    if call.keywords:
        raise HelperCallError(f"helper call {source!r}: keyword arguments are not supported")
    args: list[str | PageArg] = []
    for node in call.args:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            args.append(node.value)
        elif isinstance(node, ast.Name) and node.id == PAGE_MARKER:
            args.append(PageArg())
        else:
            raise HelperCallError(
                f"helper call {source!r}: argument {ast.unparse(node)!r} is neither a string constant "
                f"nor {PAGE_MARKER}"
            )
    kinds = tuple("page" if isinstance(a, PageArg) else "str" for a in args)
    if kinds != spec.params:
        raise HelperCallError(f"helper {name!r} takes arguments {spec.params}, got {kinds} in {source!r}")
    return HelperCall(name=name, args=tuple(args), source=source)


def run_helper(call: HelperCall, env: HelperEnv) -> str:
    """Run a parsed helper call; the page and ``__last_url__`` come from ``env.page``."""
    args = call.bind(env.page, env.sites.resolve)
    return HELPERS[call.name].fn(env, *args)


# ---------------------------------------------------------------------------------------------------- REST


def _shopping_base(env: HelperEnv) -> str:
    if env.sites.shopping is None:
        raise SiteConfigError("a helper needs the shopping site: set SHOPPING / WA_SHOPPING or sites=...")
    return env.sites.shopping


def _http_json(url: str, env: HelperEnv, *, token: str | None = None, body: Any = None) -> Any:
    """One JSON request (POST when ``body`` is given); every failure is an :class:`EvaluatorError`."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if body is None else "POST"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=env.timeout_s) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise EvaluatorError(f"helper request {method} {url} failed: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise EvaluatorError(f"helper request {method} {url} failed: {exc}") from exc
    try:
        return json.loads(payload)
    except ValueError as exc:
        raise EvaluatorError(f"helper request {method} {url} returned non-JSON: {payload[:200]!r}") from exc


def shopping_get_auth_token(env: HelperEnv) -> str:
    """An admin token of the shopping site's Magento REST API (account ``shopping_site_admin``)."""
    account = env.accounts.get("shopping_site_admin") or DEFAULT_ACCOUNTS["shopping_site_admin"]
    url = f"{_shopping_base(env)}/rest/default/V1/integration/admin/token"
    token = _http_json(url, env, body={"username": account["username"], "password": account["password"]})
    if not isinstance(token, str) or not token:
        raise EvaluatorError(f"helper request POST {url} returned no token: {token!r}")
    return token


def shopping_get_latest_order_url(env: HelperEnv) -> str:
    """``{shopping}/sales/order/view/order_id/{increment_id}/`` of the most recently created order."""
    base = _shopping_base(env)
    query = urllib.parse.urlencode({
        "searchCriteria[sortOrders][0][field]": "created_at",
        "searchCriteria[sortOrders][0][direction]": "DESC",
        "searchCriteria[pageSize]": "1",
    })
    url = f"{base}/rest/V1/orders?{query}"
    payload = _http_json(url, env, token=shopping_get_auth_token(env))
    try:
        order_id = int(payload["items"][0]["increment_id"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise EvaluatorError(f"helper request GET {url}: no latest order in the response ({exc!r})") from exc
    return f"{base}/sales/order/view/order_id/{order_id}/"


def _sku_reviews(env: HelperEnv, sku: str) -> list[Any]:
    url = f"{_shopping_base(env)}/rest/V1/products/{urllib.parse.quote(sku, safe='')}/reviews"
    payload = _http_json(url, env, token=shopping_get_auth_token(env))
    if not isinstance(payload, list):
        raise EvaluatorError(f"helper request GET {url}: expected a list, got {type(payload).__name__}")
    return payload


def shopping_get_sku_latest_review_author(env: HelperEnv, sku: str) -> str:
    """Nickname of the last review of product ``sku`` (``""`` when it has none), as WebArena."""
    reviews = _sku_reviews(env, sku)
    if not reviews:
        return ""
    try:
        return str(reviews[-1]["nickname"])
    except (KeyError, TypeError) as exc:
        raise EvaluatorError(f"reviews of sku {sku!r}: unexpected shape ({exc!r})") from exc


def shopping_get_sku_latest_review_rating(env: HelperEnv, sku: str) -> str:
    """Rating percent of the last review of ``sku`` as a string (``""`` when none), as WebArena."""
    reviews = _sku_reviews(env, sku)
    if not reviews:
        return ""
    try:
        if reviews[0]["ratings"][0]["rating_name"] != "Rating":
            raise EvaluatorError(f"reviews of sku {sku!r}: first rating is not named 'Rating'")
        return str(reviews[-1]["ratings"][0]["percent"])
    except (KeyError, IndexError, TypeError) as exc:
        raise EvaluatorError(f"reviews of sku {sku!r}: unexpected shape ({exc!r})") from exc


# ------------------------------------------------------------------------------------------------ pure / page


def reddit_get_post_url(env: HelperEnv, url: str) -> str:
    """``scheme://host/f/{forum}/{post_id}/`` of a post or comment URL; other URLs unchanged (WebArena)."""
    parsed = urllib.parse.urlparse(url)
    parts = parsed.path.split("/")
    if len(parts) < 4 or parts[1] != "f":
        return url
    return f"{parsed.scheme}://{parsed.netloc}/f/{parts[2]}/{parts[3]}/"


_GITLAB_ROLE_JS = """(account) => {
    const accounts = document.querySelectorAll("td[data-label='Account'] span.gl-avatar-labeled-sublabel");
    let index = -1;
    for (let i = 0; i < accounts.length; i++) {
        if (accounts[i].outerText === '@' + account) { index = i; break; }
    }
    const roles = document.querySelectorAll("td.col-max-role span");
    const cell = roles[index];
    return cell === undefined ? null : cell.outerText;
}"""


def gitlab_get_project_memeber_role(env: HelperEnv, page: Page, account_name: str) -> str:
    """Role of ``account_name`` on a GitLab project members page (``""`` when not listed), as WebArena.

    WebArena interpolates the account into its JS and returns ``""`` on any exception; here the account is
    passed as an argument and a missing row gives ``""`` inside the page, while a browser failure raises."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        role = page.evaluate(_GITLAB_ROLE_JS, account_name)
    except PlaywrightError as exc:
        raise EvaluatorError(f"gitlab_get_project_memeber_role: page evaluation failed: {exc}") from exc
    return "" if role is None else str(role)


HELPERS: dict[str, HelperSpec] = {
    "shopping_get_latest_order_url": HelperSpec(shopping_get_latest_order_url, ()),
    "shopping_get_sku_latest_review_author": HelperSpec(shopping_get_sku_latest_review_author, ("str",)),
    "shopping_get_sku_latest_review_rating": HelperSpec(shopping_get_sku_latest_review_rating, ("str",)),
    "reddit_get_post_url": HelperSpec(reddit_get_post_url, ("str",)),
    "gitlab_get_project_memeber_role": HelperSpec(gitlab_get_project_memeber_role, ("page", "str")),
}
"""The whitelist. The misspelling ``memeber`` is WebArena's and is kept so the task files resolve."""
