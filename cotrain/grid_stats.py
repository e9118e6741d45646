"""Statistics of the learning grid: means with bootstrap confidence intervals over seeds x tasks, and paired
differences between arms.

A grid cell holds, per arm, a matrix of held-out outcomes ``(seeds, tasks)`` (1.0 solved, 0.0 not; or any
per-task score). Every arm of a setting is scored on the same tasks with the same env seed, so arms compare
*paired*: the difference of two arms is taken cell by cell (seed ``s`` of one arm against seed ``s`` of the
other; an arm with one row, such as ``start``, which has no training seed, is compared with every seed).

The interval is a percentile bootstrap that resamples seeds and tasks independently (a crossed, two-way
bootstrap): both are random draws whose variance the interval must carry, and tasks are shared by all seeds,
so resampling the cells one by one would treat correlated cells as independent and give intervals that are
too narrow. With one seed it is the ordinary bootstrap over tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cotrain.errors import GridStatsError


@dataclass(frozen=True)
class Estimate:
    """A mean with its bootstrap confidence interval."""

    mean: float
    """Mean over all seeds x tasks cells."""
    low: float
    """Lower end of the interval."""
    high: float
    """Upper end of the interval."""
    level: float
    """Coverage of the interval (0.95)."""
    n_seeds: int
    """Seeds (rows) the mean is over."""
    n_tasks: int
    """Tasks (columns) the mean is over."""

    @property
    def excludes_zero(self) -> bool:
        """Whether the whole interval lies on one side of 0 (a difference "with the CI above/below 0")."""
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict[str, float | int]:
        """JSON form."""
        return {"mean": self.mean, "low": self.low, "high": self.high, "level": self.level,
                "n_seeds": self.n_seeds, "n_tasks": self.n_tasks}


def as_outcomes(values: Sequence[Sequence[float]] | np.ndarray, what: str = "outcomes") -> np.ndarray:
    """``values`` as a finite float64 matrix ``(seeds, tasks)``; a flat sequence is one seed."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise GridStatsError(f"{what} must be a non-empty (seeds, tasks) matrix, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise GridStatsError(f"{what} must be finite, got {arr.tolist()}")
    return arr


def bootstrap_mean(values: Sequence[Sequence[float]] | np.ndarray, *, level: float = 0.95,
                   n_boot: int = 10_000, seed: int = 0) -> Estimate:
    """The mean of a ``(seeds, tasks)`` matrix and its percentile bootstrap interval (seeds and tasks
    resampled independently, ``n_boot`` times, from a generator seeded by ``seed``)."""
    arr = as_outcomes(values)
    if not 0 < level < 1:
        raise GridStatsError(f"level must lie in (0, 1), got {level}")
    if n_boot < 1:
        raise GridStatsError(f"n_boot must be >= 1, got {n_boot}")
    n_seeds, n_tasks = arr.shape
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot, dtype=np.float64)
    chunk = max(1, 2_000_000 // (n_seeds * n_tasks))  # resamples per vectorised block (bounded memory)
    for start in range(0, n_boot, chunk):
        k = min(chunk, n_boot - start)
        rows = rng.integers(0, n_seeds, (k, n_seeds))
        cols = rng.integers(0, n_tasks, (k, n_tasks))
        means[start:start + k] = arr[rows[:, :, None], cols[:, None, :]].mean(axis=(1, 2))
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Estimate(float(arr.mean()), float(low), float(high), level, n_seeds, n_tasks)


def paired_differences(arm: Sequence[Sequence[float]] | np.ndarray,
                       baseline: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """Cell-by-cell ``arm - baseline`` on the same tasks: both ``(seeds, tasks)`` with the same number of
    seeds, or ``baseline`` with one row (compared with every seed of ``arm``)."""
    a, b = as_outcomes(arm, "arm outcomes"), as_outcomes(baseline, "baseline outcomes")
    if a.shape[1] != b.shape[1]:
        raise GridStatsError(f"paired arms need the same tasks: {a.shape[1]} against {b.shape[1]} tasks")
    if b.shape[0] not in (1, a.shape[0]):
        raise GridStatsError(f"paired arms need the same seeds (or a one-row baseline): {a.shape[0]} against "
                             f"{b.shape[0]} seeds")
    return a - b


def paired_estimate(arm: Sequence[Sequence[float]] | np.ndarray,
                    baseline: Sequence[Sequence[float]] | np.ndarray, *, level: float = 0.95,
                    n_boot: int = 10_000, seed: int = 0) -> Estimate:
    """Mean paired difference ``arm - baseline`` with its bootstrap interval (:func:`bootstrap_mean` of
    :func:`paired_differences`)."""
    return bootstrap_mean(paired_differences(arm, baseline), level=level, n_boot=n_boot, seed=seed)
