"""The sampling probe's counts, checked against a hand-computed case."""

from __future__ import annotations

import pytest

from benchmarks.common import BenchmarkError
from benchmarks.sampling_probe import cell_stats, report_md


def test_cell_stats_counts_mixed_cells_and_split_pairs_by_hand() -> None:
    rewards = [
        [[1, 0, 0], [1, 0, 1], [1, 0, 0], [0, 0, 0]],  # rows (0, 1) and (2, 3) are antithetic pairs
        [[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]],
    ]
    stats = cell_stats(rewards)
    # task 0: pair 2 splits (1 vs 0) -> mixed; task 1: all 0; task 2: pair 1 splits (0 vs 1) -> mixed
    assert stats == {"episodes": 24, "solved": 4, "cells": 6, "mixed": 2, "pairs": 12, "pairs_split": 2}


def test_cell_stats_refuses_rows_that_are_not_pairs() -> None:
    with pytest.raises(BenchmarkError, match="antithetic pairs"):
        cell_stats([[[0.0], [1.0], [0.0]]])


def test_report_lists_every_temperature() -> None:
    row = {"temperature": 2.0, "episodes": 4, "solved": 1, "cells": 2, "mixed": 1, "pairs": 4,
           "pairs_split": 1, "confidences": [[[3.0, 1.0], [2.0, 2.0]]], "seconds": 12.0}
    text = report_md({"setting": "s", "result": "r.json", "machine": "m", "date": "d", "pairs": 1,
                      "sigma": 0.01, "generations": 1, "n_tasks": 2, "temperatures": [row]})
    assert "| 2 | 25 % (1/4) | 50 % (1/2) | 25 % (1/4) | 2.00 | 12 |" in text
