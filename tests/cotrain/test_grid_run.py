"""A tiny learning grid end to end through the real env (tiny random Qwen, embedded sites, 1-step episodes):
2 settings (shopping and reddit, tier 1) x start + co-evolution, one seed. It is run in three invocations
that together complete one grid: the first trains setting A into one directory (through ``esopt grid``);
the second works on setting B in another directory while this test holds B's co-evolution run lock (the
job skips it: partial); an unfinished run directory of that run is then started here and the third
invocation resumes it. Finished runs are never run again, and the report merges both directories."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cotrain.cli import main
from cotrain.config import load_config
from cotrain.errors import GridError
from cotrain.grid import actual_budget, check_start_dtype, finished_result, plan_grid, run_grid, run_lock
from cotrain.grid_config import load_grid_config
from cotrain.grid_report import write_report

BASE = """
name = "grid-test"
[agent]
model = "tiny:0"
dtype = "float32"
policy = { max_prompt_tokens = 512 }
[env]
split = "tier1_train"
worker_split = "tier1"
tasks_per_generation = 1
max_steps = 1
[es]
population = 2
generations = 2
sigma_0 = 0.05
sigma_min = 0.01
[prompts]
reflect_rate = 1.0
recombine_rate = 1.0
max_new_tokens = 4
[workers]
num_workers = 0
[checkpoint]
snapshot_every = 1
[ui]
mode = "off"
plot = false
"""
GRID = """
[grid]
base = "base.toml"
seeds = [0]
families = ["shopping", "reddit"]
tiers = [1]
heldout_limit = 1
results = "{results}"
[models]
"tiny:0" = []
[arms]
both = ["prompts.mutation=true"]
"""
A, B = "tiny0_shopping_t1", "tiny0_reddit_t1"


@dataclass
class Grid:
    """The directories and outcomes of the three invocations."""

    config: Path
    out_a: Path
    out_b: Path
    results: Path
    partial_pending: list[str]
    second_ran: list[str]
    resumed_created: str
    start_b_mtime: float
    cli_status: int


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory, chromium_path: str) -> Iterator[Grid]:
    root = tmp_path_factory.mktemp("grid")
    (root / "base.toml").write_text(BASE)
    results = root / "report" / "grid"
    config = root / "grid.toml"
    config.write_text(GRID.format(results=results))
    out_a, out_b = root / "out_a", root / "out_b"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WEBARENA_CHROMIUM", chromium_path)
        mp.chdir(Path(__file__).resolve().parents[2])
        status = main(["grid", "--config", str(config), "--out", str(out_a), "--settings", A])
        cfg = load_grid_config(config)
        both_b = next(r for r in plan_grid(cfg, settings=[B]) if r.arm == "both")
        with run_lock(both_b.folder(out_b)) as held:  # another job holds B's co-evolution run
            assert held
            partial = run_grid(cfg, out_b, settings=[B])
        start_b = out_b / B / "start" / "result.json"
        mtime = start_b.stat().st_mtime
        from cotrain.trainer import train

        stopped = train(load_config(cfg.base, both_b.overrides), both_b.run_dir(out_b), stop_after=1)
        assert not stopped.finished and stopped.generation == 1
        created = json.loads((both_b.run_dir(out_b) / "run.json").read_text())["created"]
        second = run_grid(cfg, out_b, settings=[B])
    yield Grid(config, out_a, out_b, results, partial.pending, second.finished, created, mtime, status)


@pytest.mark.slow
@pytest.mark.browser
def test_tiny_grid_runs_every_run_once_and_scores_the_held_out_tasks(grid: Grid) -> None:
    assert grid.cli_status == 0
    cfg = load_grid_config(grid.config)
    for out, setting in ((grid.out_a, A), (grid.out_b, B)):
        runs = plan_grid(cfg, settings=[setting])
        results = {r.arm: finished_result(r, out) for r in runs}
        assert set(results) == {"start", "both"} and all(results.values())
        start, both = results["start"], results["both"]
        assert start is not None and both is not None
        assert start["genome"] == {"system": "webarena", "skills": "no_skill", "action_format": "direct"}
        for split in ("test", "test_unseen"):  # scored separately, on the same tasks, same env seed
            assert len(both["tasks"][split]) == 1 and both["tasks"][split] == start["tasks"][split]
        assert set(both["rewards"]) == {str(t) for s in ("test", "test_unseen") for t in both["tasks"][s]}
        assert both["env_seed"] == start["env_seed"] == 0
        assert start["dtype"] == both["dtype"] == "float32"  # paired in one dtype, recorded with the reason
        assert start["dtype_reason"] == both["dtype_reason"] == "set: float32"
        assert not set(both["train_tasks"]) & {int(t) for t in both["rewards"]}
        assert len(both["curve"]) == 2 and all(0.0 <= v <= 1.0 for v in both["curve"])
        # 2 candidates x 1 task x 2 generations + one reflection episode per generation (the tiny model
        # fails every task): the actual count read back from the metrics is the planned one
        assert both["budget_planned"]["episodes"] == 4 + 2
        assert both["budget_actual"]["episodes"] == both["budget_planned"]["episodes"]
        # the tiny model fails every task: every generation's rewards tie, so every weight update is empty,
        # and the steps are counted (1 step per episode here)
        assert both["updates"]["generations"] == 2 and both["updates"]["empty"] == 2
        assert both["updates"]["tiebreak_only"] == 0  # recorded; no tie-break configured here
        assert both["budget_actual"]["steps"] == 4
        assert both["budget_actual"]["credit_steps"] == 0  # no reference credit configured
        run_json = json.loads((out / both["run_dir"] / "run.json").read_text())
        # snapshots after generations 1 and 2; the grid pruned all but the last once the result was written
        assert [s["generation"] for s in run_json["snapshots"]] == [2]
        assert [p.name for p in (out / both["run_dir"] / "snapshots").iterdir()] == ["gen_000002"]
        assert both["command"].startswith("esopt train --config ")


@pytest.mark.slow
@pytest.mark.browser
def test_locked_runs_are_skipped_unfinished_runs_resumed_finished_runs_never_rerun(grid: Grid) -> None:
    assert grid.partial_pending == [f"{B}/both/seed0"], "the locked run stays pending"
    assert grid.second_ran == [f"{B}/both/seed0"], "only the unfinished run ran in the second invocation"
    run = json.loads((grid.out_b / B / "both" / "seed0" / "run" / "run.json").read_text())
    assert run["created"] == grid.resumed_created and run["finished"], "resumed, not started afresh"
    assert (grid.out_b / B / "start" / "result.json").stat().st_mtime == grid.start_b_mtime
    cfg = load_grid_config(grid.config)
    results_a = sorted((grid.out_a / A).glob("*/**/result.json")) + [grid.out_a / A / "start" / "result.json"]
    before = {p: p.stat().st_mtime for p in results_a}
    again = run_grid(cfg, grid.out_a, settings=[A])
    assert again.already == 2 and again.finished == [] and again.pending == []
    assert {p: p.stat().st_mtime for p in results_a} == before


@pytest.mark.slow
@pytest.mark.browser
def test_report_merges_the_two_directories(grid: Grid) -> None:
    cfg = load_grid_config(grid.config)
    partial = write_report(cfg, [grid.out_a])
    assert json.loads(partial[0].read_text())["pending"] == [f"{B}/start", f"{B}/both/seed0"]
    status = main(["grid", "--config", str(grid.config), "--out", str(grid.out_a), "--merge", str(grid.out_b),
                   "--report-only"])
    assert status == 0
    report = json.loads(grid.results.with_suffix(".json").read_text())
    assert report["pending"] == [] and len(report["runs"]) == 4
    for setting in (A, B):
        arms = report["settings"][setting]["arms"]
        heldout = arms["both"]["splits"]["heldout"]
        assert heldout["mean"]["n_tasks"] == 2 and "vs_start" in heldout
        assert 0.0 <= heldout["mean"]["mean"] <= 1.0
        assert (grid.results.parent / f"grid-{setting}.png").stat().st_size > 0
    assert set(report["tiers"]) == {"1"} and "both" in report["tiers"]["1"]
    markdown = grid.results.with_suffix(".md").read_text()
    assert "co-evolution beats both matched single-space arms in 0 of 0 settings" in markdown
    assert "| tiny0_reddit_t1 | both | 1 |" in markdown and "## Budgets" in markdown
    assert os.path.getsize(grid.results.parent / "grid-tiers.png") > 0


@pytest.mark.slow
@pytest.mark.browser
def test_held_out_success_by_generation_scores_earlier_centres_once(grid: Grid, tmp_path: Path,
                                                                     chromium_path: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks.heldout_by_generation on the tiny grid: generation 0 is the start (the same rewards as
    the start arm, scored apart), generation 1 an earlier centre; a second call scores nothing again."""
    from benchmarks import heldout_by_generation as by_gen

    monkeypatch.setenv("WEBARENA_CHROMIUM", chromium_path)
    args = ["--grid", str(grid.out_a), "--arms", "both", "--generations", "0", "1", "2", "--out",
            str(tmp_path / "by_gen")]
    assert by_gen.main(args) == 0
    scored = json.loads((tmp_path / "by_gen.json").read_text())["scored"]
    start = json.loads((grid.out_a / A / "start" / "result.json").read_text())
    assert set(scored) == {f"{A}/both/seed0"} and set(scored[f"{A}/both/seed0"]) == {"0", "1"}  # 2 is final
    assert scored[f"{A}/both/seed0"]["0"] == start["rewards"]
    assert f"| {A}/both/seed0 | 1 |" in (tmp_path / "by_gen.md").read_text()

    def never(*_: object) -> None:
        raise AssertionError("scored again")

    monkeypatch.setattr(by_gen, "score", never)
    assert by_gen.main(args) == 0


