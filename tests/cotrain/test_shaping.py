from __future__ import annotations

import pytest
import torch
from evotorch.tools.ranking import centered as evotorch_centered

from cotrain.shaping import ShapingConfig, as_reward_matrix, candidate_fitness, centered_ranks, shape_fitness


def test_centered_ranks_match_evotorch_without_ties() -> None:
    values = torch.tensor([0.3, -2.0, 5.0, 1.0, 0.9], dtype=torch.float64)
    ranks = centered_ranks(values)
    assert torch.equal(ranks, evotorch_centered(values))
    assert ranks.max() == 0.5 and ranks.min() == -0.5


def test_ties_get_their_average_rank() -> None:
    ranks = centered_ranks(torch.tensor([1.0, 1.0, 0.0, 2.0]))
    assert ranks.tolist() == [0.0, 0.0, -0.5, 0.5]
    assert float(ranks.sum()) == 0.0


def test_ties_survive_rounding_noise() -> None:
    ranks = centered_ranks(torch.tensor([0.3, 0.1 + 0.2, 0.0]))  # 0.1 + 0.2 == 0.30000000000000004
    assert ranks[0] == ranks[1] == 0.25


def test_equal_reward_rows_get_equal_weights() -> None:
    rewards = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    for method in ("centered_ranks", "zscore", "raw"):
        w = shape_fitness(rewards, ShapingConfig(method=method))
        assert w[0] == w[2]
        assert w[3] > w[0] > w[1]


@pytest.mark.parametrize("method", ["centered_ranks", "zscore", "raw"])
@pytest.mark.parametrize("scaling", [False, True])
def test_all_equal_fitness_gives_all_zero_weights(method: str, scaling: bool) -> None:
    config = ShapingConfig(method=method, per_task_scaling=scaling)
    assert not shape_fitness(torch.full((6, 3), 0.7), config).any()
    # Different tasks solved, same count: the mean-over-tasks fitness ties everywhere.
    swapped = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    assert not shape_fitness(swapped, config).any()


def test_centering_subtracts_task_means_and_leaves_ranks_and_zscores_alone() -> None:
    rewards = torch.tensor([[1.0, 0.2], [0.0, 0.4], [1.0, 0.9], [0.0, 0.1]])
    on, off = ShapingConfig(method="raw"), ShapingConfig(method="raw", per_task_centering=False)
    assert torch.allclose(shape_fitness(rewards, off), rewards.double().mean(dim=1))
    centred = rewards.double() - rewards.double().mean(dim=0)
    assert torch.allclose(shape_fitness(rewards, on), centred.mean(dim=1))
    for method in ("centered_ranks", "zscore"):
        a = shape_fitness(rewards, ShapingConfig(method=method))
        b = shape_fitness(rewards, ShapingConfig(method=method, per_task_centering=False))
        assert torch.allclose(a, b)


def test_per_task_scaling_credits_the_hard_task() -> None:
    # Task 0 is solved by half the candidates, task 1 only by candidate 3.
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    plain = shape_fitness(rewards)
    assert plain[0] == plain[1] == plain[3]
    scaled = shape_fitness(rewards, ShapingConfig(per_task_scaling=True))
    assert scaled[3] > scaled[0] == scaled[1] > scaled[2]
    fitness = candidate_fitness(rewards, ShapingConfig(per_task_scaling=True))
    expected = (
        torch.tensor([1 - 1 / 3**0.5, 1 - 1 / 3**0.5, -1 - 1 / 3**0.5, -1 + 3**0.5], dtype=torch.float64) / 2
    )
    assert torch.allclose(fitness, expected)


def test_task_without_spread_counts_zero_under_scaling() -> None:
    rewards = torch.tensor([[0.2], [0.9], [0.4]], dtype=torch.float64)
    config = ShapingConfig(per_task_scaling=True)
    with_flat = torch.cat([rewards, torch.ones(3, 1, dtype=torch.float64)], dim=1)
    assert torch.allclose(candidate_fitness(with_flat, config) * 2, candidate_fitness(rewards, config))


def test_zscore_math() -> None:
    rewards = torch.tensor([3.0, 1.0, 4.0, 1.5, 9.0])
    w = shape_fitness(rewards, ShapingConfig(method="zscore"))
    assert float(w.mean()) == pytest.approx(0.0, abs=1e-12)
    assert float(w.std(unbiased=False)) == pytest.approx(1.0)
    assert torch.equal(torch.argsort(w), torch.argsort(rewards))


def test_output_is_float64_of_population_length() -> None:
    w = shape_fitness([[0.0, 1.0], [1.0, 1.0], [0.5, 0.0]])
    assert w.dtype == torch.float64 and w.shape == (3,)


def test_reward_matrix_validation() -> None:
    assert as_reward_matrix([1.0, 2.0]).shape == (2, 1)
    with pytest.raises(ValueError, match="NaN"):
        shape_fitness([[1.0], [float("nan")]])
    with pytest.raises(ValueError):
        as_reward_matrix(torch.zeros(2, 2, 2))
    with pytest.raises(ValueError):
        as_reward_matrix(torch.zeros(0, 3))


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="method"):
        ShapingConfig(method="ranks")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="per_task_centering"):
        ShapingConfig(per_task_centering=False, per_task_scaling=True)
