"""The learning grid's configuration (cotrain.grid_config): a malformed grid file is refused naming the key,
the planned budgets count exactly what a run's config lets it spend, and a grid whose arms' budgets differ is
refused before anything runs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch

from cotrain.config import load_config
from cotrain.errors import ConfigError, GridConfigError
from cotrain.grid import finished_result, lock_owner, plan_grid, run_grid, run_lock, work_queue
from cotrain.grid_config import (
    Budget,
    Setting,
    check_budgets,
    grid_config_from_dict,
    load_grid_config,
    planned_budget,
    reflection_generations,
    run_config,
)
from cotrain.prompt_evolution import PromptEvolver

REPO = Path(__file__).resolve().parents[2]
BASE = REPO / "configs" / "grid_train.toml"


def grid_dict(**grid: Any) -> dict[str, Any]:
    """A valid grid file's tables (the shipped base config), with ``grid`` keys replaced."""
    table = {"base": str(BASE), "seeds": [0, 1], "families": ["shopping"], "tiers": [1], **grid}
    return {"grid": {k: v for k, v in table.items() if v is not None}, "models": {"tiny:0": []},
            "arms": {"weights": ["es.evolve_prompts=false"], "both": []}}


@pytest.mark.parametrize(("change", "key"), [
    ({"seeds": []}, "grid.seeds"),
    ({"seeds": [0, 0]}, "grid.seeds"),
    ({"seeds": "0"}, "grid.seeds"),
    ({"tiers": [0]}, "grid.tiers"),
    ({"families": ["shop"]}, "grid.families"),
    ({"base": None}, "grid.base"),
    ({"base": "no-such-file.toml"}, "grid.base"),
    ({"set": ["es.population"]}, "grid.set"),
    ({"tier_set": {"4": ["env.max_steps=9"]}}, "grid.tier_set.4"),
    ({"heldout_limit": -1}, "grid.heldout_limit"),
    ({"tier_arm_set": {"2": {"both": ["es.generations=4"]}}}, "grid.tier_arm_set.2"),
    ({"tier_arm_set": {"1": {"prompts": ["es.generations=4"]}}}, "grid.tier_arm_set.1.prompts"),
    ({"tier_arm_set": {"1": {"start": ["es.generations=4"]}}}, "grid.tier_arm_set.1.start"),
    ({"tier_arm_set": {"1": {"both": ["es.generations"]}}}, "grid.tier_arm_set.1.both"),
    ({"tier_arm_set": {"1": ["es.generations=4"]}}, "grid.tier_arm_set.1"),
    ({"tier_arm_set": ["es.generations=4"]}, "grid.tier_arm_set"),
    ({"colour": "blue"}, "grid.colour"),
])
def test_malformed_grid_file_names_the_key(change: dict[str, Any], key: str, tmp_path: Path) -> None:
    with pytest.raises(GridConfigError, match=rf"^{key.replace('.', '[.]')}: "):
        grid_config_from_dict(grid_dict(**change), tmp_path / "grid.toml")


def test_malformed_tables_name_the_table(tmp_path: Path) -> None:
    data = grid_dict()
    data["arms"]["start"] = []
    with pytest.raises(GridConfigError, match=r"^arms\.start: "):
        grid_config_from_dict(data, tmp_path / "grid.toml")
    data = grid_dict()
    data["models"] = {}
    with pytest.raises(GridConfigError, match=r"^models: "):
        grid_config_from_dict(data, tmp_path / "grid.toml")
    data = grid_dict()
    data["arms"]["both"] = "prompts.mutation=true"
    with pytest.raises(GridConfigError, match=r"^arms\.both: expected a list of strings"):
        grid_config_from_dict(data, tmp_path / "grid.toml")
    (tmp_path / "bad.toml").write_text("[grid\n")
    with pytest.raises(GridConfigError, match="cannot read TOML"):
        load_grid_config(tmp_path / "bad.toml")
    assert issubclass(GridConfigError, ConfigError)


