"""Shared by the webarena_gym tests: :func:`trivial_sweep`, which scores trivial policies on many tasks from
one episode per distinct start (the trivial-policy tests of the bundled set and of the tiers)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import pytest

from webarena_gym.env import WebArenaLiteEnv
from webarena_gym.evaluators import build_evaluator
from webarena_gym.tasks import TaskConfig

Move = Callable[[dict[str, str]], str]
"""One step of a trivial policy: the action it takes on an observation."""


@dataclass(frozen=True)
class Sweep:
    """What :func:`sweep_trivial_policy` did: the scores and how many episodes it took."""

    scores: dict[tuple[int, str | None], float]
    """Score of every (task id, answer) pair."""
    episodes: int
    """Episodes run (one per distinct start, plus one per evaluation that needed the end page unmoved)."""


def start_key(task: TaskConfig) -> tuple[Any, ...]:
    """Everything :meth:`WebArenaLiteEnv.reset` takes from a task to build the start: tasks with equal keys
    start on the same pages with the same login, geolocation and (restored) site state."""
    return (task.start_urls, task.sites, task.require_login, task.storage_state, task.geolocation)


def _page_use(task: TaskConfig) -> int:
    """0: the evaluation neither reads nor moves the end page (string_match, url_match, program_html that
    reads the last page without helpers or prep actions); 1: it reads the end page, then moves it; 2: it
    moves the page first (every check opens its own URL), so the end page does not matter."""
    checks = task.eval.program_html
    moves = any(c.url != "last" or c.url_call is not None or c.locator_call is not None or c.prep_actions
                for c in checks)
    if not moves:
        return 0
    reads = "url_match" in task.eval.eval_types or (checks[0].url == "last" and checks[0].url_call is None)
    return 1 if reads else 2


def score_end_state_as(env: gym.Env, task: TaskConfig, answer: str | None, end: str) -> float:
    """The score ``task``'s evaluator gives the state the env's last episode ended in (an episode on another
    task with the same :func:`start_key`): the env's own evaluation (:meth:`WebArenaLiteEnv._evaluate`,
    same page, context, sites, judge and rules) with the episode's task swapped for ``task``."""
    unwrapped = cast(WebArenaLiteEnv, env.unwrapped)
    saved = unwrapped._task, unwrapped._evaluator
    unwrapped._task = task
    timeout_ms = unwrapped.browser_config.navigation_timeout_ms
    unwrapped._evaluator = build_evaluator(task, nav_timeout_ms=timeout_ms)
    try:
        return float(unwrapped._evaluate(answer, end, None).score)
    finally:
        unwrapped._task, unwrapped._evaluator = saved


def sweep_trivial_policy(env: gym.Env, items: Iterable[tuple[TaskConfig, str | None]],
                         moves: Sequence[Move]) -> Sweep:
    """Score the trivial policy "the ``moves``, then ``stop [answer]``" (``answer`` None: no stop, the moves
    run the episode to the env's step limit) on every (task, answer) of ``items``.

    Its episodes do not depend on the task, only on the start, so the policy runs once per
    :func:`start_key`: reset on one task of the group, the moves, then the real end of the episode (``stop
    [answer]`` or the step limit, scored by the env itself); every other (task, answer) of the group is
    scored on that end state by :func:`score_end_state_as`, the evaluations that leave the end page alone
    first. An evaluation that needs the end page after another moved it gets an episode of its own. The
    evaluations read the sites; the only writes are the REST logins of the ``func:`` helpers (a token and
    the admin's login record, as at the end of any episode), which no evaluator reads."""
    groups: dict[tuple[Any, ...], list[tuple[TaskConfig, str | None]]] = defaultdict(list)
    for task, answer in items:
        groups[start_key(task)].append((task, answer))
    scores: dict[tuple[int, str | None], float] = {}
    episodes = 0
    for group in groups.values():
        pending = sorted(group, key=lambda item: _page_use(item[0]))
        while pending:
            task, answer = pending.pop(0)
            obs, _ = env.reset(options={"task_id": task.task_id})
            episodes += 1
            reward: SupportsFloat = 0.0
            terminated, truncated, info = False, False, cast(dict[str, Any], {})
            for move in moves:
                assert not (terminated or truncated), f"task {task.task_id}: the episode ended early"
                obs, reward, terminated, truncated, info = env.step(move(obs))
            if answer is not None:
                assert not (terminated or truncated), f"task {task.task_id}: the episode ended before stop"
                _, reward, terminated, _, info = env.step(f"stop [{answer}]")
                assert terminated and info["episode_end"] == "stop", (task.task_id, info.get("episode_end"))
            else:
                assert truncated and info["episode_end"] == "max_steps", (task.task_id, info)
            end = str(info["episode_end"])
            scores[(task.task_id, answer)] = float(reward)
            moved = _page_use(task) > 0
            rest = []
            for other, other_answer in pending:
                if _page_use(other) == 1 and moved:
                    rest.append((other, other_answer))  # needs the end page unmoved: its own episode
                    continue
                scores[(other.task_id, other_answer)] = score_end_state_as(env, other, other_answer, end)
                moved = moved or _page_use(other) > 0
            pending = rest
    return Sweep(scores, episodes)


@pytest.fixture(scope="session")
def trivial_sweep() -> Callable[..., Sweep]:
    """:func:`sweep_trivial_policy` (``trivial_sweep(env, [(task, answer), ...], moves)``)."""
    return sweep_trivial_policy
