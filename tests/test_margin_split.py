"""The margin split's arithmetic, checked against a hand-computed case."""

from __future__ import annotations

import pytest

from benchmarks.common import BenchmarkError
from benchmarks.margin_split import split_margin, summary


def test_split_margin_by_hand() -> None:
    # final = base + priors: priors (0, 150 * 0.1, 0) -> the second candidate wins by the prior
    base, final = [-1.0, -3.0, -2.5], [-1.0, 12.0, -2.5]
    assert split_margin(base, final) == {"chosen": 1, "runner": 0, "margin": 13.0, "logprob": -2.0,
                                         "prior": 15.0}
    with pytest.raises(BenchmarkError, match="two or more candidates"):
        split_margin([0.0], [0.0])


def test_summary_counts_shifts_against_margins() -> None:
    rows = [{"margin": 13.0, "logprob": -2.0, "prior": 15.0, "shifts": [0.5, -1.0], "flips": [False, False]},
            {"margin": 0.2, "logprob": 0.2, "prior": 0.0, "shifts": [0.3, -0.1], "flips": [True, False]}]
    s = summary(rows)
    assert (s["steps"], s["prior_dominates"], s["shift_beats_margin"], s["flips"], s["perturbed_steps"]) == \
        (2, 1, 1, 1, 4)
    assert s["median_margin"] == pytest.approx(6.6) and s["median_abs_shift"] == pytest.approx(0.4)
    with pytest.raises(BenchmarkError, match="no step"):
        summary([])
