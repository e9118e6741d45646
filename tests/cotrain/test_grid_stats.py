"""The grid's statistics against cases computed by hand (exact bootstrap distributions)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cotrain.grid_stats import GridStatsError, bootstrap_mean, paired_differences, paired_estimate


def test_one_seed_interval_is_the_hand_computed_bootstrap_over_tasks() -> None:
    # Tasks [0, 0, 0, 1]: a resample's mean is K/4 with K ~ Binomial(4, 1/4):
    # P(K<=1) = 189/256 = 0.738, P(K<=2) = 243/256 = 0.949, P(K<=3) = 255/256 = 0.996,
    # so the 2.5 % quantile is 0 and the 97.5 % quantile is 3/4.
    est = bootstrap_mean([0, 0, 0, 1], n_boot=20_000, seed=1)
    assert est.mean == 0.25
    assert (est.low, est.high) == (0.0, 0.75)
    assert (est.n_seeds, est.n_tasks, est.level) == (1, 4, 0.95)
    assert not est.excludes_zero


def test_two_way_interval_matches_the_exact_crossed_bootstrap() -> None:
    # Seeds and tasks are resampled independently: enumerate all 3**3 * 3**3 equally likely resamples.
    data = np.array([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
    exact = sorted(data[np.ix_(rows, cols)].mean()
                   for rows in itertools.product(range(3), repeat=3)
                   for cols in itertools.product(range(3), repeat=3))
    est = bootstrap_mean(data, level=0.8, n_boot=40_000, seed=3)
    want_low, want_high = np.quantile(exact, [0.1, 0.9])
    assert est.mean == pytest.approx(6 / 9)
    assert est.low == pytest.approx(want_low, abs=0.04)
    assert est.high == pytest.approx(want_high, abs=0.04)
    # Resampling cells one by one would ignore that a task is shared by every seed: narrower.
    cells = bootstrap_mean(data.reshape(1, -1), level=0.8, n_boot=40_000, seed=3)
    assert cells.high - cells.low < est.high - est.low


def test_paired_differences_against_a_one_row_start() -> None:
    arm = [[1, 1, 0], [1, 0, 0]]
    start = [[0, 1, 0]]
    assert paired_differences(arm, start).tolist() == [[1, 0, 0], [1, -1, 0]]
    est = paired_estimate(arm, start, n_boot=2_000)
    assert est.mean == pytest.approx(1 / 6)
    # A gain on every task and seed: the whole interval is above 0.
    sure = paired_estimate([[1, 1, 1, 1], [1, 1, 1, 1]], [[0, 0, 0, 0]], n_boot=500)
    assert (sure.mean, sure.low, sure.high) == (1.0, 1.0, 1.0) and sure.excludes_zero
    # Equal arms: exactly zero, never "significant".
    same = paired_estimate(arm, arm, n_boot=500)
    assert (same.low, same.high) == (0.0, 0.0) and not same.excludes_zero


def test_bad_outcomes_name_the_problem() -> None:
    with pytest.raises(GridStatsError, match="same tasks"):
        paired_differences([[1, 0]], [[1, 0, 1]])
    with pytest.raises(GridStatsError, match="same seeds"):
        paired_differences([[1, 0], [0, 0], [1, 1]], [[1, 0], [0, 1]])
    with pytest.raises(GridStatsError, match="finite"):
        bootstrap_mean([[1.0, float("nan")]])
    with pytest.raises(GridStatsError, match="non-empty"):
        bootstrap_mean([])
    with pytest.raises(GridStatsError, match="level"):
        bootstrap_mean([1, 0], level=1.0)
    assert isinstance(GridStatsError("x"), ValueError)
