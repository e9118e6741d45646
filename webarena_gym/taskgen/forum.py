"""Templates on the forum (``reddit``), logged in as WebArena's forum account (MarvelsGrantMan136)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from webarena_gym.taskgen import locators, phrases
from webarena_gym.taskgen.spec import (
    Instance,
    TemplateSet,
    click,
    exact_answer,
    html_answer,
    html_check,
    must_include_answer,
    stop,
    type_,
    url_answer,
)
from webarena_gym.taskgen.world import FORUM, FORUM_USER, POSTS_PER_PAGE

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.data import SiteData
    from webarena_gym.taskgen.spec import Step

TEMPLATES = TemplateSet()
SITES = ("reddit",)
SORT_LINKS = {"hot": "Hot", "new": "New", "top": "Top", "comments": "Most commented"}


def open_forum(name: str, sort: str | None = None) -> tuple[Step, ...]:
    """From any forum page: the forum list, the forum, and optionally one of its sort orders."""
    steps: tuple[Step, ...] = (click("link", "Forums"), click("link", name))
    return steps if sort is None else (*steps, click("link", SORT_LINKS[sort]))


def leader(data: SiteData, forum: str, sort: str, key: str) -> dict[str, Any] | None:
    """The first post of the forum listing by ``sort`` when its ``key`` beats the second's, else None."""
    ranked = data.posts(forum, sort=sort)  # type: ignore[arg-type]
    if len(ranked) < 2 or ranked[0][key] == ranked[1][key]:
        return None
    return ranked[0]


def first_page_posts(data: SiteData, forum: str) -> list[dict[str, Any]]:
    """Posts on the first page of the forum's "new" listing whose title is unique in the forum."""
    posts = data.posts(forum, sort="new")
    titles = Counter(p["title"] for p in posts)
    return [p for p in posts[:POSTS_PER_PAGE] if titles[p["title"]] == 1]


def forum_names(data: SiteData) -> list[str]:
    """Forum names as the forum list shows them."""
    return [f["name"] for f in data.forums()]


def post_url(post: dict[str, Any]) -> str:
    """A post's page, with the forum placeholder."""
    return f"{FORUM}/f/{post['forum_name']}/{post['id']}"


@TEMPLATES.add(
    301,
    "top-post-title",
    sites=SITES,
    start_url=FORUM,
    kind="string_match",
    intent="What is the title of the highest-scoring post in f/{{forum}}?",
)
def top_post_title(data: SiteData) -> list[Instance]:
    out = []
    for forum in forum_names(data):
        top = leader(data, forum, "top", "score")
        if top is not None:
            out.append(
                Instance(
                    {"forum": forum},
                    must_include_answer(top["title"]),
                    (*open_forum(forum, "top"), stop(top["title"])),
                )
            )
    return out


@TEMPLATES.add(
    302,
    "most-comments-count",
    sites=SITES,
    start_url=FORUM,
    kind="string_match",
    intent="How many comments does the most commented post in f/{{forum}} have?",
)
def most_comments_count(data: SiteData) -> list[Instance]:
    out = []
    for forum in forum_names(data):
        count = str(data.posts(forum, sort="comments")[0]["comment_count"])
        if int(count) < 2:
            continue
        out.append(
            Instance({"forum": forum}, exact_answer(count), (*open_forum(forum, "comments"), stop(count)))
        )
    return out


@TEMPLATES.add(
    303,
    "forum-sorted",
    sites=SITES,
    start_url=FORUM,
    kind="url_match",
    intent="Show me the posts of f/{{forum}} sorted by {{order}}",
)
def forum_sorted(data: SiteData) -> list[Instance]:
    out = []
    for sort, order in (("new", "newest first"), ("top", "score"), ("comments", "number of comments")):
        for forum in forum_names(data):
            out.append(
                Instance(
                    {"forum": forum, "order": order},
                    url_answer(f"{FORUM}/f/{forum}?sort={sort}"),
                    (*open_forum(forum, sort), stop()),
                )
            )
    return out


@TEMPLATES.add(
    304,
    "top-author-bio",
    sites=SITES,
    start_url=FORUM,
    kind="string_match",
    unseen=True,
    intent="What does the author of the highest-scoring post in f/{{forum}} say in their biography?",
)
def top_author_bio(data: SiteData) -> list[Instance]:
    bios = {u["username"]: u["biography"] for u in data.forum_users()}
    out = []
    for forum in forum_names(data):
        top = leader(data, forum, "top", "score")
        if top is None or not bios[top["username"]]:
            continue
        bio = bios[top["username"]]
        out.append(
            Instance(
                {"forum": forum},
                must_include_answer(bio),
                (*open_forum(forum, "top"), click("link", top["username"]), stop(bio)),
            )
        )
    return out


@TEMPLATES.add(
    305,
    "post-score",
    sites=SITES,
    start_url=FORUM,
    kind="string_match",
    intent='How many points does the post "{{title}}" in f/{{forum}} have?',
)
def post_score(data: SiteData) -> list[Instance]:
    out = []
    for forum in forum_names(data):
        for post in [p for p in first_page_posts(data, forum) if p["score"] >= 2][:3]:
            score = str(post["score"])
            out.append(
                Instance(
                    {"title": post["title"], "forum": forum},
                    exact_answer(score),
                    (*open_forum(forum, "new"), stop(score)),
                )
            )
    return out


