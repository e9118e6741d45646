"""Generation wall time of the demo config: today's main against the new code, and 1 against 2 workers.

Method. Three arms, run one after the other in one benchmark run, each an ``esopt train`` in its own Python
process (``cotrain.cli.main`` through a small driver, :data:`DRIVER`):

- **main**: commit :data:`MAIN_COMMIT` (the code before issue #10) checked out in a temporary
  ``git worktree`` and imported from there (``PYTHONPATH`` = the worktree, same ``.venv``), with *its*
  ``configs/demo.toml`` (float32, one in-process worker);
- **new, 1 worker**: this tree's ``configs/demo.toml`` (``dtype = "auto"``) with ``workers.num_workers=1``
  (in process);
- **new, 2 workers**: the same with ``workers.num_workers=2`` (two local Ray actors, one torch thread each).

Every arm runs the demo config (embedded SmolLM2-135M, population 4, 2 tasks per generation, at most 3
steps) with the same overrides: ``es.generations`` (3; quick: 2), ``prompts.mutation=false`` (reflective
mutation runs in the driver every other generation and is not what workers spread), ``eval.every=0``,
``checkpoint.snapshot_every=0`` (the final snapshot comes after the last generation), ``ui.mode=off``. The
same seed gives every arm the same task batches and noise seeds; episodes can still differ where the policy
code changed (prompts, typing).

A generation's seconds are the wall time of the searcher's ``step()`` (sample, evaluate on the workers,
update), timed by the driver around ``CoEvolutionES.step``, the same way in every arm (the new code's metrics
also carry them as ``seconds_generation``). The first generation is dropped as warm-up: it builds the models,
browsers and sites (lazily, in every arm). Ratios compare the sums of the measured generations (the same
generations, hence the same task batches, in every arm). The rollout / perturbation split is the run's own
metrics (``seconds_rollout``, ``seconds_perturb``, ``seconds_update``, summed over workers) over the measured
generations. Ray's startup cost is the driver's ``ensure_ray`` (``ray.init``) time, and the extra warm-up
generation time of the 2-worker arm over the 1-worker arm (actors start, load the model and build their envs
there). Quick mode: the tiny random Qwen instead of SmolLM2, 2 generations (it checks the code path, not the
figures). ``python -m benchmarks.bench_generation [--quick]``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    REPO_ROOT,
    BenchmarkError,
    Figure,
    load_average,
    print_figures,
    rnd,
    run_as_script,
    spread,
)

MAIN_COMMIT = "2442159"
"""Today's main when issue #10 was taken up: the baseline arm."""
GENERATIONS = {False: 3, True: 2}
"""Generations per arm (full, quick); the first is warm-up."""
TIMEOUT_S = {False: 1500, True: 600}
"""Per-arm limit (a generation of the demo takes about a minute on 2 cores)."""
GOALS = {"workers": 0.6, "main": 0.4}
OVERRIDES = ("prompts.mutation=false", "eval.every=0", "checkpoint.snapshot_every=0", "ui.mode=off",
             "ui.plot=false")
DRIVER = r"""
import json, sys, time
t0 = time.perf_counter()
import cotrain.searcher as searcher_module
import cotrain.trainer as trainer_module
from cotrain.cli import main

steps, ray_init = [], []
step = searcher_module.CoEvolutionES.step
def timed_step(self):
    start = time.perf_counter()
    step(self)
    steps.append([start - t0, time.perf_counter() - t0])
searcher_module.CoEvolutionES.step = timed_step
ensure_ray = trainer_module.ensure_ray
def timed_ensure_ray(workers):
    start = time.perf_counter()
    ensure_ray(workers)
    ray_init.append(time.perf_counter() - start)
trainer_module.ensure_ray = timed_ensure_ray
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "steps": steps, "ray_init_s": ray_init, "total_s": time.perf_counter() - t0,
               "cotrain": searcher_module.__file__}, f)
raise SystemExit(code)
"""
"""Runs ``esopt train`` (argv after the output file) and writes the step times; uses only APIs that exist in
both the main and the new code (``CoEvolutionES.step``, ``trainer.ensure_ray``, ``cotrain.cli.main``)."""


