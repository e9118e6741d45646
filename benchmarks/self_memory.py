"""Self-generated trajectory memory: the start agent's own solved training episodes as exemplars, scored on
the held-out tasks against the start. Learning from trajectory-level rewards alone: no reference solution
enters, only which training episodes scored 1.

For each setting of a grid file (default ``configs/grid_lexical.toml``: SmolLM2 with both lexical priors,
tier 1), with the grid's policy, env, ``max_steps`` and env seed:

1. *collect*: the start (the base model, No-Skill genome, the memory of the previous rounds) runs one
   episode on every training task (reset seed :func:`es_agent.worker.episode_seed` of the grid's env seed,
   as the grid scores); each solved episode becomes an exemplar
   (:func:`es_agent.memory.exemplar_from_episode`: per step the action kind and the element's name);
2. *score*: the held-out tasks (``test`` and ``test_unseen``) once without a memory (the start, the same
   code in the same run) and once with the collected memory at ``--memory-prior``.

Each episode is appended to ``<out>/episodes.jsonl`` as it finishes (keyed by setting, phase, round and task)
and read back on a rerun, so an interrupted run resumes. ``--write`` puts the report in
``benchmarks/results/self_memory.{md,json}``. The same episodes at a different memory weight are new
episodes (the weight is part of the key).

``python -m benchmarks.self_memory [--grid configs/grid_lexical.toml] [--settings embedded_shopping_admin_t1]
[--memory-prior 150] [--rounds 1] [--abstract-instances] [--write]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, BenchmarkError

OUT = Path.home() / ".cache" / "agentic-esopt" / "self_memory"
"""Where the episodes are kept (resume)."""
RESULTS = REPO_ROOT / "benchmarks" / "results" / "self_memory"


class _Recorder:
    """Wraps a policy and keeps each step's goal and accessibility tree (what an exemplar needs)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.goal = ""
        self.pages: list[str] = []

    def reset(self) -> None:
        self.policy.reset()
        self.goal, self.pages = "", []

    def act(self, obs: Mapping[str, Any]) -> str:
        self.goal = str(obs.get("goal", ""))
        self.pages.append(str(obs.get("axtree", "")))
        return str(self.policy.act(obs))

    @property
    def last_info(self) -> Any:
        return self.policy.last_info


