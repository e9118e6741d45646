"""The forum ("Postmill"), stand-in for WebArena's ``reddit`` site.

Routes (Postmill's URL shapes):

- ``/`` (``?sort=hot|new|top|comments``, ``?p=``), ``/forums``, ``/search?q=``
- ``/f/<forum>`` (and ``/f/<forum>/<sort>``), ``/f/<forum>/<post id>[/<slug>]``, ``/f/<forum>/<post
  id>/-/comment/<comment id>``, ``/f/<forum>/<post id>/-/edit`` (GET, POST)
- POST ``/f/<forum>/<post id>/-/comment`` (``body``, optional ``parent_id``); POST ``/sv/<post id>`` and
  ``/cv/<comment id>`` (``choice`` = 1, -1 or 0; voting the same way twice retracts)
- ``/submit`` and ``/submit/<forum>`` (GET form, POST create)
- ``/user/<name>``, ``/user/<name>/submissions``, ``/user/<name>/comments``, ``/user/<name>/edit_biography``
- ``/login`` (POST ``/login_check``), POST ``/logout`` (GET shows the button)"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import check_password
from webarena_gym.sites.forum import actions
from webarena_gym.sites.forum import queries as fq
from webarena_gym.sites.forum.lookup import forum_or_404, my_votes, post_or_404, post_url

TEMPLATES = Path(__file__).resolve().parent / "templates"
POSTS_PER_PAGE = 20


def _base_context(request: Request) -> dict[str, Any]:
    user_id = web.current_user_id(request)
    user = None
    if user_id is not None:
        user = fq.one(web.db(request).execute("SELECT id, username FROM users WHERE id = ?", (user_id,)))
    return {"user": user, "post_url": post_url}


def _listing(request: Request, template: str, sort: str | None = None, **context: Any) -> Response:
    chosen = fq.parse_sort(sort) if sort else web.query_choice(request, "sort", fq.SORTS, "hot")
    found = fq.posts(
        web.db(request),
        forum_id=context["forum"]["id"] if context.get("forum") else None,
        query=context.get("query"),
        sort=chosen,
    )
    page = web.pager(request, len(found), POSTS_PER_PAGE)
    shown = found[page.offset : page.offset + page.size]
    return web.render(
        request,
        template,
        posts=shown,
        total=len(found),
        sort=chosen,
        links=page.links(request),
        votes=my_votes(request, "submission", [p["id"] for p in shown]),
        **context,
    )


async def front(request: Request) -> Response:
    return _listing(request, "listing.html", forum=None, heading="All posts")


async def front_sorted(request: Request) -> Response:
    return _listing(
        request, "listing.html", sort=request.url.path.strip("/"), forum=None, heading="All posts"
    )


async def forum_list(request: Request) -> Response:
    return web.render(request, "forums.html", forums=fq.forums(web.db(request)))


async def forum_page(request: Request) -> Response:
    forum = forum_or_404(request)
    sort = request.path_params.get("sort")
    if sort is not None and sort not in fq.SORTS:
        raise HTTPException(404, f"No page /f/{forum['name']}/{sort}.")
    return _listing(request, "listing.html", sort=sort, forum=forum, heading=forum["title"])


async def search(request: Request) -> Response:
    query = request.query_params.get("q", "").strip()[:200]
    return _listing(request, "listing.html", forum=None, query=query, heading=f"Search results for '{query}'")


async def post_page(request: Request) -> Response:
    post = post_or_404(request)
    flat = fq.comments(web.db(request), submission_id=post["id"])
    focus = request.path_params.get("comment_id")
    if focus is not None and all(c["id"] != focus for c in flat):
        raise HTTPException(404, "This comment does not exist.")
    return web.render(
        request,
        "post.html",
        post=post,
        comments=fq.comment_tree(flat),
        comment_count=len(flat),
        focus=focus,
        post_vote=my_votes(request, "submission", [post["id"]]).get(post["id"], 0),
        votes=my_votes(request, "comment", [c["id"] for c in flat]),
    )


async def user_page(request: Request) -> Response:
    conn = web.db(request)
    user = fq.user_by_name(conn, request.path_params["username"])
    if user is None:
        raise HTTPException(404, f"There is no user named {request.path_params['username']!r}.")
    tab = request.path_params.get("tab", "overview")
    if tab not in ("overview", "submissions", "comments"):
        raise HTTPException(404, f"No page /user/{user['username']}/{tab}.")
    posts = fq.posts(conn, user_id=user["id"], sort="new") if tab in ("overview", "submissions") else []
    comments = fq.comments(conn, user_id=user["id"])[::-1] if tab in ("overview", "comments") else []
    return web.render(
        request,
        "user.html",
        profile=user,
        tab=tab,
        posts=posts,
        user_comments=comments,
        votes=my_votes(request, "submission", [p["id"] for p in posts]),
    )


async def login_form(request: Request) -> Response:
    return web.render(
        request, "login.html", referer=web.safe_referer(request.query_params.get("referer"), "/")
    )


async def login_check(request: Request) -> Response:
    form = await web.read_form(request)
    referer = web.safe_referer(form.get("referer"), "/")
    row = (
        web.db(request)
        .execute(
            "SELECT id, password_hash FROM users WHERE lower(username) = lower(?)",
            (form.get("_username", "").strip(),),
        )
        .fetchone()
    )
    if row is None or not check_password(form.get("_password", ""), row["password_hash"]):
        web.flash(request, "Invalid credentials.", "error")
        return web.redirect(request, f"/login?referer={quote(referer)}")
    web.log_in(request, row["id"])
    return web.redirect(request, referer)


async def logout_page(request: Request) -> Response:
    return web.logout_page(request, "/logout", "Log out")


async def logout(request: Request) -> Response:
    web.log_out(request)
    return web.redirect(request, "/")


routes = [
    Route("/", front, methods=["GET"]),
    Route("/forums", forum_list, methods=["GET"]),
    Route("/search", search, methods=["GET"]),
    Route("/login", login_form, methods=["GET"]),
    Route("/login_check", login_check, methods=["POST"]),
    Route("/logout", logout_page, methods=["GET"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/f/{forum}", forum_page, methods=["GET"]),
    Route("/f/{forum}/{post_id:int}", post_page, methods=["GET"]),
    Route("/f/{forum}/{post_id:int}/-/comment/{comment_id:int}", post_page, methods=["GET"]),
    Route("/f/{forum}/{post_id:int}/{slug}", post_page, methods=["GET"]),
    Route("/f/{forum}/{sort}", forum_page, methods=["GET"]),
    Route("/user/{username}", user_page, methods=["GET"]),
    Route("/user/{username}/{tab:str}", user_page, methods=["GET"]),
    *[Route(f"/{sort}", front_sorted, methods=["GET"]) for sort in fq.SORTS if sort != "comments"],
]


def build_app(server: web.ServerState, port: int) -> Starlette:
    """The forum app of ``server``; ``port`` names its session cookie."""
    config = web.SiteConfig(
        name="reddit",
        db="postmill",
        cookie=f"forum_session_{port}",
        template_dir=TEMPLATES,
        login_url="/login",
        base_context=_base_context,
    )
    return web.build_app(config, server, [*actions.routes, *routes])
