"""Trivial policies score 0 on every achievable bundled task, through the real env.

- stop at once with an empty answer: every url_match and program_html task (their score does not depend on
  the answer, so this is also "the evaluator fails before the solution runs"), plus one task per string_match
  template (all string_match tasks are checked offline against many trivial answers in test_taskset.py, where
  the score depends only on the answer);
- a fixed wrong answer (``stop [hello]``): one task per template;
- clicking the first link until the step limit (10 steps here): every bundled task.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import pytest

from webarena_gym.reference import parse_axtree
from webarena_gym.tasks import TaskConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _first_of_each_template(tasks: list[TaskConfig]) -> list[TaskConfig]:
    seen: dict[int | None, TaskConfig] = {}
    for task in tasks:
        seen.setdefault(task.intent_template_id, task)
    return list(seen.values())


def _stop_reward(env: gym.Env, task: TaskConfig, answer: str) -> float:
    env.reset(options={"task_id": task.task_id})
    _, reward, terminated, _, info = env.step(f"stop [{answer}]")
    assert terminated and info["episode_end"] == "stop"
    return float(reward)


def test_stop_at_once_scores_zero(world_env: gym.Env) -> None:
    tasks = world_env.unwrapped.tasks
    chosen = [t for t in tasks if t.eval.eval_types != ("string_match",)]
    chosen += [t for t in _first_of_each_template(tasks) if t.eval.eval_types == ("string_match",)]
    assert len(chosen) >= 100
    scored = {t.task_id: _stop_reward(world_env, t, "") for t in chosen}
    assert not {k: v for k, v in scored.items() if v != 0.0}


def test_fixed_wrong_answer_scores_zero(world_env: gym.Env) -> None:
    chosen = _first_of_each_template(world_env.unwrapped.tasks)
    scored = {t.task_id: _stop_reward(world_env, t, "hello") for t in chosen}
    assert not {k: v for k, v in scored.items() if v != 0.0}


@pytest.mark.timeout(1800)  # every achievable task to the step limit: 900 s is tight on 2 busy xdist workers
def test_clicking_the_first_link_scores_zero(make_world_env: Callable[..., gym.Env]) -> None:
    env = make_world_env(split="all", max_episode_steps=10)
    scored: dict[int, float] = {}
    for task in env.unwrapped.tasks:
        obs, _ = env.reset(options={"task_id": task.task_id})
        steps, done, reward = 0, False, 0.0
        while not done:
            link = next(line for line in parse_axtree(obs["axtree"]) if line.role == "link")
            obs, reward, terminated, truncated, _ = env.step(f"click [{link.element_id}]")
            steps, done = steps + 1, terminated or truncated
        assert steps == 10, "the episode runs to the step limit"
        scored[task.task_id] = float(reward)
    assert len(scored) == len(env.unwrapped.tasks) >= 150
    assert not {k: v for k, v in scored.items() if v != 0.0}
