"""CoEvolutionDistribution on a toy objective, no LLM: the "model" is a flat parameter vector ``theta``
and the noise ``eps(seed)`` is a pure function of the seed, so the ``(seed, coeff)`` update path can be
checked against a dense reference that materialises the population."""

from __future__ import annotations

import copy
import json
import pickle
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch
from toy_web_env import toy_config_dict

from cotrain.distribution import (
    SEED_BOUND,
    CoEvolutionConfig,
    CoEvolutionDistribution,
    WeightUpdate,
    project_to_floor,
)
from cotrain.errors import CotrainError, DistributionError
from cotrain.shaping import ShapingConfig, shape_fitness
from es_agent.errors import CandidateRowError
from es_agent.rows import decode_rows

BEST = (2, 0)
"""Hidden best prompt variant per slot of the toy (pools of 4 and 3 variants)."""


def eps(seed: int, dim: int) -> torch.Tensor:
    """The toy noise: a pure function of the seed."""
    return torch.randn(dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def apply_update(theta: torch.Tensor, update: WeightUpdate) -> None:
    """The seed path: regenerate each seed's noise and add it with its coefficient."""
    for seed, coeff in zip(update.seeds, update.coeffs, strict=True):
        theta.add_(eps(seed, theta.numel()), alpha=coeff)


def population(theta: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The dense population matrix: row i is ``theta + sigma_i * eps(seed_i)``."""
    noise = torch.stack([eps(int(s), theta.numel()) for s in rows[:, 0]])
    return theta + rows[:, 1:2] * noise


def toy_rewards(xs: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor, bonus: float) -> torch.Tensor:
    """Per-task rewards ``-||x - target_k||^2 / dim``, plus ``bonus`` per slot on the hidden best variant."""
    dist2 = ((xs[:, None, :] - targets[None, :, :]) ** 2).sum(-1) / xs.shape[1]
    hits = sum((rows[:, 3 + k] == best).double() for k, best in enumerate(BEST))
    return -dist2 + bonus * hits[:, None]


def make(pool_sizes: Sequence[int] = (4, 3), base_seed: int = 7, **config: object) -> CoEvolutionDistribution:
    return CoEvolutionDistribution.create(pool_sizes, base_seed=base_seed, config=CoEvolutionConfig(**config))


# ----- convergence and the seed path ----------------------------------------------------------------------


def test_toy_converges_in_weights_and_picks_the_best_prompts() -> None:
    dim, pop, gens = 1000, 128, 100
    gen = torch.Generator().manual_seed(0)
    centre = torch.randn(dim, generator=gen, dtype=torch.float64)
    targets = centre + 0.05 * torch.randn(3, dim, generator=gen, dtype=torch.float64)  # 3 tasks
    optimum = targets.mean(dim=0)
    theta = torch.zeros(dim, dtype=torch.float64)
    dist = make(sigma_0=1.0, sigma_min=0.05, total_generations=gens, learning_rate=2.0)
    start = float((theta - optimum).norm())
    for _ in range(gens):
        rows = dist.sample_rows(pop)
        rewards = toy_rewards(population(theta, rows), rows, targets, bonus=1.0)
        dist, update = dist.update(rows, rewards)
        apply_update(theta, update)
    end = float((theta - optimum).norm())
    assert end < 0.15 * start, f"distance {start:.2f} -> {end:.2f}"
    best_probs = [float(p[b]) for p, b in zip(dist.prompt_probs, BEST, strict=True)]
    assert min(best_probs) > 0.8, best_probs
    assert dist.most_probable_prompt_ids() == BEST
    assert dist.generation == gens and dist.sigma == pytest.approx(0.05)


@pytest.mark.parametrize("normalisation", ["total_weight", "population"])
@pytest.mark.parametrize("antithetic", [True, False])
def test_seed_path_matches_dense_reference(normalisation: str, antithetic: bool) -> None:
    dim, pop, lr = 300, 16, 1.5
    targets = torch.randn(2, dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    shaping = ShapingConfig(method="centered_ranks")
    dist = make(
        sigma_0=0.3,
        sigma_min=0.1,
        total_generations=6,
        learning_rate=lr,
        antithetic=antithetic,
        weight_normalisation=normalisation,
    )
    theta_seed = torch.zeros(dim, dtype=torch.float64)
    theta_dense = torch.zeros(dim, dtype=torch.float64)
    for _ in range(6):
        rows = dist.sample_rows(pop)
        xs = population(theta_dense, rows)
        rewards = toy_rewards(xs, rows, targets, bonus=0.05)
        # Dense reference: the online reward-weighted mean of the materialised population.
        c = shape_fitness(rewards, shaping)
        c = c - c.mean()
        c = c / (c.abs().sum() if normalisation == "total_weight" else pop)
        theta_dense = theta_dense + lr * (c[:, None] * (xs - theta_dense)).sum(dim=0)
        dist, update = dist.update(rows, rewards, shaping)
        assert len(update) == (pop // 2 if antithetic else pop)
        apply_update(theta_seed, update)
    assert float(theta_dense.norm()) > 0.5
    assert torch.allclose(theta_seed, theta_dense, rtol=0.0, atol=1e-10)


def test_antithetic_pair_coefficients_by_hand() -> None:
    dist = make(pool_sizes=(2,), sigma_0=0.2, learning_rate=0.5)
    rows = dist.sample_rows(6)
    rewards = torch.tensor([3.0, 0.0, 1.0, 1.0, 2.0, 5.0])  # the middle pair ties: no coefficient
    _, update = dist.update(rows, rewards, ShapingConfig(method="raw"))
    c = rewards.double() - rewards.double().mean()
    d = float(c.abs().sum())
    seeds = [int(s) for s in rows[0::2, 0]]
    assert update.seeds == (seeds[0], seeds[2])
    assert update.coeffs == pytest.approx([0.1 * float(c[0] - c[1]) / d, 0.1 * float(c[4] - c[5]) / d])


def test_shared_seeds_merge_into_one_coefficient() -> None:
    dist = make(
        pool_sizes=(), sigma_0=0.1, antithetic=False, learning_rate=1.0, weight_normalisation="population"
    )
    rows = torch.tensor([[11.0, 0.1, 3.0], [11.0, 0.1, 3.0], [12.0, 0.1, 3.0], [13.0, -0.1, 3.0]])
    _, update = dist.update(rows, torch.tensor([3.0, 1.0, 0.0, 0.0]), ShapingConfig(method="raw"))
    # centred weights [2, 0, -1, -1], divided by N = 4, times the rows' signed sigma
    assert update.seeds == (11, 12, 13)
    assert update.coeffs == pytest.approx([0.05, -0.025, 0.025])


def test_all_equal_rewards_give_no_update() -> None:
    dist = make(sigma_0=0.5, total_generations=10)
    rows = dist.sample_rows(8)
    new, update = dist.update(rows, torch.full((8, 3), 0.25))
    assert update.is_empty and update == WeightUpdate()
    after = new.to_dict()["parameters"]
    before = dist.to_dict()["parameters"]
    assert after.pop("generation") == before.pop("generation") + 1  # fresh seeds next time
    assert after == before
    assert all(torch.equal(a, b) for a, b in zip(new.prompt_probs, dist.prompt_probs, strict=True))
    assert not torch.equal(new.sample_rows(8)[:, 0], rows[:, 0])


def test_step_says_why_an_update_is_empty() -> None:
    dist = make(sigma_0=0.5, total_generations=10)
    rows = dist.sample_rows(8)
    tie = dist.step(rows, torch.full((8, 3), 0.25))
    assert tie.update.is_empty and "ties" in (tie.empty_reason or "")
    assert torch.equal(tie.shaped_weights, torch.zeros(8, dtype=torch.float64))
    moved = dist.step(rows, torch.arange(8.0))
    assert moved.empty_reason is None and not moved.update.is_empty
    new, update = dist.update(rows, torch.arange(8.0))
    assert moved.distribution.to_dict() == new.to_dict() and moved.update == update
    frozen = make(evolve_weights=False)
    assert "evolve_weights" in (frozen.step(frozen.sample_rows(4), torch.arange(4.0)).empty_reason or "")


def test_the_confidence_tiebreak_moves_a_population_whose_rewards_all_tie() -> None:
    from cotrain.shaping import ShapingConfig

    dist = make(sigma_0=0.5, total_generations=10)
    rows = dist.sample_rows(8)
    rewards = torch.zeros(8, 3)
    confidences = torch.linspace(0.0, 1.0, 24).reshape(8, 3)
    tiebreak = ShapingConfig(confidence_tiebreak=0.1)
    step = dist.step(rows, rewards, tiebreak, confidences)
    assert step.empty_reason is None and not step.update.is_empty
    # all failed: the least decisive candidate (row 0) gets the highest weight
    assert int(step.shaped_weights.argmax()) == 0 and int(step.shaped_weights.argmin()) == 7
    assert dist.update(rows, rewards, tiebreak, confidences)[1] == step.update
    flat = dist.step(rows, rewards, tiebreak, torch.full((8, 3), 0.5))
    assert flat.update.is_empty and "confidences included" in (flat.empty_reason or "")


def test_bad_arguments_are_distribution_errors_and_rows_go_through_the_one_validator() -> None:
    dist = make(sigma_0=0.5, total_generations=10)
    with pytest.raises(DistributionError, match="even") as info:
        dist.sample_rows(7)
    assert isinstance(info.value, CotrainError) and isinstance(info.value, ValueError)
    rows = dist.sample_rows(4)
    rows[1, 3] = 99.0
    with pytest.raises(CandidateRowError, match="row 1: prompt id 99 out of range for slot 'slot 0'"):
        dist.update(rows, torch.arange(4.0))
    with pytest.raises(DistributionError, match="float64"):
        dist.sample_into(torch.empty(4, dist.solution_length, dtype=torch.float32))


def test_sample_into_writes_the_rows_and_returns_the_env_seed() -> None:
    dist = make(sigma_0=0.5, total_generations=10)
    out = torch.full((6, dist.solution_length), -1.0, dtype=torch.float64)
    env_seed = dist.sample_into(out)
    assert torch.equal(out, dist.sample_rows(6)) and (out[:, 2] == env_seed).all()
    assert env_seed == int(torch.randint(0, SEED_BOUND, (1,), generator=dist.make_generator()))


# ----- sampling -------------------------------------------------------------------------------------------


def test_rows_are_antithetic_pairs_with_shared_prompts_and_env_seed() -> None:
    dist = make(sigma_0=0.3, sigma_min=0.03, total_generations=20)
    rows = dist.sample_rows(12)
    assert rows.dtype == torch.float64 and rows.shape == (12, 5) == (12, dist.solution_length)
    assert torch.equal(rows[0::2, 0], rows[1::2, 0])
    assert torch.equal(rows[0::2, 3:], rows[1::2, 3:])
    assert rows[0::2, 1].tolist() == [0.3] * 6 and rows[1::2, 1].tolist() == [-0.3] * 6
    assert len(set(rows[:, 2].tolist())) == 1
    assert len(set(rows[0::2, 0].tolist())) == 6
    decoded = decode_rows(rows)
    assert all(0 <= r.noise_seed < SEED_BOUND and 0 <= r.env_seed < SEED_BOUND for r in decoded)
    assert all(r.prompt_ids[0] < 4 and r.prompt_ids[1] < 3 for r in decoded)
    with pytest.raises(ValueError, match="even"):
        dist.sample_rows(7)


def test_non_antithetic_rows_are_independent() -> None:
    rows = make(antithetic=False, sigma_0=0.2).sample_rows(7)
    assert rows[:, 1].tolist() == [0.2] * 7
    assert len(set(rows[:, 0].tolist())) == 7


def test_sampling_is_reproducible_from_base_seed_and_generation() -> None:
    dist = make()
    rows = dist.sample_rows(8)
    assert torch.equal(rows, dist.sample_rows(8))
    assert torch.equal(rows, CoEvolutionDistribution.from_dict(dist.to_dict()).sample_rows(8))
    assert torch.equal(rows, dist.sample_rows(8, dist.make_generator()))
    nxt, _ = dist.update(rows, torch.arange(8.0))
    assert nxt.generation_seed() != dist.generation_seed() == dist.generation_seed(0)
    assert not torch.equal(rows[:, [0, 2]], nxt.sample_rows(8)[:, [0, 2]])
    assert not torch.equal(rows[:, [0, 2]], make(base_seed=8).sample_rows(8)[:, [0, 2]])
    a, b = (dist.sample_rows(8, torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(a, b) and not torch.equal(a, rows)


def test_prompt_ids_follow_the_categoricals() -> None:
    dist = CoEvolutionDistribution.create(
        [3], base_seed=0, config=CoEvolutionConfig(antithetic=False), initial_probs=[[0.7, 0.2, 0.1]]
    )
    ids = dist.sample_rows(20_000)[:, 3].long()
    freq = torch.bincount(ids, minlength=3).double() / ids.numel()
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64), atol=0.015)


def test_sigma_follows_the_cosine_schedule() -> None:
    dist = make(sigma_0=0.4, sigma_min=0.1, total_generations=4)
    sigmas = []
    for _ in range(6):
        rows = dist.sample_rows(4)
        assert rows[:, 1].abs().tolist() == [dist.sigma] * 4
        sigmas.append(dist.sigma)
        dist, _ = dist.update(rows, torch.arange(4.0))
    assert sigmas[0] == pytest.approx(0.4) and sigmas[4] == sigmas[5] == pytest.approx(0.1)
    assert sigmas == sorted(sigmas, reverse=True)
    assert dist.sigma_at(2) == pytest.approx(0.25)


# ----- prompts --------------------------------------------------------------------------------------------


def test_prompt_update_is_the_online_reward_weighted_mean() -> None:
    dist = make(pool_sizes=(3,), antithetic=False, prompt_learning_rate=0.5, prob_floor=0.0, sigma_0=0.1)
    rows = dist.sample_rows(4)
    rows[:, 3] = torch.tensor([0.0, 1.0, 1.0, 2.0])
    new, _ = dist.update(rows, torch.tensor([4.0, 2.0, 3.0, 1.0]), ShapingConfig(method="raw"))
    # centred weights [1.5, -0.5, 0.5, -1.5]: positive parts 1.5 (variant 0) and 0.5 (variant 1)
    expected = 0.5 * torch.full((3,), 1 / 3, dtype=torch.float64) + 0.5 * torch.tensor([0.75, 0.25, 0.0])
    assert torch.allclose(new.prompt_probs[0], expected.double())


def test_probability_floor_keeps_every_variant_alive() -> None:
    dist = make(pool_sizes=(5,), prob_floor=0.03, prompt_learning_rate=0.9, evolve_weights=False)
    for _ in range(30):
        rows = dist.sample_rows(10)
        dist, _ = dist.update(rows, (rows[:, 3] == 4).double())
    probs = dist.prompt_probs[0]
    assert float(probs.sum()) == pytest.approx(1.0, abs=1e-12)
    assert float(probs.min()) >= 0.03 - 1e-12
    assert float(probs[4]) == pytest.approx(1 - 4 * 0.03)


def test_project_to_floor() -> None:
    out = project_to_floor([0.9, 0.1, 0.0, 0.0], 0.05)
    assert torch.allclose(out, torch.tensor([0.9 * 0.9 / 1.0, 0.1 * 0.9, 0.05, 0.05], dtype=torch.float64))
    feasible = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    assert torch.equal(project_to_floor(feasible, 0.1), feasible)
    assert torch.allclose(project_to_floor([1.0, 0.0], 0.5), torch.tensor([0.5, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="infeasible"):
        project_to_floor([0.5, 0.5, 0.0], 0.4)
    with pytest.raises(ValueError):
        project_to_floor([0.0, 0.0], 0.1)


def test_pools_grow_and_shrink() -> None:
    dist = make(pool_sizes=(2, 3), prob_floor=0.05)
    grown = dist.with_added_variant(0, 0.1)
    assert grown.pool_sizes == (3, 3) and dist.pool_sizes == (2, 3)
    assert torch.allclose(grown.prompt_probs[0], torch.tensor([0.45, 0.45, 0.1], dtype=torch.float64))
    assert grown.with_added_variant(1, 0.001).prompt_probs[1][-1] == pytest.approx(0.05)
    shrunk = grown.with_removed_variant(0, 1)
    assert torch.allclose(shrunk.prompt_probs[0], torch.tensor([0.45, 0.1], dtype=torch.float64) / 0.55)
    assert shrunk.generation == grown.generation == dist.generation
    with pytest.raises(ValueError, match="single variant"):
        make(pool_sizes=(1,)).with_removed_variant(0, 0)
    with pytest.raises(ValueError, match="infeasible"):
        make(pool_sizes=(4,), prob_floor=0.25).with_added_variant(0, 0.1)
    with pytest.raises(ValueError, match="slot"):
        dist.with_added_variant(2, 0.1)
    with pytest.raises(ValueError, match="out of range"):
        dist.with_removed_variant(1, 3)


def test_update_rejects_prompt_ids_outside_the_pools() -> None:
    dist = make(pool_sizes=(2,))
    rows = dist.sample_rows(4)
    rows[0, 3] = 2.0
    with pytest.raises(ValueError, match="out of range"):
        dist.update(rows, torch.arange(4.0))


# ----- ablation switches ----------------------------------------------------------------------------------


def test_weights_only_keeps_the_initial_most_probable_prompts() -> None:
    dist = CoEvolutionDistribution.create(
        [3, 2],
        base_seed=1,
        config=CoEvolutionConfig(evolve_prompts=False),
        initial_probs=[[0.2, 0.5, 0.3], [0.6, 0.4]],
    )
    rows = dist.sample_rows(8)
    assert rows[:, 3:].tolist() == [[1.0, 0.0]] * 8
    new, update = dist.update(rows, torch.arange(8.0))
    assert not update.is_empty
    assert all(torch.equal(a, b) for a, b in zip(new.prompt_probs, dist.prompt_probs, strict=True))
    with pytest.raises(ValueError, match="frozen"):
        dist.with_removed_variant(0, 1)
    assert dist.with_removed_variant(0, 0).most_probable_prompt_ids() == (0, 0)


def test_prompts_only_rows_carry_no_perturbation() -> None:
    dist = make(evolve_weights=False, sigma_0=0.5)
    rows = dist.sample_rows(7)  # odd is fine: no pairs without weight noise
    assert dist.sigma == 0.0
    assert not rows[:, :2].any()
    new, update = dist.update(rows, torch.arange(7.0))
    assert update.is_empty
    assert not torch.equal(new.prompt_probs[0], dist.prompt_probs[0])


def test_both_switches_off_is_a_fixed_baseline() -> None:
    dist = make(evolve_weights=False, evolve_prompts=False)
    rows = dist.sample_rows(3)
    new, update = dist.update(rows, torch.arange(3.0))
    assert (
        update.is_empty
        and new.to_dict()["parameters"]["prompt_probs"] == dist.to_dict()["parameters"]["prompt_probs"]
    )


# ----- EvoTorch contract ----------------------------------------------------------------------------------


def test_parameters_are_declared() -> None:
    dist = make()
    cls = CoEvolutionDistribution
    assert set(dist.parameters) == cls.MANDATORY_PARAMETERS | cls.OPTIONAL_PARAMETERS
    assert {"sigma_0", "prompt_probs", "base_seed"} == cls.MANDATORY_PARAMETERS
    assert dist.dtype == torch.float64 and dist.solution_length == 5
    with pytest.raises(ValueError, match="unknown"):
        cls({**dist.parameters, "mu": torch.zeros(3)})
    with pytest.raises(ValueError, match="missing"):
        cls({"sigma_0": 0.1, "prompt_probs": ()})
    with pytest.raises(ValueError, match="float64"):
        cls(dist.parameters, dtype=torch.float32)
    with pytest.raises(ValueError, match="solution_length"):
        cls(dist.parameters, solution_length=4)


def test_modified_copy_returns_a_new_object() -> None:
    dist = make(sigma_0=0.2)
    copy_ = dist.modified_copy(sigma_0=0.4, generation=3)
    assert type(copy_) is CoEvolutionDistribution and copy_ is not dist
    assert copy_.parameters["sigma_0"] == 0.4 and copy_.generation == 3
    assert dist.parameters["sigma_0"] == 0.2 and dist.generation == 0
    with pytest.raises(ValueError, match="sigma_min"):
        dist.modified_copy(sigma_0=1e-6)
    assert dist.to("cpu") is dist
    assert copy.deepcopy(dist).to_dict() == dist.to_dict() == pickle.loads(pickle.dumps(dist)).to_dict()
    assert dist.clone().to_dict() == dist.to_dict()


def test_evotorch_sampling_api() -> None:
    dist = make()

    class ProblemLike:
        generator = torch.Generator().manual_seed(5)

    rows = dist.sample_rows(6)
    assert torch.equal(dist.sample(6), rows)
    out = torch.empty(6, 5, dtype=torch.float64)
    assert torch.equal(dist.sample(out=out), rows)
    assert torch.equal(CoEvolutionDistribution.functional_sample(6, dist.parameters), rows)
    assert torch.equal(
        dist.sample(6, generator=ProblemLike()), dist.sample_rows(6, torch.Generator().manual_seed(5))
    )
    with pytest.raises(TypeError):
        dist.sample(6, generator=42)


def test_evotorch_gradient_path_matches_update() -> None:
    dist = make(sigma_0=0.2, learning_rate=0.7, prompt_learning_rate=0.3)
    rows = dist.sample_rows(10)
    fitness = torch.tensor([0.3, 2.0, -1.0, 0.5, 0.9, 4.0, 1.1, 0.0, -0.4, 2.5], dtype=torch.float64)
    grads = dist.compute_gradients(rows, fitness, objective_sense="max", ranking_method="centered")
    via_evotorch = dist.update_parameters(grads)
    shaping = ShapingConfig(method="centered_ranks", per_task_centering=False)
    via_update, update = dist.update(rows, fitness[:, None], shaping)
    assert CoEvolutionDistribution.weight_update_from(grads) == update and len(update) == 5
    assert via_evotorch.to_dict() == via_update.to_dict()
    slower = dist.update_parameters(grads, learning_rates={"prompt_probs": 0.1})
    drift = (slower.prompt_probs[0] - dist.prompt_probs[0]).abs().sum()
    assert 0 < drift < (via_update.prompt_probs[0] - dist.prompt_probs[0]).abs().sum()
    with pytest.raises(ValueError, match="optimizers"):
        dist.update_parameters(grads, optimizers={"mu": object()})


# ----- checkpoints and validation -------------------------------------------------------------------------


def test_to_dict_round_trips_through_json() -> None:
    dist = make(sigma_0=0.37, learning_rate=0.123456789, base_seed=2**40 + 3)
    rows = dist.sample_rows(6)
    dist, _ = dist.update(rows, torch.randn(6, 2, generator=torch.Generator().manual_seed(0)))
    dist = dist.with_added_variant(1, 0.07)
    payload = json.loads(json.dumps(dist.to_dict()))
    back = CoEvolutionDistribution.from_dict(payload)
    assert back.to_dict() == dist.to_dict()
    assert all(torch.equal(a, b) for a, b in zip(back.prompt_probs, dist.prompt_probs, strict=True))
    assert torch.equal(back.sample_rows(6), dist.sample_rows(6))
    with pytest.raises(ValueError, match="format"):
        CoEvolutionDistribution.from_dict({"format": "pickle", "parameters": payload["parameters"]})


def test_weight_update_round_trip_and_validation() -> None:
    update = WeightUpdate((3, 9), (0.5, -0.25))
    assert WeightUpdate.from_dict(json.loads(json.dumps(update.to_dict()))) == update
    with pytest.raises(ValueError):
        WeightUpdate((1,), ())
    with pytest.raises(ValueError):
        WeightUpdate((-1,), (0.1,))
    with pytest.raises(ValueError):
        WeightUpdate((1,), (float("nan"),))


@pytest.mark.parametrize(
    "bad",
    [
        {"sigma_0": 0.0},
        {"sigma_min": 1.0},
        {"total_generations": 0},
        {"learning_rate": -1.0},
        {"prompt_learning_rate": 1.5},
        {"prob_floor": 1.0},
        {"antithetic": 1},
        {"weight_normalisation": "sum"},
        {"baseline_prior": 1.5},
        {"baseline_prior": -0.1},
    ],
)
def test_config_validation(bad: dict) -> None:
    with pytest.raises(ValueError):
        CoEvolutionConfig(**bad)


def test_update_validates_shapes_and_rewards() -> None:
    dist = make()
    rows = dist.sample_rows(4)
    with pytest.raises(ValueError, match="rewards for"):
        dist.update(rows, torch.zeros(5, 2))
    with pytest.raises(ValueError, match="NaN"):
        dist.update(rows, torch.tensor([1.0, float("nan"), 0.0, 0.0]))
    with pytest.raises(ValueError, match="shape"):
        dist.update(rows[:, :4], torch.zeros(4))
    with pytest.raises(ValueError, match="probability"):
        CoEvolutionDistribution({"sigma_0": 0.1, "base_seed": 0, "prompt_probs": [[0.5, 0.6]]})


# ----- the prompt prior (issue #13 item 4) ----------------------------------------------------------------


def test_the_baseline_prior_puts_mass_on_the_baseline_genome_at_generation_0() -> None:
    """``p = w * onehot(baseline) + (1 - w) * uniform`` per slot, then the floor; w = 0 is the uniform start
    bit for bit, and the baseline is the most probable genome (what the centre and the start evaluate)."""
    half = CoEvolutionDistribution.create([4, 3], base_seed=0, baseline_ids=[2, 0],
                                          config=CoEvolutionConfig(baseline_prior=0.5))
    assert [p.tolist() for p in half.prompt_probs] == [[0.125, 0.125, 0.625, 0.125], [2 / 3, 1 / 6, 1 / 6]]
    assert half.most_probable_prompt_ids() == (2, 0)
    zero = CoEvolutionDistribution.create([4, 3], base_seed=0, baseline_ids=[2, 0],
                                          config=CoEvolutionConfig(baseline_prior=0.0))
    uniform = CoEvolutionDistribution.create([4, 3], base_seed=0)
    assert all(torch.equal(a, b) for a, b in zip(zero.prompt_probs, uniform.prompt_probs, strict=True))
    full = CoEvolutionDistribution.create([4, 3], base_seed=0, baseline_ids=[1, 2],
                                          config=CoEvolutionConfig(baseline_prior=1.0, prob_floor=0.05))
    assert [p.tolist() for p in full.prompt_probs] == [
        pytest.approx([0.05, 0.85, 0.05, 0.05]), pytest.approx([0.05, 0.05, 0.9])]  # the floor still applies
    rows = half.sample_rows(4000)  # antithetic pairs: 2000 draws per slot
    assert float((rows[::2, 3] == 2).double().mean()) == pytest.approx(0.625, abs=0.04)
    with pytest.raises(DistributionError, match="outside the pool sizes"):
        CoEvolutionDistribution.create([4, 3], base_seed=0, baseline_ids=[4, 0])
    with pytest.raises(DistributionError, match="name 1 slot"):
        CoEvolutionDistribution.create([4, 3], base_seed=0, baseline_ids=[0])
    with pytest.raises(DistributionError, match="not both"):
        CoEvolutionDistribution.create([4, 3], base_seed=0, baseline_ids=[0, 0],
                                       initial_probs=[[0.25] * 4, [1 / 3] * 3])


def test_a_run_starts_on_its_baseline_genome_and_a_reopened_run_keeps_the_prior(tmp_path: Path) -> None:
    """The run's generation-0 distribution puts ``es.baseline_prior`` on ``eval.baseline`` of its pools; the
    run directory rebuilds the same one (a run resumed before its first generation), and a distribution
    logged after a generation round-trips exactly."""
    from cotrain.checkpoint import RunDir, initial_distribution, load_pools
    from cotrain.config import config_from_dict
    from cotrain.errors import ConfigError

    pools = load_pools(None)
    cfg = config_from_dict(toy_config_dict())
    dist = initial_distribution(cfg, pools)
    no_skill = pools.baseline("no_skill").indices
    assert cfg.es.distribution.baseline_prior == 0.5 and dist.most_probable_prompt_ids() == no_skill
    for probs, best in zip(dist.prompt_probs, no_skill, strict=True):
        assert float(probs[best]) == 0.5 + 0.5 / probs.numel()
    other = config_from_dict(toy_config_dict(eval={"baseline": "default"}, es={"baseline_prior": 0.8}))
    assert initial_distribution(other, pools).most_probable_prompt_ids() == pools.baseline("default").indices
    run = RunDir.create(tmp_path / "run", cfg, pools)
    run.release()
    reopened = RunDir.open(tmp_path / "run").load_state().distribution
    assert reopened.to_dict() == dist.to_dict()
    logged = CoEvolutionDistribution.from_dict(json.loads(json.dumps(dist.to_dict())))
    assert [p.tolist() for p in logged.prompt_probs] == [p.tolist() for p in dist.prompt_probs]
    with pytest.raises(ConfigError, match=r"es.baseline_prior.*eval.baseline = 'nope'"):
        initial_distribution(config_from_dict(toy_config_dict(eval={"baseline": "nope"})), pools)
    uniform = initial_distribution(config_from_dict(toy_config_dict(
        eval={"baseline": "nope"}, es={"baseline_prior": 0.0})), pools)
    assert all(p.tolist() == [0.25] * 4 for p in uniform.prompt_probs)
    for bad, message in ((2.0, r"es: es.baseline_prior must lie in \[0, 1\], got 2.0"),
                         ("high", r"es.baseline_prior: expected float")):
        with pytest.raises(ConfigError, match=message):
            config_from_dict(toy_config_dict(es={"baseline_prior": bad}))


# ----- anchored draws (es.anchor_pairs) -----------------------------------------------------------------


def test_anchored_draws_take_the_most_probable_genome_and_leave_the_others_as_sampled() -> None:
    """The first ``anchor_pairs`` draws carry the most probable ids (both rows of an antithetic pair); every
    other row, noise seed, sigma and env seed is what the unanchored distribution samples from the same
    stream."""
    free = CoEvolutionDistribution.create([4, 3, 4], base_seed=5, baseline_ids=[1, 2, 0],
                                          config=CoEvolutionConfig(sigma_0=0.01))
    anchored = CoEvolutionDistribution.create([4, 3, 4], base_seed=5, baseline_ids=[1, 2, 0],
                                              config=CoEvolutionConfig(sigma_0=0.01, anchor_pairs=2))
    a, f = anchored.sample_rows(8), free.sample_rows(8)
    assert a[:4, 3:].tolist() == [[1.0, 2.0, 0.0]] * 4  # two pairs on the incumbent genome
    assert torch.equal(a[4:], f[4:]) and torch.equal(a[:, :3], f[:, :3])
    assert not torch.equal(a[:4, 3:], f[:4, 3:])  # seed 5's first draws are not all the incumbent
    single = CoEvolutionDistribution.create([4, 3, 4], base_seed=5, baseline_ids=[1, 2, 0],
                                            config=CoEvolutionConfig(antithetic=False, anchor_pairs=3))
    rows = single.sample_rows(5)  # without antithetic pairs a draw is one row
    assert rows[:3, 3:].tolist() == [[1.0, 2.0, 0.0]] * 3


def test_anchoring_follows_the_mode_and_needs_a_sampled_draw() -> None:
    dist = make(pool_sizes=(3,), anchor_pairs=1, prompt_learning_rate=1.0, prob_floor=0.0, sigma_0=0.1)
    assert dist.most_probable_prompt_ids() == (0,)  # uniform: the lowest index wins the tie
    rows = dist.sample_rows(4)
    assert rows[:2, 3].tolist() == [0.0, 0.0]
    rows[2:, 3] = 2.0
    moved, _ = dist.update(rows, torch.tensor([0.0, 0.0, 1.0, 1.0]))  # the challenger beats the incumbent
    assert moved.most_probable_prompt_ids() == (2,)
    assert moved.sample_rows(4)[:2, 3].tolist() == [2.0, 2.0]  # the next generation anchors on the new mode
    with pytest.raises(DistributionError, match="anchor_pairs=2 leaves no sampled genome among the 2 draws"):
        make(pool_sizes=(3,), anchor_pairs=2).sample_rows(4)
    frozen = make(pool_sizes=(3,), anchor_pairs=5, evolve_prompts=False)  # every draw is the mode already
    assert frozen.sample_rows(4)[:, 3].tolist() == [0.0] * 4
    for bad in (-1, 1.0, True):
        with pytest.raises(DistributionError, match="anchor_pairs must be an int >= 0"):
            CoEvolutionConfig(anchor_pairs=bad)  # type: ignore[arg-type]


def test_anchor_pairs_is_left_out_of_logs_at_its_default_and_round_trips_when_set() -> None:
    """Runs logged before ``anchor_pairs`` existed keep their distribution and config forms (and the grid's
    config digests); a set value round-trips through the distribution's and the config's JSON."""
    from cotrain.config import config_from_dict
    from cotrain.errors import ConfigError

    plain = make()
    assert "anchor_pairs" not in plain.to_dict()["parameters"]
    assert CoEvolutionDistribution.from_dict(plain.to_dict()).config.anchor_pairs == 0
    set_ = make(anchor_pairs=1)
    back = CoEvolutionDistribution.from_dict(json.loads(json.dumps(set_.to_dict())))
    assert back.config.anchor_pairs == 1 and back.to_dict() == set_.to_dict()
    assert "anchor_pairs" not in config_from_dict(toy_config_dict()).to_dict()["es"]
    cfg = config_from_dict(toy_config_dict(es={"anchor_pairs": 1}))
    assert cfg.es.distribution.anchor_pairs == 1 and cfg.to_dict()["es"]["anchor_pairs"] == 1
    with pytest.raises(ConfigError, match=r"es.anchor_pairs: 2 anchored draw\(s\) of the 2 of a population"):
        config_from_dict(toy_config_dict(es={"anchor_pairs": 2}))
    assert config_from_dict(toy_config_dict(es={"anchor_pairs": 2, "evolve_prompts": False}))


def test_an_anchored_run_scores_its_first_pair_under_the_mode_it_was_sampled_from(tmp_path: Path) -> None:
    """A real run (tiny Qwen, toy env): in every generation's logged rows the first antithetic pair carries
    the most probable genome of the distribution it was sampled from (the start's, then the one logged by the
    generation before)."""
    from cotrain.checkpoint import RunDir, initial_distribution, load_pools
    from cotrain.config import config_from_dict
    from cotrain.trainer import train

    cfg = config_from_dict(toy_config_dict(es={"anchor_pairs": 1, "generations": 3}))
    train(cfg, tmp_path / "run")
    records = RunDir.open(tmp_path / "run").records()
    before = initial_distribution(cfg, load_pools(cfg.prompts.pools))
    assert len(records) == 3
    for record in records:
        rows = torch.tensor(record["rows"], dtype=torch.float64)
        mode = [float(i) for i in before.most_probable_prompt_ids()]
        assert rows[0, 3:].tolist() == mode and rows[1, 3:].tolist() == mode
        before = CoEvolutionDistribution.from_dict(record["distribution"])
        assert before.config.anchor_pairs == 1
