"""The env's ``typing`` option: ``"keys"`` (key by key, WebArena) and ``"fill"`` (all at once, Playwright's
``fill``) leave the same page on the fixture site, differ only in the key events a page sees, and bad values
are refused with a message naming them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest

import webarena_gym
from webarena_gym.actions import TYPING_MODES, TypeAction, execute_action
from webarena_gym.env import TYPING_OPTIONS, WebArenaLiteEnv

FindId = Callable[[dict[str, str], str], int]


@pytest.mark.parametrize("bad", ["paste", "Keys", "", None, 1, ("fill",)])
def test_a_typing_value_that_is_not_allowed_is_a_clear_error(
    bad: Any, fixture_tasks: list[dict[str, Any]], site: Any
) -> None:
    with pytest.raises(ValueError, match=r"typing must be one of \['auto', 'keys', 'fill'\], got ") as caught:
        WebArenaLiteEnv(fixture_tasks, sites={"shopping": site.url}, typing=bad)
    assert repr(bad) in str(caught.value)
    with pytest.raises(ValueError, match="typing must be one of"):  # gym.make passes it on unchanged
        gym.make(webarena_gym.ENV_ID, task_file=fixture_tasks, sites={"shopping": site.url}, typing=bad)


def test_the_executor_refuses_an_unknown_typing_mode_before_acting() -> None:
    with pytest.raises(ValueError, match=r"typing must be one of \['keys', 'fill'\], got 'auto'"):
        execute_action(TypeAction(1, "x", False), None, {}, typing="auto")  # type: ignore[arg-type]


def test_auto_is_fill_on_the_embedded_sites_and_keys_elsewhere(
    fixture_tasks: list[dict[str, Any]], site: Any
) -> None:
    assert TYPING_OPTIONS == ("auto", *TYPING_MODES) == ("auto", "keys", "fill")
    real = WebArenaLiteEnv(fixture_tasks, sites={"shopping": site.url})
    forced = WebArenaLiteEnv(fixture_tasks, sites={"shopping": site.url}, typing="fill")
    world = gym.make(webarena_gym.ENV_ID)  # the embedded world starts at the first reset: nothing runs yet
    chosen = gym.make(webarena_gym.ENV_ID, typing="keys")
    try:
        assert (real.typing_mode, forced.typing_mode) == ("keys", "fill")
        assert (world.unwrapped.typing_mode, chosen.unwrapped.typing_mode) == ("fill", "keys")
    finally:
        for env in (real, forced, world, chosen):
            env.close()


@pytest.fixture(scope="module")
def envs(env_factory: Callable[..., Any]) -> Iterator[dict[str, Any]]:
    """One fixture-site env per typing mode."""
    yield {mode: env_factory(typing=mode) for mode in TYPING_MODES}


def _fill_the_form(env: Any, find_id: FindId) -> dict[str, str]:
    """Type into every kind of field of the fixture form; the last observation."""
    obs, _ = env.reset(options={"task_id": 1})
    for target, text in [("textbox 'Name'", "Ann-Marie O'Neil, café 東京 😀"),
                         ("textbox 'Message'", "two\nlines\ttabbed"), ("textbox 'Notes'", "some notes"),
                         ("combobox 'Colour'", "Green"), ("textbox 'Name'", ""), ("textbox 'Name'", "Bob")]:
        obs, *_ = env.step(f"type [{find_id(obs, target)}] [{text}] [0]")
        assert obs["last_action_error"] == "", (target, obs["last_action_error"])
    return obs


@pytest.mark.browser
def test_both_modes_leave_the_same_form(envs: dict[str, Any], find_id: FindId) -> None:
    shown = {mode: _fill_the_form(env, find_id) for mode, env in envs.items()}
    assert "StaticText 'echo: Bob / g / false'" in shown["fill"]["axtree"]  # input events reached the page
    read = ("() => ['name', 'message', 'notes', 'colour'].map((id) => document.getElementById(id))"
            ".map((el) => el.isContentEditable ? el.textContent : el.value)")
    values = {mode: env._session.page.evaluate(read) for mode, env in envs.items()}
    assert values["fill"] == values["keys"] == ["Bob", "two\nlines\ttabbed", "some notes", "g"]
    assert shown["fill"] == shown["keys"]


@pytest.mark.browser
@pytest.mark.parametrize("mode", TYPING_MODES)
def test_modes_differ_only_in_key_events_and_enter_submits_in_both(
    envs: dict[str, Any], mode: str, site: Any, find_id: FindId
) -> None:
    env = envs[mode]
    env.reset(options={"task_id": 0})
    obs, *_ = env.step(f"goto [{site.url}/keys.html]")
    query = find_id(obs, "textbox 'Query'")
    obs, *_ = env.step(f"type [{query}] [hello] [0]")
    keys = 5 if mode == "keys" else 0  # one keydown per character key by key, none for fill's one insertion
    assert f"StaticText 'keys: {keys} inputs: " in obs["axtree"] and " value: hello'" in obs["axtree"]
    obs, *_ = env.step(f"type [{query}] [mouse mat] [1]")
    assert obs["url"].endswith("/search.html?q=mouse+mat"), obs["url"]  # a real Enter: implicit submission
