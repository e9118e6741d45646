"""Seeded data of the forum (``postmill`` database): users, subforums, posts, nested comments, votes."""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta
from typing import Any

from webarena_gym.sites.db import CLOCK_START, hash_password
from webarena_gym.sites.seed.text import HISTORY_END, fmt, load_vocab, random_time, salt

USER_PASSWORD = "test1234"
"""Password of every seeded forum user (WebArena's reddit accounts use this one)."""
FIRST_USER = "MarvelsGrantMan136"
N_USERS = 30


def seed_postmill(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill an empty ``postmill`` database (schema already created)."""
    vocab = load_vocab("forum")
    users = _seed_users(conn, rng, vocab)
    posts = _seed_posts(conn, rng, vocab, users)
    comments = _seed_comments(conn, rng, vocab, users, posts)
    _seed_votes(conn, rng, users, posts, comments)
    conn.execute("INSERT INTO site_clock (id, now) VALUES (1, ?)", (CLOCK_START,))


def _row_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (``sqlite3`` types ``lastrowid`` as optional)."""
    row_id = cursor.lastrowid
    assert row_id is not None, "an INSERT wrote no row"
    return row_id


def _seed_users(conn: sqlite3.Connection, rng: random.Random, vocab: dict[str, Any]) -> list[int]:
    parts = vocab["username_parts"]
    names = [FIRST_USER] + [f"{a}{b}{c}{rng.randint(1, 999)}" for a, b, c in parts[1:]]
    seen = set(names)
    while len(names) < N_USERS:
        name = f"{rng.choice(parts)[0]}{rng.choice(parts)[1]}{rng.choice(parts)[2]}{rng.randint(1, 9999)}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    ids = []
    for name in names:
        bio = rng.choice(vocab["bio_phrases"]) if rng.random() < 0.6 else ""
        created = fmt(datetime(2021, 1, 1) + timedelta(seconds=rng.randrange(300 * 86400)))
        ids.append(
            _row_id(conn.execute(
                "INSERT INTO users (username, password_hash, biography, created_at) VALUES (?, ?, ?, ?)",
                (name, hash_password(USER_PASSWORD, salt(rng)), bio, created),
            ))
        )
    return ids


def _fill(template: str, forum: dict[str, Any], rng: random.Random) -> str:
    return template.format(
        thing=rng.choice(forum["things"]),
        topic=rng.choice(forum["topics"]),
        tip=rng.choice(forum["tips"]),
        year=rng.choice((2022, 2023)),
        n=rng.choice((3, 5, 10)),
    )


def _seed_posts(
    conn: sqlite3.Connection, rng: random.Random, vocab: dict[str, Any], users: list[int]
) -> list[dict[str, Any]]:
    drafts = []
    for forum in vocab["forums"]:
        forum_id = conn.execute(
            "INSERT INTO forum (name, title, description, created_at) VALUES (?, ?, ?, ?)",
            (forum["name"], forum["title"], forum["description"], "2021-01-01 00:00:00"),
        ).lastrowid
        titles: set[str] = set()
        wanted = rng.randint(28, 42)
        for _attempt in range(4 * wanted):
            if len(titles) == wanted:
                break
            title = _fill(rng.choice(forum["titles"]), forum, rng)
            if title in titles:
                continue
            titles.add(title)
            body = " ".join(rng.sample(vocab["bodies"], rng.randint(1, 3)))
            drafts.append((random_time(rng), forum_id, rng.choice(users), title, body, forum))
    drafts.sort(key=lambda row: (row[0], row[1], row[3]))
    posts = []
    for created, forum_id, user_id, title, body, forum in drafts:
        post_id = conn.execute(
            "INSERT INTO submission (forum_id, user_id, title, url, body, created_at) VALUES (?, ?, "
            "?, NULL, ?, ?)",
            (forum_id, user_id, title, body, fmt(created)),
        ).lastrowid
        posts.append(
            {
                "id": post_id,
                "created": created,
                "user": user_id,
                "forum": forum,
                "appeal": rng.betavariate(4, 2),
            }
        )
    return posts


def _seed_comments(
    conn: sqlite3.Connection,
    rng: random.Random,
    vocab: dict[str, Any],
    users: list[int],
    posts: list[dict[str, Any]],
) -> list[int]:
    comment_ids = []
    for post in posts:
        thread: list[int] = []
        moment = post["created"]
        for _ in range(min(int(rng.expovariate(1 / 4.0)), 20)):
            moment = min(moment + timedelta(minutes=rng.randint(3, 600)), HISTORY_END - timedelta(seconds=1))
            parent = rng.choice(thread) if thread and rng.random() < 0.4 else None
            body = rng.choice(vocab["comments"]).format(thing=rng.choice(post["forum"]["things"]))
            comment_id = _row_id(conn.execute(
                "INSERT INTO comment (submission_id, user_id, parent_id, body, created_at) VALUES "
                "(?, ?, ?, ?, ?)",
                (post["id"], rng.choice(users), parent, body, fmt(moment)),
            ))
            thread.append(comment_id)
            comment_ids.append(comment_id)
    return comment_ids


def _seed_votes(
    conn: sqlite3.Connection,
    rng: random.Random,
    users: list[int],
    posts: list[dict[str, Any]],
    comments: list[int],
) -> None:
    post_votes = []
    for post in posts:
        for user in users:
            if user != post["user"] and rng.random() < 0.35:
                post_votes.append((user, post["id"], 1 if rng.random() < post["appeal"] else -1))
    conn.executemany(
        "INSERT INTO submission_vote (user_id, submission_id, choice) VALUES (?, ?, ?)", post_votes
    )
    comment_votes = []
    for comment_id in comments:
        appeal = rng.random()
        for user in users:
            if rng.random() < 0.08:
                comment_votes.append((user, comment_id, 1 if rng.random() < 0.4 + 0.5 * appeal else -1))
    conn.executemany("INSERT INTO comment_vote (user_id, comment_id, choice) VALUES (?, ?, ?)", comment_votes)