def test_shipped_grid_files_parse_and_name_nine_settings() -> None:
    for name, model in (("grid.toml", "embedded"), ("grid_qwen.toml", "embedded-qwen")):
        grid = load_grid_config(REPO / "configs" / name)
        assert grid.base == BASE and len(grid.seeds) >= 2
        assert grid.arm_names == ("start", "prompts", "weights", "both")
        assert len(grid.settings) == 9 and {s.model for s in grid.settings} == {model}
    assert Setting("tiny:0", "shopping_admin", 2).name == "tiny0_shopping_admin_t2"


@pytest.mark.parametrize(("name", "priors", "tiers", "setting"), [
    ("grid_goal_prior.toml", {"goal_prior": 200}, [1, 1, 1], "embedded_reddit_t1"),
    ("grid_lexical.toml", {"goal_prior": 150, "answer_prior": 100}, [1, 1, 1, 2, 2, 2, 3, 3, 3],
     "embedded_reddit_t3"),
    ("grid_progress.toml", {"goal_prior": 150, "answer_prior": 100}, [1, 2], "embedded_shopping_t2"),
    ("grid_progress_sigma.toml", {"goal_prior": 150, "answer_prior": 100}, [1], "embedded_shopping_t1"),
    ("grid_memory.toml", {"goal_prior": 150, "answer_prior": 100, "memory_prior": 150,
                          "memory_file": "configs/memory/tier1_train.json"}, [1, 1, 1],
     "embedded_reddit_t1")])
def test_prior_grids_run_with_the_fitted_weights_on_every_arm(name: str, priors: dict[str, Any],
                                                              tiers: list[int], setting: str) -> None:
    grid = load_grid_config(REPO / "configs" / name)
    assert grid.base == BASE and sorted(s.tier for s in grid.settings) == tiers
    runs = plan_grid(grid, settings=[setting])
    assert [r.arm for r in runs] == ["start"] + ["prompts", "weights", "both"] * 2
    shaped = name.startswith("grid_progress")
    sigmas = (0.1, 0.04) if name == "grid_progress_sigma.toml" else (0.01, 0.004)
    for run in runs:
        cfg = run_config(grid, run.overrides, run.arm)
        assert {k: cfg.agent.policy[k] for k in priors} == priors
        assert cfg.agent.policy["scoring"] == "calibrated"
        assert cfg.env.spec.kwargs.get("progress_reward", 0.0) == (0.5 if shaped else 0.0)
        assert cfg.env.spec.max_steps == {1: 3, 2: 5, 3: 8}[int(setting[-1])]
        assert (cfg.es.distribution.sigma_0, cfg.es.distribution.sigma_min) == sigmas
        cfg.agent.policy_config()  # valid PolicyConfig fields
        if "memory_file" in priors:  # the committed memory: tier-1 training solutions, never a held-out one
            from es_agent.memory import load_memory

            memory = load_memory(REPO / priors["memory_file"])
            assert memory.leave_out_same_goal and len(memory) == 55
            assert not {e.task_id for e in memory.exemplars} & set(run.tasks.all_heldout)


@pytest.mark.parametrize("name", ["grid_anchor.toml", "grid_anchor9.toml"])
def test_the_anchored_grids_reuse_the_tiebreak_runs_and_change_only_co_evolution(name: str) -> None:
    """Their start, prompts and weights runs are grid_tiebreak's (the same overrides and config digests, so
    the copied results are accepted); `both` anchors its first pair and keeps the budget of the other arms."""
    tiebreak = {r.key: r for r in plan_grid(load_grid_config(REPO / "configs" / "grid_tiebreak.toml"))}
    grid = load_grid_config(REPO / "configs" / name)
    runs = plan_grid(grid)
    assert {r.setting.name for r in runs} == {"embedded_shopping_admin_t1"}
    for run in runs:
        if run.arm == "both":
            cfg = run_config(grid, run.overrides, run.arm)
            assert cfg.es.distribution.anchor_pairs == 1 and cfg.es.distribution.evolve_prompts
            assert (cfg.es.generations, cfg.prompts.mutation) == ((9, False) if name == "grid_anchor9.toml"
                                                                  else (8, True))
            if run.key in tiebreak:  # a changed run: the grid would refuse the tie-break's result for it
                assert run.config_sha256 != tiebreak[run.key].config_sha256
        elif run.key in tiebreak:  # seeds 6-9 are new to this grid
            assert (run.overrides, run.config_sha256) == (tiebreak[run.key].overrides,
                                                          tiebreak[run.key].config_sha256)
    budgets = {r.arm: r.budget for r in runs if r.seed == 0 and r.arm != "start"}
    assert {(b.episodes, b.steps) for b in budgets.values() if b is not None} == {(72, 216)}
    assert budgets["both"] is not None and budgets["both"].reflection_episodes == (
        0 if name == "grid_anchor9.toml" else 8)


