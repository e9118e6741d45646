"""Shared test fixtures: paths to the reference WebArena data and the Chromium executable."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_WEBARENA = REPO_ROOT.parent / "shared" / "webarena"


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