def test_a_run_is_refused_in_another_dtype_than_its_settings_start(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A trained run is paired with its setting's start: when ``dtype = "auto"`` would resolve here to another
    dtype than the start's result records (a grid continued on a CPU with native bf16), the run is refused
    with the way to continue matched; the same dtype, or a start from before dtypes were recorded, passes."""
    (tmp_path / "base.toml").write_text(BASE.replace('dtype = "float32"', 'dtype = "auto"'))
    config = tmp_path / "grid.toml"
    config.write_text(GRID.format(results=tmp_path / "report"))
    cfg = load_grid_config(config)
    both = next(r for r in plan_grid(cfg, settings=[A]) if r.arm == "both")
    out = tmp_path / "out"
    start = out / A / "start" / "result.json"
    start.parent.mkdir(parents=True)
    start.write_text(json.dumps({"format": "esopt-grid-result/1", "dtype": "float32",
                                 "dtype_reason": "auto: cpu flags lack amx_bf16 and avx512_bf16"}))
    run_cfg = load_config(cfg.base, both.overrides)
    monkeypatch.setenv("ESOPT_AUTO_DTYPE", "bfloat16")
    refused = (r"would train in bfloat16 \(auto: ESOPT_AUTO_DTYPE=bfloat16\), but its setting's start was "
               r"scored in float32 .*set ESOPT_AUTO_DTYPE=float32")
    with pytest.raises(GridError, match=refused):
        check_start_dtype(both, run_cfg, out)
    monkeypatch.setenv("ESOPT_AUTO_DTYPE", "float32")
    check_start_dtype(both, run_cfg, out)
    monkeypatch.setenv("ESOPT_AUTO_DTYPE", "bfloat16")
    start.write_text(json.dumps({"format": "esopt-grid-result/1"}))  # written before dtypes were recorded
    check_start_dtype(both, run_cfg, out)


@pytest.mark.slow
@pytest.mark.browser
def test_reward_ties_are_read_back_from_the_run_directories(grid: Grid, tmp_path: Path) -> None:
    """benchmarks.reward_ties on the real runs: the tiny model fails every task, so every generation's rewards
    tie, as the runs' own results record; a result without its run directory is counted as missing."""
    from benchmarks.reward_ties import count_ties, format_table

    (count,) = count_ties(grid.out_a)
    result = json.loads((grid.out_a / A / "both" / "seed0" / "result.json").read_text())
    assert (count.setting, count.arm, count.runs, count.missing) == (A, "both", 1, 0)
    assert count.generations == result["updates"]["generations"] == 2
    assert count.tied == 2 and count.share == 1.0
    copy = tmp_path / "copied" / A / "both" / "seed0"
    copy.mkdir(parents=True)
    (copy / "result.json").write_text(json.dumps(result))
    (missing,) = count_ties(tmp_path / "copied")
    assert (missing.runs, missing.generations, missing.missing, missing.share) == (0, 0, 1, None)
    # 2 candidates x 1 task x 2 generations, none solved: both task cells all failed, and independent
    # episodes at a 0 % success rate would tie every generation too
    assert (count.episodes, count.successes, count.cells, count.cells_all_solved, count.cells_mixed) == \
        (4, 0, 2, 0, 0)
    assert count.success_rate == 0.0 and count.expected_share == 1.0
    assert (f"| out_a | {A} | both | 1 | 2 | 2 (100 %) | 0 / 0 / 2 | 0 / 4 (0.0 %) | 100 % "
            f"| none (nothing solved) | 0 |") in format_table([count])


def test_the_actual_budget_counts_the_teacher_forced_credit_steps(toy_config: Any) -> None:
    cfg = toy_config()
    metrics = [{"iter": 1, "rollouts_done": 4, "env_steps": 6, "credit_steps": 12},
               {"iter": 2, "rollouts_done": 4, "env_steps": 5, "credit_steps": 10}]
    budget = actual_budget(cfg, metrics)
    assert (budget["train_episodes"], budget["steps"], budget["credit_steps"]) == (8, 11, 22)
    assert actual_budget(cfg, [{"iter": 1, "rollouts_done": 4, "env_steps": 6}])["credit_steps"] == 0


@pytest.mark.slow
@pytest.mark.browser
def test_centre_agreement_scores_the_start_and_each_centre_once(grid: Grid, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                chromium_path: str) -> None:
    """benchmarks.centre_agreement on the tiny grid: the start (generation 0, the baseline genome) and the
    co-evolution centre (its last generation, the checksum the run recorded) are scored teacher-forced on the
    same held-out reference steps; a pick agrees exactly where its credit is above 0; a second call scores
    nothing again."""
    from benchmarks import centre_agreement as ca

    monkeypatch.setenv("WEBARENA_CHROMIUM", chromium_path)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])
    args = ["--grid", f"tiny={grid.out_a}", "--arms", "both", "--out", str(tmp_path / "ca")]
    assert ca.main(args) == 0
    data = json.loads((tmp_path / "ca.json").read_text())
    scored = data["scored"]
    assert set(scored) == {f"start:{A}", f"tiny:{A}/both/seed0"}
    start, centre = scored[f"start:{A}"], scored[f"tiny:{A}/both/seed0"]
    result = json.loads((grid.out_a / A / "both" / "seed0" / "result.json").read_text())
    assert start["generation"] == 0 and centre["generation"] == result["generation"] == 2
    assert start["genome"] == {"system": "webarena", "skills": "no_skill", "action_format": "direct"}
    from cotrain.checkpoint import RunDir

    recorded = RunDir.open(grid.out_a / result["run_dir"]).load_state().checksum
    assert recorded is not None and centre["checksum"] == recorded  # the centre the run ended with
    heldout = {str(t) for part in ("test", "test_unseen") for t in result["tasks"][part]}
    for entry in (start, centre):
        assert {str(s["task_id"]) for s in entry["steps"]} == heldout
        for s in entry["steps"]:
            assert -1.0 <= s["credit"] <= 1.0
            if s["credit"] != 0.0:
                assert s["agree"] == (s["credit"] > 0), s
    assert [(s["task_id"], s["index"]) for s in start["steps"]] == \
        [(s["task_id"], s["index"]) for s in centre["steps"]]
    (row,) = data["summary"]
    assert (row["setting"], row["grid"], row["arm"], row["seeds"]) == (A, "tiny", "both", [0])
    for field in ("agree", "credit"):
        c, s = ca.per_task(centre["steps"], field), ca.per_task(start["steps"], field)
        assert row[f"{field}_vs_start"]["mean"] == pytest.approx(sum(c[t] - s[t] for t in s) / len(s))

    def never(*_: object, **__: object) -> None:
        raise AssertionError("scored again")

    monkeypatch.setattr(ca, "score_run", never)
    assert ca.main(args) == 0
