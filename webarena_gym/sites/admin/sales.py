"""Admin sales pages: the orders grid with filters, the order view, status changes and comments."""

from __future__ import annotations

import re
from datetime import datetime

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import tick
from webarena_gym.sites.shop import queries as q

ORDERS_PER_PAGE = 20
TRANSITIONS: dict[str, tuple[str, ...]] = {
    "pending": ("processing", "complete", "canceled"),
    "processing": ("complete", "canceled"),
    "holded": (),
    "complete": (),
    "canceled": (),
}
"""Status changes the comment form allows (hold/unhold have their own buttons)."""
_DATE_FORMATS = ("%Y-%m-%d", "%m/%d/%Y", "%m/%d/%y")


def parse_date(request: Request, name: str) -> str | None:
    """A date query parameter (``YYYY-MM-DD`` or ``MM/DD/YYYY``) as ``YYYY-MM-DD``; 400 when malformed."""
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(raw, fmt).strftime("%Y-%m-%d")
        except ValueError:
            continue
    raise HTTPException(400, f"'{name}' must be a date like 2023-01-31 or 01/31/2023, got {raw!r}.")


async def order_grid(request: Request) -> Response:
    web.require_user(request)
    status = web.query_choice(request, "status", ("", *q.ORDER_STATUSES), "")
    filters = {
        "status": status or None,
        "date_from": parse_date(request, "date_from"),
        "date_to": parse_date(request, "date_to"),
        "customer": request.query_params.get("customer", "").strip()[:200] or None,
        "increment_id": re.sub(r"\D", "", request.query_params.get("increment_id", ""))[:20] or None,
    }
    page = web.pager(request, 0, ORDERS_PER_PAGE)
    orders, total = q.list_orders(
        web.db(request), limit=page.size, offset=page.offset, status=filters["status"],
        date_from=filters["date_from"], date_to=filters["date_to"], customer=filters["customer"],
        increment_id=filters["increment_id"])
    page.total = total
    return web.render(
        request,
        "orders.html",
        orders=orders,
        total=total,
        links=page.links(request),
        filters=filters,
        statuses=q.ORDER_STATUSES,
    )


def _order_or_404(request: Request) -> dict:
    order = q.order_detail(web.db(request), request.path_params["order_id"])
    if order is None:
        raise HTTPException(404, "This order no longer exists.")
    return order


async def order_view(request: Request) -> Response:
    web.require_user(request)
    order = _order_or_404(request)
    return web.render(request, "order_view.html", order=order, allowed=TRANSITIONS[order["status"]])


def _set_status(
    request: Request, order: dict, status: str, comment: str, hold_before: str | None = None
) -> None:
    conn = web.db(request)
    with conn:
        now = tick(conn)
        conn.execute(
            "UPDATE sales_order SET status = ?, hold_before_status = ?, updated_at = ? WHERE id = ?",
            (status, hold_before, now, order["id"]),
        )
        conn.execute(
            "INSERT INTO order_status_history (order_id, status, comment, created_at) VALUES (?, ?, ?, ?)",
            (order["id"], status, comment, now),
        )


async def add_comment(request: Request) -> Response:
    web.require_user(request)
    order = _order_or_404(request)
    form = await web.read_form(request)
    status = form.get("status", order["status"])
    if status not in q.ORDER_STATUSES:
        raise HTTPException(422, f"Unknown order status {status!r}.")
    comment = web.form_text(form, "comment", required=False, max_len=5000)
    back = f"/admin/sales/order/view/order_id/{order['id']}/"
    if status != order["status"] and status not in TRANSITIONS[order["status"]]:
        web.flash(
            request,
            f"The order status cannot change from {q.STATUS_LABELS[order['status']]} to "
            f"{q.STATUS_LABELS[status]}.",
            "error",
        )
        return web.redirect(request, back)
    if status == order["status"] and not comment:
        web.flash(request, "Nothing to save: choose a new status or write a comment.", "error")
        return web.redirect(request, back)
    _set_status(
        request, order, status, comment or f"Order status changed to {status}.", order["hold_before_status"]
    )
    web.flash(
        request, "You saved the order status and comment." if comment else "You changed the order status."
    )
    return web.redirect(request, back)


async def order_action(request: Request) -> Response:
    web.require_user(request)
    order = _order_or_404(request)
    action = request.path_params["action"]
    back = f"/admin/sales/order/view/order_id/{order['id']}/"
    current = order["status"]
    if action == "cancel" and current in ("pending", "processing"):
        _set_status(request, order, "canceled", "Order canceled.")
        web.flash(request, "You canceled the order.")
    elif action == "hold" and current in ("pending", "processing"):
        _set_status(request, order, "holded", "Order put on hold.", hold_before=current)
        web.flash(request, "You put the order on hold.")
    elif action == "unhold" and current == "holded":
        _set_status(request, order, order["hold_before_status"] or "pending", "Order released from hold.")
        web.flash(request, "You released the order from holding status.")
    elif action in ("cancel", "hold", "unhold"):
        web.flash(
            request, f"You can't {action} an order whose status is {q.STATUS_LABELS[current]}.", "error"
        )
    else:
        raise HTTPException(404, f"Unknown order action {action!r}.")
    return web.redirect(request, back)


routes = [
    Route("/admin/sales/order/", order_grid, methods=["GET"]),
    Route("/admin/sales/order/view/order_id/{order_id:int}/", order_view, methods=["GET"]),
    Route("/admin/sales/order/addComment/order_id/{order_id:int}/", add_comment, methods=["POST"]),
    Route("/admin/sales/order/{action}/order_id/{order_id:int}/", order_action, methods=["POST"]),
]
