"""Replay of the scripted reference solutions of the bundled tasks through a real env.

A solution (the ``reference_solution`` field of a task entry) is a list of steps whose targets are named by
accessibility role and name, e.g. ``{"action": "click", "target": {"role": "link", "name": "Orders"}}``. At
replay time each target is looked up in the text of the current observation's accessibility tree (the first
line ``[id] role 'name'`` with that role and name, or the ``nth``), exactly what an agent sees, and the step
becomes an action string of the env's grammar (``click [42]``). No DOM access, no privileged shortcut.

>>> reward = replay_reference(env, task)          # resets the env on the task and replays its solution

``python -m webarena_gym.reference --split train`` replays a split of the bundled set on the default world and
prints a table of task, steps, reward and seconds.
"""

from __future__ import annotations

import argparse
import ast
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from webarena_gym.errors import ReferenceSolutionError
from webarena_gym.tasks import TaskConfig

__all__ = [
    "AXLine",
    "ReferenceSolutionError",
    "ReplayResult",
    "find_element",
    "parse_axtree",
    "play_solution",
    "record_solution",
    "replay_reference",
    "run_reference",
    "step_to_action",
]

_LINE = re.compile(r"^(\t*)\[(\d+)\] (\S+) ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")


@dataclass(frozen=True)
class AXLine:
    """One node line of the accessibility-tree text."""

    element_id: int
    role: str
    name: str
    depth: int


def parse_axtree(text: str) -> list[AXLine]:
    """The node lines of an observation's ``axtree`` text (``[id] role 'name' props``, tab-indented)."""
    lines = []
    for raw in text.splitlines():
        match = _LINE.match(raw)
        if match is None:
            continue
        name = ast.literal_eval(match.group(4))  # a Python string literal (repr), nothing else
        lines.append(AXLine(int(match.group(2)), match.group(3), str(name), len(match.group(1))))
    return lines


def find_element(lines: Sequence[AXLine], target: Mapping[str, Any]) -> int:
    """The id of the ``nth`` (default 0) line with the target's role and name; :class:`ReferenceSolutionError`
    naming the closest candidates when there is none."""
    role, name, nth = target["role"], target["name"], int(target.get("nth", 0))
    matches = [line for line in lines if line.role == role and line.name == name]
    if len(matches) > nth:
        return matches[nth].element_id
    near = [
        f"[{line.element_id}] {line.role} {line.name!r}"
        for line in lines
        if line.name == name or (line.role == role and name.lower() in line.name.lower())
    ]
    raise ReferenceSolutionError(
        f"no element {role} {name!r} (match #{nth}) in the observation; "
        f"{len(matches)} match(es); similar: {near[:8] or 'none'}"
    )


def step_to_action(step: Mapping[str, Any], axtree: str, resolve: Callable[[str], str] = str) -> str:
    """The action string of one solution step on the page whose tree text is ``axtree``; ``resolve`` fills
    site placeholders in ``goto`` URLs."""
    kind = step.get("action")
    if kind in ("click", "hover", "type"):
        element = find_element(parse_axtree(axtree), step["target"])
        if kind == "type":
            return f"type [{element}] [{step['text']}] [{1 if step.get('enter') else 0}]"
        return f"{kind} [{element}]"
    if kind == "stop":
        return f"stop [{step.get('answer', '')}]"
    if kind == "goto":
        return f"goto [{resolve(step['url'])}]"
    if kind == "tab_focus":
        return f"tab_focus [{int(step['index'])}]"
    if kind == "press":
        return f"press [{step['keys']}]"
    if kind == "scroll":
        return f"scroll [{step['direction']}]"
    if kind in ("new_tab", "close_tab", "go_back", "go_forward"):
        return str(kind)
    raise ReferenceSolutionError(f"unknown step action {kind!r} in {dict(step)!r}")


@dataclass
class ReplayResult:
    """The outcome of one replay."""

    task_id: int
    reward: float
    steps: int
    seconds: float
    actions: list[str]
    info: dict[str, Any]
    """The ``info`` of the last step (``info["eval"]`` explains the reward)."""


def solution_of(task: TaskConfig) -> list[dict[str, Any]]:
    """The task's ``reference_solution`` steps; :class:`ReferenceSolutionError` when it has none."""
    steps = task.extras.get("reference_solution")
    if not isinstance(steps, list) or not steps:
        raise ReferenceSolutionError(f"task {task.task_id} has no reference_solution")
    return steps


