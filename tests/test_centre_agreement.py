"""benchmarks.centre_agreement's summary against a hand-computed case, and its argument checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.centre_agreement import parse_grids, per_task, render, summarise
from benchmarks.common import BenchmarkError


def _steps(agree: list[tuple[int, bool, float]]) -> list[dict[str, object]]:
    return [{"task_id": t, "index": i, "split": "tier2_test", "reference": "click [1]", "pick": "click [1]",
             "agree": a, "credit": c} for i, (t, a, c) in enumerate(agree)]


def test_summary_by_hand() -> None:
    # task 1 has two steps, task 2 one; the start agrees on 1 of task 1's steps, the seeds on more
    start = _steps([(1, True, 0.5), (1, False, -0.5), (2, False, -1.0)])
    seed0 = _steps([(1, True, 0.5), (1, True, 0.1), (2, False, -1.0)])
    seed1 = _steps([(1, True, 0.5), (1, False, -0.3), (2, True, 0.2)])
    entry = {"arm": "weights", "setting": "s", "generation": 3, "seconds": 1.0,
             "genome": {"system": "webarena", "skills": "no_skill", "action_format": "direct"}}
    scored = {"start:s": {**entry, "arm": "start", "seed": None, "generation": 0, "steps": start},
              "g:s/weights/seed0": {**entry, "seed": 0, "steps": seed0},
              "g:s/weights/seed1": {**entry, "seed": 1, "steps": seed1}}
    assert per_task(start, "agree") == {"1": 0.5, "2": 0.0}
    (row,) = summarise(scored)
    assert (row["setting"], row["grid"], row["arm"], row["seeds"], row["tasks"]) == \
        ("s", "g", "weights", [0, 1], 2)
    # per task: start (0.5, 0); seed 0 (1, 0); seed 1 (0.5, 1): differences (0.5, 0) and (0, 1), mean 0.375
    assert row["agree_vs_start"]["mean"] == pytest.approx(0.375)
    assert row["agree"]["mean"] == pytest.approx(0.625) and row["start_agree"]["mean"] == pytest.approx(0.25)
    # credit per task: start (0, -1); seed 0 (0.3, -1); seed 1 (0.1, 0.2): differences (0.3, 0), (0.1, 1.2)
    assert row["credit_vs_start"]["mean"] == pytest.approx(0.4)
    assert row["agree_steps"] == [2, 2]
    assert "| s | g | weights | 0, 1 | 2 / 3 | 25.0" in render([row], scored, "cmd")
    del scored["start:s"]
    with pytest.raises(BenchmarkError, match="start is not scored"):
        summarise(scored)


def test_parse_grids(tmp_path: Path) -> None:
    assert parse_grids([f"a={tmp_path}", str(tmp_path)]) == {"a": tmp_path, tmp_path.name: tmp_path}
    with pytest.raises(BenchmarkError, match="own non-empty label"):
        parse_grids([f"a={tmp_path}", f"a={tmp_path}"])
    with pytest.raises(BenchmarkError, match="not a directory"):
        parse_grids([f"a={tmp_path / 'missing'}"])
