"""The learning study (``python -m benchmarks.learning``) runs end to end at its smoke size and writes a
consistent report: every mode trained, the centre and the starting point scored on the same tasks. It checks
the pipeline, not that anything learns (the smoke size is a tiny random model for two generations); the
study's real numbers live in benchmarks/results/learning.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.browser
def test_quick_study_trains_every_mode_and_scores_centre_and_start(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    results = tmp_path / "learning"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.learning", "--quick", "--seeds", "0", "--out-dir",
         str(tmp_path / "runs"), "--results", str(results)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    report = json.loads(results.with_suffix(".json").read_text(encoding="utf-8"))
    assert set(report["summary"]) == {"weights", "prompts", "both"}
    assert len(report["train_tasks"]) == 2 and len(report["heldout_tasks"]) == 2
    assert not set(report["train_tasks"]) & set(report["heldout_tasks"])
    no_skill = {"system": "webarena", "skills": "no_skill", "action_format": "direct"}
    assert report["start"]["genome"] == no_skill
    for run in report["runs"]:
        assert len(run["curve"]) == 2, run  # one population success rate per generation
        assert all(0.0 <= v <= 1.0 for v in run["curve"])
        assert set(run["train_rewards"]) == {str(t) for t in report["train_tasks"]}
        assert set(run["heldout_rewards"]) == {str(t) for t in report["heldout_tasks"]}
        assert (Path(run["run_dir"]) / "run.json").exists()
    weights_only = next(r for r in report["runs"] if r["mode"] == "weights")
    assert weights_only["genome"] == report["start"]["genome"], "weights-only keeps the starting genome"
    markdown = results.with_suffix(".md").read_text(encoding="utf-8")
    assert markdown.startswith("# Learning evidence")
    assert all(f"| {mode} | 1 |" in markdown for mode in ("weights", "prompts", "both"))

    again = subprocess.run(  # finished runs are reused, not retrained
        [sys.executable, "-m", "benchmarks.learning", "--quick", "--seeds", "0", "--modes", "weights",
         "--out-dir", str(tmp_path / "runs"), "--results", str(results)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1800, check=False)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    rerun = json.loads(results.with_suffix(".json").read_text(encoding="utf-8"))
    assert rerun["runs"][0]["train_seconds"] == 0.0