def test_the_long_grid_doubles_every_arms_budget_and_reuses_the_start() -> None:
    """grid_long: the anchored grid at 144 episodes per arm (weights 18 updates on the 16-generation sigma
    schedule), with grid_tiebreak's start run (same overrides and digest, so its copied result is reused)."""
    tiebreak = {r.key: r for r in plan_grid(load_grid_config(REPO / "configs" / "grid_tiebreak.toml"))}
    grid = load_grid_config(REPO / "configs" / "grid_long.toml")
    runs = plan_grid(grid)
    start = next(r for r in runs if r.arm == "start")
    assert (start.overrides, start.config_sha256) == (tiebreak[start.key].overrides,
                                                      tiebreak[start.key].config_sha256)
    budgets = {r.arm: r.budget for r in runs if r.seed == 0 and r.arm != "start"}
    assert {(b.episodes, b.steps) for b in budgets.values() if b is not None} == {(144, 432)}
    weights = run_config(grid, next(r for r in runs if r.arm == "weights").overrides, "weights")
    assert (weights.es.generations, weights.es.distribution.total_generations) == (18, 16)
    both = run_config(grid, next(r for r in runs if r.arm == "both").overrides, "both")
    assert (both.es.generations, both.es.distribution.anchor_pairs, both.prompts.mutation) == (16, 1, True)


def test_planned_budget_counts_rollouts_reflections_and_evals() -> None:
    cfg = load_config(BASE, ["prompts.mutation=true", "es.generations=5", "prompts.reflect_rate=0.5",
                             "prompts.mutate_every=2", "prompts.reflect_tasks=3", "eval.every=2",
                             "eval.tasks=[1, 2, 3]"])
    evolver = PromptEvolver(cfg.prompts, seed=cfg.es.seed)
    chosen = [g for g in (2, 4) if evolver.rng(g).random() < 0.5]  # the evolver's own seeded draws
    assert reflection_generations(cfg) == chosen
    budget = planned_budget(cfg, n_eval_tasks=3)
    # 4 candidates x 2 tasks x 5 generations; min(3 reflected tasks, 2 tasks in a batch) per reflection;
    # centre evaluations at generations 2 and 4 on 3 tasks
    assert budget == Budget(40, 2 * len(chosen), 6, 3)
    assert budget.episodes == 40 + 2 * len(chosen) + 6 and budget.steps == budget.episodes * 3
    assert planned_budget(load_config(BASE), 3).reflection_episodes == 0  # no mutation: no reflection


def test_unequal_budgets_are_refused_naming_arms_and_numbers() -> None:
    budgets = {("both", 0): Budget(64, 8, 0, 3), ("weights", 0): Budget(64, 0, 0, 3),
               ("both", 1): Budget(64, 8, 0, 3), ("weights", 1): Budget(72, 0, 0, 3)}
    with pytest.raises(GridConfigError, match=r"seed 0: both: 72 episodes .* 216 steps, weights: 64 episo"):
        check_budgets(budgets, "s")
    check_budgets({k: v for k, v in budgets.items() if k[1] == 1}, "s")  # 72 = 72: accepted


