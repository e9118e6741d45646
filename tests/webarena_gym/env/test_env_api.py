"""The Gymnasium contract: check_env, gym.make with TimeLimit scoring, early stop, reset options, render,
errors."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import webarena_gym
from webarena_gym.errors import SiteConfigError, TaskConfigError

FindId = Callable[[dict[str, str], str], int]


@pytest.fixture(scope="module")
def made(chromium_path: str, site: Any, fixture_tasks: list[dict[str, Any]]) -> Any:
    env = gym.make(webarena_gym.ENV_ID, task_file=fixture_tasks, sites={"shopping": site.url},
                   browser={"executable_path": chromium_path})
    yield env
    env.close()


@pytest.mark.browser
@pytest.mark.slow
def test_check_env_passes(made: Any) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(made.unwrapped)
    assert not [str(w.message) for w in caught if "gymnasium" in str(w.filename)]


@pytest.mark.browser
def test_registered_env_truncates_with_the_evaluator_score(chromium_path: str, site: Any,
                                                          fixture_tasks: list[dict[str, Any]],
                                                          find_id: FindId) -> None:
    env = gym.make(webarena_gym.ENV_ID, task_file=fixture_tasks, sites={"shopping": site.url},
                   browser={"executable_path": chromium_path}, max_episode_steps=3)
    try:
        # the env itself knows no limit: TimeLimit cuts, EvaluateOnTruncation (outside it) scores
        assert env.spec.max_episode_steps == 3 and env.unwrapped.max_steps is None
        obs, _ = env.reset(seed=1, options={"task_id": 3})  # url_match on products.html
        link = find_id(obs, "link 'Products'")
        obs, reward, terminated, truncated, info = env.step(f"click [{link}]")
        assert (reward, terminated, truncated) == (0.0, False, False)
        env.step("scroll [down]")
        obs, reward, terminated, truncated, info = env.step("scroll [up]")
        assert (reward, terminated, truncated) == (1.0, False, True)
        assert info["episode_end"] == "max_steps" and info["eval"]["score"] == 1.0
        assert obs in env.observation_space
        # a failed task truncates with its (zero) score, computed all the same
        env.reset(options={"task_id": 3})
        for action in ("scroll [down]", "scroll [up]", "scroll [down]"):
            obs, reward, terminated, truncated, info = env.step(action)
        assert (reward, terminated, truncated) == (0.0, False, True) and info["eval"]["score"] == 0.0
    finally:
        env.close()


@pytest.mark.browser
def test_default_registration_scores_the_thirtieth_step(made: Any, find_id: FindId) -> None:
    assert made.spec.max_episode_steps == webarena_gym.DEFAULT_MAX_EPISODE_STEPS == 30
    obs, _ = made.reset(options={"task_id": 3})
    made.step("click [{}]".format(find_id(obs, "link 'Products'")))
    for i in range(2, 31):
        obs, reward, terminated, truncated, info = made.step("scroll [down]" if i % 2 else "scroll [up]")
        assert truncated == (i == 30) and not terminated
    assert reward == 1.0 and info["episode_end"] == "max_steps"


@pytest.mark.browser
def test_early_stop_on_parse_failures_and_repeats(made: Any, find_id: FindId) -> None:
    made.reset(options={"task_id": 3})
    for i in range(3):
        obs, reward, terminated, truncated, info = made.step("I think I should click the link")
        assert "invalid action" in obs["last_action_error"]
        assert terminated == (i == 2)
    assert info["early_stop"] == "Failed to parse actions for 3 times" and info["parsed"] is False
    assert "eval" in info  # the evaluator still runs

    obs, _ = made.reset(options={"task_id": 3})
    link = find_id(obs, "link 'Products'")
    made.step(f"click [{link}]")
    made.step("scroll [down]")
    made.step("scroll [down]")
    _, reward, terminated, _, info = made.step("scroll [down]")
    assert terminated and info["early_stop"] == "Same action for 3 times"
    assert reward == 1.0  # scored on the page it stopped on

    obs, _ = made.reset(options={"task_id": 0})
    box = find_id(obs, "textbox 'Search'")
    made.step(f"type [{box}] [a] [0]")
    made.step("scroll [down]")
    made.step(f"type [{box}] [b] [0]")
    made.step("scroll [up]")
    _, _, terminated, _, info = made.step(f"type [{box}] [c] [0]")
    assert terminated and info["early_stop"] == "Same typing action for 3 times"


@pytest.mark.browser
def test_bad_actions_are_observations_and_the_episode_goes_on(made: Any) -> None:
    obs, _ = made.reset(options={"task_id": 0})
    before = obs["axtree"]
    for action, fragment in [
        ("fly [3]", "unknown action 'fly'"),
        ("click [99999]", "no element [99999] in the current observation"),
        ("hover [abc]", "hover needs an element id"),
        ("", "empty action"),
    ]:
        obs, reward, terminated, truncated, info = made.step(action)
        assert fragment in obs["last_action_error"]
        assert not terminated and not truncated and reward == 0.0
        assert obs["axtree"] == before
        made.step("scroll [up]")  # keep the parse-failure counter below the early-stop threshold
    button = next(line for line in before.splitlines() if "button 'Plain button'" in line)
    made.unwrapped._session.page.evaluate("document.getElementById('plain-button').remove()")
    obs, *_ = made.step("click [{}]".format(button.strip()[1:].split("]")[0]))
    assert "click [" in obs["last_action_error"] and "is no longer on the page" in obs["last_action_error"]


@pytest.mark.browser
def test_reset_picks_tasks_reproducibly(made: Any) -> None:
    ids = [made.reset(seed=7)[1]["task_id"]] + [made.reset()[1]["task_id"] for _ in range(2)]
    again = [made.reset(seed=7)[1]["task_id"]] + [made.reset()[1]["task_id"] for _ in range(2)]
    assert ids == again
    first, _ = made.reset(seed=3, options={"task_id": 1})
    second, _ = made.reset(seed=4, options={"task_id": 1})
    assert first == second  # same task, same observation (element ids do not depend on Chromium's counters)
    with pytest.raises(TaskConfigError, match="options\\['task_id'\\]=42"):
        made.reset(options={"task_id": 42})


@pytest.mark.browser
def test_step_after_the_end_needs_reset(env_factory: Callable[..., Any]) -> None:
    env = env_factory()
    with pytest.raises(gym.error.ResetNeeded):
        env.step("scroll [down]")
    env.reset(options={"task_id": 0})
    env.step("stop [x]")
    with pytest.raises(gym.error.ResetNeeded):
        env.step("scroll [down]")
    env.close()
    env.close()  # idempotent


@pytest.mark.browser
def test_render_modes(env_factory: Callable[..., Any]) -> None:
    text_env = env_factory(render_mode="ansi")
    obs, _ = text_env.reset(options={"task_id": 0})
    assert text_env.render() == obs["axtree"]
    text_env.close()
    image_env = env_factory(render_mode="rgb_array", browser={"executable_path": text_env.browser_config
                                                              .executable_path, "viewport_width": 640,
                                                              "viewport_height": 360})
    image_env.reset(options={"task_id": 0})
    frame = image_env.render()
    assert isinstance(frame, np.ndarray) and frame.shape == (360, 640, 3) and frame.dtype == np.uint8
    assert frame.std() > 0
    image_env.close()


@pytest.mark.browser
def test_viewport_only_observation(env_factory: Callable[..., Any]) -> None:
    env = env_factory(viewport_only=True)
    obs, _ = env.reset(options={"task_id": 0})
    assert "Bottom of the page" not in obs["axtree"] and "link 'Products'" in obs["axtree"]
    for _ in range(2):
        obs, *_ = env.step("scroll [down]")
        env.step("scroll [down]")
        obs, *_ = env.step("press [End]")
    assert "Bottom of the page" in obs["axtree"] and "link 'Products'" not in obs["axtree"]
    env.close()


@pytest.mark.browser
def test_axtree_is_bounded(env_factory: Callable[..., Any]) -> None:
    env = env_factory(max_axtree_chars=300)
    obs, _ = env.reset(options={"task_id": 0})
    assert len(obs["axtree"]) <= 300 and "truncated" in obs["axtree"].splitlines()[-1]
    assert obs in env.observation_space
    env.close()


def test_constructor_validation(site: Any, fixture_tasks: list[dict[str, Any]]) -> None:
    from webarena_gym.env import WebArenaLiteEnv

    with pytest.raises(ValueError, match="task_file"):
        WebArenaLiteEnv(sites={"shopping": site.url})  # sites without tasks: which tasks would run there?
    with pytest.raises(ValueError, match="render_mode 'human'"):
        WebArenaLiteEnv(fixture_tasks, render_mode="human")
    with pytest.raises(ValueError, match="eval_rules"):
        WebArenaLiteEnv(fixture_tasks, eval_rules="strict")
    with pytest.raises(ValueError, match="unknown BrowserConfig fields \\['head'\\]"):
        WebArenaLiteEnv(fixture_tasks, browser={"head": True})
    with pytest.raises(TaskConfigError, match="no task has split 'train'"):
        WebArenaLiteEnv(fixture_tasks, split="train")
    with pytest.raises(TaskConfigError, match="tasks \\[77\\]"):
        WebArenaLiteEnv(fixture_tasks, tasks=[77])
    env = WebArenaLiteEnv(fixture_tasks, tasks=[1, 0], sites={"shopping": site.url})
    assert [t.task_id for t in env.tasks] == [1, 0]
    env.close()  # never reset: nothing was launched, closing is still fine


def test_tasks_split_and_task_config_objects(site: Any, fixture_tasks: list[dict[str, Any]]) -> None:
    from webarena_gym.env import WebArenaLiteEnv
    from webarena_gym.tasks import load_tasks

    tagged = [dict(t, split="train" if t["task_id"] % 2 else "test") for t in fixture_tasks]
    env = WebArenaLiteEnv(load_tasks(tagged), split="train", sites={"shopping": site.url})
    assert [t.task_id for t in env.tasks] == [1, 3]


@pytest.mark.browser
def test_unconfigured_site_and_unreachable_start_url(env_factory: Callable[..., Any],
                                                     fixture_tasks: list[dict[str, Any]]) -> None:
    gitlab_task = dict(fixture_tasks[0], task_id=9, start_url="__GITLAB__/explore")
    env = env_factory(task_file=[gitlab_task])
    with pytest.raises(SiteConfigError, match="__GITLAB__"):
        env.reset()
    env.close()
    down = env_factory(sites={"shopping": "http://127.0.0.1:9"})
    with pytest.raises(SiteConfigError, match="could not open start URL"):
        down.reset(options={"task_id": 0})
    down.close()


@pytest.mark.browser
def test_direct_construction_truncates_and_scores_at_max_steps(chromium_path: str, site: Any,
                                                               fixture_tasks: list[dict[str, Any]],
                                                               find_id: FindId) -> None:
    from webarena_gym.env import WebArenaLiteEnv

    env = WebArenaLiteEnv(task_file=fixture_tasks, sites={"shopping": site.url},
                          browser={"executable_path": chromium_path}, max_steps=2)
    try:
        obs, _ = env.reset(options={"task_id": 3})
        env.step("click [{}]".format(find_id(obs, "link 'Products'")))
        _, reward, terminated, truncated, info = env.step("scroll [down]")
        assert (reward, terminated, truncated) == (1.0, False, True) and info["episode_end"] == "max_steps"
        with pytest.raises(gym.error.ResetNeeded):
            env.end_episode()
    finally:
        env.close()
