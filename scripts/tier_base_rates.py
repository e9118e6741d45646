"""Base success of a starting agent on the held-out tasks of a tier (issue #13: the low tiers should give the
embedded agents roughly 10-60 %).

The agent is what a new user runs: model spec ``embedded`` (SmolLM2-135M) in bfloat16, the ``no_skill``
baseline genome of the default pools, constrained decoding, ``PolicyConfig`` defaults (``--scoring`` overrides
the candidate scoring), one episode per task of ``tier<N>_test`` and ``tier<N>_test_unseen`` with env seed 0,
at most ``--max-steps`` actions, one env and one torch thread. Prints success per split and per site family
and writes every episode to ``--out`` (JSON) when given.

``python scripts/tier_base_rates.py --tier 1 [--model embedded] [--genome no_skill] [--scoring mean]
[--max-steps 12] [--out runs/tier1_base.json]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "es_agent"], capture_output=True,
                               text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() + (" (es_agent/ modified)" if dirty else "")


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; exit status 0."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument("--model", default="embedded", help="model spec (es_agent.models.load_model)")
    parser.add_argument("--genome", default="no_skill", help="baseline genome of the default pools")
    parser.add_argument("--scoring", default=None, help="PolicyConfig.scoring (default: PolicyConfig's)")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks of each split (0: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the episodes here (JSON)")
    args = parser.parse_args(argv)

    import gymnasium as gym
    import torch

    import webarena_gym
    from es_agent.models import load_model
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools
    from es_agent.rollout import run_episode

    torch.set_num_threads(1)
    model, tok = load_model(args.model, dtype=getattr(torch, args.dtype), device="cpu")
    config = PolicyConfig() if args.scoring is None else PolicyConfig(scoring=args.scoring)
    policy = LLMPolicy(model, tok, PromptPools.load().baseline(args.genome), config)
    browser = {"executable_path": shutil.which("chromium")} if shutil.which("chromium") else {}
    env = gym.make(webarena_gym.ENV_ID, split=f"tier{args.tier}", browser=browser)
    splits = (f"tier{args.tier}_test", f"tier{args.tier}_test_unseen")
    episodes: list[dict[str, Any]] = []
    try:
        for split in splits:
            tasks = [t for t in env.unwrapped.tasks if t.extras["split"] == split]
            for task in tasks[: args.limit or None]:
                started = time.perf_counter()
                result = run_episode(env, policy, seed=0, options={"task_id": task.task_id},
                                     max_steps=args.max_steps)
                episodes.append({
                    "task_id": task.task_id, "split": split, "site": "+".join(task.sites),
                    "template": task.intent_template_id,
                    "reference_steps": len(task.extras["reference_solution"]),
                    "reward": result.reward, "steps": result.steps,
                    "seconds": round(time.perf_counter() - started, 2),
                    "actions": [r.action for r in result.trajectory],
                })
                print(f"{split} task {task.task_id} ({episodes[-1]['site']}, template "
                      f"{task.intent_template_id}): reward {result.reward} in {result.steps} steps: "
                      f"{episodes[-1]['actions']}", flush=True)
    finally:
        env.close()
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in episodes:
        by[(e["split"], e["site"])].append(e["reward"])
        by[(e["split"], "all")].append(e["reward"])
        by[("held-out", e["site"])].append(e["reward"])
        by[("held-out", "all")].append(e["reward"])
    commit = _commit()
    scoring = getattr(config, "scoring", "mean (the only scoring at this commit)")
    print(f"\nmodel {args.model}, genome {args.genome}, scoring {scoring}, {args.dtype}, constrained, "
          f"max {args.max_steps} steps, env seed 0, commit {commit}")
    for (split, site), rewards in sorted(by.items()):
        print(f"{split:<20} {site:<15} {sum(r == 1.0 for r in rewards):>3}/{len(rewards):<3} "
              f"= {100 * sum(r == 1.0 for r in rewards) / len(rewards):5.1f} %")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"model": args.model, "genome": args.genome, "scoring": scoring,
                                        "dtype": args.dtype, "max_steps": args.max_steps, "commit": commit,
                                        "episodes": episodes}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
