"""Reference credit (es_agent.reference_credit): the step credit on hand-computed cases, the teacher-forced
trajectory credit against the policy's own final scores (a real tiny-Qwen forward), the problem's training
rows measuring it at their perturbed weights and genome (a toy env that replays a reference), and the real
env's reference recording and answer check (Chromium)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import gymnasium as gym
import pytest
import torch

from es_agent.agreement import ReferenceStep, equivalent
from es_agent.errors import SpecError
from es_agent.policy import LLMPolicy, PolicyConfig
from es_agent.problem import AgentProblem
from es_agent.reference_credit import soft_margin, step_credit, trajectory_credit
from es_agent.specs import AgentSpec, EnvSpec
from es_agent.worker import REFERENCE_CACHE_SIZE, episode_seed

from .test_problem import AGENT, PROMPT, TARGETS, TOY_ENV, ToyWebEnv, make_problem, rows_tensor  # noqa: F401

REF_TOY_ID = "EsAgentToyWebReference-v0"


class ToyReferenceEnv(ToyWebEnv):
    """The toy shop with a two-step reference per task (click the product link, then answer) and the
    answer check teacher-forced scoring needs."""

    def reference_trajectory(self, task_id: int, seed: int | None = None
                             ) -> tuple[list[str], list[dict[str, str]]]:
        obs, _ = self.reset(seed=seed, options={"task_id": task_id})
        actions = [f"click [{self._base + 1}]", f"stop [{TARGETS[task_id]}]"]
        observations = [obs]
        for action in actions[:-1]:
            obs, *_ = self.step(action)
            observations.append(obs)
        self.step(actions[-1])
        return actions, observations

    def answer_accepted(self, task_id: int, answer: str) -> bool:
        return TARGETS[task_id].lower() in answer.lower()


if REF_TOY_ID not in gym.registry:
    gym.register(id=REF_TOY_ID, entry_point=ToyReferenceEnv)
REF_ENV = EnvSpec(env_id=REF_TOY_ID, module=None, max_steps=3)


def _step(action: str, task_id: int = 1) -> ReferenceStep:
    return ReferenceStep(task_id, "train", 0, {"axtree": "", "url": "", "goal": "", "tabs": "",
                                               "last_action_error": ""}, action)


def _never(step: ReferenceStep, answer: str) -> bool:
    return False


# ------------------------------------------------------------------------------------------ the step credit


def test_soft_margin_is_bounded_odd_and_refuses_bad_input() -> None:
    assert soft_margin(2.0, 1.0) == pytest.approx(2 / 3)
    assert soft_margin(-2.0, 1.0) == pytest.approx(-2 / 3)
    assert soft_margin(0.0, 5.0) == 0.0
    assert 0.999 < soft_margin(1e6, 1.0) < 1.0
    with pytest.raises(ValueError, match="scale must be > 0"):
        soft_margin(1.0, 0.0)
    with pytest.raises(ValueError, match="finite margin"):
        soft_margin(float("nan"), 1.0)


def test_step_credit_on_hand_computed_scores() -> None:
    cands = ["click [1]", "click [2]", "stop [red]"]
    final = [3.0, 1.0, 0.0]
    assert step_credit(cands, final, _step("click [1]"), _never, 1.0) == pytest.approx(2 / 3)  # 3 - 1
    assert step_credit(cands, final, _step("click [2]"), _never, 1.0) == pytest.approx(-2 / 3)  # 1 - 3
    assert step_credit(cands, final, _step("click [2]"), _never, 2.0) == pytest.approx(-2 / 4)
    assert step_credit(cands, final, _step("click [9]"), _never, 1.0) == -1.0, "the reference is no candidate"
    assert step_credit(["click [1]"], [0.5], _step("click [1]"), _never, 1.0) == 1.0, "only the reference"
    answers = {"red", "Red"}
    right = step_credit(cands, final, _step("stop [red]"), lambda s, a: a in answers, 1.0)
    assert right == pytest.approx(-3 / 4)  # the accepted answer scores 0 against the best other, 3
    with pytest.raises(ValueError, match="one score per candidate"):
        step_credit(cands, [1.0], _step("click [1]"), _never, 1.0)
    with pytest.raises(ValueError, match="one score per candidate"):
        step_credit([], [], _step("click [1]"), _never, 1.0)


def test_trajectory_credit_is_the_mean_over_steps_of_the_policys_own_final_scores(
        tiny: tuple[Any, Any], pools: Any, make_obs: Callable[..., dict[str, str]]) -> None:
    """Teacher-forced on a real tiny-Qwen forward: the credit equals the step credits computed from
    ``ranked_step`` by hand (history set per step), and the policy is left with no history."""
    model, tok = tiny
    policy = LLMPolicy(model, tok, pools.baseline("no_skill"), PolicyConfig(max_prompt_tokens=512))
    obs = make_obs()
    candidates = policy.candidates(obs)
    steps = [ReferenceStep(7, "train", 0, obs, candidates[1], (), 2),
             ReferenceStep(7, "train", 1, obs, candidates[0], (candidates[1],), 2)]
    expected = []
    for step in steps:
        policy.reset()
        policy.set_history(0, step.history)
        scored, final = policy.ranked_step(step.obs, 0)
        expected.append(step_credit(scored.candidates, final, step, _never, 1.5))
    policy.reset()
    got = trajectory_credit(policy, steps, _never, 1.5)
    assert got == pytest.approx(sum(expected) / 2, abs=1e-9)
    assert -1 < got < 1 and not all(e == expected[0] for e in expected)
    assert policy.render(obs).count(candidates[1]) == obs["axtree"].count(candidates[1]), "history cleared"
    with pytest.raises(ValueError, match="no step"):
        trajectory_credit(policy, [], _never, 1.0)


# ------------------------------------------------------------------------------- through the problem


def test_training_rows_measure_their_credit_at_their_own_weights_and_genome(
        make_problem: Callable[..., AgentProblem]) -> None:  # noqa: F811 (the fixture)
    problem = make_problem(AGENT, REF_ENV, credit_scale=1.0)
    problem.set_task_batch([0, 1, 2])
    batch = problem.generate_batch(4, empty=True)
    batch.set_values(rows_tensor((11, 0.5, 7, PROMPT), (11, -0.5, 7, PROMPT), (12, 0.0, 7, PROMPT),
                                 (12, 0.0, 7, (1, 0, 2))))
    problem.evaluate(batch)
    credits = problem.last_credits
    assert credits is not None and credits.shape == (4, 3)
    assert bool((credits.abs() <= 1).all())
    assert not torch.equal(credits[0], credits[1]), "antithetic members lean differently"
    assert not torch.equal(credits[2], credits[3]), "the genome changes the credit"
    assert problem.last_credit_steps == 4 * 3 * 2  # two reference steps per task and row
    assert problem.last_timings["seconds_credit"] > 0
    # the sigma-0 row is the centre: the replica's own credit at the centre, with each task's reset seed
    replica = problem.local_replica
    genome = replica.pools.from_indices(PROMPT)
    centre = replica.reference_credits(genome, [0, 1, 2], 7, 1.0)
    assert credits[2].tolist() == pytest.approx(centre, abs=1e-6)  # float32 on the way back
    steps = replica.reference(1, episode_seed(7, 1))
    assert [s.action.split(" ")[0] for s in steps] == ["click", "stop"]
    assert steps[1].history == (steps[0].action,)
    assert equivalent(f"stop [{TARGETS[1]}]", steps[1], replica._answer_ok)
    for seed in range(REFERENCE_CACHE_SIZE + 3):  # new reset seeds every generation: the oldest go
        replica.reference(0, seed)
    assert len(replica._references) == REFERENCE_CACHE_SIZE and (0, 0) not in replica._references
    assert (0, REFERENCE_CACHE_SIZE + 2) in replica._references
    # the centre's evaluation measures no credit; a problem without credit_scale measures none
    problem.evaluate_centre([0, 1], PROMPT, env_seed=7)
    cold = make_problem(AGENT, REF_ENV)
    cold.set_task_batch([0, 1, 2])
    batch2 = cold.generate_batch(2, empty=True)
    batch2.set_values(rows_tensor((11, 0.5, 7, PROMPT), (11, -0.5, 7, PROMPT)))
    cold.evaluate(batch2)
    assert cold.last_credits is None and cold.last_credit_steps == 0
    assert torch.equal(cold.per_task_rewards(batch2).clone(), problem.per_task_rewards(batch)[:2].clone()), \
        "the credit does not change the rewards"


def test_an_env_without_reference_replay_and_a_bad_scale_are_named(
        make_problem: Callable[..., AgentProblem]) -> None:  # noqa: F811 (the fixture)
    problem = make_problem(AGENT, TOY_ENV, credit_scale=1.0)
    problem.set_task_batch([0])
    batch = problem.generate_batch(1, empty=True)
    batch.set_values(rows_tensor((11, 0.5, 7, PROMPT)))
    with pytest.raises(SpecError, match="replays reference solutions .* ToyWebEnv has none"):
        problem.evaluate(batch)
    for bad in (0.0, -1.0, float("inf"), True):
        with pytest.raises(SpecError, match="credit_scale must be a finite number > 0"):
            AgentProblem(AGENT, REF_ENV, credit_scale=cast(Any, bad))


# ------------------------------------------------------------------------------------------ the real env

SORT_TASK = 20006
"""Tier 2 shopping: sort the Headphones category by price, most expensive first (three steps, then stop)."""
LOOKUP_TASK = 20000
"""Tier 2 shopping: the cheapest product of a category (its answer is checked by string_match)."""


@pytest.fixture(scope="module")
def tier2_env(chromium_path: str) -> Any:
    import webarena_gym

    env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, split="tier2_train")
    yield env
    env.close()


@pytest.mark.browser
def test_the_real_env_records_a_reference_and_checks_answers(tier2_env: Any) -> None:
    from webarena_gym.reference import run_reference

    inner = tier2_env.unwrapped
    actions, observations = inner.reference_trajectory(SORT_TASK, seed=3)
    task = next(t for t in inner.tasks if t.task_id == SORT_TASK)
    assert actions == run_reference(tier2_env, task).actions and len(actions) == 4
    assert len(observations) == 4 and all("Headphones" in o["goal"] for o in observations)
    assert observations[0]["axtree"] != observations[-1]["axtree"], "one page per step"
    answers, _ = inner.reference_trajectory(LOOKUP_TASK, seed=3)
    answer = answers[-1][len("stop ["):-1]
    assert inner.answer_accepted(LOOKUP_TASK, answer)
    assert not inner.answer_accepted(LOOKUP_TASK, "N/A")
    assert inner.answer_accepted(SORT_TASK, "anything"), "a task not scored by its answer accepts any"


@pytest.mark.browser
def test_a_replica_on_the_real_env_scores_the_credit_of_a_recorded_reference(chromium_path: str) -> None:
    from es_agent.worker import Replica

    env = EnvSpec(env_id="WebArenaLite-v0", module="webarena_gym", max_steps=5,
                  kwargs={"split": "tier2_train", "tasks": [SORT_TASK],
                          "browser": {"executable_path": chromium_path}})
    agent = AgentSpec(model="tiny:0", policy={"max_prompt_tokens": 768})
    replica = Replica(agent, env, agent.load_pools(), applied=0)
    try:
        genome = replica.pools.from_indices((0,) * len(replica.pools.slots))
        first = replica.reference_credits(genome, [SORT_TASK], 0, 1.0)
        assert len(first) == 1 and -1 <= first[0] <= 1
        assert replica.reference_credits(genome, [SORT_TASK], 0, 1.0) == first, "recorded once, reproducible"
        assert len(replica._references) == 1 and replica.stats.credit_steps == 8
    finally:
        replica.close()
