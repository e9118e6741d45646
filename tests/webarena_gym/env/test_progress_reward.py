"""The env's ``progress_reward`` (webarena_gym.progress): following the reference solution earns reward step
by step on the real env, leaving it ends the count, success reads the same; bad values and tasks without a
reference are refused; the tracker's matching rules offline."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, cast

import gymnasium as gym
import pytest

import webarena_gym
from webarena_gym.actions import parse_action
from webarena_gym.embedded import DATA_DIR
from webarena_gym.env import WebArenaLiteEnv
from webarena_gym.errors import TaskConfigError
from webarena_gym.progress import ReferenceProgress, action_key
from webarena_gym.reference import run_reference, step_to_action

SORT_TASK = 20006
"""Tier 2 shopping: "Show me the products of the Headphones category sorted by price, most expensive first":
type Sort By, type Direction, click Apply, stop (three steps before the stop)."""
BONUS = 0.6
AXTREE = "\n".join([
    "[3] link 'Orders'",
    "[4] combobox 'Sort By'",
    "[5] button 'Apply'",
])


@pytest.fixture(scope="module")
def progress_env(chromium_path: str) -> Iterator[gym.Env]:
    env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, split="tier2_train",
                   progress_reward=BONUS)
    yield env
    env.close()


def _entry() -> dict[str, Any]:
    """The first tier-1 training task as its JSON entry."""
    entries = json.loads((DATA_DIR / "embedded_tier1_train.json").read_text())
    return dict(entries[0])


def _task(env: gym.Env, task_id: int) -> Any:
    return next(t for t in cast(WebArenaLiteEnv, env.unwrapped).tasks if t.task_id == task_id)


@pytest.mark.browser
def test_reference_replay_earns_the_bonus_step_by_step(progress_env: gym.Env) -> None:
    result = run_reference(progress_env, _task(progress_env, SORT_TASK))
    assert result.actions[-1].startswith("stop") and len(result.actions) == 4
    assert result.info["reference_progress"] == 1.0
    assert math.isclose(result.reward, 1.0, abs_tol=1e-12), "the last step: the evaluator's 1, no bonus"


@pytest.mark.browser
def test_rewards_and_progress_along_an_episode(progress_env: gym.Env) -> None:
    task = _task(progress_env, SORT_TASK)
    steps = task.extras["reference_solution"]
    resolve = progress_env.unwrapped.sites.resolve  # type: ignore[attr-defined]
    # follow the reference to the end: BONUS / 3 per step before the stop, then 1 for the solved task
    obs, info = progress_env.reset(options={"task_id": SORT_TASK})
    assert info["reference_progress"] == 0.0
    rewards: list[float] = []
    progress: list[float] = []
    for step in steps:
        obs, reward, terminated, _, info = progress_env.step(step_to_action(step, obs["axtree"], resolve))
        rewards.append(float(reward))
        progress.append(info["reference_progress"])
    assert terminated
    assert rewards[:3] == pytest.approx([BONUS / 3] * 3) and rewards[3] == pytest.approx(1.0)
    assert progress == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0])
    assert sum(rewards) >= 1.0
    # one step on the path, then a wrong one: the count stops at 1 of 3 and the episode fails (< 1)
    obs, _ = progress_env.reset(options={"task_id": SORT_TASK})
    obs, first, *_ = progress_env.step(step_to_action(steps[0], obs["axtree"], resolve))
    obs, wrong, *_, info = progress_env.step("scroll [down]")
    assert first == pytest.approx(BONUS / 3) and wrong == 0.0
    assert info["reference_progress"] == pytest.approx(1 / 3)
    obs, later, *_, info = progress_env.step(step_to_action(steps[1], obs["axtree"], resolve))
    assert later == 0.0 and info["reference_progress"] == pytest.approx(1 / 3), "off the path for good"
    _, end, terminated, _, info = progress_env.step("stop [N/A]")
    assert terminated and end == 0.0 and 0 < BONUS / 3 < 1.0
    # off the path from the first action: no bonus for the reference's steps afterwards
    obs, _ = progress_env.reset(options={"task_id": SORT_TASK})
    obs, r0, *_ = progress_env.step("scroll [down]")
    obs, r1, *_, info = progress_env.step(step_to_action(steps[0], obs["axtree"], resolve))
    assert r0 == r1 == 0.0 and info["reference_progress"] == 0.0


@pytest.mark.browser
def test_a_truncated_episode_keeps_its_last_bonus(chromium_path: str) -> None:
    env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, split="tier2_train",
                   progress_reward=BONUS, max_episode_steps=1)
    try:
        obs, _ = env.reset(options={"task_id": SORT_TASK})
        step = _task(env, SORT_TASK).extras["reference_solution"][0]
        _, reward, _, truncated, info = env.step(step_to_action(step, obs["axtree"],
                                                                env.unwrapped.sites.resolve))  # type: ignore[attr-defined]
        assert truncated and info["episode_end"] == "max_steps"
        assert reward == pytest.approx(BONUS / 3), "the evaluator's 0 plus the step's bonus"
    finally:
        env.close()


@pytest.mark.parametrize("value", [-0.1, 1.0, 2, math.nan, True, "0.5"])
def test_bad_progress_reward_is_refused(value: Any) -> None:
    with pytest.raises(ValueError, match="progress_reward must be a number in \\[0, 1\\)"):
        WebArenaLiteEnv(task_file=[_entry()], sites={"shopping": "http://127.0.0.1:9"},
                        progress_reward=value)


def test_a_task_without_reference_is_refused_at_reset() -> None:
    entry = _entry()
    entry.pop("reference_solution")
    env = WebArenaLiteEnv(task_file=[entry], sites={"shopping": "http://127.0.0.1:9"}, progress_reward=0.5)
    try:
        with pytest.raises(TaskConfigError, match="has no reference_solution.*progress_reward=0.5"):
            env.reset(options={"task_id": entry["task_id"]})
    finally:
        env.close()


def test_tracker_matching_rules() -> None:
    solution: list[dict[str, Any]] = [
                {"action": "type", "target": {"role": "combobox", "name": "Sort By"}, "text": "Price"},
                {"action": "goto", "url": "__SHOPPING__/orders"},
                {"action": "click", "target": {"role": "button", "name": "Apply"}},
                {"action": "stop", "answer": ""}]

    def resolve(url: str) -> str:
        return url.replace("__SHOPPING__", "http://127.0.0.1:8000")

    def unshow(url: str) -> str:
        return url.replace("http://localhost:7770", "http://127.0.0.1:8000")

    tracker = ReferenceProgress(solution, resolve=resolve, unshow=unshow)
    assert tracker.total == 3 and tracker.fraction == 0.0
    assert tracker.advance(parse_action("type [4] [  price ] [0]"), AXTREE), "text stripped, case folded"
    assert tracker.advance(parse_action("goto [http://localhost:7770/orders]"), AXTREE), "shown address"
    assert not tracker.advance(parse_action("click [3]"), AXTREE), "another element"
    assert not tracker.advance(parse_action("click [5]"), AXTREE), "off the path: no later step counts"
    assert tracker.followed == 2 and tracker.fraction == pytest.approx(2 / 3) and not tracker.on_track
    wrong_text = ReferenceProgress(solution, resolve=resolve)
    assert not wrong_text.advance(parse_action("type [4] [Name]"), AXTREE)
    missing = ReferenceProgress(solution[2:], resolve=resolve)
    assert not missing.advance(parse_action("click [5]"), "[9] link 'Home'"), "the target is not on the page"
    assert not ReferenceProgress(solution, resolve=resolve).advance(parse_action("stop [x]"), AXTREE)
    answer_only = ReferenceProgress([{"action": "stop", "answer": "42"}])
    assert answer_only.total == 0 and answer_only.fraction == 1.0
    assert not answer_only.advance(parse_action("click [3]"), AXTREE)
    assert action_key(parse_action("click [3]")) == action_key(parse_action("click [3]"))
    assert action_key(parse_action("hover [3]")) != action_key(parse_action("click [3]"))


class _ReferencePrefix:
    """A scripted policy: the first ``k`` reference steps of the task, then ``stop [N/A]``."""

    def __init__(self, steps: list[dict[str, Any]], k: int, resolve: Any) -> None:
        self.steps, self.k, self.resolve, self.t = steps, k, resolve, 0

    def reset(self) -> None:
        self.t = 0

    def act(self, obs: Any) -> str:
        self.t += 1
        if self.t <= self.k:
            return step_to_action(self.steps[self.t - 1], obs["axtree"], self.resolve)
        return "stop [N/A]"


@pytest.mark.browser
def test_the_rollout_loop_sums_the_bonus_and_success_reads_the_same(progress_env: gym.Env) -> None:
    from es_agent.rollout import run_episode

    steps = _task(progress_env, SORT_TASK).extras["reference_solution"]
    resolve = progress_env.unwrapped.sites.resolve  # type: ignore[attr-defined]
    whole = run_episode(progress_env, _ReferencePrefix(steps, len(steps), resolve),
                        options={"task_id": SORT_TASK}, max_steps=5)
    assert whole.success and whole.reward == pytest.approx(1.0 + BONUS)
    for k in (0, 1, 2):  # all 3 steps then any stop solves this url_match task
        part = run_episode(progress_env, _ReferencePrefix(steps, k, resolve), options={"task_id": SORT_TASK},
                           max_steps=5)
        assert not part.success and part.reward == pytest.approx(BONUS * k / 3), k
        assert part.info["reference_progress"] == pytest.approx(k / 3)
