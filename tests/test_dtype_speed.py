"""benchmarks.dtype_speed: the summary's medians, speed-up and pick agreement on a hand-computed case."""

from __future__ import annotations

import pytest

from benchmarks.common import BenchmarkError
from benchmarks.dtype_speed import report_md, summary


def test_summary_on_hand_computed_times_and_picks() -> None:
    s = summary({"float32": [6.0, 5.0, 7.0], "bfloat16": [4.0, 3.0, 5.0, 9.0]},
                {"float32": [0, 2, 1], "bfloat16": [0, 2, 3]})
    assert s["seconds_per_step"] == {"float32": 6.0, "bfloat16": 4.5}
    assert s["speedup_bf16"] == pytest.approx(6.0 / 4.5)
    assert (s["same_pick"], s["steps"]) == (2, 3)
    md = report_md({"split": "tier2_train", "family": "shopping_admin", "steps": 3, "repeats": 2,
                    "machine": "cpu", "date": "today", "summary": s})
    assert "| 3 | 6.00 | 4.50 | 1.33x | 2 / 3 |" in md


def test_summary_refuses_missing_dtypes_and_unequal_picks() -> None:
    with pytest.raises(BenchmarkError, match="both dtypes"):
        summary({"float32": [1.0]}, {"float32": [0], "bfloat16": [0]})
    with pytest.raises(BenchmarkError, match="different numbers of steps"):
        summary({"float32": [1.0], "bfloat16": [1.0]}, {"float32": [0, 1], "bfloat16": [0]})
