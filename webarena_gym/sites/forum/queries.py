"""Read queries over the ``postmill`` database, shared by the forum app and :mod:`webarena_gym.sites.data`."""

from __future__ import annotations

import math
import sqlite3
from datetime import datetime
from typing import Any, Literal

from webarena_gym.sites.db import TIME_FORMAT
from webarena_gym.sites.seed.text import slugify
from webarena_gym.sites.shop.queries import one, rows

Sort = Literal["hot", "new", "top", "comments"]
SORTS: tuple[Sort, ...] = ("hot", "new", "top", "comments")
_EPOCH = datetime(2021, 1, 1)

_POST_SELECT = (
    "SELECT s.*, f.name AS forum_name, u.username,"
    " COALESCE((SELECT SUM(choice) FROM submission_vote v WHERE v.submission_id = s.id), 0) AS score,"
    " (SELECT COUNT(*) FROM submission_vote v WHERE v.submission_id = s.id AND v.choice = 1) AS upvotes,"
    " (SELECT COUNT(*) FROM submission_vote v WHERE v.submission_id = s.id AND v.choice = -1) AS downvotes,"
    " (SELECT COUNT(*) FROM comment c WHERE c.submission_id = s.id) AS comment_count"
    " FROM submission s JOIN forum f ON f.id = s.forum_id JOIN users u ON u.id = s.user_id"
)


def post_path(post: dict[str, Any]) -> str:
    """Canonical path of a post's page: ``/f/<forum>/<id>/<slug>`` (needs ``forum_name``, ``id``,
    ``title``)."""
    slug = slugify(post["title"])[:60].rstrip("-") or "-"
    return f"/f/{post['forum_name']}/{post['id']}/{slug}"


def hot_rank(score: int, created_at: str) -> float:
    """Reddit's classic "hot" formula: log-scaled score plus age (newer is hotter)."""
    order = math.log10(max(abs(score), 1))
    sign = (score > 0) - (score < 0)
    seconds = (datetime.strptime(created_at, TIME_FORMAT) - _EPOCH).total_seconds()
    return round(sign * order + seconds / 45000, 7)


def parse_sort(value: str) -> Sort:
    """``value`` as one of :data:`SORTS` (a ``ValueError`` naming it otherwise)."""
    for sort in SORTS:
        if sort == value:
            return sort
    raise ValueError(f"sort must be one of {SORTS}, got {value!r}")


def sort_posts(posts: list[dict[str, Any]], sort: Sort) -> list[dict[str, Any]]:
    """Posts in listing order; every sort ends with newest first, then the highest id, so order is total."""
    newest = sorted(posts, key=lambda p: (p["created_at"], p["id"]), reverse=True)
    if sort == "new":
        return newest
    if sort == "top":
        return sorted(newest, key=lambda p: p["score"], reverse=True)
    if sort == "comments":
        return sorted(newest, key=lambda p: p["comment_count"], reverse=True)
    if sort == "hot":
        return sorted(newest, key=lambda p: hot_rank(p["score"], p["created_at"]), reverse=True)
    raise ValueError(f"sort must be one of {SORTS}, got {sort!r}")


def forums(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """All forums by name, with ``post_count``."""
    return rows(
        conn.execute(
            "SELECT f.*, (SELECT COUNT(*) FROM submission s WHERE s.forum_id = f.id) AS post_count"
            " FROM forum f ORDER BY lower(f.name)"
        )
    )


def forum_by_name(conn: sqlite3.Connection, name: str) -> dict[str, Any] | None:
    """A forum by its name (case-insensitive, like Postmill)."""
    return one(conn.execute("SELECT * FROM forum WHERE lower(name) = lower(?)", (name,)))


def posts(
    conn: sqlite3.Connection,
    *,
    forum_id: int | None = None,
    user_id: int | None = None,
    query: str | None = None,
    sort: Sort = "hot",
) -> list[dict[str, Any]]:
    """Posts with ``score``, vote counts, ``comment_count``, ``forum_name`` and ``username``, sorted."""
    where: list[str] = ["1 = 1"]
    args: list[Any] = []
    if forum_id is not None:
        where.append("s.forum_id = ?")
        args.append(forum_id)
    if user_id is not None:
        where.append("s.user_id = ?")
        args.append(user_id)
    for word in (query or "").split():
        where.append("(s.title LIKE ? OR s.body LIKE ?)")
        args.extend((f"%{word}%", f"%{word}%"))
    found = rows(conn.execute(f"{_POST_SELECT} WHERE {' AND '.join(where)}", args))
    return sort_posts(found, sort)


def post(conn: sqlite3.Connection, post_id: int) -> dict[str, Any] | None:
    """One post with its counts, or None."""
    return one(conn.execute(f"{_POST_SELECT} WHERE s.id = ?", (post_id,)))


def comments(
    conn: sqlite3.Connection,
    *,
    submission_id: int | None = None,
    user_id: int | None = None,
) -> list[dict[str, Any]]:
    """Comments (oldest first) with ``score``, ``username``, ``post_title``, ``forum_name``."""
    where: list[str] = ["1 = 1"]
    args: list[Any] = []
    if submission_id is not None:
        where.append("c.submission_id = ?")
        args.append(submission_id)
    if user_id is not None:
        where.append("c.user_id = ?")
        args.append(user_id)
    return rows(
        conn.execute(
            "SELECT c.*, u.username, s.title AS post_title, f.name AS forum_name,"
            " COALESCE((SELECT SUM(choice) FROM comment_vote v WHERE v.comment_id = c.id), 0) AS score"
            " FROM comment c JOIN users u ON u.id = c.user_id JOIN submission s ON s.id = c.submission_id"
            f" JOIN forum f ON f.id = s.forum_id WHERE {' AND '.join(where)} ORDER BY c.created_at, c.id",
            args,
        )
    )


def comment_tree(flat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nest comments under their parents (``replies``); top level and replies keep chronological order."""
    nodes = {c["id"]: dict(c, replies=[]) for c in flat}
    roots: list[dict[str, Any]] = []
    for node in nodes.values():
        parent = nodes.get(node["parent_id"]) if node["parent_id"] is not None else None
        (parent["replies"] if parent is not None else roots).append(node)
    return roots


def user_by_name(conn: sqlite3.Connection, username: str) -> dict[str, Any] | None:
    """A user by username (case-insensitive) without the password hash."""
    return one(
        conn.execute(
            "SELECT id, username, biography, created_at FROM users WHERE lower(username) = lower(?)",
            (username,),
        )
    )
