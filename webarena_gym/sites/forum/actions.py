"""Forum actions that change state: submit and edit posts, comment and reply, vote, edit the biography."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from webarena_gym.sites import web
from webarena_gym.sites.db import tick
from webarena_gym.sites.forum import queries as fq
from webarena_gym.sites.forum.lookup import forum_or_404, post_or_404, post_url


async def submit_form(request: Request) -> Response:
    web.require_user(request)
    chosen = None
    if "forum" in request.path_params:
        chosen = forum_or_404(request)["name"]
    return web.render(request, "submit.html", forums=fq.forums(web.db(request)), chosen=chosen)


async def submit(request: Request) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    conn = web.db(request)
    forum = fq.forum_by_name(conn, form.get("forum", ""))
    if forum is None:
        raise HTTPException(422, f"Choose an existing forum, not {form.get('forum', '')!r}.")
    title = web.form_text(form, "title", max_len=300)
    body = web.form_text(form, "body", required=False, max_len=40_000)
    url = web.form_text(form, "url", required=False, max_len=2000) or None
    if url is not None and not web.is_web_url(url):
        raise HTTPException(422, f"The field 'url' must be an http:// or https:// address, got {url!r}.")
    with conn:
        now = tick(conn)
        post_id = conn.execute(
            "INSERT INTO submission (forum_id, user_id, title, url, body, created_at) VALUES (?, ?, "
            "?, ?, ?, ?)",
            (forum["id"], user_id, title, url, body, now),
        ).lastrowid
    return web.redirect(request, post_url({"id": post_id, "title": title, "forum_name": forum["name"]}))


def _own_post(request: Request) -> dict:
    user_id = web.require_user(request)
    post = post_or_404(request)
    if post["user_id"] != user_id:
        raise HTTPException(403, "You can only edit your own posts.")
    return post


async def edit_form(request: Request) -> Response:
    return web.render(request, "edit_post.html", post=_own_post(request))


async def edit(request: Request) -> Response:
    post = _own_post(request)
    form = await web.read_form(request)
    title = web.form_text(form, "title", max_len=300)
    body = web.form_text(form, "body", required=False, max_len=40_000)
    conn = web.db(request)
    with conn:
        now = tick(conn)
        conn.execute(
            "UPDATE submission SET title = ?, body = ?, edited_at = ? WHERE id = ?",
            (title, body, now, post["id"]),
        )
    web.flash(request, "The submission was edited.")
    return web.redirect(request, post_url(dict(post, title=title)))


async def comment(request: Request) -> Response:
    user_id = web.require_user(request)
    post = post_or_404(request)
    form = await web.read_form(request)
    body = web.form_text(form, "body", max_len=10_000)
    parent_id = None
    conn = web.db(request)
    if form.get("parent_id"):
        parent_id = web.parse_int(form["parent_id"], "parent_id", minimum=1)
        parent = conn.execute("SELECT submission_id FROM comment WHERE id = ?", (parent_id,)).fetchone()
        if parent is None or parent["submission_id"] != post["id"]:
            raise HTTPException(422, f"Comment {parent_id} is not part of this post.")
    with conn:
        now = tick(conn)
        comment_id = conn.execute(
            "INSERT INTO comment (submission_id, user_id, parent_id, body, created_at) VALUES (?, ?, "
            "?, ?, ?)",
            (post["id"], user_id, parent_id, body, now),
        ).lastrowid
    web.flash(request, "Your comment was posted.")
    return web.redirect(request, f"/f/{post['forum_name']}/{post['id']}/-/comment/{comment_id}")


async def _vote(request: Request, table: str, target_id: int, default_back: str) -> Response:
    user_id = web.require_user(request)
    form = await web.read_form(request)
    choice = web.parse_int(form.get("choice"), "choice", minimum=-1, maximum=1)
    column = f"{table}_id"
    conn = web.db(request)
    current = conn.execute(
        f"SELECT choice FROM {table}_vote WHERE user_id = ? AND {column} = ?", (user_id, target_id)
    ).fetchone()
    if current is not None and current["choice"] == choice:
        choice = 0  # voting the same way twice retracts the vote, as on Postmill
    with conn:
        conn.execute(f"DELETE FROM {table}_vote WHERE user_id = ? AND {column} = ?", (user_id, target_id))
        if choice:
            conn.execute(
                f"INSERT INTO {table}_vote (user_id, {column}, choice) VALUES (?, ?, ?)",
                (user_id, target_id, choice),
            )
    return web.redirect(request, web.safe_referer(form.get("next"), default_back))


async def vote_post(request: Request) -> Response:
    post = fq.post(web.db(request), request.path_params["id"])
    if post is None:
        raise HTTPException(404, "This post does not exist.")
    return await _vote(request, "submission", post["id"], post_url(post))


async def vote_comment(request: Request) -> Response:
    row = (
        web.db(request)
        .execute(
            "SELECT c.id, c.submission_id, f.name AS forum_name FROM comment c JOIN submission s ON "
            "s.id = c.submission_id"
            " JOIN forum f ON f.id = s.forum_id WHERE c.id = ?",
            (request.path_params["id"],),
        )
        .fetchone()
    )
    if row is None:
        raise HTTPException(404, "This comment does not exist.")
    back = f"/f/{row['forum_name']}/{row['submission_id']}/-/comment/{row['id']}"
    return await _vote(request, "comment", row["id"], back)


def _own_profile(request: Request) -> dict:
    user_id = web.require_user(request)
    user = fq.user_by_name(web.db(request), request.path_params["username"])
    if user is None:
        raise HTTPException(404, f"There is no user named {request.path_params['username']!r}.")
    if user["id"] != user_id:
        raise HTTPException(403, "You can only edit your own biography.")
    return user


async def biography_form(request: Request) -> Response:
    return web.render(request, "edit_biography.html", profile=_own_profile(request))


async def biography(request: Request) -> Response:
    user = _own_profile(request)
    form = await web.read_form(request)
    text = web.form_text(form, "biography", required=False, max_len=300)
    with web.db(request) as conn:
        conn.execute("UPDATE users SET biography = ? WHERE id = ?", (text, user["id"]))
    web.flash(request, "Your biography was updated.")
    return web.redirect(request, f"/user/{user['username']}")


routes = [
    Route("/submit", submit_form, methods=["GET"]),
    Route("/submit", submit, methods=["POST"]),
    Route("/submit/{forum}", submit_form, methods=["GET"]),
    Route("/submit/{forum}", submit, methods=["POST"]),
    Route("/f/{forum}/{post_id:int}/-/edit", edit_form, methods=["GET"]),
    Route("/f/{forum}/{post_id:int}/-/edit", edit, methods=["POST"]),
    Route("/f/{forum}/{post_id:int}/-/comment", comment, methods=["POST"]),
    Route("/sv/{id:int}", vote_post, methods=["POST"]),
    Route("/cv/{id:int}", vote_comment, methods=["POST"]),
    Route("/user/{username}/edit_biography", biography_form, methods=["GET"]),
    Route("/user/{username}/edit_biography", biography, methods=["POST"]),
]
