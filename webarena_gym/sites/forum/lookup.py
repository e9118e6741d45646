"""Lookups shared by the forum's pages and actions: post URLs, path objects or 404, the user's votes."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from webarena_gym.sites import web
from webarena_gym.sites.forum import queries as fq

post_url = fq.post_path
"""Canonical URL of a post (see :func:`webarena_gym.sites.forum.queries.post_path`)."""


def my_votes(request: Request, table: str, ids: list[int]) -> dict[int, int]:
    """The logged-in user's votes on the given posts (``submission``) or comments (``comment``)."""
    user_id = web.current_user_id(request)
    if user_id is None or not ids:
        return {}
    column = f"{table}_id"
    found = (
        web.db(request)
        .execute(
            f"SELECT {column}, choice FROM {table}_vote"
            f" WHERE user_id = ? AND {column} IN ({', '.join('?' * len(ids))})",
            (user_id, *ids),
        )
        .fetchall()
    )
    return {row[0]: row[1] for row in found}


def forum_or_404(request: Request) -> dict[str, Any]:
    """The forum named in the path, or a 404 page."""
    forum = fq.forum_by_name(web.db(request), request.path_params["forum"])
    if forum is None:
        raise HTTPException(404, f"There is no forum named {request.path_params['forum']!r}.")
    return forum


def post_or_404(request: Request) -> dict[str, Any]:
    """The post named in the path (its forum must match), or a 404 page."""
    forum = forum_or_404(request)
    post = fq.post(web.db(request), request.path_params["post_id"])
    if post is None or post["forum_id"] != forum["id"]:
        raise HTTPException(404, "This post does not exist.")
    return post
