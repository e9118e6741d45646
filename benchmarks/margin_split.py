"""Margin split (issue #13): how much of a chosen action's lead comes from the priors, and how far a weight
perturbation moves the rest.

The learning grid's policy ranks candidates by a final score: the calibrated log-probability plus the goal,
answer and memory priors (fixed functions of the page, the goal and the memory). A weight perturbation moves
only the log-probability part. ES gets a signal only where a perturbation changes a choice, so this splits
each step's margin (chosen action over the runner-up) into its prior part and its log-probability part and
sets it against the change that ``--pairs`` antithetic full-rank perturbations at ``--sigma`` (seeds
``1000 + i``, ``+sigma`` and ``-sigma``, what ES evaluates) make to the log-probability part of that margin.

Method. The reference solutions of ``--split``'s tasks on ``--family`` are replayed through the real env
(:func:`benchmarks.bench_agreement.record`, cached), and each step is scored teacher-forced with the grid's
policy (``configs/grid_6h.toml`` at the split's tier: calibrated scoring, ``goal_prior=150``,
``answer_prior=100``, ``memory_prior=150`` with the tier's training memory, history 3, the ``no_skill``
genome) by :meth:`es_agent.policy.LLMPolicy.ranked_step`.

Per step: ``margin`` (final scores), ``prior`` (its part from the priors), ``logprob`` (the rest), and per
perturbation ``shift`` (the change of the log-probability part of the chosen-over-runner-up margin) and
whether the pick changed. ``<out>.{md,json}``: medians and the shares.

``python -m benchmarks.margin_split [--split tier2_train] [--family shopping_admin] [--sigma 0.01]
[--pairs 2] [--out benchmarks/results/margin_split]``
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, BenchmarkError, machine_info, median, torch_threads
from benchmarks.exploration_reach import GENOME, POLICY, SEED_BASE
from es_agent.decoding import best_index

MEMORY_PRIOR = 150.0
"""The grid's memory prior (``configs/grid_6h.toml``), added to exploration_reach's policy."""


def split_margin(base: Sequence[float], final: Sequence[float]) -> dict[str, Any]:
    """The chosen candidate (best ``final``), its runner-up, and the margin between them split into the part
    the priors add (``final - base``) and the log-probability part (``base``, the scoring's own scores)."""
    if len(base) != len(final) or len(final) < 2:
        raise BenchmarkError(f"need two or more candidates with both scores, got {len(base)} and "
                             f"{len(final)}")
    chosen = best_index(final)
    runner = max((i for i in range(len(final)) if i != chosen), key=final.__getitem__)
    margin = final[chosen] - final[runner]
    logprob = base[chosen] - base[runner]
    return {"chosen": chosen, "runner": runner, "margin": margin, "logprob": logprob,
            "prior": margin - logprob}


def _scores(policy: Any, step: Any) -> tuple[list[str], list[float], list[float]]:
    policy.reset()
    policy.set_history(0, step.history)
    scored, final = policy.ranked_step(step.obs, 0)
    cfg = policy.config
    return scored.candidates, scored.scores(cfg.scoring, cfg.prior_weight, cfg.kind_bias), final


def run(split: str, family: str, sigma: float, pairs: int) -> dict[str, Any]:
    """Every recorded step of the family's tasks: the centre's margin split and each perturbation's shift."""
    from benchmarks.bench_agreement import load, record
    from es_agent.perturb import perturbed
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools
    from webarena_gym.embedded import default_tasks

    tier = split.split("_")[0]
    ids = [t.task_id for t in default_tasks(split) if tuple(t.sites) == (family,)]
    if not ids:
        raise BenchmarkError(f"split {split!r} has no task on exactly the site {family!r}")
    steps, _ = record(split, ids)
    model, tok, dtype = load("embedded")
    config = PolicyConfig(**POLICY, memory_prior=MEMORY_PRIOR,
                          memory_file=str(REPO_ROOT / f"configs/memory/{tier}_train.json"))
    policy = LLMPolicy(model, tok, PromptPools.load().baseline(GENOME), config)
    started = time.perf_counter()
    rows = []
    with torch_threads(1):
        centre = [_scores(policy, s) for s in steps]
        for step, (cands, base, final) in zip(steps, centre, strict=True):
            if len(cands) < 2:
                continue
            rows.append({"task_id": step.task_id, "index": step.index, "candidates": len(cands),
                         **split_margin(base, final), "shifts": [], "flips": []})
        kept = {(r["task_id"], r["index"]): r for r in rows}
        for i in range(pairs):
            for sign in (1, -1):
                with perturbed(model, SEED_BASE + i, sign * sigma):
                    for step in steps:
                        row = kept.get((step.task_id, step.index))
                        if row is None:
                            continue
                        _, base, final = _scores(policy, step)
                        c, r = row["chosen"], row["runner"]
                        row["shifts"].append((base[c] - base[r]) - row["logprob"])
                        row["flips"].append(best_index(final) != c)
    return {"split": split, "family": family, "sigma": sigma, "pairs": pairs, "dtype": dtype,
            "tasks": ids, "steps": rows, "seconds": round(time.perf_counter() - started, 1),
            "machine": machine_info()["cpu"], "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the margin, its parts and the absolute shift; the shares of steps whose prior part is
    larger than the margin's log-probability part, and of (step, perturbation) whose shift exceeds the
    margin and whose pick changed."""
    if not rows:
        raise BenchmarkError("no step with two or more candidates")
    shifts = [abs(s) for r in rows for s in r["shifts"]]
    return {
        "steps": len(rows),
        "median_margin": median([r["margin"] for r in rows]),
        "median_abs_prior": median([abs(r["prior"]) for r in rows]),
        "median_abs_logprob": median([abs(r["logprob"]) for r in rows]),
        "prior_dominates": sum(abs(r["prior"]) > abs(r["logprob"]) for r in rows),
        "median_abs_shift": median(shifts) if shifts else None,
        "shift_beats_margin": sum(abs(s) > r["margin"] for r in rows for s in r["shifts"]),
        "flips": sum(f for r in rows for f in r["flips"]),
        "perturbed_steps": sum(len(r["flips"]) for r in rows),
    }


def report_md(result: dict[str, Any]) -> str:
    """The summary as a table."""
    s = result["summary"]

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    return "\n".join([
        f"# Margin split: {result['split']} / {result['family']}", "",
        f"`python -m benchmarks.margin_split --split {result['split']} --family {result['family']} --sigma "
        f"{result['sigma']} --pairs {result['pairs']}` on {result['machine']}, {result['date']}, "
        f"{result['dtype']}, {result['seconds']:.0f} s.", "",
        "Teacher-forced reference steps with two or more candidates; margins in score units (chosen action "
        "over the runner-up, the grid's final scores); shift = change of the log-probability part of that "
        "margin under a perturbation.", "",
        "| steps | median margin | median abs prior part | median abs log-prob part | prior part larger | "
        "median abs shift | shift larger than margin | pick changed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {s['steps']} | {f(s['median_margin'])} | {f(s['median_abs_prior'])} | "
        f"{f(s['median_abs_logprob'])} | {s['prior_dominates']}/{s['steps']} | {f(s['median_abs_shift'])} | "
        f"{s['shift_beats_margin']}/{s['perturbed_steps']} | {s['flips']}/{s['perturbed_steps']} |", ""])


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.margin_split", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="tier2_train")
    parser.add_argument("--family", default="shopping_admin")
    parser.add_argument("--sigma", type=float, default=0.01)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks/results/margin_split")
    args = parser.parse_args(argv)
    if args.pairs < 1 or not args.sigma > 0:
        parser.error("--pairs must be >= 1 and --sigma > 0")
    result = run(args.split, args.family, args.sigma, args.pairs)
    result["summary"] = summary(result["steps"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    text = report_md(result)
    args.out.with_suffix(".md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
