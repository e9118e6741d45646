"""The examples run end to end with tiny budgets (tiny Qwen, toy text env through ``--env-module``); the real
WebArena one can only check its setup here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TOY = ["--env-id", "CotrainToyWeb-v0", "--env-module", "toy_web_env"]


def run_example(name: str, args: list[str], env: dict[str, str],
                cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "args", "expect"), [
    ("random_agent.py", [*TOY, "--episodes", "2", "--max-steps", "2"], "success rate"),
    ("llm_agent_one_task.py", [*TOY, "--model", "tiny:0", "--task", "1", "--max-steps", "2"], "reward"),
    ("pgpe_dense.py", [*TOY, "--model", "tiny:0", "--tasks", "0,1", "--popsize", "4", "--generations", "2",
                       "--stdev-init", "0.1", "--max-steps", "2"], "done: 2 generation(s)"),
    ("coevolution.py", [*TOY, "--model", "tiny:0", "--generations", "2", "--population", "4",
                        "--max-steps", "2", "--sigma", "0.05", "--ui", "off", "--run-dir", "run"],
     "2 generation(s)"),
], ids=["random_agent", "llm_agent_one_task", "pgpe_dense", "coevolution"])
def test_example_runs_with_a_tiny_budget(name: str, args: list[str], expect: str, tmp_path: Path,
                                         subprocess_env: dict[str, str]) -> None:
    done = run_example(name, args, subprocess_env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert expect in done.stdout


def test_real_webarena_example_reports_an_incomplete_setup(tmp_path: Path,
                                                           subprocess_env: dict[str, str]) -> None:
    env = {k: v for k, v in subprocess_env.items() if k.removeprefix("WA_") not in ("SHOPPING", "REDDIT")}
    tasks = tmp_path / "tasks.json"
    task = {"task_id": 0, "sites": ["shopping"], "require_login": False, "storage_state": None,
            "start_url": "__SHOPPING__", "geolocation": None, "intent_template": "x", "intent": "x",
            "instantiation_dict": {}, "require_reset": False, "intent_template_id": 0,
            "eval": {"eval_types": ["string_match"], "reference_answers": {"exact_match": "1"},
                     "reference_url": "", "program_html": []}}
    tasks.write_text(json.dumps([task]))
    args = ["--check", "--task-file", str(tasks), "--auth-dir", "missing"]
    done = run_example("real_webarena.py", args, env, tmp_path)
    assert done.returncode == 2
    assert "set SHOPPING (or WA_SHOPPING)" in done.stderr and "auto_login.py" in done.stderr
