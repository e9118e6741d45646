from __future__ import annotations

import math

import pytest

from cotrain.schedule import cosine_sigma


def test_endpoints_midpoint_and_clamp() -> None:
    assert cosine_sigma(0, 100, 0.02, 0.002) == 0.02  # exact endpoints
    assert cosine_sigma(0, 100, 0.3, 0.03) == 0.3
    assert cosine_sigma(50, 100, 0.02, 0.002) == pytest.approx(0.011)
    assert cosine_sigma(100, 100, 0.02, 0.002) == 0.002
    assert cosine_sigma(10_000, 100, 0.02, 0.002) == 0.002


def test_monotone_non_increasing_and_within_bounds() -> None:
    values = [cosine_sigma(t, 37, 1.0, 0.1) for t in range(60)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    assert all(0.1 <= v <= 1.0 for v in values)
    assert values[1] < values[0] and values[36] > 0.1


def test_constant_schedule_when_sigma_min_equals_sigma_0() -> None:
    assert {cosine_sigma(t, 10, 0.5, 0.5) for t in range(20)} == {0.5}


@pytest.mark.parametrize(
    ("step", "total", "sigma_0", "sigma_min"),
    [
        (-1, 10, 1.0, 0.1),
        (1.5, 10, 1.0, 0.1),
        (True, 10, 1.0, 0.1),
        (0, 0, 1.0, 0.1),
        (0, 10, 0.0, 0.0),
        (0, 10, 1.0, 2.0),
        (0, 10, 1.0, -0.1),
        (0, 10, math.nan, 0.1),
        (0, 10, 1.0, math.inf),
    ],
)
def test_rejects_bad_arguments(step: int, total: int, sigma_0: float, sigma_min: float) -> None:
    with pytest.raises(ValueError):
        cosine_sigma(step, total, sigma_0, sigma_min)
