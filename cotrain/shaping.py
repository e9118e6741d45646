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

Confidence tie-break (``confidence_tiebreak = lambda > 0``): with 0/1 rewards and a few tasks per candidate,
most antithetic pairs take the same trajectories and tie, so the update is empty (the grids measured 4 to 7
empty updates in 8 or 9 generations). Each episode also has a *confidence*, the mean margin of its chosen
actions over the runner-up (:attr:`es_agent.rollout.EpisodeResult.confidence`), which moves continuously
with the weights. The tie-break adds ``lambda x mean over tasks of (2 r - 1) x soft(confidence)`` to each
candidate's fitness, with ``soft(c) = c / (confidence_scale + |c|)``: among candidates whose rewards tie, it
prefers the one more decisive on its solved tasks and less decisive on its failed ones (the failed choice is
then closer to flipping). ``soft`` is bounded in (-1, 1) and, unlike ``tanh``, never saturates in float64: a
step that a lexical prior decides by a margin of 100 leaves the small changes of the other steps visible.
The term lies in ``(-lambda, +lambda)``; ``lambda < 1 / (2 n_tasks)`` is required, so with 0/1 rewards it
never reorders candidates whose mean rewards differ: it only breaks ties.

Reference credit (``reference_credit = mu > 0``): step-level credit from the training tasks' reference
solutions (:mod:`es_agent.reference_credit`). Each (candidate, task) also has a credit in [-1, 1], the mean
over the task's reference steps, replayed teacher-forced, of how far the policy's choice leans to the
reference action (squashed with ``confidence_scale``), and ``mu x mean over tasks of the credit`` is added to
each candidate's fitness. Unlike the tie-break it has no bound: ``mu < 1 / (2 n_tasks)`` makes it a
tie-break that prefers the candidates closer to the references, a larger ``mu`` a dense objective that trades
terminal reward for step credit. The credits move with every perturbation, so a generation whose rewards all
tie still ranks its candidates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
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
    confidence_tiebreak: float = field(default=0.0, metadata={"omit_when_default": True})
    """Weight ``lambda`` of the confidence tie-break (module docstring); 0 turns it off. Must stay below
    ``1 / (2 x tasks per candidate)``; not combined with ``per_task_scaling`` (scaled rewards can differ by
    less than the term)."""
    confidence_scale: float = field(default=1.0, metadata={"omit_when_default": True})
    """Confidences are squashed by ``c / (confidence_scale + |c|)`` (the policy's score units: with the
    ``calibrated`` scoring, log-probability differences per token); so are the reference credit's margins."""
    reference_credit: float = field(default=0.0, metadata={"omit_when_default": True})
    """Weight ``mu`` of the reference credit (module docstring); 0 turns it off. Any finite ``mu >= 0``."""

    def __post_init__(self) -> None:
        if self.method not in SHAPING_METHODS:
            raise DistributionError(f"shaping method must be one of {SHAPING_METHODS}, got {self.method!r}")
        if self.per_task_scaling and not self.per_task_centering:
            raise DistributionError("per_task_scaling=True requires per_task_centering=True")
        for name in ("confidence_tiebreak", "confidence_scale", "reference_credit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise DistributionError(f"{name} must be a finite number, got {value!r}")
        for name in ("confidence_tiebreak", "reference_credit"):
            if getattr(self, name) < 0:
                raise DistributionError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.confidence_scale <= 0:
            raise DistributionError(f"confidence_scale must be > 0, got {self.confidence_scale}")
        if self.confidence_tiebreak and self.per_task_scaling:
            raise DistributionError("confidence_tiebreak > 0 cannot be combined with per_task_scaling=True "
                                    "(scaled rewards can differ by less than the tie-break term)")


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
    rewards: torch.Tensor | Sequence[Sequence[float]], config: ShapingConfig | None = None,
    confidences: torch.Tensor | Sequence[Sequence[float]] | None = None,
    credits: torch.Tensor | Sequence[Sequence[float]] | None = None,
) -> torch.Tensor:
    """One fitness per candidate: the mean over tasks after the optional per-task centring and scaling,
    plus the confidence tie-break when ``config.confidence_tiebreak > 0`` (``confidences``: one per episode,
    the shape of ``rewards``) and the reference credit term when ``config.reference_credit > 0``
    (``credits``: one per episode, in [-1, 1])."""
    config = config or ShapingConfig()
    matrix = as_reward_matrix(rewards)
    fitness = _reward_fitness(matrix, config)
    if config.confidence_tiebreak:
        fitness = fitness + confidence_tiebreak(matrix, confidences, config)
    if config.reference_credit:
        fitness = fitness + reference_credit_term(matrix, credits, config)
    return fitness


