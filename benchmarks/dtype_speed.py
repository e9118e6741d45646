"""The learning grid's policy step in float32 against bfloat16, side by side (issue #13: the 6-hour grid).

The grid's rollouts are bound by the policy's scoring forwards (``LLMPolicy.ranked_step``: the prompt's
prefill and the candidates' tree-attention forward, about 98 % of a step's time), and until
``configs/grid_bf16.toml`` every grid held float32. This times one teacher-forced step of the grid's policy
(:mod:`benchmarks.margin_split`'s policy: calibrated scoring, goal, answer and memory priors, history 3, the
``no_skill`` genome) on recorded reference steps, in both dtypes, one torch thread, alternating the dtype
order every repetition, with no prefix reuse between steps (the policy is reset before each). Times are CPU
seconds of this process (robust to other work on the machine; wall seconds in the JSON), and the picks are
compared: bfloat16 rounds the scores, so a near-tie can go the other way.

``python -m benchmarks.dtype_speed [--split tier2_train] [--family shopping_admin] [--steps 8] [--repeats 2]
[--out benchmarks/results/dtype_speed]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, BenchmarkError, machine_info, median, torch_threads

DTYPES = ("float32", "bfloat16")


def summary(times: dict[str, list[float]], picks: dict[str, list[int]]) -> dict[str, Any]:
    """Median CPU seconds per step per dtype, the speed-up of bfloat16 (float32 time over bfloat16 time, each
    the median over steps x repeats) and the share of steps whose pick is the same in both dtypes."""
    if set(times) != set(DTYPES) or any(not times[d] for d in DTYPES):
        raise BenchmarkError(f"need step times for both dtypes {DTYPES}, got {sorted(times)}")
    if len(picks["float32"]) != len(picks["bfloat16"]):
        raise BenchmarkError("the two dtypes scored different numbers of steps")
    same = sum(a == b for a, b in zip(picks["float32"], picks["bfloat16"], strict=True))
    med = {d: median(times[d]) for d in DTYPES}
    return {"seconds_per_step": med, "speedup_bf16": med["float32"] / med["bfloat16"],
            "same_pick": same, "steps": len(picks["float32"])}


def run(split: str, family: str, n_steps: int, repeats: int) -> dict[str, Any]:
    """Record (cached) the split's reference steps on the family, take the first ``n_steps`` with two or more
    candidates, and time the grid's policy on them in both dtypes."""
    import torch

    from benchmarks.bench_agreement import record
    from benchmarks.exploration_reach import GENOME, POLICY
    from benchmarks.margin_split import MEMORY_PRIOR
    from es_agent.decoding import best_index
    from es_agent.models import load_model
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools
    from webarena_gym.embedded import default_tasks

    tier = split.split("_")[0]
    ids = [t.task_id for t in default_tasks(split) if tuple(t.sites) == (family,)]
    if not ids:
        raise BenchmarkError(f"split {split!r} has no task on exactly the site {family!r}")
    steps, _ = record(split, ids)
    config = PolicyConfig(**POLICY, memory_prior=MEMORY_PRIOR,
                          memory_file=str(REPO_ROOT / f"configs/memory/{tier}_train.json"))
    policies = {}
    for dtype in DTYPES:
        model, tok = load_model("embedded", dtype=getattr(torch, dtype))
        policies[dtype] = LLMPolicy(model, tok, PromptPools.load().baseline(GENOME), config)
    chosen = [s for s in steps if len(policies["float32"].candidates(s.obs)) >= 2][:n_steps]
    if len(chosen) < n_steps:
        raise BenchmarkError(f"only {len(chosen)} recorded steps with two or more candidates")
    times: dict[str, list[float]] = {d: [] for d in DTYPES}
    wall: dict[str, list[float]] = {d: [] for d in DTYPES}
    picks: dict[str, list[int]] = {d: [] for d in DTYPES}
    with torch_threads(1):
        for rep in range(repeats):
            for dtype in (DTYPES if rep % 2 == 0 else DTYPES[::-1]):
                policy = policies[dtype]
                for step in chosen:
                    policy.reset()
                    policy.set_history(0, step.history)
                    cpu, started = time.process_time(), time.perf_counter()
                    _, final = policy.ranked_step(step.obs, 0)
                    times[dtype].append(time.process_time() - cpu)
                    wall[dtype].append(time.perf_counter() - started)
                    if rep == 0:
                        picks[dtype].append(best_index(final))
    return {"split": split, "family": family, "steps": len(chosen), "repeats": repeats,
            "summary": summary(times, picks), "cpu_seconds": times, "wall_seconds": wall,
            "machine": machine_info()["cpu"], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def report_md(result: dict[str, Any]) -> str:
    """The summary as a table."""
    s = result["summary"]
    per = s["seconds_per_step"]
    return "\n".join([
        f"# Policy step, float32 against bfloat16: {result['split']} / {result['family']}", "",
        f"`python -m benchmarks.dtype_speed --split {result['split']} --family {result['family']} --steps "
        f"{result['steps']} --repeats {result['repeats']}` on {result['machine']}, {result['date']}.", "",
        "One teacher-forced step of the learning grid's policy (`ranked_step`, no prefix reuse, one torch "
        "thread), median CPU seconds per step over steps x repeats, dtypes alternated:", "",
        "| steps | float32 s/step | bfloat16 s/step | bfloat16 speed-up | same pick in both |",
        "| --- | --- | --- | --- | --- |",
        f"| {s['steps']} | {per['float32']:.2f} | {per['bfloat16']:.2f} | {s['speedup_bf16']:.2f}x | "
        f"{s['same_pick']} / {s['steps']} |", ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dtype_speed", description=__doc__)
    parser.add_argument("--split", default="tier2_train")
    parser.add_argument("--family", default="shopping_admin")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/dtype_speed")
    args = parser.parse_args(argv)
    result = run(args.split, args.family, args.steps, args.repeats)
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    out.with_suffix(".md").write_text(report_md(result))
    print(report_md(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
