"""Admin reports: bestsellers and sales totals by period (computed live from the orders)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.admin.sales import parse_date
from webarena_gym.sites.shop import queries as q

PERIODS: tuple[q.Period, ...] = ("day", "month", "year")
BESTSELLERS_PER_PERIOD = 5


async def bestsellers(request: Request) -> Response:
    web.require_user(request)
    period = web.query_choice(request, "period", PERIODS, "month")
    date_from, date_to = parse_date(request, "from"), parse_date(request, "to")
    shown = "show" in request.query_params or date_from is not None or date_to is not None
    found = (
        q.bestsellers(
            web.db(request),
            period,
            date_from=date_from,
            date_to=date_to,
            limit_per_period=BESTSELLERS_PER_PERIOD,
        )
        if shown
        else []
    )
    return web.render(
        request,
        "bestsellers.html",
        rows=found,
        period=period,
        date_from=date_from or "",
        date_to=date_to or "",
        shown=shown,
        per_period=BESTSELLERS_PER_PERIOD,
    )


async def sales(request: Request) -> Response:
    web.require_user(request)
    period = web.query_choice(request, "period", PERIODS, "month")
    status = web.query_choice(request, "order_status", ("", *q.ORDER_STATUSES), "")
    date_from, date_to = parse_date(request, "from"), parse_date(request, "to")
    shown = "show" in request.query_params or date_from is not None or date_to is not None
    found = (
        q.sales_totals(
            web.db(request),
            period,
            date_from=date_from,
            date_to=date_to,
            statuses=(status,) if status else None,
        )
        if shown
        else []
    )
    totals = {
        key: sum(r[key] or 0 for r in found)
        for key in ("orders", "items", "subtotal_cents", "shipping_cents", "total_cents")
    }
    return web.render(
        request,
        "sales_report.html",
        rows=found,
        totals=totals,
        period=period,
        status=status,
        statuses=q.ORDER_STATUSES,
        date_from=date_from or "",
        date_to=date_to or "",
        shown=shown,
    )


routes = [
    Route("/admin/reports/report_sales/bestsellers/", bestsellers, methods=["GET"]),
    Route("/admin/reports/report_sales/sales/", sales, methods=["GET"]),
]
