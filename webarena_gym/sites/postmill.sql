-- Schema of the embedded forum (a Postmill stand-in).
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    biography TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
CREATE TABLE forum (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE submission (
    id INTEGER PRIMARY KEY,
    forum_id INTEGER NOT NULL REFERENCES forum(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    url TEXT,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    edited_at TEXT
);
CREATE INDEX submission_forum ON submission(forum_id);
CREATE INDEX submission_user ON submission(user_id);
CREATE TABLE comment (
    id INTEGER PRIMARY KEY,
    submission_id INTEGER NOT NULL REFERENCES submission(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    parent_id INTEGER REFERENCES comment(id),
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    edited_at TEXT
);
CREATE INDEX comment_submission ON comment(submission_id);
CREATE INDEX comment_user ON comment(user_id);
CREATE TABLE submission_vote (
    user_id INTEGER NOT NULL REFERENCES users(id),
    submission_id INTEGER NOT NULL REFERENCES submission(id),
    choice INTEGER NOT NULL CHECK (choice IN (-1, 1)),
    PRIMARY KEY (user_id, submission_id)
);
CREATE INDEX submission_vote_submission ON submission_vote(submission_id);
CREATE TABLE comment_vote (
    user_id INTEGER NOT NULL REFERENCES users(id),
    comment_id INTEGER NOT NULL REFERENCES comment(id),
    choice INTEGER NOT NULL CHECK (choice IN (-1, 1)),
    PRIMARY KEY (user_id, comment_id)
);
CREATE INDEX comment_vote_comment ON comment_vote(comment_id);
CREATE TABLE session (
    token TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    user_id INTEGER,
    flash TEXT NOT NULL DEFAULT '[]',
    created_at TEXT NOT NULL
);
CREATE TABLE site_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    now TEXT NOT NULL
);
