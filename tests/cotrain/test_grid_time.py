"""A grid's time from its runs' result files (cotrain.grid_time): compute, busy wall time as the union of the
runs' intervals, pieces, concurrency, on hand-computed cases; bad times are refused naming the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cotrain.errors import GridError
from cotrain.grid_report import build_report, collect_results, render_markdown
from cotrain.grid_time import grid_time, time_lines


def timed(arm: str, tier: int, finished: str, seconds: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {"arm": arm, "tier": tier, "finished_at": finished}
    if seconds is not None:
        out["seconds"] = seconds
    return out


def test_overlapping_runs_make_one_piece_and_a_gap_starts_another() -> None:
    results = {
        "s/start": timed("start", 1, "2026-12-07T10:01:40+0000", 100.0),   # 10:00:00-10:01:40
        "s/weights/seed0": timed("weights", 1, "2026-12-07T10:02:30+0000", 100.0),  # 10:00:50-10:02:30
        "s/both/seed0": timed("both", 2, "2026-12-07T12:00:00+0000", 1800.0),  # 11:30-12:00, after a gap
        "s/both/seed1": timed("both", 2, "2026-12-07T12:30:00+0000", 1799.0),  # starts 1 s after: joins
        "s/prompts/seed0": timed("prompts", 2, "2026-12-07T13:00:00+0000", None),  # no seconds: untimed
    }
    t = grid_time(results)
    assert t.compute_hours == pytest.approx((100 + 100 + 1800 + 1799) / 3600)
    # union: 10:00:00-10:02:30 (150 s) and 11:30:00-12:30:00 (3600 s)
    assert t.busy_hours == pytest.approx((150 + 3600) / 3600)
    assert [len(p.runs) for p in t.pieces] == [2, 2]
    assert t.max_concurrent == 2
    assert t.compute_by_tier == pytest.approx({"starts": 100 / 3600, "tier 1": 100 / 3600,
                                               "tier 2": 3599 / 3600})
    assert t.untimed == ["s/prompts/seed0"]
    lines = time_lines(t.to_dict())
    assert lines[0].startswith("- compute: **1.06 h**")
    assert "busy wall time: **1.04 h**" in lines[1] and "in 2 piece(s)" in lines[1]
    assert "at most 2" in lines[1]
    assert lines[-1] == "- without a recorded time (not counted): s/prompts/seed0"


def test_runs_back_to_back_end_before_the_next_starts() -> None:
    t = grid_time({"a": timed("weights", 1, "2026-12-07T10:00:10+0000", 10.0),
                   "b": timed("weights", 1, "2026-12-07T10:00:20+0000", 10.0)})
    assert len(t.pieces) == 1 and t.max_concurrent == 1 and t.busy_hours == pytest.approx(20 / 3600)
    # the next run's start, from its fractional seconds, 0.6 s before the whole-second finish of the last
    t = grid_time({"a": timed("weights", 1, "2026-12-07T10:00:10+0000", 10.0),
                   "b": timed("weights", 1, "2026-12-07T10:00:20+0000", 10.6)})
    assert len(t.pieces) == 1 and t.max_concurrent == 1


@pytest.mark.parametrize(("finished", "seconds", "message"), [
    ("yesterday", 1.0, "finished_at 'yesterday' is not a time"),
    ("2026-12-07T10:00:10+0000", -5.0, "seconds -5.0 is not a non-negative number"),
    ("2026-12-07T10:00:10+0000", "ten", "seconds 'ten' is not a non-negative number"),
])
def test_a_bad_time_names_the_run(finished: str, seconds: Any, message: str) -> None:
    with pytest.raises(GridError, match=f"run x/weights/seed0: {message}"):
        grid_time({"x/weights/seed0": {"arm": "weights", "tier": 1, "finished_at": finished,
                                       "seconds": seconds}})


def test_the_report_carries_the_time_section(tmp_path: Path) -> None:
    from tests.cotrain.test_grid_report import grid, result, write

    out = tmp_path / "g"
    runs = (("start", None, "10:00:10"), ("weights", 0, "10:00:30"), ("prompts", 0, "10:00:30"))
    for arm, seed, end in runs:
        r = result("tiny0_shopping_t1", 1, arm, seed, [1])
        r.update(finished_at=f"2026-12-07T{end}+0000", seconds=20.0)
        write(out, r)
    report = build_report(grid(tmp_path, ["shopping"]), collect_results([out]), command="c", dirs=[out])
    assert report["time"]["compute_hours"] == pytest.approx(60 / 3600)
    assert report["time"]["max_concurrent"] == 2
    markdown = render_markdown(report, {})
    assert "## Time" in markdown and "busy wall time: **0.01 h**" in markdown
