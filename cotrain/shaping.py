"""Fitness shaping: from a ``(n_candidates, n_tasks)`` reward matrix to one weight per candidate.

The rollout workers keep per-task rewards, so the shaping sees which candidate solved which task. The steps:

1. optional per-task centring (subtract each task's mean reward over the candidates) and scaling (divide each
   task's centred rewards by its standard deviation over the candidates, so every task that separates the
   candidates carries the same influence and a task everyone solves, or nobody solves, carries none);
2. aggregation: the mean over tasks gives one shaped fitness per candidate (the unshaped fitness, the plain
   mean reward, is computed once where the rewards are produced: column 0 of the population's evals);
3. the method: ``centered_ranks`` (OpenAI-ES / EvoTorch "centered": ranks spread linearly over [-0.5, 0.5],
   tied fitnesses share their average rank so equal rewards give equal weights), ``zscore`` (fitness minus its
   mean, over its population standard deviation) or ``raw`` (the aggregated fitness itself).

Centring alone subtracts the same constant from every candidate's mean, so it changes neither ranks nor
z-scores, only ``raw`` weights; it is ``per_task_scaling`` that stops easy or hard tasks from dominating.

When every candidate has the same fitness (within a relative ``1e-12``) the weights are all zero, whatever the
method: there is no signal, and :meth:`CoEvolutionDistribution.update` then skips the update.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from cotrain.errors import DistributionError

ShapingMethod = Literal["centered_ranks", "zscore", "raw"]
SHAPING_METHODS: tuple[str, ...] = ("centered_ranks", "zscore", "raw")

TIE_RTOL = 1e-12
"""Fitnesses closer than ``TIE_RTOL * max(1, max |fitness|)`` are tied (guards against rounding noise)."""


@dataclass(frozen=True)
class ShapingConfig:
    """How per-task rewards become one update weight per candidate."""

    method: ShapingMethod = "centered_ranks"
    """``centered_ranks`` (in [-0.5, 0.5], ties averaged), ``zscore`` or ``raw`` (the aggregated reward)."""
    per_task_centering: bool = True
    """Subtract each task's mean reward over the candidates before aggregating over tasks."""
    per_task_scaling: bool = False
    """Also divide each task's centred rewards by their std over candidates (tasks with no spread count 0).
    Requires ``per_task_centering``."""

    def __post_init__(self) -> None:
        if self.method not in SHAPING_METHODS:
            raise DistributionError(f"shaping method must be one of {SHAPING_METHODS}, got {self.method!r}")
        if self.per_task_scaling and not self.per_task_centering:
            raise DistributionError("per_task_scaling=True requires per_task_centering=True")


def as_reward_matrix(rewards: torch.Tensor | Sequence[float] | Sequence[Sequence[float]]) -> torch.Tensor:
    """Rewards as a float64 ``(n_candidates, n_tasks)`` matrix; a 1-D input is one task. Rejects NaN/inf."""
    matrix = torch.as_tensor(rewards, dtype=torch.float64).detach().cpu()
    if matrix.ndim == 1:
        matrix = matrix.unsqueeze(1)
    if matrix.ndim != 2 or matrix.shape[0] < 1 or matrix.shape[1] < 1:
        raise DistributionError(
            f"rewards must be (n_candidates, n_tasks) with both >= 1, got shape {tuple(matrix.shape)}"
        )
    if not torch.isfinite(matrix).all():
        raise DistributionError("rewards contain NaN or inf: a failed rollout must raise, not be scored")
    return matrix


def candidate_fitness(
    rewards: torch.Tensor | Sequence[Sequence[float]], config: ShapingConfig | None = None
) -> torch.Tensor:
    """One fitness per candidate: the mean over tasks after the optional per-task centring and scaling."""
    config = config or ShapingConfig()
    matrix = as_reward_matrix(rewards)
    task_means = matrix.mean(dim=0)
    if config.per_task_scaling:
        task_stds = matrix.std(dim=0, unbiased=False)
        flat = task_stds <= TIE_RTOL * torch.clamp(task_means.abs(), min=1.0)
        scaled = (matrix - task_means) / torch.where(flat, torch.ones_like(task_stds), task_stds)
        return torch.where(flat, torch.zeros_like(scaled), scaled).mean(dim=1)
    fitness = matrix.mean(dim=1)
    if config.per_task_centering:
        # Centring each task subtracts the same constant from every row mean; subtracting it once keeps
        # candidates with equal means exactly equal (no summation-order noise).
        fitness = fitness - task_means.mean()
    return fitness


def centered_ranks(values: torch.Tensor) -> torch.Tensor:
    """Linearly spaced ranks in [-0.5, 0.5] (highest value -> 0.5); ties share their average rank."""
    x = torch.as_tensor(values, dtype=torch.float64).reshape(-1)
    n = x.numel()
    if n < 2:
        return torch.zeros_like(x)
    order = torch.argsort(x, stable=True)
    sorted_x = x[order]
    tol = TIE_RTOL * max(1.0, float(sorted_x.abs().max()))
    positions = torch.arange(n, dtype=torch.float64)
    ranks_sorted = torch.empty(n, dtype=torch.float64)
    start = 0
    for i in range(1, n + 1):
        if i == n or float(sorted_x[i] - sorted_x[i - 1]) > tol:
            ranks_sorted[start:i] = positions[start:i].mean()
            start = i
    ranks = torch.empty(n, dtype=torch.float64)
    ranks[order] = ranks_sorted
    return ranks / (n - 1) - 0.5


def shape_fitness(
    rewards: torch.Tensor | Sequence[Sequence[float]], config: ShapingConfig | None = None
) -> torch.Tensor:
    """Shaped weights, float64 of shape ``(n_candidates,)``; all zeros when every fitness is equal."""
    config = config or ShapingConfig()
    fitness = candidate_fitness(rewards, config)
    spread = float(fitness.max() - fitness.min())
    if spread <= TIE_RTOL * max(1.0, float(fitness.abs().max())):
        return torch.zeros_like(fitness)
    if config.method == "centered_ranks":
        return centered_ranks(fitness)
    if config.method == "zscore":
        centred = fitness - fitness.mean()
        return centred / centred.std(unbiased=False)
    return fitness.clone()
