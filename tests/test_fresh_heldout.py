"""benchmarks.fresh_heldout: the fresh tasks of a site, and the report of hand-built scored entries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import fresh_heldout
from cotrain.checkpoint import atomic_write_json


def _entry(
    grid: str, arm: str, seed: int | None, solved: set[int], tasks: dict[str, list[int]]
) -> dict[str, Any]:
    key = "s_t1/start" if arm == "start" else f"s_t1/{arm}/seed{seed}"
    ids = [t for kind in ("test", "test_unseen") for t in tasks[kind]]
    return {"grid": grid, "setting": "s_t1", "arm": arm, "seed": seed, "key": key, "tasks": tasks,
            "rewards": {str(t): 1.0 if t in solved else 0.0 for t in ids}, "env_seed": 0, "seconds": 1.0,
            "date": "-"}


def test_fresh_tasks_of_a_site_are_in_the_fresh_splits() -> None:
    tasks = fresh_heldout.fresh_tasks("shopping_admin")
    assert (len(tasks["test"]), len(tasks["test_unseen"])) == (19, 6)
    assert all(15000 <= t < 20000 for kind in tasks.values() for t in kind)
    with pytest.raises(SystemExit, match="no fresh held-out task of site 'gitlab'"):
        fresh_heldout.fresh_tasks("gitlab")


def test_report_pairs_every_seed_with_the_start_per_split_and_template(tmp_path: Path) -> None:
    real = fresh_heldout.fresh_tasks("shopping_admin")
    tasks = {"test": real["test"][:3], "test_unseen": real["test_unseen"][:1]}
    a, b, c = tasks["test"]
    u = tasks["test_unseen"][0]
    entries = [_entry("start", "start", None, {a}, tasks),
               _entry("g", "weights", 0, {a, b, u}, tasks),   # +2 cells
               _entry("g", "weights", 1, {b}, tasks)]         # +1 -1
    for e in entries:
        path = fresh_heldout.cache_path(tmp_path, e["grid"], e["key"])
        path.parent.mkdir(parents=True)
        atomic_write_json(path, e)
    report = fresh_heldout.build(fresh_heldout.load_cache(tmp_path), n_boot=500)
    s = report["settings"]["s_t1"]
    assert s["start_solved"] == 1
    (row,) = s["rows"]
    assert row["seeds"] == [0, 1] and row["solved"] == [3, 1]
    # both splits, 2 seeds x 4 tasks: seed 0 (0, +1, 0, +1), seed 1 (-1, +1, 0, 0) -> 2 / 8
    assert row["splits"]["heldout"]["vs_start"]["mean"] == pytest.approx(0.25)
    assert row["splits"]["test_unseen"]["vs_start"]["mean"] == pytest.approx(0.5)
    assert row["splits"]["test"]["mean"]["mean"] == pytest.approx(3 / 6)
    cells = {t["template"]: t["arms"]["g/weights"] for t in s["per_template"]}
    assert sum(n for n, _ in cells.values()) == 4 and sum(m for _, m in cells.values()) == 8
    assert s["between"] == [], "one row: nothing to pair"
    report.update(date="d", machine={"cpu": "x", "cpu_count": 2})
    text = fresh_heldout.render(report, "cmd")
    assert "| g | weights | 0, 1 | 3 / 1 of 4 |" in text and "+25.0 [" in text
    assert "on x, 2 cores, 1-1 s per centre" in text
    json.dumps(report)


def test_a_run_scored_on_other_tasks_than_the_start_is_an_error(tmp_path: Path) -> None:
    real = fresh_heldout.fresh_tasks("shopping_admin")
    tasks = {"test": real["test"][:2], "test_unseen": real["test_unseen"][:1]}
    other = {"test": real["test"][1:3], "test_unseen": real["test_unseen"][:1]}
    entries = [_entry("start", "start", None, set(), tasks), _entry("g", "weights", 0, set(), other)]
    with pytest.raises(SystemExit, match="scored on other fresh tasks than the start"):
        fresh_heldout.build(entries, n_boot=10)
    with pytest.raises(SystemExit, match="the start is not scored yet"):
        fresh_heldout.build(entries[1:], n_boot=10)


def test_rows_sharing_seeds_are_paired_on_those_seeds(tmp_path: Path) -> None:
    real = fresh_heldout.fresh_tasks("shopping_admin")
    tasks = {"test": real["test"][:2], "test_unseen": real["test_unseen"][:2]}
    a, b = tasks["test"]
    entries = [_entry("start", "start", None, set(), tasks),
               _entry("long", "weights", 0, {a, b}, tasks), _entry("long", "weights", 1, {a}, tasks),
               _entry("long", "weights", 2, {a}, tasks),
               _entry("long", "both", 1, {a, b}, tasks), _entry("long", "both", 2, {a, b}, tasks)]
    (d,) = fresh_heldout.build(entries, n_boot=200)["settings"]["s_t1"]["between"]
    assert (d["a"], d["b"], d["seeds"]) == ("long/both", "long/weights", [1, 2])
    assert d["a_minus_b"]["mean"] == pytest.approx(2 / 8)  # task b gained in seeds 1 and 2, of 2 x 4 cells