def run_arm(name: str, tree: Path, overrides: list[str], run_dir: Path, quick: bool) -> dict[str, Any]:
    """One ``esopt train`` of ``tree``'s demo config in a child process; its step times and metrics."""
    out = run_dir.parent / f"{run_dir.name}.timing.json"
    cmd = [sys.executable, "-c", DRIVER, str(out), "train", "--config", str(tree / "configs" / "demo.toml"),
           "--run-dir", str(run_dir)]
    for item in [*OVERRIDES, f"es.generations={GENERATIONS[quick]}", *overrides]:
        cmd += ["--set", item]
    env = {**os.environ, "PYTHONPATH": str(tree), "EVOTORCH_VERBOSE_LEVEL": "0"}
    load = load_average()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S[quick], check=False)
    except subprocess.TimeoutExpired as exc:
        raise BenchmarkError(f"arm {name!r} timed out after {TIMEOUT_S[quick]} s") from exc
    if proc.returncode != 0 or not out.is_file() or not (run_dir / "metrics.jsonl").is_file():
        raise BenchmarkError(f"arm {name!r} failed (exit {proc.returncode}):\n"
                             + (proc.stdout[-1000:] + "\n" + proc.stderr[-3000:]).strip())
    timing = json.loads(out.read_text())
    if not Path(timing["cotrain"]).resolve().is_relative_to(tree.resolve()):
        raise BenchmarkError(f"arm {name!r} imported cotrain from {timing['cotrain']}, not from {tree}")
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    manifest = json.loads((run_dir / "run.json").read_text())
    print(f"arm {name}: generation seconds {[round(b - a, 1) for a, b in timing['steps']]}, "
          f"first step at {timing['steps'][0][0]:.1f} s, ray.init {timing['ray_init_s']}, resolved "
          f"{manifest.get('resolved')}", flush=True)
    return {"name": name, "timing": timing, "metrics": metrics, "resolved": manifest.get("resolved"),
            "load_before": load, "load_after": load_average()}


def summarise(arm: dict[str, Any]) -> dict[str, Any]:
    """Generation seconds (warm-up dropped), the rollout / perturbation split and the startup of one arm."""
    steps = [end - start for start, end in arm["timing"]["steps"]]
    if len(steps) < 2 or len(steps) != len(arm["metrics"]):
        raise BenchmarkError(f"arm {arm['name']!r}: {len(steps)} timed steps, {len(arm['metrics'])} metrics "
                             "lines (expected the same number, at least 2)")
    measured, metrics = steps[1:], arm["metrics"][1:]
    parts = {k: sum(float(m.get(k, 0.0)) for m in metrics)
             for k in ("seconds_rollout", "seconds_perturb", "seconds_update")}
    worker_total = sum(parts.values())
    return {
        "generation_s": measured, "warmup_s": steps[0], "total_s": sum(measured),
        "startup_s": arm["timing"]["steps"][0][0], "ray_init_s": sum(arm["timing"]["ray_init_s"]),
        "rollout_s": parts["seconds_rollout"], "perturb_s": parts["seconds_perturb"],
        "update_s": parts["seconds_update"],
        "perturb_share": (parts["seconds_perturb"] + parts["seconds_update"]) / worker_total
        if worker_total else None,
        "workers": [len(m.get("workers") or []) for m in arm["metrics"]],
        "torch_threads": sorted({w.get("torch_threads") for m in arm["metrics"]
                                 for w in m.get("workers") or [] if w.get("torch_threads") is not None}),
        "resolved": arm["resolved"], "load": [arm["load_before"][0], arm["load_after"][0]],
    }