@TEMPLATES.add(
    306,
    "comment-on-post",
    sites=SITES,
    start_url=FORUM,
    kind="program_html",
    state_changing=True,
    intent='Comment "{{comment}}" on the post "{{title}}" in f/{{forum}}',
)
def comment_on_post(data: SiteData) -> list[Instance]:
    out = []
    for index, forum in enumerate(forum_names(data)):
        post = first_page_posts(data, forum)[1 + index % 4]
        comment = phrases.FORUM_COMMENTS[index % len(phrases.FORUM_COMMENTS)]
        check = html_check(post_url(post), locators.FORUM_COMMENT_LINES, must=[f"{FORUM_USER}: {comment}"])
        out.append(
            Instance(
                {"comment": comment, "title": post["title"], "forum": forum},
                html_answer(check),
                (
                    *open_forum(forum, "new"),
                    click("link", post["title"]),
                    type_("textbox", "Comment", comment),
                    click("button", "Post comment"),
                    stop(),
                ),
            )
        )
    return out


def post_checks(title: str, forum: str, body: str) -> tuple[dict[str, Any], ...]:
    """The new post (where the episode ended) has this title, author, forum and body."""
    return (
        html_check(
            "func:reddit_get_post_url('__last_url__')",
            locators.FORUM_POST_HEADER,
            exact=f"{title} | {FORUM_USER} | f/{forum}",
        ),
        html_check("last", locators.FORUM_POST_BODY, must=[body]),
    )


def submit_steps(forum: str, title: str, body: str) -> tuple[Step, ...]:
    """From any forum page: submit a post to ``forum``."""
    return (
        *open_forum(forum),
        click("link", f"Submit a new post to f/{forum}"),
        type_("textbox", "Title", title),
        type_("textbox", "Body", body),
        click("button", "Create submission"),
    )


@TEMPLATES.add(
    307,
    "create-post",
    sites=SITES,
    start_url=FORUM,
    kind="program_html",
    state_changing=True,
    intent='Submit a post to f/{{forum}} with the title "{{title}}" and the text "{{body}}"',
)
def create_post(data: SiteData) -> list[Instance]:
    out = []
    for index, forum in enumerate(forum_names(data)):
        title = phrases.FORUM_TITLES[index % len(phrases.FORUM_TITLES)]
        body = phrases.FORUM_BODIES[(index + 2) % len(phrases.FORUM_BODIES)]
        out.append(
            Instance(
                {"forum": forum, "title": title, "body": body},
                html_answer(*post_checks(title, forum, body)),
                (*submit_steps(forum, title, body), stop()),
            )
        )
    return out


@TEMPLATES.add(
    308,
    "upvote-post",
    sites=SITES,
    start_url=FORUM,
    kind="program_html",
    state_changing=True,
    intent='Upvote the post "{{title}}" in f/{{forum}}',
)
def upvote_post(data: SiteData) -> list[Instance]:
    voted = {
        row[0]
        for row in data.connection("postmill").execute(
            "SELECT submission_id FROM submission_vote v JOIN users u ON u.id = v.user_id"
            " WHERE u.username = ?",
            (FORUM_USER,),
        )
    }
    out = []
    for forum in forum_names(data):
        for post in [p for p in first_page_posts(data, forum) if p["id"] not in voted][:2]:
            check = html_check(post_url(post), locators.FORUM_POST_UPVOTED, exact="true")
            out.append(
                Instance(
                    {"title": post["title"], "forum": forum},
                    html_answer(check),
                    (*open_forum(forum, "new"), click("button", f"Upvote {post['title']}"), stop()),
                )
            )
    return out


@TEMPLATES.add(
    309,
    "edit-biography",
    sites=SITES,
    start_url=FORUM,
    kind="program_html",
    state_changing=True,
    intent='Change my biography on the forum to "{{bio}}"',
)
def edit_biography(data: SiteData) -> list[Instance]:
    out = []
    for bio in phrases.FORUM_BIOS:
        check = html_check(f"{FORUM}/user/{FORUM_USER}", locators.FORUM_BIOGRAPHY, exact=bio)
        out.append(
            Instance(
                {"bio": bio},
                html_answer(check),
                (
                    click("link", FORUM_USER),
                    click("link", "Edit biography"),
                    type_("textbox", "Biography", bio),
                    click("button", "Save"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    310,
    "rename-own-post",
    sites=SITES,
    start_url=FORUM,
    kind="program_html",
    state_changing=True,
    unseen=True,
    intent='Change the title of my post "{{old}}" to "{{new}}"',
)
def rename_own_post(data: SiteData) -> list[Instance]:
    mine = data.posts(username=FORUM_USER, sort="new")
    titles = Counter(p["title"] for p in mine)
    out = []
    for index, post in enumerate(p for p in mine if titles[p["title"]] == 1):
        new = phrases.NEW_POST_TITLES[index % len(phrases.NEW_POST_TITLES)]
        check = html_check(post_url(post), locators.FORUM_POST_TITLE, exact=new)
        out.append(
            Instance(
                {"old": post["title"], "new": new},
                html_answer(check),
                (
                    click("link", FORUM_USER),
                    click("link", post["title"]),
                    click("link", "Edit"),
                    type_("textbox", "Title", new),
                    click("button", "Save"),
                    stop(),
                ),
            )
        )
    return out


@TEMPLATES.add(
    311,
    "most-commented-author",
    sites=SITES,
    start_url=FORUM,
    kind="url_match",
    intent="Open the profile page of the user who submitted the most commented post in f/{{forum}}",
)
def most_commented_author(data: SiteData) -> list[Instance]:
    out = []
    for forum in forum_names(data):
        top = leader(data, forum, "comments", "comment_count")
        if top is not None:
            out.append(
                Instance(
                    {"forum": forum},
                    url_answer(f"{FORUM}/user/{top['username']}"),
                    (*open_forum(forum, "comments"), click("link", top["username"]), stop()),
                )
            )
    return out
