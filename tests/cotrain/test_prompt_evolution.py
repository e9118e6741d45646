"""Prompt evolution: validation of new texts, recombination, reflective mutation through a writer, pruning of
full pools, replay of logged changes, determinism given seeds, and the model writer on a tiny model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from cotrain.config import PromptsConfig
from cotrain.distribution import CoEvolutionConfig, CoEvolutionDistribution
from cotrain.prompt_evolution import (
    FailureReport,
    ModelTextWriter,
    PoolChange,
    PromptEvolver,
    apply_pool_changes,
    check_variant_text,
    clean_model_text,
    recombine_lines,
    reflection_messages,
    summarize_episode,
)
from es_agent.prompts import PromptPools
from es_agent.rollout import EpisodeResult, StepRecord

GOOD = "Useful skills:\n- Read the page before acting.\n- Answer with stop [answer] once you know it."
REFLECTED = "Read the whole page first, then answer with the exact text shown on the page."


def dist_for(pools: PromptPools, **config: Any) -> CoEvolutionDistribution:
    return CoEvolutionDistribution.create(list(pools.sizes().values()), base_seed=0,
                                          config=CoEvolutionConfig(**config))


def failed_episode(task: int) -> EpisodeResult:
    step = StepRecord(step=0, url="http://toy.local/", obs_digest="abc", obs_head="[1] RootWebArea",
                      action="click [3]", error="element 3 is not clickable", reward=0.0)
    return EpisodeResult(task_id=task, reward=0.0, steps=1, terminated=False, truncated=True,
                         trajectory=[step])


class FakeTrajectories:
    """Centre trajectories that always fail; records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], tuple[int, ...], int]] = []

    def __call__(self, tasks: Sequence[Any], prompt_ids: Sequence[int], env_seed: int,
                 ) -> list[tuple[str, EpisodeResult]]:
        self.calls.append((tuple(tasks), tuple(prompt_ids), env_seed))
        return [(f"goal of task {t}", failed_episode(t)) for t in tasks]


class FakeWriter:
    def __init__(self, reply: str = REFLECTED) -> None:
        self.reply = reply
        self.messages: list[list[dict[str, str]]] = []

    def __call__(self, messages: list[dict[str, str]]) -> str:
        self.messages.append(messages)
        return self.reply


REPORT = FailureReport(generation=1, task_success={10: 0.5, 11: 0.0, 12: 1.0}, env_seed=77)


@pytest.mark.parametrize(("text", "reason"), [
    ("", "empty"), ("too short", "shorter"), ("x" * 50 + " words " * 300, "longer"),
    ("Answer <|im_end|> then continue with the task.", "special tokens"),
    ("Look at {axtree} and decide what to click next.", "placeholders"),
    ("Control\x07characters are not allowed in prompts.", "control"),
    ("12345 67890 !!!! ???? 12345 67890 ###", "mostly not words"),
    (GOOD.upper(), "duplicates"),
])
def test_check_variant_text_rejects_with_a_reason(text: str, reason: str) -> None:
    found = check_variant_text(text, min_chars=20, max_chars=400, existing=[GOOD])
    assert found is not None and reason in found


def test_check_variant_text_accepts_a_plain_instruction() -> None:
    assert check_variant_text(REFLECTED, min_chars=20, max_chars=400, existing=[GOOD]) is None
    assert clean_model_text('```\n"' + REFLECTED + '"\n```\n') == REFLECTED


def test_recombine_lines_mixes_bullets_of_both_parents_deterministically() -> None:
    a = "Useful skills:\n- a1\n- a2\n- a3"
    b = "Useful skills:\n- b1\n- b2\n- a1"
    child = recombine_lines(a, b, np.random.default_rng(3))
    assert child == recombine_lines(a, b, np.random.default_rng(3))
    lines = child.splitlines()
    assert lines[0] == "Useful skills:"
    assert any(line in ("- a1", "- a2", "- a3") for line in lines[1:])
    assert any(line in ("- b1", "- b2", "- a1") for line in lines[1:])
    assert len(lines) == len(set(lines))


def test_failure_report_orders_the_hardest_unsolved_tasks() -> None:
    assert REPORT.hardest(2) == [11, 10]
    assert FailureReport(1, {1: 1.0}).hardest(3) == []


def test_summaries_and_reflection_prompt_carry_goal_actions_and_errors() -> None:
    text = summarize_episode("find the price", failed_episode(3))
    assert "find the price" in text and "click [3]" in text and "not clickable" in text
    messages = reflection_messages("skills", GOOD, [text])
    assert messages[0]["role"] == "system"
    assert GOOD in messages[1]["content"] and text in messages[1]["content"]


def test_reflective_mutation_adds_a_variant_with_small_mass(pools: PromptPools) -> None:
    config = PromptsConfig(mutation=True, reflect_rate=1.0, recombine_rate=0.0, mutable_slots=("skills",),
                           reflect_tasks=2, new_variant_mass=0.05)
    writer, trajectories = FakeWriter(), FakeTrajectories()
    evolver = PromptEvolver(config, seed=0, writer=writer, trajectories=trajectories)
    dist = dist_for(pools)
    new_dist, new_pools, changes = evolver.step(dist, pools, REPORT)
    assert [c.op for c in changes] == ["add"] and changes[0].kind == "reflect" and changes[0].slot == "skills"
    assert new_pools.slots["skills"][-1].text == REFLECTED
    assert new_dist.pool_sizes == tuple(new_pools.sizes().values())
    slot = pools.slot_names.index("skills")
    assert new_dist.prompt_probs[slot][-1].item() == pytest.approx(0.05)
    assert trajectories.calls == [((11, 10), dist.most_probable_prompt_ids(), 77)]
    assert "goal of task 11" in writer.messages[0][1]["content"]
    assert apply_pool_changes(pools, [PoolChange.from_dict(c.to_dict()) for c in changes]) == new_pools


