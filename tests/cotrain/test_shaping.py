from __future__ import annotations

import pytest
import torch
from evotorch.tools.ranking import centered as evotorch_centered

from cotrain.errors import DistributionError
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


def test_confidence_tiebreak_hand_computed_case() -> None:
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    confidences = torch.tensor([[0.5, 0.2], [1.0, 0.2], [3.0, 0.1]])
    config = ShapingConfig(confidence_tiebreak=0.1)
    fitness = candidate_fitness(rewards, config, confidences)
    base = candidate_fitness(rewards, ShapingConfig())
    expected = [0.1 * (0.5 / 1.5 - 0.2 / 1.2) / 2, 0.1 * (1.0 / 2.0 - 0.2 / 1.2) / 2,
                0.1 * (-3.0 / 4.0 - 0.1 / 1.1) / 2]
    torch.testing.assert_close(fitness - base, torch.tensor(expected, dtype=torch.float64))
    # the first two tie on rewards: the more decisive on its solved task wins; the third stays last
    assert shape_fitness(rewards, config, confidences).tolist() == [0.0, 0.5, -0.5]
    assert shape_fitness(rewards, ShapingConfig()).tolist() == [0.25, 0.25, -0.5]
    halved = ShapingConfig(confidence_tiebreak=0.1, confidence_scale=2.0)
    assert float(confidence_tiebreak_term(rewards, confidences, halved)[0]) == pytest.approx(
        0.1 * (0.5 / 2.5 - 0.2 / 2.2) / 2)


def confidence_tiebreak_term(rewards: torch.Tensor, confidences: torch.Tensor,
                             config: ShapingConfig) -> torch.Tensor:
    from cotrain.shaping import confidence_tiebreak

    return confidence_tiebreak(as_reward_matrix(rewards), confidences, config)


def test_confidence_tiebreak_keeps_small_differences_beside_large_margins() -> None:
    # a prior-decided step puts the episode mean near 40; the members still differ by 1e-6 in the rest
    rewards = torch.ones(2, 1)
    confidences = torch.tensor([[40.0], [40.0 + 1e-6]], dtype=torch.float64)
    assert shape_fitness(rewards, ShapingConfig(confidence_tiebreak=0.1), confidences).tolist() == [-0.5, 0.5]


def test_confidence_tiebreak_turns_an_all_tied_population_into_a_signal() -> None:
    rewards = torch.zeros(6, 3)
    confidences = torch.rand(6, 3, generator=torch.Generator().manual_seed(0))
    assert not shape_fitness(rewards, ShapingConfig()).any()
    weights = shape_fitness(rewards, ShapingConfig(confidence_tiebreak=0.1), confidences)
    assert sorted(weights.tolist()) == pytest.approx([-0.5, -0.3, -0.1, 0.1, 0.3, 0.5])
    # failed episodes: the less decisive candidate ranks higher
    assert int(weights.argmax()) == int(confidences.mean(dim=1).argmin())


def test_confidence_tiebreak_never_reorders_different_rewards() -> None:
    gen = torch.Generator().manual_seed(3)
    for n_tasks in (1, 2, 4, 8):
        rewards = (torch.rand(40, n_tasks, generator=gen) < 0.5).to(torch.float64)
        confidences = torch.randn(40, n_tasks, generator=gen) * 100
        weight = 1 / (2 * n_tasks) - 1e-6  # just below the bound
        fitness = candidate_fitness(rewards, ShapingConfig(confidence_tiebreak=weight), confidences)
        means = rewards.mean(dim=1)
        for i in range(40):
            for j in range(40):
                if means[i] > means[j]:
                    assert fitness[i] > fitness[j]


def test_confidence_tiebreak_errors_name_the_problem() -> None:
    rewards = torch.zeros(3, 2)
    with pytest.raises(DistributionError, match="needs the episodes' confidences"):
        shape_fitness(rewards, ShapingConfig(confidence_tiebreak=0.1))
    with pytest.raises(DistributionError, match=r"too large for 2 task\(s\).*below 1 / \(2 x 2\) = 0.25"):
        shape_fitness(rewards, ShapingConfig(confidence_tiebreak=0.25), torch.zeros(3, 2))
    with pytest.raises(DistributionError, match=r"confidences of shape \(3, 1\)"):
        shape_fitness(rewards, ShapingConfig(confidence_tiebreak=0.1), torch.zeros(3, 1))
    with pytest.raises(DistributionError, match="NaN or inf"):
        shape_fitness(rewards, ShapingConfig(confidence_tiebreak=0.1), torch.full((3, 2), float("nan")))
    for bad, match in [({"confidence_tiebreak": -0.1}, ">= 0"), ({"confidence_scale": 0.0}, "> 0"),
                       ({"confidence_tiebreak": float("inf")}, "finite"),
                       ({"confidence_scale": "1"}, "finite"),
                       ({"confidence_tiebreak": 0.1, "per_task_scaling": True}, "per_task_scaling")]:
        with pytest.raises(DistributionError, match=match):
            ShapingConfig(**bad)  # type: ignore[arg-type]


def test_reference_credit_hand_computed_case() -> None:
    rewards = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    credits = torch.tensor([[0.5, -0.5], [0.8, 0.2], [1.0, 1.0]])
    config = ShapingConfig(reference_credit=0.4)
    fitness = candidate_fitness(rewards, config, credits=credits)
    # reward means 0.5, 0.5, 0 centred by the task means' mean (1/3): 1/6, 1/6, -1/3; credit means 0, 0.5, 1
    assert fitness.tolist() == pytest.approx([1 / 6 + 0.0, 1 / 6 + 0.2, -1 / 3 + 0.4])
    assert shape_fitness(rewards, config, credits=credits).tolist() == [0.0, 0.5, -0.5]
    dense = ShapingConfig(reference_credit=0.8)  # 1/6, 1/6 + 0.4, -1/3 + 0.8: the unsolved one passes one
    assert shape_fitness(rewards, dense, credits=credits).tolist() == [-0.5, 0.5, 0.0]
    small = ShapingConfig(reference_credit=0.1)
    assert shape_fitness(rewards, small, credits=credits).tolist() == [-0.5 + 0.5, 0.5, -0.5]  # a tie-break
    assert shape_fitness(torch.zeros(3, 2), small, credits=credits).tolist() == [-0.5, 0.0, 0.5]


def test_reference_credit_errors_name_the_problem() -> None:
    rewards = torch.zeros(3, 2)
    config = ShapingConfig(reference_credit=0.5)
    with pytest.raises(DistributionError, match="needs the episodes' reference credits"):
        shape_fitness(rewards, config)
    with pytest.raises(DistributionError, match=r"reference credits of shape \(3, 1\)"):
        shape_fitness(rewards, config, credits=torch.zeros(3, 1))
    with pytest.raises(DistributionError, match=r"finite and in \[-1, 1\]"):
        shape_fitness(rewards, config, credits=torch.full((3, 2), 1.5))
    with pytest.raises(DistributionError, match=r"finite and in \[-1, 1\]"):
        shape_fitness(rewards, config, credits=torch.full((3, 2), float("nan")))
    for bad, match in [(-0.1, ">= 0"), (float("nan"), "finite"), ("1", "finite")]:
        with pytest.raises(DistributionError, match=match):
            ShapingConfig(reference_credit=bad)  # type: ignore[arg-type]
