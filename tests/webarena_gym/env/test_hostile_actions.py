"""Hostile actions: refused when outside the action space, cut at the per-action timeout, never an exception.

Real Chromium on the local fixture site. A page made slow on purpose (a busy ``keydown`` handler, a server
that never answers) makes the slow cases certain on any machine, without timed assertions.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest

import webarena_gym
from webarena_gym.env import ACTION_MAX_CHARS

pytestmark = pytest.mark.browser

FindId = Callable[[dict[str, str], str], int]
SLOW_KEYS = """() => document.addEventListener('keydown', () => {
  const until = performance.now() + 20;
  while (performance.now() < until) {}
}, true)"""
"""A capture listener that makes every key event cost the page 20 ms."""


@pytest.fixture(scope="module")
def made(chromium_path: str, site: Any, fixture_tasks: list[dict[str, Any]]) -> Iterator[Any]:
    env = gym.make(webarena_gym.ENV_ID, task_file=fixture_tasks, sites={"shopping": site.url},
                   browser={"executable_path": chromium_path})
    yield env
    env.close()


@pytest.fixture(scope="module")
def quick(env_factory: Callable[..., Any]) -> Any:
    """An env whose actions may take one second each."""
    return env_factory(action_timeout_s=1.0)


def field_value(env: Any, element: str) -> str:
    return env.unwrapped._session.page.evaluate(f"document.getElementById('{element}').value")


def test_an_over_long_action_is_refused_and_counts_as_a_parse_failure(made: Any, find_id: FindId) -> None:
    obs, _ = made.reset(options={"task_id": 1})
    name = find_id(obs, "textbox 'Name'")
    for length in (ACTION_MAX_CHARS + 1, 100_000):
        action = f"type [{name}] [{'x' * length}] [0]"
        assert not made.action_space.contains(action)
        obs, reward, terminated, truncated, info = made.step(action)
        assert "invalid action" in obs["last_action_error"]
        assert f"at most {ACTION_MAX_CHARS} characters" in obs["last_action_error"]
        assert f"{len(action)} characters" in obs["last_action_error"]
        assert field_value(made, "name") == "prefilled"  # nothing was typed
        assert info["parsed"] is False and len(info["action"]) < 300
        assert obs in made.observation_space
    assert not terminated and not truncated and reward == 0.0
    _, _, terminated, _, info = made.step("x" * 5000)  # the third refusal in a row: WebArena's early stop
    assert terminated and info["early_stop"] == "Failed to parse actions for 3 times"


@pytest.mark.parametrize("action, fragment", [
    ("scroll [down]\x1b", "U+001B"),
    ("click [1]\x00", "U+0000"),
    ("\x7f", "U+007F"),
    ("type [3] [a\ud800b] [0]", "U+D800"),
    ("stop [\u2028]", "U+2028"),
    (42, "got int"),
    (None, "got NoneType"),
    (b"scroll [down]", "got bytes"),
    (["scroll [down]"], "got list"),
])
def test_actions_outside_the_action_space_are_refused(made: Any, action: Any, fragment: str) -> None:
    made.reset(options={"task_id": 0})
    before = made.unwrapped._session.page.evaluate("window.scrollY")
    obs, reward, terminated, truncated, info = made.step(action)
    assert "invalid action" in obs["last_action_error"] and fragment in obs["last_action_error"]
    assert (reward, terminated, truncated, info["parsed"]) == (0.0, False, False, False)
    assert made.unwrapped._session.page.evaluate("window.scrollY") == before  # nothing was run
    assert obs in made.observation_space


def test_an_action_whose_str_raises_is_refused(made: Any) -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("no")

        __repr__ = __str__

    made.reset(options={"task_id": 0})
    obs, _, terminated, _, info = made.step(Hostile())
    assert "got Hostile" in obs["last_action_error"] and not terminated
    assert info["action"] == "<refused> Hostile"


def test_slow_typing_is_cut_at_the_action_timeout(quick: Any, find_id: FindId) -> None:
    obs, _ = quick.reset(options={"task_id": 1})
    quick._session.page.evaluate(SLOW_KEYS)
    name = find_id(obs, "textbox 'Name'")
    text = "abcdefghij" * 100  # 1,000 keys at 20 ms or more: 20 s or more
    obs, reward, terminated, truncated, info = quick.step(f"type [{name}] [{text}] [1]")
    assert f"type [{name}] [" in obs["last_action_error"]
    assert "exceeded its 1 s timeout" in obs["last_action_error"]
    typed = field_value(quick, "name")
    assert typed and len(typed) < len(text) and text.startswith(typed)  # as far as it got, then stopped
    assert (reward, terminated, truncated) == (0.0, False, False)
    obs, *_ = quick.step("scroll [down]")
    assert obs["last_action_error"] == ""  # the env goes on


def test_a_long_key_combination_is_cut_and_releases_its_keys(quick: Any) -> None:
    quick.reset(options={"task_id": 1})
    page = quick._session.page
    page.evaluate(SLOW_KEYS)
    page.evaluate("() => { window.seen = []; document.addEventListener('keydown', "
                  "(e) => window.seen.push([e.key, e.shiftKey])); }")
    combo = "+".join(["Shift", *["a"] * 1500])  # 1,500 keys at 20 ms or more
    assert len(f"press [{combo}]") <= ACTION_MAX_CHARS
    obs, *_ = quick.step(f"press [{combo}]")
    assert "exceeded its 1 s timeout" in obs["last_action_error"]
    assert 0 < len(page.evaluate("window.seen")) < 1501
    page.evaluate("() => { window.seen = []; }")
    obs, *_ = quick.step("press [b]")
    assert obs["last_action_error"] == ""
    assert page.evaluate("window.seen") == [["b", False]]  # Shift was released when the action was cut


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An origin whose server accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_a_navigation_that_never_loads_is_cut(env_factory: Callable[..., Any], silent_server: str) -> None:
    env = env_factory(action_timeout_s=1.0, allowed_origins=[silent_server])
    obs, _ = env.reset(options={"task_id": 0})
    start = obs["url"]
    obs, reward, terminated, truncated, _ = env.step(f"goto [{silent_server}/never]")
    assert "exceeded its 1 s timeout" in obs["last_action_error"]
    assert obs["url"] == start and (reward, terminated, truncated) == (0.0, False, False)
    obs, *_ = env.step("scroll [down]")  # the stalled navigation was stopped: it holds nothing up
    assert obs["last_action_error"] == "" and obs["url"] == start
    env.close()


def test_the_action_timeout_is_validated(site: Any, fixture_tasks: list[dict[str, Any]]) -> None:
    from webarena_gym.env import WebArenaLiteEnv

    for bad in (0, -1.0, float("nan"), float("inf"), True, "30"):
        with pytest.raises(ValueError, match="action_timeout_s"):
            WebArenaLiteEnv(fixture_tasks, sites={"shopping": site.url}, action_timeout_s=bad)


def test_tab_focus_to_huge_indices(made: Any) -> None:
    made.reset(options={"task_id": 0})
    for action, fragment in [("tab_focus [999999999999]", "there is no tab 999999999999"),
                             ("tab_focus [9999999999999]", "too long to be an element id or tab index"),
                             ("tab_focus [-1]", "tab_focus needs a tab index")]:
        obs, _, terminated, _, _ = made.step(action)
        assert fragment in obs["last_action_error"] and not terminated
        made.step("new_tab")  # keeps the parse-failure and repeat counters below their thresholds
    assert obs in made.observation_space


def test_a_scroll_storm_leaves_the_env_usable(env_factory: Callable[..., Any]) -> None:
    env = env_factory()  # no step limit
    env.reset(options={"task_id": 0})
    for i in range(60):  # each direction twice in a row: under the repeat threshold of 3
        obs, reward, terminated, truncated, _ = env.step("scroll [down]" if i % 4 < 2 else "scroll [up]")
        assert (obs["last_action_error"], reward, terminated, truncated) == ("", 0.0, False, False)
        assert obs in env.observation_space
    _, reward, terminated, _, _ = env.step("stop [19.99]")
    assert terminated and reward == 1.0
    env.close()
