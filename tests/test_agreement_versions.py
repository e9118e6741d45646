"""benchmarks.agreement_versions: two versions' cached scores of the same recorded steps, paired step by step
(hand-built scores, hand-counted outcomes)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import agreement_versions
from benchmarks.bench_agreement import _step_key, recorded_path, scores_path
from es_agent.agreement import ReferenceStep, save_trajectories
from es_agent.decoding import action_kind


def _step(split: str, task: int) -> ReferenceStep:
    obs = {"axtree": f"[{task}] button 'Cancel Order'\n[9] link 'Home'", "url": "http://shop/",
           "goal": f"Cancel order #{task}", "tabs": "", "last_action_error": ""}
    return ReferenceStep(task, split, 0, obs, f"click [{task}]", (), 2)


def _write_scores(cache: Path, version: str, split: str, steps: list[ReferenceStep], right: set[int]) -> None:
    """Scores under which the model picks the reference click on the tasks in ``right``, 'Home' elsewhere."""
    with scores_path("fake", "no_skill", split, cache, version=version).open("w") as out:
        for s in steps:
            cands = [f"click [{s.task_id}]", "click [9]"]
            logps = [[-1.0], [-2.0]] if s.task_id in right else [[-2.0], [-1.0]]
            out.write(json.dumps({"key": _step_key(s), "candidates": cands,
                                  "kinds": [action_kind(c) for c in cands], "token_logps": logps,
                                  "prior": None}) + "\n")


def test_versions_are_paired_step_by_step(tmp_path: Path) -> None:
    splits = {"tier1_train": [_step("tier1_train", 11)],
              "tier1_test": [_step("tier1_test", t) for t in (13, 14, 15, 16)]}
    for split, steps in splits.items():
        save_trajectories(recorded_path(split, tmp_path), steps, {"sites": {"shopping": "http://shop"}})
    _write_scores(tmp_path, "v0", "tier1_train", splits["tier1_train"], set())
    _write_scores(tmp_path, "v1", "tier1_train", splits["tier1_train"], set())
    _write_scores(tmp_path, "v0", "tier1_test", splits["tier1_test"], {13, 16})      # old: 2 of 4
    _write_scores(tmp_path, "v1", "tier1_test", splits["tier1_test"], {13, 14, 15})  # new: 3 of 4
    result = agreement_versions.compare("v0", "v1", ["tier1_train"], ["tier1_test"], model_name="fake",
                                        scoring="mean", goal_prior=0.0, answer_prior=0.0, cache_dir=tmp_path,
                                        grid=(0.0,))
    row = next(r for r in result["rows"] if r["group"] == "all")
    assert (row["steps"], row["old"], row["new"], row["only_new"], row["only_old"]) == (4, 2, 3, 2, 1)
    assert row["difference"]["mean"] == 0.25  # (0 + 1 + 1 - 1) / 4
    assert row["difference"]["low"] < 0.25 < row["difference"]["high"]
    assert sorted(c["step"] for c in result["changed_steps"]) == [
        "tier1_test 14 step 1", "tier1_test 15 step 1", "tier1_test 16 step 1"]
    result.update(date="2026-12-06 04:00 UTC", machine={"cpu": "x", "cpu_count": 2})
    text = agreement_versions.to_markdown(result, "python -m benchmarks.agreement_versions --old v0")
    assert "| all | 4 | 2 (50.0 %) | 3 (75.0 %) | +25.0 [" in text
    assert agreement_versions.QUESTION in text
