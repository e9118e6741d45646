"""SQLite plumbing of the embedded sites: schemas, connections, password hashes, the site clock and dumps.

Two logical databases, as in WebArena: ``magento`` (the shop and its admin panel share it) and ``postmill``
(the forum). Every piece of mutable site state lives in them, sessions and the clock included, so restoring
the files restores the whole world."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

DATABASES: tuple[str, ...] = ("magento", "postmill")
"""Names of the logical databases; each has ``<name>.sql`` beside this module and a ``<name>.db`` file."""

SCHEMA_DIR = Path(__file__).resolve().parent
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
CLOCK_START = "2024-01-02 09:00:00"
"""The site clock of the pristine world (the seeded history ends on 2023-12-31)."""
CLOCK_TICK = timedelta(minutes=1)
_PBKDF2_ROUNDS = 2000


def schema_sql(name: str) -> str:
    """The ``CREATE`` statements of database ``name`` (one of :data:`DATABASES`)."""
    if name not in DATABASES:
        raise ValueError(f"unknown database {name!r}; expected one of {DATABASES}")
    return (SCHEMA_DIR / f"{name}.sql").read_text(encoding="utf-8")


def connect(path: str | Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open a database file with row access by name. ``readonly`` opens it with ``mode=ro``."""
    if readonly:
        conn = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), check_same_thread=False)
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA journal_mode=MEMORY")
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Commit on success, roll back on error."""
    with conn:
        yield conn


def hash_password(password: str, salt: str) -> str:
    """A salted PBKDF2 hash, stored as ``salt$hexdigest`` (the salt is given so seeding stays
    deterministic)."""
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), _PBKDF2_ROUNDS).hex()
    return f"{salt}${digest}"


def check_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a hash made by :func:`hash_password`."""
    salt, _, digest = stored.partition("$")
    expected = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), _PBKDF2_ROUNDS).hex()
    return hmac.compare_digest(expected, digest)


def tick(conn: sqlite3.Connection) -> str:
    """Advance the site clock by one tick and return the new time (deterministic: no wall clock involved).

    The caller commits, with the write the time stamps."""
    row = conn.execute("SELECT now FROM site_clock WHERE id = 1").fetchone()
    now = datetime.strptime(row["now"], TIME_FORMAT) + CLOCK_TICK
    text = now.strftime(TIME_FORMAT)
    conn.execute("UPDATE site_clock SET now = ? WHERE id = 1", (text,))
    return text


def dump(conn: sqlite3.Connection) -> str:
    """The database as SQL text (``iterdump``): equal dumps mean equal state."""
    return "\n".join(conn.iterdump())


def dump_digest(path: str | Path) -> str:
    """SHA-256 of the dump of the database file at ``path``."""
    conn = connect(path, readonly=True)
    try:
        return hashlib.sha256(dump(conn).encode()).hexdigest()
    finally:
        conn.close()
