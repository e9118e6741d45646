"""Shared test fixtures (paths to the reference WebArena data and the Chromium executable) and the
pytest-xdist grouping that lets ``make test`` run the suite on two workers (``pytest -n 2``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_WEBARENA = REPO_ROOT.parent / "shared" / "webarena"


@pytest.fixture(autouse=True)
def _machine_decides_auto_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests see the machine's own ``dtype = "auto"`` choice, not a grid session's ``ESOPT_AUTO_DTYPE``."""
    monkeypatch.delenv("ESOPT_AUTO_DTYPE", raising=False)


@pytest.fixture(scope="session")
def shared_webarena_dir() -> Path:
    """The reference WebArena task files in ``../shared/webarena``; tests skip cleanly when absent."""
    if not (SHARED_WEBARENA / "test.raw.json").is_file():
        pytest.skip(f"reference WebArena task files not found at {SHARED_WEBARENA}")
    return SHARED_WEBARENA


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of a Chromium the browser tests can launch (fails loudly if there is none: CI installs it)."""
    path = os.environ.get("WEBARENA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("no Chromium found: install Debian's `chromium` (scripts/bootstrap.sh does)")
    return path



# ------------------------------------------------------------------------------------------ pytest-xdist
# `make test` runs `pytest -n 2`. The tests are handed to the workers in groups (GroupScheduling below): a
# group runs on one worker, in collection order, and groups are handed out in collection order. Every test
# file is a group of its own (its module fixtures -- browsers, envs, sites -- are built once, and tests that
# rely on the order of their module keep it), except:
XDIST_RAY_GROUP = "ray"
"""The tests that start Ray (marked ``ray``: the file :data:`XDIST_RAY_FILES` and ``test_ray_*`` anywhere):
one local Ray cluster at a time (each starts its own worker processes on the 2 cores)."""
XDIST_RAY_FILES = ("tests/cotrain/test_ray_runs.py",)
XDIST_SPLIT_FILES = ("tests/webarena_gym/embedded/test_replay.py", "tests/test_benchmarks.py")
"""Files grouped by their test's parameter id instead: the replay of every reference solution is the longest
file of the suite (per split, its two tests -- fill, then keys reusing the fill outcomes -- stay together),
and the quick benchmark run comes in parts (the Ray benchmarks together)."""
XDIST_FIRST = (
    "tests/test_benchmarks.py",
    "tests/webarena_gym/embedded/test_replay.py",
    "tests/es_agent/test_embedded_qwen.py",
    XDIST_RAY_GROUP,
    "tests/cotrain/test_cli.py",
)
"""Groups handed out first (longest first: a long group handed out last would run alone at the end): the
quick benchmark run (its Ray part is the longest group), the reference replays, the embedded Qwen (its
one-time conversion on a clean machine, then real forwards), the Ray runs and the CLI's subprocess runs. A
plain ``pytest`` (no workers) keeps the usual order."""


def xdist_group_of(nodeid: str) -> str:
    """The group of a test, from its node id alone (the controller that hands groups out sees no markers)."""
    path = nodeid.split("::", 1)[0]
    if path in XDIST_RAY_FILES or "::test_ray_" in nodeid:
        return XDIST_RAY_GROUP
    if path in XDIST_SPLIT_FILES and nodeid.endswith("]") and "[" in nodeid:
        return f"{path}[{nodeid.rsplit('[', 1)[1]}"
    return path


def _first_rank(group: str) -> int:
    for rank, first in enumerate(XDIST_FIRST):
        if group == first or group.startswith(first + "["):
            return rank
    return len(XDIST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker (all collect alike): check that every ``ray`` test falls in the Ray group and
    move the :data:`XDIST_FIRST` groups to the front."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    stray = [item.nodeid for item in items
             if item.get_closest_marker("ray") is not None and xdist_group_of(item.nodeid) != XDIST_RAY_GROUP]
    if stray:
        raise pytest.UsageError(
            f"tests marked 'ray' must be named test_ray_* (or live in {list(XDIST_RAY_FILES)}) so that "
            f"pytest-xdist runs one Ray cluster at a time (tests/conftest.py): {stray}")
    rank = {item.nodeid: (_first_rank(xdist_group_of(item.nodeid)), index)
            for index, item in enumerate(items)}
    items.sort(key=lambda item: rank[item.nodeid])


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The scheduler of ``pytest -n N`` (``--dist load``, the default, or ``loadgroup``): by
    :func:`xdist_group_of`, groups in collection order. Other ``--dist`` modes are left to xdist."""
    if config.getoption("dist") not in ("load", "loadgroup"):
        return None
    import importlib

    # xdist ships no type information: its scheduler base is taken as a value (typed Any)
    scope_scheduling: Any = importlib.import_module("xdist.scheduler").LoadScopeScheduling

    class GroupScheduling(scope_scheduling):
        """xdist's scope scheduling with :func:`xdist_group_of` as the scope, never reordered by size."""

        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    config.option.loadscopereorder = False
    return GroupScheduling(config, log)
