"""The subset of Magento's REST API that WebArena's evaluation helpers call, with Magento's JSON shapes.

- ``POST /rest/default/V1/integration/admin/token`` with ``{"username", "password"}`` -> the token (a JSON
  string)
- ``GET /rest/V1/orders?searchCriteria[...]`` -> ``{"items": [...], "search_criteria": {...}, "total_count":
  n}``
- ``GET /rest/V1/orders/<id>`` -> one order
- ``GET /rest/V1/products/<sku>`` -> one product
- ``GET /rest/V1/products/<sku>/reviews`` -> reviews, oldest first, each with ``ratings`` and ``nickname``

Every path also answers under ``/rest/default/V1`` and ``/rest/all/V1``; the GETs need ``Authorization:
Bearer``."""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import check_password, tick
from webarena_gym.sites.shop import queries as q

PREFIXES = ("/rest/V1", "/rest/default/V1", "/rest/all/V1")
ORDER_FIELDS = {
    "entity_id": "id",
    "increment_id": "increment_id",
    "created_at": "created_at",
    "updated_at": "updated_at",
    "customer_email": "customer_email",
    "status": "status",
    "grand_total": "grand_total_cents",
    "customer_id": "customer_id",
}
CONDITIONS = {"eq": "=", "neq": "!=", "gt": ">", "gteq": ">=", "lt": "<", "lteq": "<=", "like": "LIKE"}
_FILTER = re.compile(
    r"searchCriteria\[filterGroups\]\[(\d+)\]\[filters\]\[(\d+)\]\[(field|value|conditionType)\]"
)
_SORT = re.compile(r"searchCriteria\[sortOrders\]\[(\d+)\]\[(field|direction)\]")
_PAGING = ("searchCriteria[pageSize]", "searchCriteria[currentPage]")
UNSUPPORTED = '"%fieldName" is not supported. Correct the field name and try again.'
"""Magento's error message for an unknown search key (the key itself goes into ``parameters``)."""


def _require_token(request: Request) -> None:
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header.lower().startswith("bearer ") else ""
    row = (
        web.db(request).execute("SELECT 1 FROM oauth_token WHERE token = ?", (token,)).fetchone()
        if token
        else None
    )
    if row is None:
        raise HTTPException(401, "The consumer isn't authorized to access %resources.")