def play_solution(env: Any, task: TaskConfig, obs: dict[str, str]) -> ReplayResult:
    """Replay the reference solution of ``task`` on an episode already reset on it, from observation
    ``obs``; raises :class:`ReferenceSolutionError` when a step cannot be resolved, an action reports an
    error, or the episode ends before the last step."""
    steps = solution_of(task)
    started = time.perf_counter()
    resolve = env.unwrapped.sites.resolve
    actions: list[str] = []
    reward, info = 0.0, {}
    for index, step in enumerate(steps):
        try:
            action = step_to_action(step, obs["axtree"], resolve)
        except ReferenceSolutionError as exc:
            raise ReferenceSolutionError(
                f"task {task.task_id}, step {index + 1} {dict(step)}: {exc} (page {obs['url']})"
            ) from None
        actions.append(action)
        obs, reward, terminated, truncated, info = env.step(action)
        if obs["last_action_error"]:
            raise ReferenceSolutionError(
                f"task {task.task_id}, step {index + 1} {action!r} failed: {obs['last_action_error']}"
            )
        if (terminated or truncated) and index + 1 < len(steps):
            raise ReferenceSolutionError(
                f"task {task.task_id}: the episode ended after step {index + 1} of "
                f"{len(steps)} ({info.get('episode_end')}: {info.get('early_stop')})"
            )
    return ReplayResult(
        task.task_id, float(reward), len(actions), time.perf_counter() - started, actions, info
    )


def run_reference(env: Any, task: TaskConfig, *, seed: int | None = None) -> ReplayResult:
    """Reset ``env`` on ``task`` (``options={"task_id": ...}``, with ``seed``) and replay its reference
    solution (see :func:`play_solution`); the seconds include the reset."""
    started = time.perf_counter()
    obs, _ = env.reset(seed=seed, options={"task_id": task.task_id})
    result = play_solution(env, task, obs)
    result.seconds = time.perf_counter() - started
    return result


def record_solution(env: Any, task: TaskConfig, *, seed: int | None = None
                    ) -> tuple[ReplayResult, list[dict[str, Any]]]:
    """Reset ``env`` on ``task`` (with ``seed``, the episode's reset seed, so the pages are the ones an agent
    sees in that episode) and replay its reference solution, keeping the observation each action was taken
    on: ``(result, observations)`` with ``observations[i]`` the page of ``result.actions[i]``. Raises
    :class:`ReferenceSolutionError` as :func:`play_solution` does, and when the replay scores below 1."""
    from webarena_gym.wrappers import RecordObservations

    recorder = RecordObservations(env)  # a view on env: nothing to close
    result = run_reference(recorder, task, seed=seed)
    if result.reward < 1.0:
        raise ReferenceSolutionError(f"task {task.task_id}: its reference solution scored {result.reward} "
                                     f"on replay ({result.info.get('eval')})")
    return result, recorder.observations[:len(result.actions)]


def replay_reference(env: Any, task: TaskConfig) -> float:
    """Reset ``env`` on ``task``, replay its reference solution and return the reward (1.0 when it works)."""
    return run_reference(env, task).reward


# --------------------------------------------------------------------------------------------------- command


def main(argv: list[str] | None = None) -> int:
    """``python -m webarena_gym.reference``: replay a split on the default world, print a table; exit status
    1 when a replay fails or scores below 1."""
    import gymnasium as gym
    from rich.console import Console
    from rich.table import Table

    import webarena_gym
    from webarena_gym.embedded import SPLITS
    from webarena_gym.env import WebArenaLiteEnv

    parser = argparse.ArgumentParser(prog="python -m webarena_gym.reference", description=main.__doc__)
    parser.add_argument("--split", choices=SPLITS, default="train", help="split of the bundled task set")
    parser.add_argument("--task-ids", type=int, nargs="*", default=None, help="only these tasks")
    parser.add_argument("--headful", action="store_true", help="show the browser window")
    args = parser.parse_args(argv)
    env = gym.make(
        webarena_gym.ENV_ID, split=args.split, tasks=args.task_ids, browser={"headless": not args.headful}
    )
    tasks = cast(WebArenaLiteEnv, env.unwrapped).tasks
    console = Console()
    table = Table(title=f"Reference solutions, split {args.split}")
    table.add_column("task", justify="right", no_wrap=True, min_width=4)
    table.add_column("intent", no_wrap=True, overflow="ellipsis", max_width=40)
    for column in ("steps", "reward", "seconds"):
        table.add_column(column, justify="right", no_wrap=True, min_width=len(column))
    failures = 0
    try:
        for task in tasks:
            try:
                result = run_reference(env, task)
                reward, steps, seconds = f"{result.reward:.2f}", str(result.steps), f"{result.seconds:.1f}"
                failures += result.reward < 1.0
            except ReferenceSolutionError as exc:
                console.print(f"[red]{exc}[/red]")
                reward, steps, seconds, failures = "error", "-", "-", failures + 1
            table.add_row(str(task.task_id), task.intent[:70], steps, reward, seconds)
    finally:
        env.close()
    console.print(table)
    console.print(f"{len(tasks) - failures}/{len(tasks)} solved")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
