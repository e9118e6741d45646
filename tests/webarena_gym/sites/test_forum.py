"""The forum over real HTTP: listings and sorts, posts and comments, voting, profiles, malformed requests."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from pathlib import Path
from urllib.parse import quote

import pytest

from webarena_gym.sites.data import SiteData, post_path


@pytest.fixture(scope="module")
def data(sites_cache: Path) -> SiteData:
    return SiteData(0, cache_dir=sites_cache)


def _titles(html: str) -> list[str]:
    return [unescape(t) for t in re.findall(r'<h2 id="post-\d+"><a href="[^"]+">([^<]+)</a></h2>', html)]


def test_pages_render(client: Callable, data: SiteData) -> None:
    forum = client("reddit")
    post = data.posts("books")[0]
    comment = next(c for p in data.posts() for c in data.post(p["id"])["comments"])
    for path in (
        "/",
        "/forums",
        "/f/books",
        "/f/BOOKS",
        "/f/books/new",
        "/new",
        "/top",
        "/search?q=book",
        post_path(post),
        f"/f/books/{post['id']}",
        "/user/MarvelsGrantMan136",
        "/user/MarvelsGrantMan136/comments",
        "/user/MarvelsGrantMan136/submissions",
        "/login",
        f"/f/{comment['forum_name']}/{comment['submission_id']}/-/comment/{comment['id']}",
    ):
        page = forum.get(path)
        assert page.status == 200 and "<h1" in page.text, path
    assert all(f["name"] in forum.get("/forums").text for f in data.forums())


def test_listing_sorts_and_pages_follow_the_data(client: Callable, data: SiteData) -> None:
    forum = client("reddit")
    for sort in ("hot", "new", "top", "comments"):
        expected = [p["title"] for p in data.posts("books", sort=sort)]
        assert _titles(forum.get(f"/f/books?sort={sort}").text) == expected[:20], sort
        assert _titles(forum.get(f"/f/books?sort={sort}&p=2").text) == expected[20:40], sort
    assert _titles(forum.get("/f/books/top").text) == _titles(forum.get("/f/books?sort=top").text)
    everything = [p["title"] for p in data.posts(sort="new")]
    assert _titles(forum.get("/new").text) == everything[:20]


def test_post_page_nests_comments(client: Callable, data: SiteData) -> None:
    post = next(
        data.post(p["id"])
        for p in data.posts()
        if any(c["parent_id"] for c in data.post(p["id"])["comments"])
    )
    page = client("reddit").get(post_path(post)).text
    reply = next(c for c in post["comments"] if c["parent_id"])
    parent_at = page.index(f'id="comment-{reply["parent_id"]}"')
    reply_at = page.index(f'id="comment-{reply["id"]}"')
    assert parent_at < reply_at
    assert f"{post['comment_count']} comment" in page


def test_post_comment_reply_vote_edit(client: Callable, data: SiteData) -> None:
    forum = client("reddit", login=True)
    page = forum.post(
        "/submit", {"forum": "books", "title": "What should I read next?", "body": "Ideas welcome"}
    )
    assert '<h1 id="post-title">What should I read next?</h1>' in page.text
    post_id = int(re.search(r"/f/books/(\d+)/", page.url)[1])  # type: ignore[index]
    assert post_id == max(p["id"] for p in data.posts()) + 1
    assert _titles(forum.get("/f/books?sort=new").text)[0] == "What should I read next?"
    page = forum.post(f"/f/books/{post_id}/-/comment", {"body": "Try Piranesi."})
    comment_id = int(re.search(r"/-/comment/(\d+)$", page.url)[1])  # type: ignore[index]
    assert "Try Piranesi." in page.text and "1 comment" in page.text
    other = client("reddit", login=True, user=data.forum_users()[1]["username"])
    page = other.post(f"/f/books/{post_id}/-/comment", {"body": "Seconded!", "parent_id": comment_id})
    assert page.text.index(f'id="comment-{comment_id}"') < page.text.index("Seconded!")
    # Votes: up, toggled off, down; comment votes too.
    assert "1 point<" in other.post(f"/sv/{post_id}", {"choice": 1}).text
    assert "0 points" in other.post(f"/sv/{post_id}", {"choice": 1}).text
    page = other.post(f"/sv/{post_id}", {"choice": -1, "next": "/f/books?sort=new"})
    assert page.url.endswith("/f/books?sort=new") and "-1 point<" in page.text
    page = forum.post(f"/cv/{comment_id}", {"choice": 1})
    assert 'aria-pressed="true" aria-label="Upvote comment by MarvelsGrantMan136"' in page.text
    # Only the author can edit.
    assert other.get(f"/f/books/{post_id}/-/edit").status == 403
    page = forum.post(
        f"/f/books/{post_id}/-/edit", {"title": "What should I read in 2024?", "body": "Edited"}
    )
    assert "What should I read in 2024?" in page.text and "(edited" in page.text
    user_page = forum.get("/user/MarvelsGrantMan136").text
    assert "What should I read in 2024?" in user_page and "Try Piranesi." in user_page


def test_biography_edit(client: Callable) -> None:
    forum = client("reddit", login=True)
    page = forum.post("/user/MarvelsGrantMan136/edit_biography", {"biography": "I like books."})
    assert "I like books." in page.text and "Your biography was updated." in page.text
    assert forum.get("/user/QuietOtterFan1/edit_biography").status in (403, 404)


def test_anonymous_actions_redirect_to_login(client: Callable, data: SiteData) -> None:
    forum = client("reddit")
    page = forum.get("/submit", follow=False)
    assert page.status == 303 and page.headers["location"].startswith("/login?referer=/submit")
    post = data.posts("books")[0]
    page = forum.post(
        f"/sv/{post['id']}", {"choice": 1}, headers={"Referer": forum.base_url + post_path(post)}
    )
    assert page.url.endswith("/login?referer=" + quote(post_path(post))) and "<h1>Log in</h1>" in page.text
    assert "Invalid credentials." in forum.post("/login_check", {"_username": "x", "_password": "y"}).text


def test_malformed_requests(client: Callable, data: SiteData) -> None:
    forum = client("reddit", login=True)
    post = data.posts("books")[0]
    for path, status in (
        ("/f/books?p=x", 400),
        ("/f/books?sort=bogus", 400),
        ("/f/books/999999", 404),
        ("/f/nope", 404),
        ("/f/books/sideways", 404),
        ("/user/nobody", 404),
        ("/user/MarvelsGrantMan136/secrets", 404),
        (f"/f/gaming/{post['id']}", 404),
        ("/f/books/1/-/comment/999999", 404),
        ("/f/books/99999999999999999999999", 404),
    ):
        assert forum.get(path).status == status, path
    assert forum.post(f"/sv/{post['id']}", {"choice": 5}).status == 422
    assert forum.post("/sv/999999", {"choice": 1}).status == 404
    assert forum.post("/submit", {"forum": "nope", "title": "x"}).status == 422
    assert forum.post("/submit", {"forum": "books", "title": ""}).status == 422
    other_comment = next(c for p in data.posts("gaming") for c in data.post(p["id"])["comments"])
    page = forum.post(f"/f/books/{post['id']}/-/comment", {"body": "x", "parent_id": other_comment["id"]})
    assert page.status == 422
    assert forum.get("/").status == 200
