"""Step agreement of two versions of the agent code on the same recorded steps, paired step by step.

``bench_agreement`` caches every step's candidate scores per ``es_agent/`` tree (the code version), and
``bench_agreement --fit-memory-prior`` turns them into step agreement with the grids' priors (``calibrated``
scoring, goal prior, answer-type prior, and the trajectory memory of the training split's reference
solutions, its weight fitted on the training split). This runs that fit for both versions and pairs the
held-out steps: agreement of each, the difference with a 95 % bootstrap CI over steps, the steps that only
one version gets right, per split and action kind. Score each version first (``bench_agreement --models
embedded --genomes no_skill --splits ...`` from a checkout of that version); nothing here runs the model.

    python -m benchmarks.agreement_versions --old 879885f5e3e3 --new 4550cd73a44e \\
        --splits tier1_fresh_test tier1_fresh_test_unseen --out benchmarks/results/agreement_versions
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_agreement import CACHE_DIR, MEMORY_PRIOR_GRID, fit_memory_prior, recorded_path
from benchmarks.common import REPO_ROOT, code_version
from cotrain.checkpoint import atomic_write_json, atomic_write_text
from cotrain.grid_report import format_points, machine_info
from cotrain.grid_stats import paired_estimate
from es_agent.agreement import load_trajectories

QUESTION = (
    "Written before either version was scored on the fresh splits (6 December 2026, 03:40 UTC): does the "
    "record-relevance change of commit 49a9b58 (es_agent tree 4550cd73a44e: truncation keeps the rows and "
    "posts most relevant to the goal, answer candidates put their texts first) raise the step agreement of "
    "the embedded agent (SmolLM2-135M, float32, no_skill genome, calibrated scoring, goal prior 150, "
    "answer prior 100, memory of the tier1_train solutions with its weight fitted on tier1_train) on the "
    "fresh held-out splits tier1_fresh_test and tier1_fresh_test_unseen, against the tree before it "
    "(879885f5e3e3), paired over steps? The change was designed on the misses of tier1_test and "
    "tier1_test_unseen, so those splits are not the test of it; the fresh splits were never scored for "
    "agreement. Expected: a gain on the order-total template (fresh_test_unseen), little elsewhere."
)


def step_outcomes(result: dict[str, Any], steps: Sequence[Any]) -> dict[tuple[str, int, int], int]:
    """1 for every held-out step the fitted policy gets right, 0 for its misses (``result``:
    :func:`~benchmarks.bench_agreement.fit_memory_prior`'s)."""
    missed = {(m["split"], m["task_id"], m["index"]) for m in result["heldout_misses"]}
    return {(s.split, s.task_id, s.index): int((s.split, s.task_id, s.index) not in missed) for s in steps}


def compare(old: str, new: str, train: Sequence[str], splits: Sequence[str], *, model_name: str = "embedded",
            genome: str = "no_skill", scoring: str = "calibrated", goal_prior: float = 150.0,
            answer_prior: float = 100.0, cache_dir: Path = CACHE_DIR,
            grid: Sequence[float] = MEMORY_PRIOR_GRID) -> dict[str, Any]:
    """Both versions' fitted agreement on ``splits`` and their paired difference (``new - old``)."""
    steps = [step for split in splits for step in load_trajectories(recorded_path(split, cache_dir))[0]]
    fits = {label: fit_memory_prior(model_name, genome, train, splits, scoring=scoring,
                                    goal_prior=goal_prior, answer_prior=answer_prior, version=version,
                                    cache_dir=cache_dir, grid=grid)
            for label, version in (("old", old), ("new", new))}
    outcome = {label: step_outcomes(fit, steps) for label, fit in fits.items()}
    keys = sorted(outcome["old"])
    groups: dict[str, list[tuple[str, int, int]]] = {"all": keys}
    by_key = {(s.split, s.task_id, s.index): s for s in steps}
    for key in keys:
        groups.setdefault(key[0], []).append(key)
        groups.setdefault(f"kind {by_key[key].kind}", []).append(key)
    rows = []
    for name, members in groups.items():
        a = [[outcome["new"][k] for k in members]]
        b = [[outcome["old"][k] for k in members]]
        diff = paired_estimate(a, b)
        rows.append({"group": name, "steps": len(members), "old": sum(b[0]), "new": sum(a[0]),
                     "difference": diff.to_dict(),
                     "only_new": sum(x > y for x, y in zip(a[0], b[0], strict=True)),
                     "only_old": sum(y > x for x, y in zip(a[0], b[0], strict=True))})
    changed = [{"step": f"{k[0]} {k[1]} step {k[2] + 1}", "reference": by_key[k].action,
                "goal": by_key[k].obs.get("goal", ""), "right": "new" if outcome["new"][k] else "old"}
               for k in keys if outcome["new"][k] != outcome["old"][k]]
    return {"question": QUESTION, "old": old, "new": new, "model": model_name, "genome": genome,
            "scoring": scoring, "train": list(train), "splits": list(splits),
            "goal_prior": goal_prior, "answer_prior": answer_prior,
            "memory_prior": {label: fit["memory_prior"] for label, fit in fits.items()},
            "miss_ranks": {label: fit["heldout_miss_ranks"] for label, fit in fits.items()},
            "rows": rows, "changed_steps": changed}


def to_markdown(result: dict[str, Any], command: str) -> str:
    """The report: the question, the table per group, and the steps whose outcome changed."""
    lines = [f"# Step agreement: es_agent {result['new']} against {result['old']}", "",
             f"`{command}`", "", f"{result['date']}; {result['machine'].get('cpu', '?')}, "
             f"{result['machine'].get('cpu_count', '?')} cores; no model forward (cached scores)", "",
             f"**Question.** {result['question']}", "",
             f"Fitted memory-prior weight on {', '.join(result['train'])}: old "
             f"{result['memory_prior']['old']:g}, new {result['memory_prior']['new']:g}; goal prior "
             f"{result['goal_prior']:g}, answer prior {result['answer_prior']:g}.", "",
             "| steps | n | old | new | new - old (points, 95 % CI over steps) | only new right "
             "| only old right |",
             "|---|---|---|---|---|---|---|"]
    for row in result["rows"]:
        n = row["steps"]
        lines.append(f"| {row['group']} | {n} | {row['old']} ({100 * row['old'] / n:.1f} %) | {row['new']} "
                     f"({100 * row['new'] / n:.1f} %) | {format_points(row['difference'])} | "
                     f"{row['only_new']} | {row['only_old']} |")
    lines += ["", "Where the misses stand (unreachable / reference ranked 2nd / 3rd-5th / lower): old "
              + " / ".join(str(v) for v in result["miss_ranks"]["old"].values()) + ", new "
              + " / ".join(str(v) for v in result["miss_ranks"]["new"].values()) + ".", "",
              "Steps whose outcome changed:", ""]
    lines += [f"- {c['step']} ({c['right']} right): `{c['reference']}`; {c['goal']}"
              for c in result["changed_steps"]] or ["- none"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agreement_versions", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="the es_agent/ tree id (12 hex) scored as the baseline")
    parser.add_argument("--new", default=None, help="the es_agent/ tree id of the change (default: this one)")
    parser.add_argument("--train", nargs="+", default=["tier1_train"])
    parser.add_argument("--splits", nargs="+", default=["tier1_fresh_test", "tier1_fresh_test_unseen"])
    parser.add_argument("--goal-prior", type=float, default=150.0)
    parser.add_argument("--answer-prior", type=float, default=100.0)
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "benchmarks" / "results" / "agreement_versions")
    parser.add_argument("--question", action="store_true", help="print the question and stop")
    args = parser.parse_args(argv)
    if args.question:
        print(QUESTION)
        return 0
    result = compare(args.old, args.new or code_version(), args.train, args.splits,
                     goal_prior=args.goal_prior, answer_prior=args.answer_prior)
    result.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine=machine_info())
    command = "python -m benchmarks.agreement_versions " + " ".join(sys.argv[1:] if argv is None else argv)
    text = to_markdown(result, command)
    atomic_write_json(args.out.with_suffix(".json"), {**result, "command": command})
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
