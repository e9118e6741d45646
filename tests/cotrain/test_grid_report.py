"""The grid report from result files (cotrain.grid_report): headlines, paired estimates, the per-tier table
and pending runs on hand-computed outcomes; results of several grid directories merge, and two directories
that hold the same run with different overrides are refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cotrain.checkpoint import atomic_write_json
from cotrain.errors import GridError
from cotrain.grid import RESULT_FORMAT
from cotrain.grid_config import grid_config_from_dict
from cotrain.grid_report import build_report, chance_line, collect_results, headline_lines, write_report

REPO = Path(__file__).resolve().parents[2]
TEST, UNSEEN = [1, 2], [3, 4]


def result(setting: str, tier: int, arm: str, seed: int | None, solved: list[int],
           model: str = "tiny:0", family: str = "shopping") -> dict[str, Any]:
    """A result file's content: tasks 1-2 (test) and 3-4 (test_unseen), ``solved`` of them with reward 1."""
    key = f"{setting}/{arm}" + ("" if seed is None else f"/seed{seed}")
    return {"format": RESULT_FORMAT, "key": key, "setting": setting, "model": model, "family": family,
            "tier": tier, "arm": arm, "seed": seed, "overrides": [f"es.seed={seed}"], "env_seed": 0,
            "tasks": {"test": TEST, "test_unseen": UNSEEN},
            "rewards": {str(t): 1.0 if t in solved else 0.0 for t in TEST + UNSEEN},
            "curve": [0.0, 0.5], "seconds_train": 1.0,
            "updates": None if seed is None else {"generations": 2, "empty": seed, "empty_reasons":
                                                  {"all rewards tie": seed} if seed else {},
                                                  # seed 0: metrics from before the rewards_tied record
                                                  **({"tiebreak_only": 1} if seed else {})},
            "budget_planned": None if seed is None else {"episodes": 6, "steps": 6},
            "budget_actual": None if seed is None else {"episodes": 6, "steps": None}}


def write(out: Path, r: dict[str, Any]) -> None:
    (out / r["key"]).mkdir(parents=True)
    atomic_write_json(out / r["key"] / "result.json", r)


def grid(tmp_path: Path, families: list[str]) -> Any:
    data = {"grid": {"base": str(REPO / "configs" / "grid_train.toml"), "seeds": [0, 1], "families": families,
                     "tiers": [1], "results": str(tmp_path / "report" / "grid")},
            "models": {"tiny:0": []},
            "arms": {"prompts": [], "weights": [], "both": []}}
    return grid_config_from_dict(data, tmp_path / "grid.toml")


