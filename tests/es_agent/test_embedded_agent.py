"""The embedded model (SmolLM2-135M-Instruct) acting in the embedded world through ``run_episode``: every
action it produces parses in the env's grammar on real pages (constrained decoding), and free decoding's
failures are counted, not hidden."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.model, pytest.mark.browser]


@pytest.fixture(scope="module")
def embedded_env(chromium_path: str) -> Iterator[Any]:
    import gymnasium as gym

    import webarena_gym

    env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, max_episode_steps=3)
    yield env
    env.close()


@pytest.fixture(scope="module")
def embedded_model() -> Any:
    import torch

    from es_agent import load_model

    torch.set_num_threads(1)
    return load_model("embedded")


def _task_ids(env: Any, n: int) -> list[int]:
    tasks = env.unwrapped.tasks
    step = max(1, len(tasks) // n)
    return [t.task_id for t in tasks[::step][:n]]


def test_constrained_actions_always_parse_on_embedded_pages(embedded_env: Any, embedded_model: Any) -> None:
    from es_agent import LLMPolicy, PromptPools, run_episode

    model, tokenizer = embedded_model
    policy = LLMPolicy(model, tokenizer, PromptPools.load().baseline("no_skill"))
    steps = invalid = 0
    for task_id in _task_ids(embedded_env, 3):
        result = run_episode(embedded_env, policy, options={"task_id": task_id})
        assert result.steps >= 1 and result.task_id == task_id
        for record in result.trajectory:
            print(f"task {task_id} step {record.step}: {record.action!r} error={record.error!r}")
            steps += 1
            invalid += record.parse_failed or record.error.startswith("invalid action")
    print(f"embedded model, constrained decoding: {steps - invalid}/{steps} actions parsed")
    assert steps >= 3 and invalid == 0


def test_free_decoding_failures_are_counted(embedded_env: Any, embedded_model: Any) -> None:
    from es_agent import LLMPolicy, PolicyConfig, PromptPools, run_episode

    model, tokenizer = embedded_model
    policy = LLMPolicy(model, tokenizer, PromptPools.load().baseline("no_skill"),
                       PolicyConfig(decoding="free", max_new_tokens=24))
    result = run_episode(embedded_env, policy, options={"task_id": _task_ids(embedded_env, 1)[0]})
    failed = sum(r.parse_failed for r in result.trajectory)
    rejected = sum(r.error.startswith("invalid action") for r in result.trajectory)
    for record in result.trajectory:
        print(f"step {record.step}: {record.action!r} error={record.error!r}")
    print(f"embedded model, free decoding: {result.steps - failed}/{result.steps} parsed by the policy, "
          f"{rejected} rejected by the env")
    assert policy.stats["parse_failures"] == failed
    assert all(e for e in result.errors) and len(result.errors) >= failed
