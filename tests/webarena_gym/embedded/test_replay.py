"""Every bundled reference solution, replayed through the real env on the embedded sites, scores 1.0 (one
test per split, all on one shared env, so each stays well inside the per-test timeout)."""

from __future__ import annotations

import statistics

import gymnasium as gym
import pytest

from webarena_gym.embedded import SPLITS
from webarena_gym.reference import ReferenceSolutionError, run_reference

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("split", SPLITS)
def test_every_reference_solution_scores_one(
    world_env: gym.Env, split: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [t for t in world_env.unwrapped.tasks if t.extras["split"] == split]
    assert tasks
    failures: list[str] = []
    seconds: list[float] = []
    for task in tasks:
        try:
            result = run_reference(world_env, task)
        except ReferenceSolutionError as exc:
            failures.append(str(exc))
            continue
        seconds.append(result.seconds)
        if result.reward != 1.0:
            failures.append(f"task {task.task_id}: reward {result.reward}: {result.info.get('eval')}")
    if seconds:
        with capsys.disabled():
            print(
                f"\n{split}: replayed {len(seconds)} reference solutions in {sum(seconds):.0f}s "
                f"(per task median {statistics.median(seconds):.1f}s, max {max(seconds):.1f}s)"
            )
    assert not failures, "\n".join(failures)
