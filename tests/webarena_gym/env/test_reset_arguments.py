"""Bad ``reset`` arguments are typed errors that name the argument, and leave the env exactly as it was;
``step`` before any reset and after ``close`` says what to do. Through ``gym.make`` (passive env checker,
``OrderEnforcing``, ``TimeLimit`` and ``EvaluateOnTruncation``) and directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

import webarena_gym
from webarena_gym.errors import ResetArgumentError, SiteConfigError, TaskConfigError

pytestmark = pytest.mark.browser

BAD_RESETS = [
    pytest.param({"options": {"task_id": 99999}}, TaskConfigError, r"options\['task_id'\]=99999",
                 id="unknown-id"),
    pytest.param({"seed": "x"}, ResetArgumentError, "seed", id="seed-str"),
    pytest.param({"seed": -1}, ResetArgumentError, "seed", id="seed-negative"),
    pytest.param({"seed": 1.5}, ResetArgumentError, "seed", id="seed-float"),
    pytest.param({"seed": True}, ResetArgumentError, "seed", id="seed-bool"),
    pytest.param({"options": "str"}, ResetArgumentError, "options", id="options-str"),
    pytest.param({"options": ["task_id"]}, ResetArgumentError, "options", id="options-list"),
    pytest.param({"options": {"task_id": [0]}}, ResetArgumentError, r"options\['task_id'\]", id="id-list"),
    pytest.param({"options": {"task_id": True}}, ResetArgumentError, r"options\['task_id'\]", id="id-bool"),
    pytest.param({"options": {"task_id": 0.0}}, ResetArgumentError, r"options\['task_id'\]", id="id-float"),
    pytest.param({"options": {"task_id": "0"}}, ResetArgumentError, r"options\['task_id'\]", id="id-str"),
    pytest.param({"options": {"taskid": 0}}, ResetArgumentError, "taskid", id="unknown-key"),
    pytest.param({"options": {0: 0}}, ResetArgumentError, "0", id="non-str-key"),
]


def made_env(chromium_path: str, site: Any, tasks: list[dict[str, Any]]) -> Any:
    return gym.make(webarena_gym.ENV_ID, task_file=tasks, sites={"shopping": site.url},
                    browser={"executable_path": chromium_path})


@pytest.mark.parametrize("kwargs, error, fragment", BAD_RESETS)
def test_a_failed_first_reset_leaves_the_made_env_usable(chromium_path: str, site: Any,
                                                        fixture_tasks: list[dict[str, Any]],
                                                        kwargs: dict[str, Any], error: type[Exception],
                                                        fragment: str) -> None:
    env = made_env(chromium_path, site, fixture_tasks)
    try:
        with pytest.raises(error, match=fragment):
            env.reset(**kwargs)
        obs, info = env.reset(options={"task_id": 0})
        assert info["task_id"] == 0 and obs in env.observation_space
        obs, reward, terminated, truncated, info = env.step("stop [19.99]")
        assert (reward, terminated, truncated) == (1.0, True, False)
    finally:
        env.close()


def test_a_first_reset_that_fails_in_the_browser_leaves_the_made_env_usable(
        chromium_path: str, site: Any, fixture_tasks: list[dict[str, Any]]) -> None:
    refused = dict(fixture_tasks[0], task_id=8, start_url="http://127.0.0.1:9/elsewhere")
    env = made_env(chromium_path, site, [*fixture_tasks, refused])
    try:
        with pytest.raises(SiteConfigError, match="start URL refused"):
            env.reset(options={"task_id": 8})  # past the argument checks: the checker saw this reset start
        env.reset(options={"task_id": 0})
        _, reward, terminated, _, _ = env.step("stop [19.99]")
        assert (reward, terminated) == (1.0, True)
    finally:
        env.close()


@pytest.fixture(scope="module")
def draws_after_seed_5(env: Any) -> list[int]:
    """The task ids of the two plain resets that follow ``reset(seed=5)`` (drawn once for the module: the
    draws are a function of the seed)."""
    env.reset(seed=5)
    return [env.reset()[1]["task_id"] for _ in range(2)]


@pytest.mark.parametrize("kwargs, error, fragment", BAD_RESETS)
def test_a_failed_reset_changes_nothing(env: Any, draws_after_seed_5: list[int], kwargs: dict[str, Any],
                                        error: type[Exception], fragment: str) -> None:
    plain = draws_after_seed_5
    env.reset(seed=5)
    env.step("scroll [down]")
    with pytest.raises(error, match=fragment):
        env.reset(**kwargs)
    # the episode that was running goes on, and the task draws continue as if nothing had happened
    obs, reward, terminated, _, _ = env.step("scroll [up]")
    assert obs["last_action_error"] == "" and not terminated
    assert [env.reset()[1]["task_id"] for _ in range(2)] == plain


def test_options_with_numpy_integer_ids_still_work(env_factory: Callable[..., Any]) -> None:
    import numpy as np

    env = env_factory()
    _, info = env.reset(options={"task_id": np.int64(3)})
    assert info["task_id"] == 3 and type(info["task_id"]) is int
    _, info = env.reset(seed=np.int64(5), options={})  # empty options: a drawn task
    assert info["task_id"] in {0, 1, 2, 3, 4}
    env.close()


def test_step_before_any_reset_and_after_close(chromium_path: str, site: Any,
                                               fixture_tasks: list[dict[str, Any]],
                                               env_factory: Callable[..., Any]) -> None:
    made = made_env(chromium_path, site, fixture_tasks)
    with pytest.raises(gym.error.ResetNeeded):
        made.step("scroll [down]")
    made.close()
    direct = env_factory()
    with pytest.raises(gym.error.ResetNeeded, match="call reset"):
        direct.step("scroll [down]")
    direct.reset(options={"task_id": 0})
    direct.close()
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        direct.step("scroll [down]")
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        direct.reset(options={"task_id": 0})
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        direct.end_episode()
    direct.close()  # still idempotent


def test_hostile_reset_values_get_short_messages(site: Any, fixture_tasks: list[dict[str, Any]]) -> None:
    from webarena_gym.env import WebArenaLiteEnv

    class NoRepr:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    env = WebArenaLiteEnv(fixture_tasks, sites={"shopping": site.url})  # never reset: no browser
    cases = [({"options": {"task_id": 10 ** 5000}}, TaskConfigError, "an integer of 16610 bits"),
             ({"seed": -(10 ** 5000)}, ResetArgumentError, "an integer of 16610 bits"),
             ({"options": {"task_id": "x" * 100_000}}, ResetArgumentError, r"'xxxx.*\.\.\..*' \(str\)"),
             ({"options": {NoRepr(): 1}}, ResetArgumentError, "unknown reset option"),
             ({"options": {"task_id": NoRepr()}}, ResetArgumentError, "NoRepr")]
    for kwargs, error, fragment in cases:
        with pytest.raises(error, match=fragment) as caught:
            env.check_reset_arguments(**kwargs)
        assert len(str(caught.value)) < 400
    assert env.check_reset_arguments(seed=2 ** 80, options={"task_id": 4}) == (2 ** 80, env.tasks[4])
    env.close()
