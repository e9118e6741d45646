"""Seeded stochastic action choice (``PolicyConfig.temperature``): the Gumbel-max draw, the policy, and that
only training candidates sample (centre evaluations stay greedy)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch

from cotrain.config import load_config
from cotrain.errors import ConfigError
from es_agent.errors import SpecError
from es_agent.policy import LLMPolicy, PolicyConfig
from es_agent.problem import AgentProblem
from es_agent.sampling import gumbel_noise, sampled_scores
from es_agent.specs import AgentSpec

from .conftest import FORUM_AXTREE
from .test_problem import PROMPT, TOY_ENV, make_problem, rows_tensor  # noqa: F401 (a fixture)

EULER_GAMMA = 0.5772156649


def test_gumbel_noise_is_a_pure_function_with_the_gumbel_law() -> None:
    assert gumbel_noise(7, 2, "click [3]") == gumbel_noise(7, 2, "click [3]")
    assert len({gumbel_noise(7, 2, "click [3]"), gumbel_noise(8, 2, "click [3]"),
                gumbel_noise(7, 3, "click [3]"), gumbel_noise(7, 2, "click [4]")}) == 4
    draws = [gumbel_noise(seed, 0, "stop [N/A]") for seed in range(20_000)]
    mean = sum(draws) / len(draws)
    var = sum((d - mean) ** 2 for d in draws) / len(draws)
    assert abs(mean - EULER_GAMMA) < 0.05  # standard error about 0.009
    assert abs(var - math.pi ** 2 / 6) < 0.1


def test_the_draw_follows_the_softmax_of_the_scores() -> None:
    cands, scores, temperature = ["a", "b", "c"], [0.0, 1.0, 2.0], 2.0
    picks = Counter(max(range(3), key=sampled_scores(scores, cands, temperature, seed, 0).__getitem__)
                    for seed in range(20_000))
    weights = [math.exp(s / temperature) for s in scores]
    for i, w in enumerate(weights):
        assert abs(picks[i] / 20_000 - w / sum(weights)) < 0.015


def test_the_draw_keeps_with_a_candidate_whatever_the_order_or_the_other_candidates() -> None:
    cands, scores = ["click [1]", "click [2]", "stop [x]", "scroll [down]"], [0.3, -0.2, 0.1, 0.0]
    for seed in range(50):
        noisy = dict(zip(cands, sampled_scores(scores, cands, 1.0, seed, 4), strict=True))
        order = [3, 1, 0, 2]
        shuffled = sampled_scores([scores[i] for i in order], [cands[i] for i in order], 1.0, seed, 4)
        assert dict(zip([cands[i] for i in order], shuffled, strict=True)) == noisy
        assert sampled_scores(scores[:2], cands[:2], 1.0, seed, 4) == [noisy[c] for c in cands[:2]]


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_sampled_scores_refuses_a_bad_temperature(bad: float) -> None:
    with pytest.raises(ValueError, match="temperature"):
        sampled_scores([0.0], ["stop [x]"], bad, 0, 0)
    with pytest.raises(ValueError, match="2 scores for 1 candidates"):
        sampled_scores([0.0, 1.0], ["stop [x]"], 1.0, 0, 0)


@pytest.mark.parametrize(("fields", "match"), [
    ({"temperature": -0.5}, "temperature must be a finite number >= 0"),
    ({"temperature": True}, "temperature must be"),
    ({"temperature": float("nan")}, "temperature must be"),
    ({"temperature": 1.0, "constrained_method": "greedy"}, "constrained_method='score'"),
    ({"temperature": 1.0, "decoding": "free"}, "constrained_method='score'"),
])
def test_policy_config_checks_the_temperature(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        PolicyConfig(**fields)


def test_a_train_config_sets_the_temperature_and_names_a_bad_one() -> None:
    cfg = load_config("configs/grid_train.toml", ["agent.policy.temperature=1.5"])
    assert cfg.agent.policy_config().temperature == 1.5
    with pytest.raises((ConfigError, SpecError), match="temperature"):
        load_config("configs/grid_train.toml", ["agent.policy.temperature=-1"])


def test_the_policy_samples_only_with_a_seed_and_reproduces_each_draw(tiny: tuple[Any, Any], pools: Any,
                                                                      make_obs: Any) -> None:
    """Real tiny-model scores: without a sampling seed a hot policy is the greedy one; with one, its picks
    are the Gumbel-max draw over the greedy policy's final scores, the same for the same seed, and they vary
    with the seed."""
    model, tok = tiny
    genome = pools.baseline("no_skill")
    observations = [make_obs(), make_obs(FORUM_AXTREE, "Open the books forum")]
    greedy = LLMPolicy(model, tok, genome, PolicyConfig())
    hot = LLMPolicy(model, tok, genome, PolicyConfig(temperature=3.0))
    assert not hot.sampling
    assert hot.act_batch(observations) == greedy.act_batch(observations)
    picks = set()
    for seed in range(12):
        draws = []
        for _ in range(2):
            hot.reset()
            hot.set_sample_seed(seed)
            draws.append(hot.act_batch(observations))
            greedy.reset()
            assert hot.last_info[0]["greedy"] == greedy.act(observations[0]) and hot.sampling
        assert draws[0] == draws[1]
        greedy.reset()
        step, scores = greedy.ranked_step(observations[1])
        noisy = sampled_scores(scores, step.candidates, 3.0, seed, 0)
        assert draws[0][1] == step.candidates[max(range(len(noisy)), key=noisy.__getitem__)]
        picks.add(tuple(draws[0]))
    assert len(picks) > 3
    hot.set_sample_seed(None)
    hot.reset()
    greedy.reset()
    assert hot.act_batch(observations) == greedy.act_batch(observations)


def _hot(temperature: float) -> AgentSpec:
    return AgentSpec(model="tiny:0", policy={"max_prompt_tokens": 512, "temperature": temperature})


def test_training_candidates_sample_and_centre_evaluations_stay_greedy(
        make_problem: Callable[..., AgentProblem]) -> None:  # noqa: F811 (the fixture)
    """Through the real problem and replica: a hot problem's centre evaluation is the greedy problem's, its
    training rows sample (reproducibly: the same rewards twice), and its sampled episodes are not the greedy
    ones."""
    hot = make_problem(_hot(50.0))
    cold = make_problem(_hot(0.0))
    tasks = [0, 1, 2, 3]
    for env_seed in (3, 7):
        assert hot.evaluate_centre(tasks, PROMPT, env_seed=env_seed) == \
            cold.evaluate_centre(tasks, PROMPT, env_seed=env_seed)
    centre_rows = rows_tensor(*[(5, 0.0, e, PROMPT) for e in range(12)])
    first = hot.evaluate_rows(centre_rows, tasks)
    assert torch.equal(first, hot.evaluate_rows(centre_rows, tasks))
    assert torch.equal(hot.evaluate_rows(centre_rows, tasks, sample=False),
                       cold.evaluate_rows(centre_rows, tasks))
    replica = hot.local_replica
    genome = replica.pools.from_indices(PROMPT)
    sampled = replica.run_episodes(genome, tasks, 7, sample=True)
    assert [r.trajectory for r in sampled] == [r.trajectory for r in replica.run_episodes(genome, tasks, 7,
                                                                                          sample=True)]
    greedy = replica.run_episodes(genome, tasks, 7)
    assert [r.trajectory for r in greedy] == [r.trajectory for r in cold.local_replica.run_episodes(
        cold.local_replica.pools.from_indices(PROMPT), tasks, 7)]
    assert [r.trajectory for r in sampled] != [r.trajectory for r in greedy]


def test_a_generation_sends_its_rows_as_sampled_and_the_centre_as_greedy(
        make_problem: Callable[..., AgentProblem], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    problem = make_problem(_hot(1.0))
    problem.set_task_batch([0, 1])
    seen: list[bool] = []
    real = problem._run_rows

    def spy(values: Any, task_ids: Any, *, sample: bool = False) -> Any:
        seen.append(sample)
        return real(values, task_ids, sample=sample)

    monkeypatch.setattr(problem, "_run_rows", spy)
    batch = problem.generate_batch(2, empty=True)
    batch.set_values(rows_tensor((11, 0.5, 7, PROMPT), (11, -0.5, 7, PROMPT)))
    problem.evaluate(batch)
    problem.evaluate_centre([0, 1], PROMPT, env_seed=7)
    assert seen == [True, True, False]  # one piece per row (rows_per_piece=1), then the centre
