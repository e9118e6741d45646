"""Trivial policies score 0 on every achievable bundled task, through the real env.

- stop at once with an empty answer: every task;
- a fixed wrong answer (``stop [hello]``): every string_match and url_match task and one task per template
  (all string_match tasks are also checked offline against many trivial answers in test_taskset.py);
- clicking the first link until the step limit (10 steps here): every bundled task.

A trivial policy's episode depends on the start, not on the task (the bundled tasks have 5 distinct starts),
so each policy runs once per start and every task of that start is scored on its end state by the task's
own evaluator (the ``trivial_sweep`` fixture of tests/webarena_gym/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import pytest

from webarena_gym.env import WebArenaLiteEnv
from webarena_gym.reference import parse_axtree
from webarena_gym.tasks import TaskConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _tasks(env: gym.Env) -> list[TaskConfig]:
    return cast(WebArenaLiteEnv, env.unwrapped).tasks


def _first_of_each_template(tasks: list[TaskConfig]) -> list[TaskConfig]:
    seen: dict[int | None, TaskConfig] = {}
    for task in tasks:
        seen.setdefault(task.intent_template_id, task)
    return list(seen.values())


def _nonzero(scores: dict[tuple[int, str | None], float]) -> dict[tuple[int, str | None], float]:
    return {key: value for key, value in scores.items() if value != 0.0}


def test_stop_at_once_scores_zero(world_env: gym.Env, trivial_sweep: Callable[..., Any]) -> None:
    tasks = _tasks(world_env)
    assert len(tasks) >= 150
    sweep = trivial_sweep(world_env, [(t, "") for t in tasks], [])
    assert len(sweep.scores) == len(tasks)
    assert sweep.episodes < len(tasks) / 10, "one episode per start"
    assert not _nonzero(sweep.scores)


def test_fixed_wrong_answer_scores_zero(world_env: gym.Env, trivial_sweep: Callable[..., Any]) -> None:
    tasks = _tasks(world_env)
    chosen = {t.task_id: t for t in tasks if t.eval.eval_types in (("string_match",), ("url_match",))}
    chosen.update((t.task_id, t) for t in _first_of_each_template(tasks))
    sweep = trivial_sweep(world_env, [(t, "hello") for t in chosen.values()], [])
    assert len(sweep.scores) == len(chosen) >= 100
    assert not _nonzero(sweep.scores)


def _first_link(obs: dict[str, str]) -> str:
    return f"click [{next(x for x in parse_axtree(obs['axtree']) if x.role == 'link').element_id}]"


def test_clicking_the_first_link_scores_zero(
    make_world_env: Callable[..., gym.Env], trivial_sweep: Callable[..., Any]
) -> None:
    env = make_world_env(split="all", max_episode_steps=10)
    tasks = _tasks(env)
    sweep = trivial_sweep(env, [(t, None) for t in tasks], [_first_link] * 10)  # to the step limit
    assert len(sweep.scores) == len(tasks) >= 150
    assert not _nonzero(sweep.scores)


def test_the_sweep_scores_right_answers_one(world_env: gym.Env, trivial_sweep: Callable[..., Any]) -> None:
    """The sweep's evaluations on a shared end state are real ones: every string_match task scores 1.0 with
    its reference answer (stop at once) and 0.0 with an empty one, on the same episodes."""
    tasks = [t for t in _tasks(world_env) if t.eval.eval_types == ("string_match",)]
    items = [(t, t.extras["reference_solution"][-1]["answer"]) for t in tasks] + [(t, "") for t in tasks]
    sweep = trivial_sweep(world_env, items, [])
    assert sweep.episodes < len(tasks) / 10
    assert {key: value for key, value in sweep.scores.items() if value != (1.0 if key[1] else 0.0)} == {}
