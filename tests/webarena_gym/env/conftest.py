"""Fixtures for the env tests: local HTTP servers for the fixture pages, small task sets, shared envs."""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FIXTURE_SITE = Path(__file__).resolve().parent.parent / "fixtures" / "site"


@dataclass
class LocalSite:
    """A threaded HTTP server on 127.0.0.1 (random port) serving a folder and recording request paths."""

    url: str
    requests: list[str] = field(default_factory=list)


class _Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, record: list[str], **kwargs: Any) -> None:
        self._record = record
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        self._record.append(self.path)
        super().do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def _serve(directory: Path) -> Iterator[LocalSite]:
    record: list[str] = []
    handler = functools.partial(_Handler, directory=str(directory), record=record)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield LocalSite(f"http://127.0.0.1:{server.server_port}", record)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def site() -> Iterator[LocalSite]:
    """The fixture pages, mapped as the ``shopping`` site."""
    yield from _serve(FIXTURE_SITE)


@pytest.fixture(scope="session")
def other_site() -> Iterator[LocalSite]:
    """A second server on another port: another origin, which the browser must never reach."""
    yield from _serve(FIXTURE_SITE)


def make_task(task_id: int, start: str, *, eval_spec: dict[str, Any] | None = None,
              **extra: Any) -> dict[str, Any]:
    """A WebArena task entry on the fixture site (``start`` is a path under ``__SHOPPING__``)."""
    entry = {
        "task_id": task_id,
        "sites": ["shopping"],
        "require_login": False,
        "storage_state": None,
        "start_url": f"__SHOPPING__/{start}",
        "geolocation": None,
        "intent_template": "",
        "instantiation_dict": {},
        "intent": f"Fixture task {task_id}: what does the wireless mouse cost?",
        "require_reset": False,
        "eval": eval_spec or {
            "eval_types": ["string_match"],
            "reference_answers": {"must_include": ["19.99"]},
            "reference_url": "",
            "program_html": [],
        },
    }
    entry.update(extra)
    return entry


@pytest.fixture(scope="session")
def fixture_tasks(other_site: LocalSite) -> list[dict[str, Any]]:
    """Tasks: 0 home (string_match 19.99), 1 form page, 2 leak page, 3 home with url_match on products."""
    return [
        make_task(0, "index.html"),
        make_task(1, "form.html"),
        make_task(2, f"leak.html?other={other_site.url}"),
        make_task(3, "index.html", eval_spec={
            "eval_types": ["url_match"], "reference_answers": None,
            "reference_url": "__SHOPPING__/products.html", "program_html": [],
        }),
        make_task(4, "index.html |AND| __SHOPPING__/products.html"),
    ]


@pytest.fixture(scope="session")
def env_factory(chromium_path: str, site: LocalSite, fixture_tasks: list[dict[str, Any]],
                ) -> Iterator[Callable[..., Any]]:
    """Builds ``WebArenaLiteEnv`` instances on the fixture site; all are closed at the end of the session."""
    from webarena_gym.env import WebArenaLiteEnv

    made: list[WebArenaLiteEnv] = []

    def factory(**kwargs: Any) -> WebArenaLiteEnv:
        kwargs.setdefault("task_file", fixture_tasks)
        kwargs.setdefault("sites", {"shopping": site.url})
        kwargs.setdefault("browser", {"executable_path": chromium_path})
        env = WebArenaLiteEnv(**kwargs)
        made.append(env)
        return env

    yield factory
    for env in made:
        env.close()


@pytest.fixture(scope="module")
def env(env_factory: Callable[..., Any]) -> Any:
    """One env shared by the tests of a module (a browser launch costs about a second)."""
    return env_factory()


def element_id(obs: dict[str, str], text: str) -> int:
    """The id of the first tree line containing ``text``."""
    for line in obs["axtree"].splitlines():
        if text in line:
            return int(line.strip().split("]", 1)[0][1:])
    raise AssertionError(f"no line containing {text!r} in:\n{obs['axtree']}")


@pytest.fixture(scope="session")
def find_id() -> Callable[[dict[str, str], str], int]:
    """``find_id(obs, text)``: the element id of the first tree line containing ``text``."""
    return element_id
