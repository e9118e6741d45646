"""Does it learn? Training success and held-out success of the three ablations (weights only, prompts only,
co-evolution), several seeds each, measured with the product itself.

Method: for every mode and seed, one ``esopt train`` run of the same config (``configs/learning.toml`` by
default: the embedded SmolLM2-135M on the embedded sites), differing only in ``es.seed`` and the ablation
switches (``weights``: ``es.evolve_prompts = false``, the genome stays the No-Skill baseline; ``prompts``:
``es.evolve_weights = false``, the weights stay the base model's; ``both``: co-evolution). Each run leaves its
run directory under ``--out-dir``; a finished one is reused and an unfinished one is resumed, so the study can
be stopped and continued. Then, with the product's ``evaluate_run`` at sigma 0 and the run's most probable
genome, the centre is scored on the run's training tasks and on its held-out tasks (``eval.tasks`` of the
config, or its ``eval.split``), and the starting point (base model + No-Skill genome: what every mode starts
from) is scored once on the same tasks with the same env seed. Reported per mode: the population's training
success per generation (mean over seeds, min-max), the centre's success at the start and at the end on the
training and the held-out tasks (mean over seeds and min-max).

    python -m benchmarks.learning                      # configs/learning.toml, 3 modes x 2 seeds
    python -m benchmarks.learning --seeds 0 1 2 --modes both
    python -m benchmarks.learning --quick              # tiny model, smoke size: checks the pipeline only
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import load_average, machine_info

MODES: dict[str, tuple[str, ...]] = {
    "weights": ("es.evolve_prompts=false",),
    "prompts": ("es.evolve_weights=false",),
    "both": (),
}
"""Ablation name -> config overrides."""
QUICK_OVERRIDES = ("agent.model=tiny:0", "agent.dtype=float32", "es.population=2", "es.generations=2",
                   "env.tasks_per_generation=1", "env.max_steps=1", "eval.every=1")
"""Smoke size: a tiny random Qwen, two generations of two candidates on one task, one step per episode."""


def run_training(config: Path, run_dir: Path, overrides: Sequence[str]) -> float:
    """Train (or resume, or reuse) one run in a child process; seconds spent (0 when it was finished)."""
    manifest = run_dir / "run.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("finished"):
        return 0.0
    if manifest.exists():
        cmd = ["resume", "--run-dir", str(run_dir)]
    else:
        cmd = ["train", "--config", str(config), "--run-dir", str(run_dir)]
        for item in overrides:
            cmd += ["--set", item]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cotrain.cli", *cmd], check=True)
    return time.perf_counter() - started


def score(run_dir: Path, train: Sequence[int | str], heldout: Sequence[int | str],
          baseline: bool) -> dict[str, dict[str, Any]]:
    """The centre (and, with ``baseline``, the starting point) of a finished run on its training and held-out
    tasks, in one evaluation (one model load and one set of sites for both task sets):
    ``{"centre" | "baseline": {"train": summary, "heldout": summary, "genome": ...}}``."""
    from cotrain.evaluate import evaluate_run, summarise_rewards

    report = evaluate_run(run_dir, tasks=[*train, *heldout], split="train+heldout", baseline=baseline,
                          write=False)
    return {who: {"train": summarise_rewards(train, report[who]["rewards"]),
                  "heldout": summarise_rewards(heldout, report[who]["rewards"]),
                  "genome": report[who].get("genome")}
            for who in ("centre", "baseline") if who in report}


def run_tasks_of(run_dir: Path) -> tuple[list[Any], list[Any]]:
    """The run's resolved training and held-out task ids (recorded in ``run.json``)."""
    from cotrain.checkpoint import RunDir
    from cotrain.tasks import run_tasks

    tasks = run_tasks(RunDir.open(run_dir))
    return list(tasks.train), list(tasks.eval)


def curve_of(run_dir: Path) -> list[float]:
    """Population training success per generation (``metrics.jsonl``)."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [float(json.loads(line)["success_rate"]) for line in lines if line.strip()]


def stats(values: Sequence[float]) -> dict[str, float]:
    """Mean, min and max."""
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}


def summarise(runs: list[dict[str, Any]], start: dict[str, float], window: int) -> dict[str, Any]:
    """Per mode: seeds, first/last ``window`` generations' population success, the centre at the end."""
    out: dict[str, Any] = {}
    for mode in MODES:
        mine = [r for r in runs if r["mode"] == mode]
        if not mine:
            continue
        first = [sum(r["curve"][:window]) / len(r["curve"][:window]) for r in mine]
        last = [sum(r["curve"][-window:]) / len(r["curve"][-window:]) for r in mine]
        out[mode] = {
            "seeds": [r["seed"] for r in mine],
            "population_success_first": stats(first),
            "population_success_last": stats(last),
            "centre_train_end": stats([r["train"] for r in mine]),
            "centre_heldout_end": stats([r["heldout"] for r in mine]),
            "start_train": start["train"],
            "start_heldout": start["heldout"],
            "curve_mean": [sum(col) / len(col) for col in zip(*(r["curve"] for r in mine), strict=False)],
        }
    return out


def _range(s: dict[str, float]) -> str:
    return f"{s['mean']:.2f} ({s['min']:.2f}-{s['max']:.2f})"