def reference_credit_term(rewards: torch.Tensor, credits: torch.Tensor | Sequence[Sequence[float]] | None,
                          config: ShapingConfig) -> torch.Tensor:
    """``mu x`` the mean credit over tasks, per candidate (module docstring)."""
    if credits is None:
        raise DistributionError("reference_credit > 0 needs the episodes' reference credits, and none were "
                                "given (the problem does not measure them)")
    values = torch.as_tensor(credits, dtype=torch.float64).detach().cpu()
    if values.shape != rewards.shape:
        raise DistributionError(f"reference credits of shape {tuple(values.shape)} for rewards of shape "
                                f"{tuple(rewards.shape)}")
    if not torch.isfinite(values).all() or bool((values.abs() > 1).any()):
        raise DistributionError("reference credits must be finite and in [-1, 1]")
    return config.reference_credit * values.mean(dim=1)


def confidence_tiebreak(rewards: torch.Tensor, confidences: torch.Tensor | Sequence[Sequence[float]] | None,
                        config: ShapingConfig) -> torch.Tensor:
    """The tie-break term per candidate (module docstring), in ``(-lambda, +lambda)``."""
    weight = config.confidence_tiebreak
    n_tasks = rewards.shape[1]
    if confidences is None:
        raise DistributionError("confidence_tiebreak > 0 needs the episodes' confidences, and none were "
                                "given (the problem does not measure them)")
    if 2 * weight * n_tasks >= 1:
        raise DistributionError(f"confidence_tiebreak={weight} is too large for {n_tasks} task(s) per "
                                f"candidate: it must be below 1 / (2 x {n_tasks}) = "
                                f"{1 / (2 * n_tasks):.4g}, so that it only orders candidates whose rewards "
                                f"tie")
    conf = torch.as_tensor(confidences, dtype=torch.float64).detach().cpu()
    if conf.shape != rewards.shape:
        raise DistributionError(f"confidences of shape {tuple(conf.shape)} for rewards of shape "
                                f"{tuple(rewards.shape)}")
    if not torch.isfinite(conf).all():
        raise DistributionError("confidences contain NaN or inf")
    sign = 2.0 * rewards.clamp(0.0, 1.0) - 1.0
    return weight * (sign * conf / (config.confidence_scale + conf.abs())).mean(dim=1)


def _reward_fitness(matrix: torch.Tensor, config: ShapingConfig) -> torch.Tensor:
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
    rewards: torch.Tensor | Sequence[Sequence[float]], config: ShapingConfig | None = None,
    confidences: torch.Tensor | Sequence[Sequence[float]] | None = None,
    credits: torch.Tensor | Sequence[Sequence[float]] | None = None,
) -> torch.Tensor:
    """Shaped weights, float64 of shape ``(n_candidates,)``; all zeros when every fitness is equal
    (``confidences``, ``credits``: see :func:`candidate_fitness`)."""
    config = config or ShapingConfig()
    fitness = candidate_fitness(rewards, config, confidences, credits)
    spread = float(fitness.max() - fitness.min())
    if spread <= TIE_RTOL * max(1.0, float(fitness.abs().max())):
        return torch.zeros_like(fitness)
    if config.method == "centered_ranks":
        return centered_ranks(fitness)
    if config.method == "zscore":
        centred = fitness - fitness.mean()
        return centred / centred.std(unbiased=False)
    return fitness.clone()