def test_report_on_hand_computed_outcomes_with_a_merged_directory(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    s1, s2 = "tiny0_shopping_t1", "tiny0_reddit_t1"
    write(a, result(s1, 1, "start", None, [1]))  # start: 1 of 4
    for seed in (0, 1):
        write(a, result(s1, 1, "prompts", seed, [1]))        # 1/4: +0 over start
        write(a, result(s1, 1, "weights", seed, [1, 2]))     # 2/4: +25 points
        write(a, result(s1, 1, "both", seed, [1, 2, 3]))     # 3/4: beats both
    write(b, result(s2, 1, "start", None, [], family="reddit"))
    write(b, result(s2, 1, "weights", 0, [3], family="reddit"))   # +25 points on seed 0 only; seed 1 pending
    report = build_report(grid(tmp_path, ["shopping"]), collect_results([a, b]), command="c", dirs=[a, b])

    assert list(report["settings"]) == [s1, s2], "the merged directory's setting joins the report"
    co = report["headlines"]["coevolution"]
    assert (co["k"], co["m"]) == (1, 1)  # only s1's three arms share 2 seeds
    assert co["settings"][0]["seeds"] == [0, 1]
    arms = report["settings"][s1]["arms"]
    assert arms["start"]["splits"]["heldout"]["mean"]["mean"] == 0.25
    assert arms["weights"]["splits"]["test"]["vs_start"]["mean"] == 0.5   # test: 2/2 against 1/2
    assert arms["weights"]["splits"]["test_unseen"]["vs_start"]["mean"] == 0.0
    both_vs = report["settings"][s1]["comparisons"]
    assert both_vs["both_vs_weights"]["splits"]["heldout"]["mean"] == 0.25
    assert both_vs["both_vs_prompts"]["splits"]["heldout"]["mean"] == 0.5
    # weights over start pooled over settings: s1 (2 seeds) and s2 (1 seed) side by side on their shared
    # first seed row: s1 [0, 1, 0, 0] and s2 [0, 0, 1, 0] -> 2 of 8 cells = +25 points
    w = report["headlines"]["weights_vs_start"]
    assert w["mean"] == 0.25 and w["n_seeds"] == 1 and w["n_tasks"] == 8
    assert report["tiers"]["1"]["weights"]["mean"] == 0.25
    assert f"{s2}/weights/seed1" in report["pending"] and f"{s2}/both/seed0" in report["pending"]
    assert not any(k.startswith(s1) for k in report["pending"])
    per_task = report["settings"][s1]["per_task"]
    assert [(r["task"], r["split"], r["start"]) for r in per_task["tasks"]] == [
        (1, "test", True), (2, "test", False), (3, "test_unseen", False), (4, "test_unseen", False)]
    assert [r["arms"]["both"] for r in per_task["tasks"]] == [[2, 2], [2, 2], [2, 2], [0, 2]]
    # both: tasks 2 and 3 gained in 2 seeds each, nothing lost, of 2 seeds x 4 tasks
    assert per_task["cells"] == {"prompts": {"gained": 0, "lost": 0, "cells": 8},
                                 "weights": {"gained": 2, "lost": 0, "cells": 8},
                                 "both": {"gained": 4, "lost": 0, "cells": 8}}
    s2_cells = report["settings"][s2]["per_task"]["cells"]
    assert s2_cells == {"weights": {"gained": 1, "lost": 0, "cells": 4}}  # arms without runs are left out
    lines = headline_lines(report)
    assert lines[0].startswith("co-evolution beats both matched single-space arms in 1 of 1 settings")
    assert lines[1].startswith("weights-only ES changes held-out success by +25.0 points (95 % CI ")

    paths = write_report(grid(tmp_path, ["shopping"]), [a, b], command="esopt grid ...")
    assert json.loads(paths[0].read_text())["plots"] == {s1: f"grid-{s1}.png", s2: f"grid-{s2}.png",
                                                          "tiers": "grid-tiers.png"}
    markdown = paths[1].read_text()
    assert "| tiny0_shopping_t1 | weights | 2 | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 50.0" in markdown
    assert "| tiny0_shopping_t1 | weights | 0/2 1/2 | all rewards tie | ? 1 | 0.250 |" in markdown
    assert "| 3 | test_unseen | 0 | 0/2 | 0/2 | 2/2 |" in markdown  # prompts, weights, both
    assert "| gained / lost cells |  |  | +0 / -0 of 8 | +2 / -0 of 8 | +4 / -0 of 8 |" in markdown
    assert all(p.stat().st_size > 0 for p in paths)


def test_the_coevolution_headline_compares_the_seeds_all_three_arms_share(tmp_path: Path) -> None:
    """A grid extended by more seeds: a setting counts once its trained arms share 2 seeds, compared on those
    (here both's seed 2 would turn its win into a tie and is left out); one shared seed is not enough."""
    out = tmp_path / "g"
    s1, s2 = "tiny0_shopping_t1", "tiny0_reddit_t1"
    write(out, result(s1, 1, "start", None, [1]))
    for seed in (0, 1, 2):
        write(out, result(s1, 1, "prompts", seed, [1]))
        write(out, result(s1, 1, "weights", seed, [1, 2]))
    for seed in (0, 1):
        write(out, result(s1, 1, "both", seed, [1, 2, 3]))
    write(out, result(s1, 1, "both", 3, [1]))            # a seed the others lack: not compared
    write(out, result(s2, 1, "start", None, [], family="reddit"))
    for arm in ("prompts", "weights", "both"):
        write(out, result(s2, 1, arm, 0, [3] if arm == "both" else [], family="reddit"))
    g = grid(tmp_path, ["shopping", "reddit"])
    report = build_report(g, collect_results([out]), command="c", dirs=[out])
    co = report["headlines"]["coevolution"]
    assert (co["k"], co["k_at_least"], co["m"]) == (1, 1, 1)
    win = co["settings"][0]
    assert win["setting"] == s1 and win["seeds"] == [0, 1]
    assert win["means"] == {"both": 0.75, "prompts": 0.25, "weights": 0.5}
    assert "on the seeds all three trained arms share, at least 2" in headline_lines(report)[0]


def test_a_tie_where_no_arm_and_not_the_start_solves_a_task_is_counted_apart(tmp_path: Path) -> None:
    """Ties at 0 count as "at least as good" but are no evidence, so the headline says how many there are;
    a setting whose start solves a task that every trained arm then loses is not such a tie."""
    out = tmp_path / "g"
    s1, s2, s3 = "tiny0_shopping_t1", "tiny0_reddit_t1", "tiny0_shopping_admin_t1"
    write(out, result(s1, 1, "start", None, [1]))
    write(out, result(s2, 1, "start", None, [], family="reddit"))
    write(out, result(s3, 1, "start", None, [2], family="shopping_admin"))
    for seed in (0, 1):
        write(out, result(s1, 1, "prompts", seed, [1]))
        write(out, result(s1, 1, "weights", seed, [1]))
        write(out, result(s1, 1, "both", seed, [1, 2]))
        for arm in ("prompts", "weights", "both"):
            write(out, result(s2, 1, arm, seed, [], family="reddit"))
            write(out, result(s3, 1, arm, seed, [], family="shopping_admin"))
    report = build_report(grid(tmp_path, ["shopping", "reddit", "shopping_admin"]), collect_results([out]),
                          command="c", dirs=[out])
    co = report["headlines"]["coevolution"]
    assert (co["k"], co["k_at_least"], co["zero_ties"], co["m"]) == (1, 3, 1, 3)
    assert [w["zero_tie"] for w in co["settings"]] == [False, True, False]
    assert "at least as good in 3 of 3, 1 of them ties where no arm and not the start solves" in \
        headline_lines(report)[0]
    # Chance level: s1's seeds each total (both 2, prompts 1, weights 1); with the labels shuffled per seed,
    # both beats when it gets the 2 in both seeds (1/9) and ties when in one (4/9); s2 and s3 tie at 0 always
    chance = co["chance"]
    assert chance["beats"] == pytest.approx({"observed": 1, "settings": 3, "expected": 1 / 9,
                                             "p_value": 1 / 9})
    assert chance["at_least"] == pytest.approx({"observed": 3, "settings": 3, "expected": 2 + 5 / 9,
                                                "p_value": 5 / 9})
    assert chance_line(report) == (
        "by chance (each seed's three trained runs exchangeable, arm labels carrying nothing), co-evolution "
        "would beat both in 0.1 of 3 settings on average (P(at least 1) = 0.11) and be at least as good in "
        "2.6 (P(at least 3) = 0.56)")


def test_the_same_run_with_other_overrides_does_not_merge(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, result("tiny0_shopping_t1", 1, "start", None, []))
    other = result("tiny0_shopping_t1", 1, "start", None, [])
    other["overrides"] = ["es.population=8"]
    write(b, other)
    with pytest.raises(GridError, match="different overrides"):
        collect_results([a, b])
    assert len(collect_results([a, a])) == 1
    with pytest.raises(GridError, match="no grid directory"):
        collect_results([tmp_path / "missing"])


def test_a_report_of_a_seed_subset_keeps_only_those_seeds_and_the_start(tmp_path: Path) -> None:
    """``seeds``: the report of a pre-registered subset, as if the grid had only those seeds."""
    out = tmp_path / "g"
    s1 = "tiny0_shopping_t1"
    write(out, result(s1, 1, "start", None, [1]))
    write(out, result(s1, 1, "weights", 0, [1, 2, 3, 4]))   # left out: +75 points would lift the mean
    write(out, result(s1, 1, "weights", 1, [1]))            # +0
    write(out, result(s1, 1, "weights", 2, [1, 2]))         # +25
    g = grid(tmp_path, ["shopping"])
    paths = write_report(g, [out], results=tmp_path / "subset", seeds=[1, 2], command="c")
    report = json.loads(paths[0].read_text())
    assert report["seeds"] == [1, 2]
    weights = report["settings"][s1]["arms"]["weights"]
    assert weights["seeds"] == [1, 2]
    assert weights["splits"]["heldout"]["vs_start"]["mean"] == pytest.approx(0.125)
    assert report["settings"][s1]["arms"]["start"]["splits"]["heldout"]["mean"]["mean"] == 0.25
    assert f"{s1}/weights/seed0" not in report["pending"]
    whole = json.loads(write_report(g, [out], results=tmp_path / "whole", command="c")[0].read_text())
    assert whole["settings"][s1]["arms"]["weights"]["seeds"] == [0, 1, 2]
    assert whole["settings"][s1]["arms"]["weights"]["splits"]["heldout"]["vs_start"]["mean"] == \
        pytest.approx(1 / 3)  # (3 + 0 + 1) of 12 cells
