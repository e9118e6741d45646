"""How often the co-evolution headline would come out as it did if the arm made no difference.

The headline counts the settings where ``both`` beats (or at least matches) both single-space arms on held-out
success. With 2 seeds, a few dozen held-out tasks and many tied runs, such counts are noisy, and a tie counts
as "at least as good". This module gives the count's chance level under a permutation null: within each
setting and seed, the three trained runs (``both``, ``prompts``, ``weights``) are *exchangeable*, that is the
arm label carries nothing and each of the 3! ways to hand the seed's three observed held-out totals to the
three labels is equally likely, independently per seed.

Per setting that gives an exact probability that ``both`` beats (or matches) both others, computed by
enumerating the label assignments seed by seed on the totals (every arm of a setting is scored on the same
tasks, so totals compare as means do). Settings are independent, so the headline count is a sum of
independent Bernoulli variables (Poisson-binomial), whose exact distribution gives the expected count and the
one-sided p-value ``P(K >= k observed)``.

It is conditional on the outcomes observed: it asks whether the labels line up with the outcomes more often
than chance, not whether any arm learns.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cotrain.errors import GridStatsError

ARMS = 3
"""``both``, then the two single-space arms, in each seed's row of totals."""


def label_chances(totals: Sequence[Sequence[float]] | np.ndarray) -> tuple[float, float]:
    """``(P(beats), P(at least as good))`` for one setting under the permutation null.

    ``totals``: ``(seeds, 3)`` held-out successes per seed, ``both`` first (the single arms' order does not
    matter). Each seed's row is handed to the three labels in one of its 6 orders, uniformly and independently
    per seed; ``both`` beats when its total over the seeds exceeds both others', and is at least as good when
    no other total exceeds it."""
    arr = np.asarray(totals, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] != ARMS:
        raise GridStatsError(f"totals must be a (seeds, {ARMS}) matrix (both, then the single arms), "
                             f"got shape {arr.shape}")
    if not np.isfinite(arr).all() or (arr < 0).any():
        raise GridStatsError(f"totals must be finite counts >= 0, got {arr.tolist()}")
    orders = list(itertools.permutations(range(ARMS)))
    states: dict[tuple[float, ...], float] = {(0.0,) * ARMS: 1.0}
    for row in arr:
        grown: dict[tuple[float, ...], float] = {}
        for state, p in states.items():
            for order in orders:
                nxt = tuple(s + row[i] for s, i in zip(state, order, strict=True))
                grown[nxt] = grown.get(nxt, 0.0) + p / len(orders)
        states = grown
    beats = sum(p for (b, *rest), p in states.items() if b > max(rest))
    at_least = sum(p for (b, *rest), p in states.items() if b >= max(rest))
    return float(beats), float(at_least)


def count_distribution(probabilities: Sequence[float]) -> np.ndarray:
    """``P(K = k)`` for ``k = 0..n``, where ``K`` is the number of successes of independent Bernoulli trials
    with the given ``probabilities`` (the Poisson-binomial distribution, by convolution)."""
    dist = np.ones(1, dtype=np.float64)
    for p in probabilities:
        if not 0.0 <= p <= 1.0:
            raise GridStatsError(f"a probability must lie in [0, 1], got {p}")
        dist = np.convolve(dist, [1.0 - p, p])
    return dist


@dataclass(frozen=True)
class CountChance:
    """A headline count against its chance level."""

    observed: int
    """The count the grid shows."""
    settings: int
    """Settings counted (the ``m`` of "k of m")."""
    expected: float
    """Its mean under the permutation null."""
    p_value: float
    """``P(K >= observed)`` under the null (one-sided; 1.0 for ``observed = 0``)."""

    def to_dict(self) -> dict[str, float | int]:
        """JSON form."""
        return {"observed": self.observed, "settings": self.settings, "expected": self.expected,
                "p_value": self.p_value}


def count_chance(probabilities: Sequence[float], observed: int) -> CountChance:
    """``observed`` successes out of trials with these per-setting ``probabilities``, against chance."""
    if not 0 <= observed <= len(probabilities):
        raise GridStatsError(f"observed count {observed} is outside 0..{len(probabilities)}")
    dist = count_distribution(probabilities)
    return CountChance(observed, len(probabilities), float(sum(probabilities)),
                       float(min(1.0, dist[observed:].sum())))


@dataclass(frozen=True)
class HeadlineChance:
    """The co-evolution headline's two counts against chance."""

    beats: CountChance
    """Settings where ``both`` beats both single arms."""
    at_least: CountChance
    """Settings where ``both`` is at least as good as both."""

    def to_dict(self) -> dict[str, dict[str, float | int]]:
        """JSON form."""
        return {"beats": self.beats.to_dict(), "at_least": self.at_least.to_dict()}


def headline_chance(totals: Sequence[Sequence[Sequence[float]] | np.ndarray], *, beats: int,
                    at_least: int) -> HeadlineChance:
    """The headline counts ``beats`` and ``at_least`` against the permutation null, from each counted
    setting's ``(seeds, 3)`` totals (:func:`label_chances`)."""
    chances = [label_chances(t) for t in totals]
    return HeadlineChance(count_chance([c[0] for c in chances], beats),
                          count_chance([c[1] for c in chances], at_least))