def _episodes(path: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                entry = json.loads(line)
                out[entry["key"]] = entry
    return out


def run_setting(grid_file: Path, setting: str, memory_prior: float, rounds: int, out: Path,
                log: Any = print, abstract_instances: bool = False) -> dict[str, Any]:
    """Collect the self memory of one setting and score the held-out tasks with and without it."""
    from cotrain.config import load_config
    from cotrain.grid import plan_grid
    from cotrain.grid_config import load_grid_config
    from es_agent.memory import TrajectoryMemory, exemplar_from_episode
    from es_agent.policy import LLMPolicy
    from es_agent.prompts import PromptPools
    from es_agent.rollout import run_episode
    from es_agent.worker import episode_seed, load_agent_model

    grid = load_grid_config(grid_file)
    runs = plan_grid(grid, settings=[setting], arms=["start"])
    if not runs:
        raise BenchmarkError(f"{grid_file}: no setting {setting!r}")
    run = runs[0]
    cfg = load_config(grid.base, run.overrides)
    agent = cfg.agent.resolved()
    config = agent.policy_config()
    if config.memory_file:
        raise BenchmarkError(f"{grid_file}: the grid's policy has a memory file already "
                             f"({config.memory_file})")
    with_memory = dataclasses.replace(config, memory_prior=memory_prior)
    genome = PromptPools.load(cfg.prompts.pools).baseline(cfg.eval.baseline)
    model, tok = load_agent_model(agent)
    env_seed, max_steps = cfg.eval.env_seed, cfg.env.spec.max_steps
    out.mkdir(parents=True, exist_ok=True)
    file = out / "episodes.jsonl"
    done = _episodes(file)
    memory = TrajectoryMemory(abstract_instances=abstract_instances)
    started = time.perf_counter()

    def episode(env: Any, phase: str, round_: int, task: Any, policy: Any) -> dict[str, Any]:
        # the memory's state (an empty one has one key whatever its options: round 0 runs without it)
        state = (memory.digest() if len(memory) else TrajectoryMemory().digest()) if phase != "start" else ""
        key = f"{setting}|{phase}|{round_}|{task}|{memory_prior:g}|{state}"
        if key in done:
            return done[key]
        recorder = _Recorder(policy)
        result = run_episode(env, recorder, seed=episode_seed(env_seed, task), options={"task_id": task},
                             max_steps=max_steps)
        entry = {"key": key, "setting": setting, "phase": phase, "round": round_, "task": task,
                 "reward": float(result.reward), "steps": int(result.steps),
                 "actions": [s.action for s in result.trajectory], "goal": recorder.goal,
                 "pages": recorder.pages if result.success and phase == "collect" else [],
                 "seconds": result.wall_seconds}
        with file.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        done[key] = entry
        return entry

    rows: dict[str, Any] = {"collect": [], "start": {}, "memory": {}}
    train_env = cfg.env.spec_for().make()  # the workers' env: the tier's splits, train and held out
    try:
        for round_ in range(rounds):
            policy = LLMPolicy(model, tok, genome, with_memory if len(memory) else config,
                               memory=memory if len(memory) else None)
            solved = []
            for task in run.tasks.train:
                entry = episode(train_env, "collect", round_, task, policy)
                if entry["reward"] >= 1.0:
                    solved.append(entry)
            for entry in solved:
                memory.add(exemplar_from_episode(entry["goal"], entry["actions"], entry["pages"],
                                                 task_id=entry["task"]))
            rows["collect"].append({"round": round_, "solved": [e["task"] for e in solved],
                                    "of": len(run.tasks.train), "memory": len(memory)})
            log(f"{setting}: round {round_}: solved {len(solved)} / {len(run.tasks.train)} training tasks, "
                f"memory {len(memory)}")
        plain = LLMPolicy(model, tok, genome, config)
        remembering = LLMPolicy(model, tok, genome, with_memory, memory=memory)
        for task in run.tasks.all_heldout:
            rows["start"][str(task)] = episode(train_env, "start", 0, task, plain)["reward"]
            rows["memory"][str(task)] = episode(train_env, "memory", 0, task, remembering)["reward"]
    finally:
        train_env.close()
    heldout = {split: [str(t) for t in run.tasks.heldout[split]] for split in run.tasks.heldout}
    solved_of = {arm: {split: sum(rows[arm][t] >= 1.0 for t in ids) for split, ids in heldout.items()}
                 for arm in ("start", "memory")}
    log(f"{setting}: held out start {solved_of['start']}, with the self memory {solved_of['memory']}")
    return {"setting": setting, "grid": str(grid_file),
            "memory_prior": memory_prior, "rounds": rounds, "abstract_instances": abstract_instances,
            "collect": rows["collect"],
            "exemplars": [{"goal": e.goal, "task": e.task_id, "steps": [[s.kind, s.target] for s in e.steps]}
                          for e in memory.exemplars],
            "heldout": heldout, "rewards": {"start": rows["start"], "memory": rows["memory"]},
            "solved": solved_of, "seconds": time.perf_counter() - started}


def report_md(results: Sequence[dict[str, Any]], command: str) -> str:
    """The markdown report."""
    lines = ["# Self-generated trajectory memory", "",
             f"`{command}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{platform.processor() or platform.machine()})", "",
             "The start's own solved training episodes as exemplars (no reference solution), then the "
             "held-out tasks without and with that memory (same policy, env seed and code).", "",
             "| setting | training tasks solved (memory) | held out: start, test / test_unseen | with the "
             "self memory | tasks gained | tasks lost |", "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        start, mem = r["rewards"]["start"], r["rewards"]["memory"]
        gained = [t for t in start if mem[t] >= 1.0 > start[t]]
        lost = [t for t in start if start[t] >= 1.0 > mem[t]]
        collect = ", ".join(f"{len(c['solved'])} / {c['of']} ({c['memory']})" for c in r["collect"])
        s, m = r["solved"]["start"], r["solved"]["memory"]
        lines.append(f"| `{r['setting']}` | {collect} | {s['test']} / {s['test_unseen']} | "
                     f"{m['test']} / {m['test_unseen']} | {', '.join(gained) or '-'} | "
                     f"{', '.join(lost) or '-'} |")
    return "\n".join(lines) + "\n"


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--grid", type=Path, default=REPO_ROOT / "configs" / "grid_lexical.toml")
    parser.add_argument("--settings", nargs="+", default=["embedded_shopping_admin_t1"])
    parser.add_argument("--memory-prior", type=float, default=150.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--abstract-instances", action="store_true",
                        help="the memory matches targets with the goals' instance words as one slot")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--write", action="store_true", help="write benchmarks/results/self_memory.{md,json}")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    import torch

    torch.set_num_threads(1)
    results = [run_setting(args.grid, s, args.memory_prior, args.rounds, args.out,
                           abstract_instances=args.abstract_instances) for s in args.settings]
    command = "python -m benchmarks.self_memory " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.with_suffix(".json").write_text(json.dumps({"command": command, "results": results}, indent=1)
                                                + "\n", encoding="utf-8")
        RESULTS.with_suffix(".md").write_text(report_md(results, command), encoding="utf-8")
    print(report_md(results, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
