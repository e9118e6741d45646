"""Small helpers shared by the seeders: slugs, vocabulary files, random time stamps."""

from __future__ import annotations

import json
import random
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from webarena_gym.sites.db import TIME_FORMAT

HISTORY_START = datetime(2022, 1, 1)
"""First instant of the seeded history."""
HISTORY_END = datetime(2024, 1, 1)
"""End (exclusive) of the seeded history: two full years, 2022 and 2023."""


def load_vocab(name: str) -> dict[str, Any]:
    """The vocabulary file ``<name>_vocab.json`` beside this module."""
    path = Path(__file__).resolve().parent / f"{name}_vocab.json"
    return json.loads(path.read_text(encoding="utf-8"))


def slugify(text: str) -> str:
    """Magento/Postmill style slug: lower case, runs of other characters become one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def random_time(rng: random.Random, start: datetime = HISTORY_START, end: datetime = HISTORY_END) -> datetime:
    """A time stamp drawn uniformly from ``[start, end)`` at one-second resolution."""
    span = int((end - start).total_seconds())
    return start + timedelta(seconds=rng.randrange(span))


def fmt(moment: datetime) -> str:
    """The database text form of a time stamp."""
    return moment.strftime(TIME_FORMAT)


def salt(rng: random.Random) -> str:
    """A deterministic password salt."""
    return f"{rng.getrandbits(64):016x}"
