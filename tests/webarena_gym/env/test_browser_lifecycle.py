"""Browser discovery, configuration, login state, and crashes (never a silent reward)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from webarena_gym.browser import BrowserConfig, find_chromium
from webarena_gym.errors import BrowserError, SiteConfigError


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def browser_pids() -> list[int]:
    """Main Chromium processes (no ``--type=``) descending from this test process, found through /proc."""
    tree, found, todo = _children(), [], [os.getpid()]
    while todo:
        pid = todo.pop()
        for child in tree.get(pid, []):
            todo.append(child)
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()  # Chromium rewrites children's argv
            except OSError:
                continue
            if b"chrom" in cmdline and b"--type=" not in cmdline and b"crashpad" not in cmdline:
                found.append(child)
    return found


def test_browser_config_validation_and_defaults() -> None:
    config = BrowserConfig.from_value({"viewport_width": 800, "extra_args": ["--lang=en-US"]})
    assert config.viewport_width == 800 and config.extra_args == ("--lang=en-US",)
    assert "--no-sandbox" in config.args and config.headless
    assert BrowserConfig.from_value(None) == BrowserConfig()
    assert BrowserConfig.from_value(config) is config
    with pytest.raises(ValueError, match="action_timeout_ms must be a positive integer, got 0"):
        BrowserConfig(action_timeout_ms=0)
    with pytest.raises(TypeError, match="got str"):
        BrowserConfig.from_value("headless")  # type: ignore[arg-type]


def test_find_chromium(monkeypatch: pytest.MonkeyPatch, chromium_path: str, tmp_path: Path) -> None:
    assert find_chromium(chromium_path) == chromium_path
    monkeypatch.setenv("WEBARENA_CHROMIUM", chromium_path)
    assert find_chromium() == chromium_path
    monkeypatch.setenv("WEBARENA_CHROMIUM", str(tmp_path / "nope"))
    with pytest.raises(BrowserError, match="WEBARENA_CHROMIUM points at .*nope"):
        find_chromium()
    monkeypatch.delenv("WEBARENA_CHROMIUM")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserError, match="no Chromium found; install Chromium"):
        find_chromium()
    (tmp_path / "chromium").write_text("#!/bin/sh\n")
    (tmp_path / "chromium").chmod(0o755)
    assert find_chromium() == str(tmp_path / "chromium")


@pytest.mark.browser
def test_storage_state_is_loaded_for_login_tasks(env_factory: Callable[..., Any], site: Any,
                                                 fixture_tasks: list[dict[str, Any]], tmp_path: Path) -> None:
    task = dict(fixture_tasks[0], task_id=20, require_login=True, storage_state="./.auth/shopping_state.json")
    env = env_factory(task_file=[task], auth_dir=tmp_path)
    with pytest.raises(SiteConfigError, match="storage state './.auth/shopping_state.json' not found"):
        env.reset()
    cookie = {"name": "session", "value": "logged-in-42", "domain": "127.0.0.1", "path": "/", "expires": -1,
              "httpOnly": False, "secure": False, "sameSite": "Lax"}
    state = {"cookies": [cookie], "origins": []}
    (tmp_path / "shopping_state.json").write_text(json.dumps(state))
    env.reset()
    assert env._session.page.evaluate("document.cookie") == "session=logged-in-42"
    env.close()


@pytest.mark.browser
def test_killed_browser_raises_then_reset_relaunches(env_factory: Callable[..., Any], find_id: Any) -> None:
    env = env_factory()
    before = set(browser_pids())
    obs, _ = env.reset(options={"task_id": 0})
    mine = [pid for pid in browser_pids() if pid not in before]
    assert len(mine) == 1, mine
    os.kill(mine[0], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while env._session.browser_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(BrowserError, match="browser process is gone"):
        env.step("click [{}]".format(find_id(obs, "link 'Products'")))
    obs, info = env.reset(options={"task_id": 0})  # a bounded relaunch, reported
    assert info["error"] == "the browser had crashed and was relaunched" and env.browser_relaunches == 1
    obs, reward, terminated, truncated, _ = env.step("click [{}]".format(find_id(obs, "link 'Products'")))
    assert obs["url"].endswith("/products.html") and obs["last_action_error"] == ""
    assert env.step("stop [19.99]")[1] == 1.0
    env.close()


@pytest.mark.browser
def test_browser_dying_during_the_stop_step_is_not_a_reward(env_factory: Callable[..., Any]) -> None:
    env = env_factory()
    before = set(browser_pids())
    env.reset(options={"task_id": 3})  # url_match: the evaluator needs the page
    for pid in browser_pids():
        if pid not in before:
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while env._session.browser_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(BrowserError):
        env.step("stop [done]")
    env.close()


@pytest.mark.browser
def test_crashed_tab_raises_then_reset_recovers(env_factory: Callable[..., Any]) -> None:
    from playwright.sync_api import Error as PlaywrightError

    env = env_factory()
    env.reset(options={"task_id": 0})
    with pytest.raises(PlaywrightError):  # the renderer dies before it can answer
        env._session.tab(env._session.page).cdp.send("Page.crash", timeout=1000)
    with pytest.raises(BrowserError, match="crashed"):
        env.step("scroll [down]")
    obs, info = env.reset(options={"task_id": 0})
    assert info["error"] is None and "link 'Products'" in obs["axtree"]
    env.close()


@pytest.mark.browser
def test_context_closed_before_an_action_is_a_browser_error(env_factory: Callable[..., Any],
                                                            find_id: Any) -> None:
    """The episode's browser context (its tabs) goes away between the liveness check and the action, as when
    a Ctrl-C reaches Chromium first: a BrowserError (an infrastructure failure the episode retry knows), never
    Playwright's raw TargetClosedError from opening a new tab, and reset recovers."""
    env = env_factory()
    obs, _ = env.reset(options={"task_id": 0})
    env._session.context.close()
    with pytest.raises(BrowserError, match="the browser failed before click"):
        env.step("click [{}]".format(find_id(obs, "link 'Products'")))
    obs, info = env.reset(options={"task_id": 0})
    assert "link 'Products'" in obs["axtree"]
    env.close()
