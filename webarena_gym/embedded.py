"""The embedded world: the bundled task set as the named task source ``"embedded"``, and the sites behind an
env created without a task file.

>>> from webarena_gym import load_tasks
>>> train = load_tasks("embedded:train")   # also "embedded" (all), "embedded:test", "embedded:test_unseen"

:class:`EmbeddedWorld` owns one :class:`~webarena_gym.sites.EmbeddedSites` (started on first use) and, before
every episode, restores the sites to their pristine state and writes fresh login storage states for the task's
sites (a reset clears the sites' sessions), under the file name the task's ``storage_state`` gives. Importing
this module starts nothing; it registers the task source.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from webarena_gym.errors import TaskConfigError
from webarena_gym.tasks import register_task_source

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.sites.lifecycle import EmbeddedSites
    from webarena_gym.tasks import SiteURLs, TaskConfig

DATA_DIR = Path(__file__).resolve().parent / "data" / "tasks"
"""Where the bundled task files ``embedded_<split>.json`` live."""
SPLITS = ("train", "test", "test_unseen")
"""Splits of the bundled task set: training templates, new instances of them, templates never trained on."""
SOURCE_NAME = "embedded"
_CREDENTIAL_TABLES = frozenset({"session", "oauth_token"})


def task_file(split: str) -> Path:
    """The bundled task file of ``split``."""
    if split not in SPLITS:
        raise TaskConfigError(
            f"unknown embedded split {split!r}; expected one of {list(SPLITS)}", path=f"{SOURCE_NAME}:{split}"
        )
    return DATA_DIR / f"embedded_{split}.json"


def load_entries(split: str | None) -> list[dict[str, Any]]:
    """The bundled task entries of ``split`` (``None``: every split, by task id)."""
    entries: list[dict[str, Any]] = []
    for name in SPLITS if split is None else (split,):
        path = task_file(name)
        try:
            entries.extend(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise TaskConfigError(f"cannot read the bundled task file: {exc}", path=str(path)) from exc
    return sorted(entries, key=lambda e: e.get("task_id", -1)) if split is None else entries


register_task_source(SOURCE_NAME, load_entries)


def default_tasks(split: str | None = None) -> list[TaskConfig]:
    """The bundled tasks of an env made without a task file: ``split`` (default ``"train"``), or every split
    for ``"all"``."""
    from webarena_gym.tasks import load_tasks

    if split == "all":
        return load_tasks(SOURCE_NAME)
    if split is not None and split not in SPLITS:
        raise TaskConfigError(f"unknown embedded split {split!r}; expected one of {[*SPLITS, 'all']}")
    return load_tasks(f"{SOURCE_NAME}:{split or 'train'}")


class EmbeddedWorld:
    """The embedded sites for one env: started on first use, pristine and logged in before every episode.

    Arguments:
        seed: seed of the generated world (the bundled tasks are computed for the default seed).
        cache_dir: where the pristine databases are cached (default: the sites' cache).
    """

    def __init__(self, *, seed: int | None = None, cache_dir: str | Path | None = None) -> None:
        from webarena_gym.sites.seed import DEFAULT_SEED

        self.seed = DEFAULT_SEED if seed is None else seed
        self.cache_dir = cache_dir
        self._sites: EmbeddedSites | None = None
        self._urls: SiteURLs | None = None
        self._auth_dir: Path | None = None

    @property
    def started(self) -> bool:
        """Whether the sites are running."""
        return self._sites is not None

    @property
    def server_pid(self) -> int | None:
        """Pid of the sites' server process (None when not running)."""
        return self._sites.pid if self._sites is not None else None

    @property
    def auth_dir(self) -> Path:
        """The folder of the storage-state files written by :meth:`prepare`."""
        if self._auth_dir is None:
            self._auth_dir = Path(tempfile.mkdtemp(prefix="webarena-auth-"))
        return self._auth_dir

    def start(self) -> SiteURLs:
        """Start the sites (once) and return their URLs."""
        if self._sites is None or self._urls is None:
            from webarena_gym.sites.lifecycle import EmbeddedSites
            from webarena_gym.tasks import SiteURLs

            sites = EmbeddedSites(seed=self.seed, cache_dir=self.cache_dir)
            self._urls = SiteURLs(**sites.start())
            self._sites = sites
        return self._urls

    def prepare(self, task: TaskConfig) -> None:
        """Restore the pristine state of every site and, when ``task`` needs a login, write its storage
        state (each of its sites logged in with WebArena's account) as ``auth_dir / <storage_state name>``."""
        self.start()
        assert self._sites is not None
        self._sites.reset()
        if not (task.require_login and task.storage_state):
            return
        from webarena_gym.sites.login import ACCOUNTS

        cookies: list[dict[str, Any]] = []
        for site in task.sites:
            if site not in ACCOUNTS:
                raise TaskConfigError(
                    f"the embedded world has no site {site!r} to log in to (it has {sorted(ACCOUNTS)})",
                    task_id=task.task_id,
                    field="sites",
                )
            cookies.extend(self._sites.login_state(site)["cookies"])
        path = self.auth_dir / Path(task.storage_state).name
        path.write_text(json.dumps({"cookies": cookies, "origins": []}), encoding="utf-8")

    def state_digest(self) -> dict[str, str]:
        """SHA-256 per database of the live site state, login sessions and REST tokens left out (each login
        creates them with random values): equal digests, equal world. The sites must be running."""
        if self._sites is None:
            raise RuntimeError("the embedded sites are not running: call start() first")
        from webarena_gym.sites.db import connect

        digests = {}
        for name, path in self._sites.db_paths.items():
            conn = connect(path, readonly=True)
            try:
                digest = hashlib.sha256()
                tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                for (table,) in tables.fetchall():
                    if table in _CREDENTIAL_TABLES or table.startswith("sqlite_"):
                        continue
                    digest.update(table.encode())
                    for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid'):
                        digest.update(repr(tuple(row)).encode())
                digests[name] = digest.hexdigest()
            finally:
                conn.close()
        return digests

    def close(self) -> None:
        """Stop the sites and delete the storage states. Idempotent."""
        if self._sites is not None:
            self._sites.close()
        self._sites, self._urls = None, None
        if self._auth_dir is not None:
            shutil.rmtree(self._auth_dir, ignore_errors=True)
            self._auth_dir = None

    def __enter__(self) -> EmbeddedWorld:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
