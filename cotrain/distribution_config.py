"""The hyperparameters of the co-evolution search distribution, in a module that imports no torch (so the
run configuration can nest them without loading the distribution)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from cotrain.errors import DistributionError
from cotrain.schedule import validate_sigma_range

WeightNormalisation = Literal["total_weight", "population"]
_FLOAT_FIELDS = ("sigma_0", "sigma_min", "learning_rate", "prompt_learning_rate", "prob_floor",
                 "baseline_prior")
_BOOL_FIELDS = ("antithetic", "evolve_weights", "evolve_prompts")


def draws_per_generation(population: int, *, antithetic: bool, evolve_weights: bool) -> int:
    """The draws (noise seeds and genomes) of a population: one per antithetic pair when the weights evolve
    with antithetic sampling, else one per row."""
    return population // 2 if antithetic and evolve_weights else population


@dataclass(frozen=True)
class CoEvolutionConfig:
    """Hyperparameters of :class:`CoEvolutionDistribution` (all of them travel in its ``parameters``)."""

    sigma_0: float = 1e-3
    """Perturbation scale at generation 0 (start of the cosine schedule)."""
    sigma_min: float = 1e-4
    """Perturbation scale reached at ``total_generations`` and kept afterwards."""
    total_generations: int = 100
    """Length of the cosine schedule, in generations."""
    learning_rate: float = 0.5
    """``lr`` of the weight step ``lr * sum_i w~_i * sigma_i * eps_i`` (see the module docstring)."""
    prompt_learning_rate: float = 0.2
    """``alpha`` of the prompt update ``p <- (1 - alpha) p + alpha share``, in [0, 1]."""
    prob_floor: float = 0.01
    """Least probability of any prompt variant; ``pool_size * prob_floor`` must stay <= 1."""
    antithetic: bool = True
    """Sample mirrored pairs (same seed, ``+sigma``/``-sigma``, same prompt ids); populations must be even."""
    evolve_weights: bool = True
    """Ablation switch: if False, rows carry sigma 0 (seed 0) and no weight update is ever emitted."""
    evolve_prompts: bool = True
    """Ablation switch: if False, every row uses the most probable ids and the categoricals never change."""
    weight_normalisation: WeightNormalisation = "total_weight"
    """Divisor of the weight step: ``total_weight`` (sum of |centred weights|) or ``population`` (N)."""
    baseline_prior: float = 0.5
    """Weight ``w`` in [0, 1] of the baseline genome in the generation-0 categoricals: per slot
    ``p = w * onehot(baseline variant) + (1 - w) * uniform``, then the ``prob_floor``. 0 is the uniform start;
    the default 0.5 gives each slot's baseline variant ``0.5 + 0.5 / k`` of a pool of ``k`` (0.625 of 4), so
    the first generations try mostly the baseline and its one-slot neighbours instead of random genomes,
    most of them worse than No-Skill. A run's baseline genome is ``eval.baseline`` (default ``no_skill``) of
    its pools (:meth:`CoEvolutionDistribution.create`'s ``baseline_ids``)."""
    anchor_pairs: int = field(default=0, metadata={"omit_when_default": True})
    """Draws of every generation (antithetic pairs; single rows without antithetic sampling) that take the
    most probable genome instead of a sampled one: the first ``anchor_pairs`` of the population. The other
    draws sample the categoricals as before, from the same random stream, so anchoring changes only the
    anchored draws. Each generation then scores the incumbent genome beside its challengers on the same tasks
    (the prompt update weighs them head to head), and the anchored weight directions are scored under the
    genome the centre is evaluated with. 0 (default): every draw is sampled. It must leave at
    least one sampled draw; without ``evolve_prompts`` every draw already uses the most probable genome."""

    def __post_init__(self) -> None:
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise DistributionError(f"{name} must be a finite number, got {value!r}")
        validate_sigma_range(self.sigma_0, self.sigma_min)
        if isinstance(self.total_generations, bool) or not isinstance(self.total_generations, int):
            raise DistributionError(f"total_generations must be an int, got {self.total_generations!r}")
        if self.total_generations < 1:
            raise DistributionError(f"total_generations must be >= 1, got {self.total_generations}")
        if self.learning_rate < 0:
            raise DistributionError(f"learning_rate must be >= 0, got {self.learning_rate}")
        if not 0 <= self.prompt_learning_rate <= 1:
            raise DistributionError(
                f"prompt_learning_rate must lie in [0, 1], got {self.prompt_learning_rate}")
        if not 0 <= self.baseline_prior <= 1:
            raise DistributionError(
                f"{type(self).__name__}.baseline_prior must lie in [0, 1], got {self.baseline_prior}")
        if not 0 <= self.prob_floor < 1:
            raise DistributionError(f"prob_floor must lie in [0, 1), got {self.prob_floor}")
        for name in _BOOL_FIELDS:
            if not isinstance(getattr(self, name), bool):
                raise DistributionError(f"{name} must be a bool, got {getattr(self, name)!r}")
        anchors = self.anchor_pairs
        if isinstance(anchors, bool) or not isinstance(anchors, int) or anchors < 0:
            raise DistributionError(f"anchor_pairs must be an int >= 0, got {self.anchor_pairs!r}")
        if self.weight_normalisation not in ("total_weight", "population"):
            raise DistributionError(
                "weight_normalisation must be 'total_weight' or 'population',"
                f" got {self.weight_normalisation!r}"
            )
