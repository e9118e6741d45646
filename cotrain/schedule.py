"""The perturbation-scale schedule: ``sigma_t`` decays along a cosine from ``sigma_0`` to ``sigma_min``.

Large perturbations early explore; small ones late refine. Because the weight step of
:class:`cotrain.distribution.CoEvolutionDistribution` is proportional to ``sigma_t``, the same schedule also
anneals the step size.
"""

from __future__ import annotations

import math

from cotrain.errors import DistributionError


def cosine_sigma(step: int, total_steps: int, sigma_0: float, sigma_min: float) -> float:
    """Cosine decay: ``sigma_0`` at ``step = 0``, ``sigma_min`` at ``step >= total_steps`` (clamped after).

    With ``t = min(step, total_steps) / total_steps``:
    ``sigma = sigma_min + (sigma_0 - sigma_min) * (1 + cos(pi * t)) / 2``, non-increasing in ``step``.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise DistributionError(f"step must be a non-negative int, got {step!r}")
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise DistributionError(f"total_steps must be an int >= 1, got {total_steps!r}")
    validate_sigma_range(sigma_0, sigma_min)
    if step == 0:
        return float(sigma_0)
    if step >= total_steps:
        return float(sigma_min)
    cos_term = 0.5 * (1.0 + math.cos(math.pi * step / total_steps))
    return float(min(sigma_0, max(sigma_min, sigma_min + (sigma_0 - sigma_min) * cos_term)))


def validate_sigma_range(sigma_0: float, sigma_min: float) -> None:
    """Raise :class:`~cotrain.errors.DistributionError` (a ``ValueError``) unless
    ``0 <= sigma_min <= sigma_0``, ``sigma_0 > 0`` and both are finite."""
    for name, value in (("sigma_0", sigma_0), ("sigma_min", sigma_min)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DistributionError(f"{name} must be a finite number, got {value!r}")
    if sigma_0 <= 0:
        raise DistributionError(f"sigma_0 must be > 0, got {sigma_0}")
    if not 0 <= sigma_min <= sigma_0:
        raise DistributionError(f"sigma_min must lie in [0, sigma_0={sigma_0}], got {sigma_min}")
