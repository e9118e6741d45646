"""Sampling probe (issue #13): does a sampled action choice make a generation's candidates differ?

The 6-hour grid's candidates tied on every reward in 96 % of tier-2 generations (reward_ties.md): with greedy
choices an episode's outcome is set by the task and the centre, so ES got no signal. This probe scores one
ES generation's population, as training does, at several policy temperatures
(``PolicyConfig.temperature``: training rollouts sample ``softmax(scores / T)`` with noise shared by the
population, :mod:`es_agent.sampling`) and counts what the update would see.

Method. The policy and tasks are one grid run's (``--result``: a grid ``result.json``; its base config and
overrides, so the same model, priors, memory, tier and training tasks). For each temperature and each of
``--generations`` env seeds (0, 1, ...), a population of ``--pairs`` antithetic pairs of full-rank
perturbations (seeds ``1000 + 10 * g + i``, ``+sigma`` and ``-sigma``, the run's ``es.sigma_0``) runs one
episode of each training task (``--tasks``: the first n; 0 all) through
:meth:`es_agent.problem.AgentProblem.evaluate_rows`, as a generation's candidates do. Each temperature's
matrix is written to ``<out>.json`` as soon as it is done, and a rerun skips the temperatures it holds (same
result file, tasks, pairs and generations).

Per temperature (``<out>.{md,json}``):
- ``success``: share of the candidate episodes solved;
- ``mixed``: share of (generation, task) cells whose candidates' rewards differ (the cells that give the
  update a reward signal; with one task per generation, as in the grid, a tied cell is an empty update);
- ``pairs split``: share of (generation, task, pair) whose two antithetic members' rewards differ;
- ``confidence``: the mean chosen-action margin of the episodes (in score units).

``python -m benchmarks.sampling_probe --result
runs/grid_6h/embedded_shopping_admin_t2/weights/seed0/result.json --temperatures 0 1 4 [--tasks 10]
[--pairs 2] [--generations 1] [--out benchmarks/results/sampling_probe]``
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, BenchmarkError, code_version, machine_info, torch_threads

FORMAT = "esopt-sampling-probe/1"
SEED_BASE = 1000


def cell_stats(rewards: Sequence[Sequence[Sequence[float]]]) -> dict[str, Any]:
    """The probe's counts from rewards ``[generation][row][task]`` (rows in antithetic pairs: ``2i`` and
    ``2i + 1`` share a noise seed)."""
    episodes = solved = cells = mixed = pairs = split = 0
    for matrix in rewards:
        n_rows = len(matrix)
        if n_rows % 2:
            raise BenchmarkError(f"{n_rows} rows: the rows come in antithetic pairs")
        for t in range(len(matrix[0]) if matrix else 0):
            column = [float(matrix[r][t]) for r in range(n_rows)]
            episodes += len(column)
            solved += sum(v >= 1.0 for v in column)
            cells += 1
            mixed += len(set(column)) > 1
            for i in range(0, n_rows, 2):
                pairs += 1
                split += column[i] != column[i + 1]
    return {"episodes": episodes, "solved": solved, "cells": cells, "mixed": mixed, "pairs": pairs,
            "pairs_split": split}


def _settings(result_path: Path, temperature: float) -> tuple[Any, list[int]]:
    from cotrain.config import load_config

    result = json.loads(result_path.read_text())
    overrides = [o for o in result["overrides"] if not o.startswith("agent.policy.temperature=")]
    cfg = load_config(result["base_config"], [*overrides, f"agent.policy.temperature={temperature}"])
    return cfg, [int(t) for t in result["train_tasks"]]


def probe(result_path: Path, temperature: float, tasks: int, pairs: int, generations: int) -> dict[str, Any]:
    """One temperature's population rewards and confidences on the run's training tasks."""
    from cotrain.checkpoint import RunState, initial_distribution, load_pools
    from cotrain.config import resolve_settings, with_resolved
    from cotrain.trainer import build_problem
    from es_agent.rows import CandidateRow

    cfg, train_tasks = _settings(result_path, temperature)
    cfg = with_resolved(cfg, resolve_settings(cfg))
    task_ids = train_tasks[:tasks] if tasks else train_tasks
    pools = load_pools(cfg.prompts.pools)
    genome = pools.baseline(cfg.eval.baseline)
    state = RunState(0, initial_distribution(cfg, pools), pools, None, 0, [], None)
    problem = build_problem(cfg, state, task_ids)
    rewards, confidences = [], []
    started = time.perf_counter()
    try:
        for g in range(generations):
            sigma = cfg.es.distribution.sigma_0
            rows = [CandidateRow(SEED_BASE + 10 * g + i, sign * sigma, g, tuple(genome.indices))
                    for i in range(pairs) for sign in (1.0, -1.0)]
            columns, margins = [], []
            for task in task_ids:  # one task per call, as the grid's generations (max_batch_tasks=1)
                columns.append(problem.evaluate_rows(rows, [task], sample=True)[:, 0].tolist())
                margins.append(problem.local_replica.last_confidences[:, 0].tolist())
            rewards.append([list(r) for r in zip(*columns, strict=True)])
            confidences.append([list(r) for r in zip(*margins, strict=True)])
            print(f"T={temperature} generation {g}: {rewards[-1]}", file=sys.stderr, flush=True)
    finally:
        problem.close()
    return {"temperature": temperature, "tasks": task_ids, "rewards": rewards, "confidences": confidences,
            "seconds": time.perf_counter() - started, **cell_stats(rewards)}


def report_md(result: dict[str, Any]) -> str:
    """The probe's table."""
    def pct(a: int, b: int) -> str:
        return f"{100 * a / b:.0f} % ({a}/{b})" if b else "-"

    lines = [f"# Sampling probe: {result['setting']}", "",
             f"`python -m benchmarks.sampling_probe --result {result['result']}` on {result['machine']}, "
             f"{result['date']}; {result['pairs']} antithetic pairs at sigma {result['sigma']}, "
             f"{result['generations']} generation(s), {result['n_tasks']} training tasks.", "",
             "| temperature | success | mixed cells | pairs split | mean confidence | seconds |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in result["temperatures"]:
        flat = [c for gen in row["confidences"] for r in gen for c in r]
        conf = sum(flat) / len(flat) if flat else 0.0
        lines.append(f"| {row['temperature']:g} | {pct(row['solved'], row['episodes'])} | "
                     f"{pct(row['mixed'], row['cells'])} | {pct(row['pairs_split'], row['pairs'])} | "
                     f"{conf:.2f} | {row['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sampling_probe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--result", required=True, type=Path, help="a grid run's result.json")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.0, 1.0, 4.0])
    parser.add_argument("--tasks", type=int, default=10, help="the first n training tasks (0: all)")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--generations", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks/results/sampling_probe")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.generations < 1 or args.tasks < 0:
        parser.error("--pairs and --generations must be >= 1, --tasks >= 0")
    if any(not t >= 0 for t in args.temperatures):
        parser.error("--temperatures must be >= 0")
    with torch_threads(1):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    path = args.out.with_suffix(".json")
    meta = json.loads(args.result.read_text())
    head = {"format": FORMAT, "result": str(args.result), "setting": meta["setting"], "pairs": args.pairs,
            "generations": args.generations, "n_tasks": args.tasks}
    done: dict[float, dict[str, Any]] = {}
    if path.exists():
        old = json.loads(path.read_text())
        if all(old.get(k) == v for k, v in head.items()):
            done = {float(r["temperature"]): r for r in old["temperatures"]}
    cfg, _ = _settings(args.result, 0.0)
    for temperature in args.temperatures:
        if temperature not in done:
            done[temperature] = probe(args.result, temperature, args.tasks, args.pairs, args.generations)
        result = {**head, "sigma": cfg.es.distribution.sigma_0, "code_version": code_version(),
                  "machine": f"{machine_info()['cpu']}, {platform.node()}",
                  "date": time.strftime("%Y-%m-%d"),
                  "temperatures": [done[t] for t in sorted(done)]}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(report_md(result))
    print(report_md(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