async def admin_token(request: Request) -> Response:
    try:
        body = json.loads(await request.body() or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise HTTPException(400, f"Malformed JSON body: {error}") from error
    if (
        not isinstance(body, dict)
        or not isinstance(body.get("username"), str)
        or not isinstance(body.get("password"), str)
    ):
        raise HTTPException(400, 'Expected a JSON object {"username": ..., "password": ...}.')
    conn = web.db(request)
    user = conn.execute(
        "SELECT id, password_hash FROM admin_user WHERE username = ?", (body["username"],)
    ).fetchone()
    if user is None or not check_password(body["password"], user["password_hash"]):
        raise HTTPException(401, "The account sign-in was incorrect or your account is disabled temporarily.")
    token = secrets.token_hex(16)
    with conn:
        conn.execute(
            "INSERT INTO oauth_token (token, admin_user_id, created_at) VALUES (?, ?, ?)",
            (token, user["id"], tick(conn)),
        )
    return JSONResponse(token)


def _order_json(order: dict[str, Any], items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out = {
        "entity_id": order["id"],
        "increment_id": order["increment_id"],
        "customer_id": order["customer_id"],
        "customer_email": order["customer_email"],
        "customer_firstname": order["customer_firstname"],
        "customer_lastname": order["customer_lastname"],
        "created_at": order["created_at"],
        "updated_at": order["updated_at"],
        "status": order["status"],
        "state": order["status"],
        "subtotal": order["subtotal_cents"] / 100,
        "shipping_amount": order["shipping_cents"] / 100,
        "grand_total": order["grand_total_cents"] / 100,
        "base_grand_total": order["grand_total_cents"] / 100,
        "total_qty_ordered": order["total_qty"],
        "order_currency_code": "USD",
    }
    if items is not None:
        out["items"] = [
            {
                "item_id": i["id"],
                "sku": i["sku"],
                "name": i["name"],
                "price": i["price_cents"] / 100,
                "qty_ordered": i["qty"],
                "row_total": i["row_total_cents"] / 100,
            }
            for i in items
        ]
    return out


@dataclass
class _Criteria:
    """The ``searchCriteria[...]`` query parameters of a search, by their camelCase names."""

    filters: dict[tuple[int, int], dict[str, str]] = field(default_factory=dict)
    sorts: dict[int, dict[str, str]] = field(default_factory=dict)
    paging: dict[str, str] = field(default_factory=dict)


def _camel(key: str) -> str:
    """``filter_groups`` -> ``filterGroups`` in every bracket of a key: Magento takes both spellings."""
    return re.sub(r"_([a-z])", lambda m: m[1].upper(), key)


def _criteria(request: Request) -> _Criteria:
    """The search's criteria; an unknown ``searchCriteria`` key is a 400 naming it (never ignored: a search
    that silently dropped a filter would answer with every order)."""
    found = _Criteria()
    for key, value in request.query_params.multi_items():
        if not key.startswith("searchCriteria"):
            continue
        name = _camel(key)
        if match := _FILTER.fullmatch(name):
            found.filters.setdefault((int(match[1]), int(match[2])), {})[match[3]] = value
        elif match := _SORT.fullmatch(name):
            found.sorts.setdefault(int(match[1]), {})[match[2]] = value
        elif name in _PAGING:
            found.paging[name] = value
        else:
            raise web.ApiError(400, UNSUPPORTED, {"fieldName": key})
    return found


def _where(criteria: _Criteria) -> tuple[str, list[Any]]:
    """SQL condition and arguments of the filters: filters in a group are OR'ed, groups AND'ed (Magento)."""
    where: list[str] = ["1 = 1"]
    args: list[Any] = []
    groups: dict[int, list[tuple[str, list[Any]]]] = {}
    for (group, _), spec in sorted(criteria.filters.items()):
        column = ORDER_FIELDS.get(spec.get("field", ""))
        op = CONDITIONS.get(spec.get("conditionType", "eq"))
        if column is None or op is None or "value" not in spec:
            raise HTTPException(400, f"Unsupported filter {spec!r}.")
        value: Any = spec["value"]
        if column == "grand_total_cents":
            value = round(float(value) * 100) if re.fullmatch(r"-?\d+(\.\d+)?", value) else None
            if value is None:
                raise HTTPException(400, f"grand_total filter needs a number, got {spec['value']!r}.")
        groups.setdefault(group, []).append((f"{column} {op} ?", [value]))
    for clauses in groups.values():
        where.append("(" + " OR ".join(c for c, _ in clauses) + ")")
        args.extend(a for _, values in clauses for a in values)
    return " AND ".join(where), args


def _sort_orders(criteria: _Criteria) -> list[dict[str, str]]:
    """The sort orders in index order (default: ``entity_id`` ascending), validated."""
    orders = []
    for _, spec in sorted(criteria.sorts.items()) or [(0, {})]:
        name = spec.get("field", "entity_id")
        direction = spec.get("direction", "ASC").upper()
        if name not in ORDER_FIELDS:
            raise HTTPException(400, "Unsupported sort field.")
        if direction not in ("ASC", "DESC"):
            raise HTTPException(400, "Sort direction must be ASC or DESC.")
        orders.append({"field": name, "direction": direction})
    return orders


async def orders(request: Request) -> Response:
    _require_token(request)
    criteria = _criteria(request)
    sql_where, args = _where(criteria)
    sorts = _sort_orders(criteria)
    order_by = ", ".join(f"{ORDER_FIELDS[s['field']]} {s['direction']}" for s in sorts)
    size_key, page_key = _PAGING
    size = web.parse_int(criteria.paging.get(size_key), size_key, default=0, maximum=10_000, status=400)
    current = web.parse_int(
        criteria.paging.get(page_key), page_key, default=1, minimum=1, maximum=100_000, status=400
    )
    conn = web.db(request)
    total = conn.execute(f"SELECT COUNT(*) FROM sales_order WHERE {sql_where}", args).fetchone()[0]
    paging = f" LIMIT {size} OFFSET {(current - 1) * size}" if size else ""
    found = q.rows(
        conn.execute(
            f"SELECT * FROM sales_order WHERE {sql_where}"
            f" ORDER BY {order_by}, id {sorts[-1]['direction']}{paging}",
            args,
        )
    )
    echoed: dict[str, Any] = {"filter_groups": [], "sort_orders": sorts}
    if size:
        echoed.update(page_size=size, current_page=current)
    return JSONResponse(
        {"items": [_order_json(o) for o in found], "search_criteria": echoed, "total_count": total}
    )


async def order_one(request: Request) -> Response:
    _require_token(request)
    order = q.order_detail(web.db(request), request.path_params["order_id"])
    if order is None:
        raise HTTPException(
            404, "The entity that was requested doesn't exist. Verify the entity and try again."
        )
    return JSONResponse(_order_json(order, order["items"]))


def _product_or_404(request: Request) -> dict[str, Any]:
    product = q.product_by(web.db(request), "sku", request.path_params["sku"])
    if product is None:
        raise HTTPException(
            404, "The product that was requested doesn't exist. Verify the product and try again."
        )
    return product


async def product_one(request: Request) -> Response:
    _require_token(request)
    p = _product_or_404(request)
    return JSONResponse(
        {
            "id": p["id"],
            "sku": p["sku"],
            "name": p["name"],
            "price": p["price_cents"] / 100,
            "status": p["status"],
            "type_id": "simple",
            "created_at": p["created_at"],
            "extension_attributes": {"stock_item": {"qty": p["qty"], "is_in_stock": p["qty"] > 0}},
            "custom_attributes": [
                {"attribute_code": "url_key", "value": p["url_key"]},
                {"attribute_code": "description", "value": p["description"]},
            ],
        }
    )


async def product_reviews(request: Request) -> Response:
    _require_token(request)
    product = _product_or_404(request)
    reviews = q.product_reviews(web.db(request), product["id"], approved_only=False)
    return JSONResponse(
        [
            {
                "id": r["id"],
                "title": r["title"],
                "detail": r["detail"],
                "nickname": r["nickname"],
                "ratings": [
                    {
                        "vote_id": r["id"],
                        "rating_id": 4,
                        "rating_name": "Rating",
                        "percent": r["rating"] * 20,
                        "value": r["rating"],
                    }
                ],
                "review_entity": "product",
                "review_type": 2 if r["customer_id"] is None else 1,
                "review_status": {"approved": 1, "pending": 2, "not_approved": 3}[r["status"]],
                "created_at": r["created_at"],
                "entity_pk_value": product["id"],
                "store_id": 1,
            }
            for r in reviews
        ]
    )


routes = []
for _prefix in PREFIXES:
    routes += [
        Route(f"{_prefix}/integration/admin/token", admin_token, methods=["POST"]),
        Route(f"{_prefix}/orders", orders, methods=["GET"]),
        Route(f"{_prefix}/orders/{{order_id:int}}", order_one, methods=["GET"]),
        Route(f"{_prefix}/products/{{sku}}", product_one, methods=["GET"]),
        Route(f"{_prefix}/products/{{sku}}/reviews", product_reviews, methods=["GET"]),
    ]