def render(report: dict[str, Any]) -> str:
    """The Markdown report."""
    w = report["window"]
    lines = [
        "# Learning evidence", "",
        f"- Date: {report['date']}; command: `{report['command']}`; {report['seconds']:.0f} s in all",
        f"- Machine: {report['machine'].get('cpu')}, {report['machine'].get('cpu_count')} cores; "
        f"load average at the start {report['load_start']}, at the end {report['load_end']}",
        f"- Config: `{report['config']}` with overrides {report['overrides'] or 'none'}; training tasks "
        f"{report['train_tasks']}, held-out tasks {report['heldout_tasks']}",
        "- Start: base model + No-Skill genome (what every mode starts from), scored once with the same env "
        "seed; centre: the run's final weights at sigma 0 with its most probable genome.",
        f"- Start's reward per task: training {report['start'].get('train_rewards')}, held-out "
        f"{report['start'].get('heldout_rewards')}", "",
        f"| mode | seeds | population success, first {w} gens | last {w} gens | centre on training tasks: "
        "start -> end | centre on held-out tasks: start -> end |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for mode, s in report["summary"].items():
        lines.append(
            f"| {mode} | {len(s['seeds'])} | {_range(s['population_success_first'])} | "
            f"{_range(s['population_success_last'])} | {s['start_train']:.2f} -> "
            f"{_range(s['centre_train_end'])} | {s['start_heldout']:.2f} -> "
            f"{_range(s['centre_heldout_end'])} |")
    lines += ["", "Mean over seeds (min-max). Per run:", "",
              "| mode | seed | population success per generation | centre train | centre held-out | "
              "final genome | train s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in report["runs"]:
        curve = " ".join(f"{v:.2f}" for v in r["curve"])
        lines.append(f"| {r['mode']} | {r['seed']} | {curve} | {r['train']:.2f} | {r['heldout']:.2f} | "
                     f"{r['genome']} | {r['train_seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.learning", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=Path("configs/learning.toml"))
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        help="extra config override (section.key=value), for every run")
    parser.add_argument("--out-dir", type=Path, default=Path("runs/learning"))
    parser.add_argument("--results", type=Path, default=Path("benchmarks/results/learning"),
                        help="writes <results>.md and <results>.json")
    parser.add_argument("--window", type=int, default=2, help="generations averaged at each end of the curve")
    parser.add_argument("--max-score-tasks", type=int, default=0,
                        help="score the centre on at most this many tasks of each set (0: all)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny model, smoke size, 2 tasks scored per set (checks the pipeline only)")
    args = parser.parse_args(argv)
    limit = args.max_score_tasks or (2 if args.quick else 0)
    overrides = [*(QUICK_OVERRIDES if args.quick else ()), *args.overrides]
    started, load_start = time.perf_counter(), load_average()

    runs: list[dict[str, Any]] = []
    report: dict[str, Any] = {}
    start: dict[str, float] | None = None
    train_tasks: list[Any] = []
    heldout: list[Any] = []
    for seed in args.seeds:
        for mode in args.modes:
            run_dir = args.out_dir / f"{mode}_s{seed}"
            seconds = run_training(args.config, run_dir, [*overrides, f"es.seed={seed}", *MODES[mode]])
            train_tasks, heldout = run_tasks_of(run_dir)
            if limit:
                train_tasks, heldout = train_tasks[:limit], heldout[:limit]
            if not heldout:
                raise SystemExit(f"{run_dir}: the config names no held-out tasks (set eval.tasks, "
                                 "eval.templates or eval.split)")
            scored = score(run_dir, train_tasks, heldout, baseline=start is None)
            if start is None:
                base = scored["baseline"]
                start = {"train": base["train"]["success_rate"], "heldout": base["heldout"]["success_rate"],
                         "genome": base["genome"], "train_rewards": base["train"]["rewards"],
                         "heldout_rewards": base["heldout"]["rewards"]}
            centre = scored["centre"]
            runs.append({"mode": mode, "seed": seed, "run_dir": str(run_dir), "curve": curve_of(run_dir),
                         "train": centre["train"]["success_rate"],
                         "heldout": centre["heldout"]["success_rate"],
                         "train_rewards": centre["train"]["rewards"],
                         "heldout_rewards": centre["heldout"]["rewards"],
                         "genome": centre["genome"], "train_seconds": seconds})
            print(f"{mode} seed {seed}: curve {runs[-1]['curve']} centre train {runs[-1]['train']:.2f} "
                  f"held-out {runs[-1]['heldout']:.2f} (start {start['train']:.2f} / {start['heldout']:.2f})",
                  flush=True)
            report = {  # rewritten after every run: a stopped study keeps what it measured
                "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "command": " ".join(["python -m benchmarks.learning", *(argv or sys.argv[1:])]),
                "seconds": time.perf_counter() - started, "machine": machine_info(), "load_start": load_start,
                "load_end": load_average(), "config": str(args.config), "overrides": overrides,
                "train_tasks": train_tasks, "heldout_tasks": heldout, "window": args.window, "start": start,
                "runs": runs, "summary": summarise(runs, start, args.window),
            }
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
            args.results.with_suffix(".md").write_text(render(report))
    print(render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
