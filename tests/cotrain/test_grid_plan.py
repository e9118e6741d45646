"""``esopt grid --plan`` (cotrain.grid_plan): unfinished runs priced per planned episode by the finished ones
(hand-built results, hand-computed seconds), the fallbacks when a setting or arm has no finished run, and the
command on the committed grid_long results, which it reads without writing anything."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from cotrain import cli
from cotrain.grid import RESULT_FORMAT, GridRun, run_lock
from cotrain.grid_config import Budget, Setting, SettingTasks
from cotrain.grid_plan import FINISHED, RUNNING, TO_RUN, format_plan, price_runs, wall_seconds

REPO = Path(__file__).resolve().parents[2]
TASKS = SettingTasks((1, 2), {"test": (3, 4, 5), "test_unseen": (6,)})
SHOP, FORUM = Setting("tiny:0", "shopping", 1), Setting("tiny:0", "reddit", 1)


def _run(arm: str, seed: int | None, episodes: int = 100, setting: Setting = SHOP) -> GridRun:
    budget = None if seed is None else Budget(episodes, 0, 0, 3)
    return GridRun(setting, arm, seed, (f"x={arm}{seed}",), TASKS, budget)


def _finish(out: Path, run: GridRun, seconds: float, seconds_train: float | None = None) -> None:
    """A result file as the grid writes one (only the fields the plan reads, and the identity checks);
    without ``seconds_train``, as results written before the grid recorded it."""
    folder = run.folder(out)
    folder.mkdir(parents=True)
    extra = {} if seconds_train is None else {"seconds_train": seconds_train}
    (folder / "result.json").write_text(json.dumps({
        "format": RESULT_FORMAT, "key": run.key, "setting": run.setting.name, "arm": run.arm,
        "seed": run.seed, "overrides": list(run.overrides), "tasks": TASKS.to_dict()["heldout"],
        "budget_planned": run.budget.to_dict() if run.budget else None, "seconds": seconds, **extra}))


def test_unfinished_runs_cost_the_finished_runs_seconds_per_episode(tmp_path: Path) -> None:
    out, other = tmp_path / "grid", tmp_path / "earlier"
    start, w0, b0, w1, b1, w2 = (_run("start", None), _run("weights", 0), _run("both", 0), _run("weights", 1),
                                 _run("both", 1), _run("weights", 2))
    _finish(out, start, 40.0)                     # 4 held-out tasks: 10 s each
    _finish(out, w0, 600.0)                       # 6 s per episode
    _finish(out, b0, 900.0)                       # 9 s per episode
    _finish(other, _run("weights", 7, episodes=50), 200.0)  # another grid's budget: 4 s per episode
    with run_lock(b1.folder(out), "a job") as mine:  # held: the run is training in another process
        assert mine
        costs = {c.key: c for c in price_runs([start, w0, b0, w1, b1, w2], out, [other])}
    assert [costs[r.key].status for r in (start, w0, b0)] == [FINISHED] * 3
    assert (costs[b1.key].status, costs[w1.key].status) == (RUNNING, TO_RUN)
    assert costs[w1.key].seconds == costs[w2.key].seconds == pytest.approx(500.0)  # mean(6, 4) x 100
    assert costs[w1.key].basis == "2 finished weights runs of tiny0_shopping_t1"
    assert costs[b1.key].seconds == pytest.approx(900.0)
    left = [c.seconds for c in costs.values() if c.status != FINISHED]
    assert wall_seconds(left, 2) == pytest.approx(1000.0)  # 900 | 500 + 500
    assert wall_seconds(left, 1) == pytest.approx(1900.0)
    assert wall_seconds([5, 4, 3, 3, 3], 2) == 10  # longest first: 5+3+... is greedy, not optimal (9)
    text = format_plan(list(costs.values()), 2)
    assert "tiny0_shopping_t1  weights  1         0        2       100 episodes  10.0" in text
    assert "about 0.5 h left in 3 run(s)" in text  # 1900 s


def test_held_out_scoring_is_priced_per_task_and_training_per_episode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of another budget (grid_6h's 40-episode runs priced by grid_recipe's 72-episode ones): training
    scales with the episodes, the held-out scoring after it does not."""
    from cotrain import grid_plan

    out, other = tmp_path / "grid", tmp_path / "bigger"
    _finish(other, _run("weights", 0, episodes=200), 1040.0, seconds_train=1000.0)  # 5 s/episode, 10 s/task
    _finish(other, _run("weights", 1, episodes=100), 380.0, seconds_train=300.0)    # 3 s/episode, 20 s/task
    small = _run("weights", 2, episodes=50)
    (cost,) = price_runs([small], out, [other])
    assert cost.seconds == pytest.approx(4.0 * 50 + 15.0 * 4)  # mean rates x 50 episodes, x 4 held-out tasks
    # Half its generations done (a resumed run; isolated from a real run directory): half the training is
    # left, and all of the scoring.
    monkeypatch.setattr(grid_plan, "_progress", lambda run, folder: 0.5)
    (cost,) = price_runs([small], out, [other])
    assert cost.seconds == pytest.approx(4.0 * 25 + 15.0 * 4)


def test_without_a_finished_run_of_the_setting_or_arm_the_plan_falls_back_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "grid"
    _finish(out, _run("start", None), 40.0)
    _finish(out, _run("weights", 0), 600.0)
    forum_start, forum_weights, forum_both = (
        _run("start", None, setting=FORUM), _run("weights", 0, setting=FORUM), _run("both", 0, setting=FORUM))
    costs = {c.key: c for c in price_runs([forum_start, forum_weights, forum_both], out)}
    assert costs[forum_start.key].seconds == pytest.approx(40.0)
    assert costs[forum_start.key].basis == "1 finished start runs of other settings"
    assert costs[forum_weights.key].seconds == pytest.approx(600.0)
    assert costs[forum_both.key].basis == "1 finished trained runs of other arms"
    empty = price_runs([_run("both", 3)], tmp_path / "nothing yet")
    assert empty[0].seconds is None and empty[0].status == TO_RUN
    assert "1 run(s) with nothing to price them by (tiny0_shopping_t1/both/seed3)" in format_plan(empty, 1)


def _plan_row(out: Path, arm: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert cli.main(["grid", "--config", str(REPO / "configs" / "grid_long.toml"), "--out", str(out),
                     "--plan", "--arms", "start", arm]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if f" {arm} " in line)


def test_plan_of_the_committed_grid_long_reads_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = REPO / "benchmarks" / "results" / "grid_long_runs"
    before = sorted((p, os.stat(p).st_mtime_ns) for p in out.rglob("*"))
    row = _plan_row(out, "weights", capsys)
    assert sorted((p, os.stat(p).st_mtime_ns) for p in out.rglob("*")) == before
    weights = [json.loads(p.read_text()) for p in sorted(out.glob("*/weights/seed*/result.json"))]
    measured = sum(r["seconds"] for r in weights) / len(weights) / 60
    assert row.split()[2:6] == [str(len(weights)), "0", str(10 - len(weights)), "144"]
    assert f"{measured:.1f}" in row
    # With runs left to do (a copy without its last two seeds), the finished ones price them.
    copy = tmp_path / "grid_long_runs"
    shutil.copytree(out, copy)
    for gone in sorted(copy.glob("*/weights/seed*"))[-2:]:
        shutil.rmtree(gone)
    kept = weights[:-2]  # the same sorted order
    row = _plan_row(copy, "weights", capsys)
    assert row.split()[2:6] == [str(len(kept)), "0", str(10 - len(kept)), "144"]
    assert f"{len(kept)} finished weights runs" in row
