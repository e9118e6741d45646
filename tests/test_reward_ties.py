"""The arithmetic of benchmarks.reward_ties: the chance that independent episodes tie, and the population
that gives a reward difference even odds (the counts on real runs: tests/cotrain/test_grid_run.py)."""

from __future__ import annotations

import pytest

from benchmarks.reward_ties import TieCount, population_for_signal, tie_chance


def test_tie_chance_is_all_solved_or_all_failed_on_every_task() -> None:
    assert tie_chance(0.0, 4) == 1.0 and tie_chance(1.0, 4) == 1.0
    assert tie_chance(0.5, 2) == pytest.approx(0.5)
    assert tie_chance(0.2, 4) == pytest.approx(0.2 ** 4 + 0.8 ** 4)
    assert tie_chance(0.2, 4, tasks=2) == pytest.approx((0.2 ** 4 + 0.8 ** 4) ** 2)


def test_population_for_signal_is_the_smallest_even_population_at_even_odds() -> None:
    assert population_for_signal(0.5) == 2  # 0.25 + 0.25
    assert population_for_signal(0.2) == 4  # 4: 0.41; 2: 0.68
    assert population_for_signal(0.04) == 18  # 0.96^16 = 0.52 > 0.5 >= 0.96^18 = 0.48
    assert population_for_signal(0.2, tasks=2) == 2  # two chances per generation: 0.68^2 = 0.46
    assert population_for_signal(0.0) is None and population_for_signal(1.0) is None
    assert population_for_signal(1e-9, limit=1000) is None


def test_shares_are_none_without_generations() -> None:
    empty = TieCount("g", "s", "both", runs=0, generations=0, tied=0, missing=1)
    assert (empty.share, empty.success_rate, empty.expected_share) == (None, None, None)
    count = TieCount("g", "s", "both", runs=1, generations=4, tied=3, missing=0, episodes=16, successes=4,
                     expected_tied=2.0)
    assert (count.share, count.success_rate, count.expected_share) == (0.75, 0.25, 0.5)
