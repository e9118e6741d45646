"""Every bundled reference solution, replayed through the real env on the embedded sites, scores 1.0 (one
test per split, all on one shared env, so each stays well inside the per-test timeout); and typing with
``fill`` (the embedded sites' default) leaves the same sites and pages as WebArena's key-by-key typing, on
one typing task per template and split (:func:`_typing_representatives`)."""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import pytest

from webarena_gym.embedded import SPLITS
from webarena_gym.reference import ReferenceSolutionError, run_reference
from webarena_gym.tasks import TaskConfig

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@dataclass(frozen=True)
class Outcome:
    """What a replay left: its reward, the sites' state and a digest of every page the agent was shown."""

    reward: float
    sites: dict[str, str]
    pages: str


class _Recorder(gym.Wrapper):
    """Keeps a running digest of the observations of an episode."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.digest = hashlib.sha256()

    def reset(self, **kwargs: Any) -> Any:
        obs, info = self.env.reset(**kwargs)
        self.digest = hashlib.sha256()
        self._add(obs)
        return obs, info

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self._add(out[0])
        return out

    def _add(self, obs: dict[str, str]) -> None:
        for key in sorted(obs):
            self.digest.update(f"{key}\0{obs[key]}\0".encode())


def _replay(env: gym.Env, task: TaskConfig) -> Outcome:
    recorder = _Recorder(env)
    result = run_reference(recorder, task)
    return Outcome(result.reward, env.unwrapped.world.state_digest(), recorder.digest.hexdigest())


def _typed_texts(task: TaskConfig) -> list[str]:
    return [str(step.get("text", "")) for step in task.extras.get("reference_solution") or ()
            if step.get("action") == "type"]


def _types(task: TaskConfig) -> bool:
    return bool(_typed_texts(task))


def _typing_representatives(tasks: list[TaskConfig]) -> list[TaskConfig]:
    """One typing task per intent template: the instances of a template type into the same fields of the same
    pages and differ only in the text, so the one whose typed texts have the most distinct characters (then
    the longest, then the lowest id) stands for them. It keeps the per-split test a fraction of replaying
    every typing task twice (73 train tasks in 25 templates)."""
    best: dict[object, TaskConfig] = {}

    def rank(task: TaskConfig) -> tuple[int, int, int]:
        texts = "".join(_typed_texts(task))
        return len(set(texts)), len(texts), -task.task_id

    for task in tasks:
        if not _types(task):
            continue
        template = task.intent_template_id if task.intent_template_id is not None else ("task", task.task_id)
        if template not in best or rank(task) > rank(best[template]):
            best[template] = task
    return sorted(best.values(), key=lambda t: t.task_id)


@pytest.fixture(scope="module")
def fill_outcomes() -> dict[int, Outcome]:
    """Outcomes of the module's default-typing (``fill``) replays by task id, for the comparison with keys."""
    return {}


@pytest.mark.parametrize("split", SPLITS)
def test_every_reference_solution_scores_one(
    world_env: gym.Env, split: str, capsys: pytest.CaptureFixture[str], fill_outcomes: dict[int, Outcome]
) -> None:
    assert world_env.unwrapped.typing_mode == "fill"  # "auto" on the embedded sites
    tasks = [t for t in world_env.unwrapped.tasks if t.extras["split"] == split]
    assert tasks
    failures: list[str] = []
    seconds: list[float] = []
    for task in tasks:
        recorder = _Recorder(world_env)
        try:
            result = run_reference(recorder, task)
        except ReferenceSolutionError as exc:
            failures.append(str(exc))
            continue
        seconds.append(result.seconds)
        if result.reward != 1.0:
            failures.append(f"task {task.task_id}: reward {result.reward}: {result.info.get('eval')}")
        elif _types(task):
            fill_outcomes[task.task_id] = Outcome(
                result.reward, world_env.unwrapped.world.state_digest(), recorder.digest.hexdigest())
    if seconds:
        with capsys.disabled():
            print(
                f"\n{split}: replayed {len(seconds)} reference solutions in {sum(seconds):.0f}s "
                f"(per task median {statistics.median(seconds):.1f}s, max {max(seconds):.1f}s)"
            )
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("split", SPLITS)
def test_fill_and_key_by_key_typing_leave_the_same_sites_and_pages(
    world_env: gym.Env, make_world_env: Callable[..., gym.Env], split: str, fill_outcomes: dict[int, Outcome]
) -> None:
    keys_env = make_world_env(split="all", typing="keys")
    assert keys_env.unwrapped.typing_mode == "keys"
    tasks = _typing_representatives([t for t in world_env.unwrapped.tasks if t.extras["split"] == split])
    assert tasks
    differences: list[str] = []
    for task in tasks:
        fill = fill_outcomes.get(task.task_id) or _replay(world_env, task)  # replayed here when run alone
        keys = _replay(keys_env, task)
        if (fill.reward, keys.reward) != (1.0, 1.0):
            differences.append(f"task {task.task_id}: rewards fill {fill.reward}, keys {keys.reward}")
        if fill.sites != keys.sites:
            changed = sorted(name for name in fill.sites if fill.sites[name] != keys.sites.get(name))
            differences.append(f"task {task.task_id}: site state differs in {changed}")
        if fill.pages != keys.pages:
            differences.append(f"task {task.task_id}: the observations differ")
    assert not differences, "\n".join(differences)