def test_shipped_grid_is_balanced_and_a_grid_with_unequal_arms_runs_nothing(tmp_path: Path) -> None:
    shipped = load_grid_config(REPO / "configs" / "grid.toml")
    runs = plan_grid(shipped, settings=["embedded_reddit_t3"])
    budgets = {(r.arm, r.seed): r.budget for r in runs if r.budget is not None}
    assert {(b.episodes, b.steps) for b in budgets.values()} == {(72, 72 * 8)}
    assert {r.arm for r in runs} == {"start", "prompts", "weights", "both"} and len(runs) == 7
    assert all(set(r.tasks.train).isdisjoint(r.tasks.all_heldout) for r in runs)

    data = tomllib.loads((REPO / "configs" / "grid.toml").read_text())
    data["grid"]["base"] = str(BASE)
    data["arms"]["weights"] = ["es.evolve_prompts=false"]  # 64 episodes against 72
    grid = grid_config_from_dict(data, tmp_path / "grid.toml")
    out = tmp_path / "out"
    with pytest.raises(GridConfigError, match=r"weights: 64 episodes"):
        run_grid(grid, out, settings=["embedded_shopping_t1"], arms=["start"])
    assert not out.exists(), "nothing may run (or be written) for a grid with unequal budgets"
    with pytest.raises(GridConfigError, match=r"^--arms: unknown \['nope'\]"):
        plan_grid(shipped, arms=["nope"])


def test_run_lock_is_exclusive(tmp_path: Path) -> None:
    with run_lock(tmp_path / "run") as first, run_lock(tmp_path / "run") as second:
        assert first and not second
    with run_lock(tmp_path / "run") as again:
        assert again


def test_run_lock_records_its_holder(tmp_path: Path) -> None:
    assert lock_owner(tmp_path / "run") == ""
    with run_lock(tmp_path / "run", "q1.json pid 7") as first, run_lock(tmp_path / "run", "other") as second:
        assert first and not second and lock_owner(tmp_path / "run") == "q1.json pid 7"
    with run_lock(tmp_path / "run", owner="q2.json pid 8") as again:  # the last holder replaces the record
        assert again and lock_owner(tmp_path / "run") == "q2.json pid 8"


def test_a_child_job_skips_quietly_what_a_sibling_job_holds(tmp_path: Path,
                                                           capfd: pytest.CaptureFixture[str]) -> None:
    """Every job of a grid walks the same queue: a run a sibling job took is passed over without a word, one
    held by any other process is named with its holder."""
    shipped = load_grid_config(REPO / "configs" / "grid.toml")
    out = tmp_path / "out"
    start = next(r for r in plan_grid(shipped, settings=["embedded_reddit_t1"]) if r.arm == "start")
    queue = tmp_path / "123-456.json"
    queue.write_text(json.dumps({"base": str(shipped.base), "out": str(out), "deadline": None,
                                 "runs": [start.to_dict()]}))
    threads = torch.get_num_threads()  # a job runs on one torch thread; this process gets its own back
    for holder, said in (("123-456.json pid 99", False), ("999-000.json pid 98", True)):
        with run_lock(start.folder(out), owner=holder) as held:
            try:
                assert held and work_queue(queue) == 0
            finally:
                torch.set_num_threads(threads)
        printed = capfd.readouterr().out
        assert ("embedded_reddit_t1/start: another process holds its lock" in printed) is said
        assert (holder in printed) is said
    assert finished_result(start, out) is None


