"""The co-evolution headline's chance level against cases enumerated by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cotrain.errors import GridStatsError
from cotrain.grid_chance import count_chance, count_distribution, headline_chance, label_chances


@pytest.mark.parametrize(("totals", "beats", "at_least"), [
    ([[2, 1, 0]], 1 / 3, 1 / 3),          # both gets the 2 in 2 of the 6 orders
    ([[1, 1, 0]], 0.0, 2 / 3),            # a 1 for both always meets the other 1: ties, never a win
    ([[0, 0, 0]], 0.0, 1.0),              # all tied at 0: "at least as good" always, a win never
    ([[1, 0, 0], [1, 0, 0]], 1 / 9, 5 / 9),  # both gets both 1s (1/9) or one, tied with the other's (4/9)
    ([[2, 1, 1], [2, 1, 1]], 1 / 9, 5 / 9),
])
def test_label_chances_by_hand(totals: list[list[int]], beats: float, at_least: float) -> None:
    assert label_chances(totals) == pytest.approx((beats, at_least))


def test_label_chances_match_brute_force_enumeration() -> None:
    rng = np.random.default_rng(0)
    totals = rng.integers(0, 4, (3, 3)).astype(float)
    wins = ties = 0
    orders = list(itertools.permutations(range(3)))
    for choice in itertools.product(orders, repeat=3):
        sums = sum(totals[s][list(o)] for s, o in enumerate(choice))
        wins += sums[0] > max(sums[1:])
        ties += sums[0] >= max(sums[1:])
    n = len(orders) ** 3
    assert label_chances(totals) == pytest.approx((wins / n, ties / n))


def test_count_distribution_is_the_poisson_binomial() -> None:
    assert count_distribution([0.5, 0.5]).tolist() == pytest.approx([0.25, 0.5, 0.25])
    assert count_distribution([1.0, 0.2]).tolist() == pytest.approx([0.0, 0.8, 0.2])
    assert count_distribution([]).tolist() == [1.0]


def test_count_chance_p_value_is_the_upper_tail() -> None:
    c = count_chance([0.5, 0.5], 1)
    assert (c.expected, c.p_value, c.settings) == (1.0, pytest.approx(0.75), 2)
    assert count_chance([0.5, 0.5], 0).p_value == pytest.approx(1.0)
    assert count_chance([0.1, 0.0], 1).p_value == pytest.approx(0.1)


def test_headline_chance_combines_settings() -> None:
    chance = headline_chance([[[2, 1, 0]], [[0, 0, 0]]], beats=1, at_least=2)
    assert chance.beats.expected == pytest.approx(1 / 3)
    assert chance.beats.p_value == pytest.approx(1 / 3)
    assert chance.at_least.p_value == pytest.approx(1 / 3)  # the 0-0 setting always counts; the other 1/3
    assert chance.to_dict()["at_least"]["observed"] == 2


@pytest.mark.parametrize(("totals", "match"), [
    ([[1, 0]], r"\(seeds, 3\) matrix"),
    ([[1, 0, -1]], "counts >= 0"),
    ([[1, 0, float("nan")]], "counts >= 0"),
])
def test_bad_totals_are_refused(totals: list[list[float]], match: str) -> None:
    with pytest.raises(GridStatsError, match=match):
        label_chances(totals)


def test_bad_counts_are_refused() -> None:
    with pytest.raises(GridStatsError, match="outside 0..2"):
        count_chance([0.5, 0.5], 3)
    with pytest.raises(GridStatsError, match=r"in \[0, 1\]"):
        count_distribution([1.5])
