"""benchmarks.compare_grids: two grid directories paired run by run (hand-built results)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import compare_grids
from cotrain.errors import GridError
from cotrain.grid import RESULT_FORMAT

TASKS = {"test": [1, 2, 3], "test_unseen": [4]}


def _write(root: Path, arm: str, seed: int | None, solved: set[int], tasks: dict | None = None,
           seconds: float | None = None) -> None:
    key = f"s_t1/{arm}" + ("" if seed is None else f"/seed{seed}")
    folder = root / key
    folder.mkdir(parents=True)
    tasks = tasks or TASKS
    rewards = {str(t): 1.0 if t in solved else 0.0 for split in tasks.values() for t in split}
    (folder / "result.json").write_text(json.dumps({
        "format": RESULT_FORMAT, "key": key, "setting": "s_t1", "arm": arm, "seed": seed, "env_seed": 0,
        "tasks": tasks, "rewards": rewards, **({} if seconds is None else {"seconds": seconds})}))


def test_runs_pair_by_key_and_the_difference_is_the_hand_computed_one(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        _write(root, "start", None, {1})
    _write(a, "weights", 0, {1, 2, 4}, seconds=600.0)
    _write(a, "weights", 1, {1, 2}, seconds=630.0)
    _write(a, "weights", 2, {1})  # no partner in b: left out
    _write(b, "weights", 0, {1}, seconds=900.0)
    _write(b, "weights", 1, {1, 3})
    rows = compare_grids.compare(compare_grids.collect(a), compare_grids.collect(b), n_boot=2000)
    assert [(r["arm"], r["seeds"]) for r in rows] == [("start", [None]), ("weights", [0, 1])]
    start, weights = rows
    assert start["a_minus_b"]["mean"] == 0.0 and start["a_solved"] == start["b_solved"] == [1]
    assert weights["a_solved"] == [3, 2] and weights["b_solved"] == [1, 2]
    # cells a - b: seed 0 (0, +1, 0, +1), seed 1 (0, +1, -1, 0): mean 2 / 8
    assert weights["a_minus_b"]["mean"] == pytest.approx(0.25)
    assert weights["a_minus_b"]["low"] <= 0.25 <= weights["a_minus_b"]["high"]
    text = compare_grids.render(rows, ("x", "y"), "cmd")
    assert "| s_t1 | weights | 0, 1 | 3 / 2 of 4 | 1 / 2 of 4 |" in text and "+25.0 [" in text
    assert weights["a_minutes"] == [10.0, 10.5] and weights["b_minutes"] == [15.0, None]
    assert text.rstrip().splitlines()[-1].endswith("| 10.0 / 10.5 | 15.0 / - |")


def test_different_held_out_tasks_are_not_a_matched_pair(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, "both", 0, {1})
    _write(b, "both", 0, {1}, tasks={"test": [1, 2], "test_unseen": [5]})
    with pytest.raises(GridError, match="s_t1/both/seed0: the two grids scored different held-out tasks"):
        compare_grids.compare(compare_grids.collect(a), compare_grids.collect(b))


def test_the_command_writes_markdown_and_json(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        _write(root, "start", None, {1, 2})
    out = tmp_path / "res" / "cmp"
    assert compare_grids.main(["--a", str(a), "--b", str(b), "--labels", "on", "off", "--out", str(out)]) == 0
    assert "`on` against `off`" in out.with_suffix(".md").read_text()
    assert json.loads(out.with_suffix(".json").read_text())["rows"][0]["a_solved"] == [2]


def test_a_seed_subset_pairs_only_those_seeds(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        _write(root, "start", None, {1})
    _write(a, "weights", 0, {1, 2, 3, 4})
    _write(b, "weights", 0, {1})
    _write(a, "weights", 1, {1, 2})
    _write(b, "weights", 1, {1, 2})
    rows = compare_grids.compare(compare_grids.collect(a, [1]), compare_grids.collect(b, [1]), n_boot=500)
    assert [(r["arm"], r["seeds"]) for r in rows] == [("start", [None]), ("weights", [1])]
    assert rows[1]["a_minus_b"]["mean"] == 0.0
    out = tmp_path / "cmp"
    assert compare_grids.main(["--a", str(a), "--b", str(b), "--seeds", "0", "--out", str(out)]) == 0
    assert json.loads(out.with_suffix(".json").read_text())["rows"][1]["a_minus_b"]["mean"] == 0.75