def test_a_run_locked_by_another_process_is_skipped_and_reported(tmp_path: Path,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    """A real child job finds the run's lock held (as by another esopt grid, or the jobs of a killed one):
    it says so and skips the run, and the outcome names it as held elsewhere, not failed."""
    shipped = load_grid_config(REPO / "configs" / "grid.toml")
    out = tmp_path / "out"
    start = next(r for r in plan_grid(shipped, settings=["embedded_reddit_t1"]) if r.arm == "start")
    with run_lock(start.folder(out)) as held:
        assert held
        outcome = run_grid(shipped, out, settings=["embedded_reddit_t1"], arms=["start"])
    assert outcome.held_elsewhere == ["embedded_reddit_t1/start"] and outcome.failed == {}
    assert outcome.pending == ["embedded_reddit_t1/start"] and outcome.finished == []
    assert "embedded_reddit_t1/start: another process holds its lock" in capfd.readouterr().out
    assert run_grid(shipped, out, settings=["embedded_reddit_t1"], max_runs=0).held_elsewhere == []


def test_max_runs_and_time_budget_start_nothing_more(tmp_path: Path) -> None:
    shipped = load_grid_config(REPO / "configs" / "grid.toml")
    out = tmp_path / "out"
    none = run_grid(shipped, out, settings=["embedded_reddit_t1"], max_runs=0)
    assert none.finished == [] and len(none.pending) == 7 and none.already == 0
    assert [r["arm"] for r in json.loads((out / "plan.json").read_text())["runs"]][:2] == [
        "start", "prompts"]
    # a real child job that finds its time budget spent before its first run: it starts none
    spent = run_grid(shipped, out, settings=["embedded_reddit_t1"], arms=["start"], budget_minutes=0)
    assert spent.finished == [] and spent.failed == {} and spent.pending == ["embedded_reddit_t1/start"]
    assert not (out / "embedded_reddit_t1" / "start" / "result.json").exists()


def test_a_result_from_other_overrides_or_another_base_config_is_not_reused(tmp_path: Path) -> None:
    from cotrain.checkpoint import atomic_write_json
    from cotrain.errors import GridError
    from cotrain.grid import RESULT_FORMAT, GridRun, finished_result
    from cotrain.grid_config import SettingTasks

    tasks = SettingTasks((1, 2), {"test": (3,), "test_unseen": (4,)})
    run = GridRun(Setting("tiny:0", "shopping", 1), "start", None, ("es.seed=0",), tasks, None, "a" * 64)
    assert finished_result(run, tmp_path) is None
    run.folder(tmp_path).mkdir(parents=True)
    atomic_write_json(run.result_path(tmp_path), {"format": RESULT_FORMAT, "overrides": ["es.seed=0"],
                                                  "config_sha256": "a" * 64})
    assert finished_result(run, tmp_path) is not None
    assert GridRun.from_dict(run.to_dict()) == run
    atomic_write_json(run.result_path(tmp_path), {"format": RESULT_FORMAT, "overrides": ["es.seed=0"],
                                                  "config_sha256": "b" * 64})
    with pytest.raises(GridError, match="another base config"):
        finished_result(run, tmp_path)
    atomic_write_json(run.result_path(tmp_path), {"format": RESULT_FORMAT, "overrides": ["es.seed=1"]})
    with pytest.raises(GridError, match="other overrides"):
        finished_result(run, tmp_path)


def test_bigger_budget_grid_balances_weights_and_both_at_four_times_the_episodes() -> None:
    grid = load_grid_config(REPO / "configs" / "grid_lexical_big.toml")
    runs = plan_grid(grid)  # refuses unequal budgets
    assert [(r.arm, r.seed) for r in runs] == [("start", None), ("weights", 0), ("both", 0), ("weights", 1),
                                               ("both", 1)]
    budgets = {}
    for run in runs[1:3]:
        cfg = run_config(grid, run.overrides, run.arm)
        assert (cfg.es.population, cfg.env.tasks_per_generation, cfg.es.distribution.sigma_0) == (8, 4, 0.02)
        assert cfg.agent.policy["goal_prior"] == 150 and cfg.agent.policy["answer_prior"] == 100
        budgets[run.arm] = planned_budget(cfg, n_eval_tasks=0).episodes
    assert budgets == {"weights": 288, "both": 288}  # 4x configs/grid_lexical.toml's 72


def test_tiebreak_grid_is_the_memory_grid_plus_the_tie_break_on_every_arm() -> None:
    """configs/grid_tiebreak.toml: grid_memory's policy, tasks and budgets plus the confidence tie-break on
    every arm (the start included, where it trains nothing), on shop admin and the forum."""
    tiebreak = load_grid_config(REPO / "configs" / "grid_tiebreak.toml")
    memory = load_grid_config(REPO / "configs" / "grid_memory.toml")
    assert {s.name for s in tiebreak.settings} == {"embedded_shopping_admin_t1", "embedded_reddit_t1"}
    assert tiebreak.seeds[:2] == memory.seeds == (0, 1)
    for setting in tiebreak.settings:
        ours = plan_grid(tiebreak, settings=[setting.name])
        theirs = plan_grid(memory, settings=[setting.name])
        assert [r.arm for r in ours] == ["start"] + ["prompts", "weights", "both"] * len(tiebreak.seeds)
        matched = {(r.arm, r.seed): r for r in theirs}
        for run in ours:
            cfg = run_config(tiebreak, run.overrides, run.arm)
            assert cfg.es.shaping.confidence_tiebreak == 0.1
            assert cfg.es.shaping.confidence_tiebreak < 1 / (2 * cfg.env.tasks_per_generation)
            twin = matched.get((run.arm, run.seed))
            if twin is not None:  # one override apart: the matched ablation of benchmarks/compare_grids.py
                assert [o for o in run.overrides if o not in twin.overrides] == [
                    "es.shaping.confidence_tiebreak=0.1"]
                assert run.budget == twin.budget and run.tasks == twin.tasks


def test_recipe_grid_runs_the_whole_recipe_on_nine_settings_with_each_tiers_own_memory() -> None:
    """configs/grid_recipe.toml: 3 families x 3 tiers, every arm (the start included) with both priors, the
    confidence tie-break and the memory of its own tier's training solutions (none of a held-out task);
    `both` anchored; 72 episodes in every trained arm."""
    from es_agent.memory import load_memory
    from webarena_gym.embedded import load_entries

    grid = load_grid_config(REPO / "configs" / "grid_recipe.toml")
    assert grid.base == BASE and grid.seeds == (0, 1)
    assert sorted((s.family, s.tier) for s in grid.settings) == sorted(
        (f, t) for f in ("shopping", "shopping_admin", "reddit") for t in (1, 2, 3))
    for setting in grid.settings:
        runs = plan_grid(grid, settings=[setting.name])
        assert [r.arm for r in runs] == ["start"] + ["prompts", "weights", "both"] * 2
        for run in runs:
            cfg = run_config(grid, run.overrides, run.arm)
            policy = cfg.agent.policy
            assert {k: policy[k] for k in ("goal_prior", "answer_prior", "memory_prior", "scoring")} == {
                "goal_prior": 150, "answer_prior": 100, "memory_prior": 150, "scoring": "calibrated"}
            assert policy["memory_file"] == f"configs/memory/tier{setting.tier}_train.json"
            assert cfg.es.shaping.confidence_tiebreak == 0.1
            assert cfg.env.spec.max_steps == {1: 3, 2: 5, 3: 8}[setting.tier]
            assert cfg.es.distribution.anchor_pairs == (1 if run.arm == "both" else 0)
            if run.budget is not None:
                assert (run.budget.episodes, run.budget.steps) == (72, 72 * cfg.env.spec.max_steps)
        memory = load_memory(REPO / f"configs/memory/tier{setting.tier}_train.json")
        train = {e["task_id"] for e in load_entries(f"tier{setting.tier}_train")}
        ids = {e.task_id for e in memory.exemplars}
        assert memory.leave_out_same_goal and ids == train
        assert not ids & set(runs[0].tasks.all_heldout)


def test_the_6h_grid_reuses_the_recipe_grids_tier_1_and_starts_and_cuts_tiers_2_and_3_equally() -> None:
    """configs/grid_6h.toml: grid_recipe with the same tier-1 and start runs (same overrides and digests, so
    their copied results are reused), and per-tier arm overrides (grid.tier_arm_set, applied after the arm's
    own) that give every trained arm 40 episodes at tier 2 and 20 at tier 3."""
    recipe = {r.key: r for r in plan_grid(load_grid_config(REPO / "configs" / "grid_recipe.toml"))}
    grid = load_grid_config(REPO / "configs" / "grid_6h.toml")
    assert set(grid.tier_arm_overrides) == {2, 3}
    runs = plan_grid(grid)
    assert {r.key for r in runs} == set(recipe)
    for run in runs:
        twin = recipe[run.key]
        if run.setting.tier == 1 or run.arm == "start":
            assert (run.overrides, run.config_sha256, run.budget) == (twin.overrides, twin.config_sha256,
                                                                      twin.budget)
            continue
        assert run.overrides[:len(twin.overrides) - 1] == twin.overrides[:-1]  # + the arm's at the tier
        assert run.overrides[-1] == twin.overrides[-1] == f"es.seed={run.seed}"
        assert run.budget is not None
        assert run.budget.episodes == {2: 40, 3: 20}[run.setting.tier]
        cfg = run_config(grid, run.overrides, run.arm)
        assert cfg.env.tasks_per_generation == 1
        assert cfg.es.generations == {("weights", 2): 10, ("weights", 3): 5}.get(
            (run.arm, run.setting.tier), {2: 8, 3: 4}[run.setting.tier])
        assert cfg.es.distribution.total_generations == {2: 8, 3: 4}[run.setting.tier]


def test_the_sampled_grid_is_the_6h_grids_tier_2_with_only_the_temperature_added() -> None:
    """configs/grid_sampled.toml: every run has a grid_6h twin whose config differs only in
    agent.policy.temperature (2 against greedy), with the same budget."""
    six_grid = load_grid_config(REPO / "configs" / "grid_6h.toml")
    six = {r.key: r for r in plan_grid(six_grid)}
    grid = load_grid_config(REPO / "configs" / "grid_sampled.toml")
    runs = plan_grid(grid)
    assert len(runs) == 14 and {r.setting.tier for r in runs} == {2}
    for run in runs:
        twin = six[run.key]
        assert run.budget == twin.budget
        cfg = run_config(grid, run.overrides, run.arm).to_dict()
        twin_cfg = run_config(six_grid, twin.overrides, twin.arm).to_dict()
        assert cfg["agent"]["policy"].pop("temperature") == 2
        assert cfg == twin_cfg


def test_the_bf16_grid_is_the_6h_grid_with_only_the_dtype_changed() -> None:
    """configs/grid_bf16.toml: every grid_6h run has a twin whose config differs only in agent.dtype
    (bfloat16 against auto, which the 6-hour grid held at float32), with the same budget."""
    six_grid = load_grid_config(REPO / "configs" / "grid_6h.toml")
    six = {r.key: r for r in plan_grid(six_grid)}
    grid = load_grid_config(REPO / "configs" / "grid_bf16.toml")
    runs = plan_grid(grid)
    assert {r.key for r in runs} == set(six)
    for run in runs:
        twin = six[run.key]
        assert run.budget == twin.budget
        cfg = run_config(grid, run.overrides, run.arm).to_dict()
        twin_cfg = run_config(six_grid, twin.overrides, twin.arm).to_dict()
        assert (cfg["agent"].pop("dtype"), twin_cfg["agent"].pop("dtype")) == ("bfloat16", "auto")
        assert cfg == twin_cfg


def test_the_credit_grid_is_the_bf16_grid_with_only_the_reference_credit_added() -> None:
    """configs/grid_credit.toml: tiers 2-3 of the shop admin and the shop; every start is grid_bf16's own
    start (the same config), every trained run has a grid_bf16 twin whose config differs only in
    es.shaping.reference_credit (0.4 against 0), with the same budget."""
    bf16_grid = load_grid_config(REPO / "configs" / "grid_bf16.toml")
    twins = {r.key: r for r in plan_grid(bf16_grid)}
    grid = load_grid_config(REPO / "configs" / "grid_credit.toml")
    runs = plan_grid(grid)
    assert len(runs) == 4 * 7 and {(r.setting.family, r.setting.tier) for r in runs} == {
        (f, t) for f in ("shopping", "shopping_admin") for t in (2, 3)}
    for run in runs:
        twin = twins[run.key]
        assert run.budget == twin.budget
        if run.arm == "start":
            assert (run.overrides, run.config_sha256) == (twin.overrides, twin.config_sha256)
            continue
        cfg = run_config(grid, run.overrides, run.arm).to_dict()
        twin_cfg = run_config(bf16_grid, twin.overrides, twin.arm).to_dict()
        assert cfg["es"]["shaping"].pop("reference_credit") == 0.4
        assert "reference_credit" not in twin_cfg["es"]["shaping"]
        assert cfg == twin_cfg