def test_junk_from_the_writer_is_rejected_and_nothing_changes(pools: PromptPools) -> None:
    config = PromptsConfig(mutation=True, reflect_rate=1.0, recombine_rate=0.0)
    junk = FakeWriter("<|im_start|> ???")
    evolver = PromptEvolver(config, seed=0, writer=junk, trajectories=FakeTrajectories())
    dist = dist_for(pools)
    new_dist, new_pools, changes = evolver.step(dist, pools, REPORT)
    assert changes == [] and new_pools is pools and new_dist is dist
    assert evolver.rejected and "generation 1 reflect" in evolver.rejected[0]


def test_no_changes_off_schedule_or_when_disabled(pools: PromptPools) -> None:
    dist = dist_for(pools)
    on = PromptsConfig(mutation=True, mutate_every=2, reflect_rate=1.0, recombine_rate=1.0)
    assert PromptEvolver(on, seed=0).step(dist, pools, REPORT)[2] == []  # generation 1 is off schedule
    off = PromptsConfig(mutation=False, reflect_rate=1.0, recombine_rate=1.0)
    assert PromptEvolver(off, seed=0).step(dist, pools, FailureReport(2, {1: 0.0}))[2] == []


def test_recombination_is_deterministic_given_the_seed(pools: PromptPools) -> None:
    config = PromptsConfig(mutation=True, reflect_rate=0.0, recombine_rate=1.0)
    dist = dist_for(pools)
    runs = [PromptEvolver(config, seed=5).step(dist, pools, REPORT) for _ in range(2)]
    assert runs[0][2] == runs[1][2] and runs[0][1] == runs[1][1]
    (change,) = runs[0][2]
    assert change.kind == "recombine" and change.slot == "skills"
    other = PromptEvolver(config, seed=6).step(dist, pools, FailureReport(9, REPORT.task_success))[2]
    assert other and other[0].variant_id == "recombine_g0009"


def test_full_pools_prune_the_least_probable_unprotected_variant(pools: PromptPools) -> None:
    size = pools.sizes()["skills"]
    config = PromptsConfig(mutation=True, reflect_rate=1.0, recombine_rate=0.0, mutable_slots=("skills",),
                           max_pool_size=size)
    slot = pools.slot_names.index("skills")
    probs = [list(p.tolist()) for p in dist_for(pools).prompt_probs]
    probs[slot] = [0.4] + [0.6 / (size - 1)] * (size - 1)
    probs[slot][-1] -= 0.05
    probs[slot][1] += 0.05
    dist = CoEvolutionDistribution.create(list(pools.sizes().values()), base_seed=0, initial_probs=probs)
    evolver = PromptEvolver(config, seed=0, writer=FakeWriter(), trajectories=FakeTrajectories())
    new_dist, new_pools, changes = evolver.step(dist, pools, REPORT)
    assert [(c.op, c.kind) for c in changes] == [("remove", "prune"), ("add", "reflect")]
    removed = pools.slots["skills"][size - 1].id
    assert changes[0].variant_id == removed
    assert new_pools.sizes()["skills"] == size and new_dist.pool_sizes[slot] == size
    protected = {choice["skills"] for choice in pools.baselines.values()}
    assert protected <= {v.id for v in new_pools.slots["skills"]}
    assert apply_pool_changes(pools, changes) == new_pools


@pytest.mark.model
def test_model_text_writer_is_greedy_and_deterministic(tiny: tuple[Any, Any]) -> None:
    writer = ModelTextWriter(lambda: tiny, max_new_tokens=12)
    messages = reflection_messages("skills", GOOD, ["Objective: x\nOutcome: reward 0 after 1 action(s)"])
    first = writer(messages)
    assert isinstance(first, str) and first == writer(messages)


def test_replica_trajectories_come_from_a_replica_that_follows_the_log(toy_config: Any) -> None:
    from cotrain.checkpoint import RunState, initial_distribution, load_pools
    from cotrain.prompt_evolution import ReplicaTrajectories
    from cotrain.trainer import build_problem
    from es_agent.updates import WeightUpdate
    from es_agent.worker import replica_at

    cfg = toy_config()
    pools = load_pools(None)
    dist = initial_distribution(cfg, pools)
    problem = build_problem(cfg, RunState(0, dist, pools, None, 0, [], None), [0, 1, 2, 3, 4])
    driver = None
    try:
        problem.push_update(1, WeightUpdate((5,), (0.01,)))
        driver = replica_at(None, problem.agent, problem.env_spec, problem.pools, problem.update_log,
                            problem.log_end)
        assert driver.applied == 1
        problem.push_update(2, WeightUpdate((6,), (-0.02,)))
        again = replica_at(driver, problem.agent, problem.env_spec, problem.pools, problem.update_log,
                           problem.log_end)
        assert again is driver and driver.applied == 2
        assert driver.checksum() == problem.local_replica.checksum()  # both at the centre after 2 updates
        ids = dist.most_probable_prompt_ids()
        episodes = driver.centre_trajectories([0, 1], ids, env_seed=3)
        assert [bool(goal) for goal, _ in episodes] == [True, True]
        assert all(result.steps for _, result in episodes)
        in_process = ReplicaTrajectories(problem)([0, 1], ids, 3)  # no actors: the problem's own replica
        assert [(g, r.reward, [s.action for s in r.trajectory]) for g, r in in_process] == [
            (g, r.reward, [s.action for s in r.trajectory]) for g, r in episodes]
    finally:
        if driver is not None:
            driver.close()
        problem.close()