def figures_of(arms: dict[str, dict[str, Any]], model: str) -> list[Figure]:
    """The benchmark's figures from the summaries of the arms ``main``, ``new1`` and ``new2``."""
    labels = {"main": f"main {MAIN_COMMIT}, 1 worker", "new1": "new, 1 worker", "new2": "new, 2 workers"}
    out = []
    for key, s in arms.items():
        mean = sum(s["generation_s"]) / len(s["generation_s"])
        out.append(Figure(
            f"demo generation wall time [{labels[key]}, {model}]", rnd(mean), "s", None, None,
            spread(s["generation_s"]),
            f"mean of generations 2..{len(s['generation_s']) + 1} (generation 1, {s['warmup_s']:.0f} s, is "
            f"warm-up); load {s['load'][0]} -> {s['load'][1]}",
            extra={k: (rnd(v) if isinstance(v, float) else v) for k, v in s.items()
                   if k not in ("generation_s",)} | {"generation_s": [rnd(v) for v in s["generation_s"]]}))
    workers = arms["new2"]["total_s"] / arms["new1"]["total_s"]
    out.append(Figure(
        f"demo generation time, 2 workers / 1 worker [new code, {model}]", rnd(workers, 3), "x",
        f"<= {GOALS['workers']}", workers <= GOALS["workers"], None,
        f"sums of the measured generations: {arms['new2']['total_s']:.1f} s vs "
        f"{arms['new1']['total_s']:.1f} s; 4 candidates on 2 workers are 2 rounds of 2, so 0.5 is the floor"))
    vs_main = arms["new2"]["total_s"] / arms["main"]["total_s"]
    out.append(Figure(
        f"demo generation time, new (2 workers) / main {MAIN_COMMIT} (1 worker) [{model}]", rnd(vs_main, 3),
        "x", f"<= {GOALS['main']}", vs_main <= GOALS["main"], None,
        f"{arms['new2']['total_s']:.1f} s vs {arms['main']['total_s']:.1f} s; new, 1 worker / main: "
        f"{arms['new1']['total_s'] / arms['main']['total_s']:.3f}x"))
    for key, s in arms.items():
        share = s["perturb_share"]
        out.append(Figure(
            f"perturbation + update share of worker time [{labels[key]}, {model}]",
            None if share is None else rnd(100 * share, 3), "%", "< 5 %" if key == "new2" else None,
            None if share is None or key != "new2" else share < 0.05, None,
            f"rollout {s['rollout_s']:.1f} s, perturb/restore {s['perturb_s']:.1f} s, update "
            f"{s['update_s']:.1f} s over the measured generations, summed over workers (run metrics)"))
    new1, new2 = arms["new1"], arms["new2"]
    out.append(Figure(
        f"Ray startup, 2 workers [{model}]", rnd(new2["ray_init_s"] + new2["warmup_s"] - new1["warmup_s"], 3),
        "s", None, None, None,
        f"ray.init {new2['ray_init_s']:.1f} s + extra warm-up generation "
        f"{new2['warmup_s'] - new1['warmup_s']:.1f} s (actors start, load the model, build browser and "
        "sites) over the in-process arm; paid once per run",
        extra={"ray_init_s": rnd(new2["ray_init_s"]), "warmup_s_2_workers": rnd(new2["warmup_s"]),
               "warmup_s_1_worker": rnd(new1["warmup_s"])}))
    return out


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the three arms and return the figures (also printed)."""
    started = time.perf_counter()
    model = "tiny:0" if quick else "embedded SmolLM2-135M"
    extra = ["agent.model=tiny:0", "agent.policy={max_prompt_tokens = 512}"] if quick else []
    with tempfile.TemporaryDirectory(prefix="esopt-bench-generation-") as folder:
        root = Path(folder)
        worktree = root / "main"
        subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(worktree),
                        MAIN_COMMIT], check=True, capture_output=True, text=True)
        try:
            raw = {
                "main": run_arm("main", worktree, extra, root / "main-run", quick),
                **{key: run_arm(key, REPO_ROOT, [*extra, f"workers.num_workers={n}"], root / f"{key}-run",
                                quick) for key, n in (("new1", 1), ("new2", 2))},
            }
        finally:
            subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(worktree)],
                           check=False, capture_output=True)
    arms = {key: summarise(arm) for key, arm in raw.items()}
    out = [f.to_dict() for f in figures_of(arms, model)]
    print_figures(f"bench_generation (quick={quick}, {time.perf_counter() - started:.0f} s)", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__, "tiny random Qwen instead of SmolLM2, 2 generations per arm")
