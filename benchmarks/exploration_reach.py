"""Exploration reach (issue #13): how often a seed-perturbed policy picks the reference action where the
centre does not, by sigma.

ES improves a policy only through candidates that do better than their siblings: a task the centre fails
gives a signal only when some perturbation ``theta + sigma * eps(seed)`` solves it. This study measures that
reach directly, teacher-forced, so it needs no rollout and no reward.

Method. The reference solutions of ``--split``'s tasks on one site family (``--family``) are replayed through
the real env and their observations recorded (:func:`benchmarks.bench_agreement.record`, cached). The policy
is the learning grid's (``configs/grid_lexical.toml``: the model spec, the ``no_skill`` genome,
``PolicyConfig(history_len=3, scoring="calibrated", goal_prior=150, answer_prior=100)``, one torch thread)
and ranks every step's candidates exactly as constrained decoding does
(:meth:`es_agent.policy.LLMPolicy.ranked_step`), with the reference actions before it as its history. Each
step is scored at the centre, then under ``--pairs`` antithetic pairs of full-rank perturbations
(seeds ``1000 + i``, scales ``+sigma`` and ``-sigma``; :func:`es_agent.perturb.perturbed`, what ES
evaluates) at every ``--sigmas`` value. A pick agrees when it is the reference action or an equivalent one
(:func:`es_agent.agreement.equivalent`); a task is solved teacher-forced when every one of its steps agrees.
Each perturbation's records go to a JSONL cache as soon as they are scored (keyed by the agent code version,
the model, the policy and the steps), so an interrupted run resumes.

Per sigma (``<out>.{md,json}``):
- ``changed``: share of (step, perturbation) whose pick differs from the centre's (how far sigma moves
  the choices);
- ``gained``: of the reachable steps the centre gets wrong, the share of (step, perturbation) that agree, and
  the share of those steps that at least one of the perturbations gets right;
- ``lost``: of the steps the centre gets right, the share of (step, perturbation) that no longer agree;
- ``tasks gained`` / ``tasks lost``: tasks the centre fails (solves) that at least one perturbation solves
  (fails) teacher-forced: the candidates whose reward could differ from their siblings'.
- the reference action's rank among the candidates (1 = picked; best equivalent candidate), median.

``python -m benchmarks.exploration_reach [--model embedded] [--split tier1_train] [--family shopping]
[--sigmas 0.004 0.01 0.03 0.1] [--pairs 4] [--first-steps] [--out benchmarks/results/exploration_reach]``
(``--report-only``: no scoring, the report of what the cache holds; ``--first-steps``: only the first step
of every task, where the grid's episodes fail; a task then counts as solved when its first step agrees)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, BenchmarkError, code_version, median, torch_threads

CACHE_DIR = Path.home() / ".cache" / "agentic-esopt" / "exploration"
"""Where the per-perturbation records are cached."""
POLICY: dict[str, Any] = {"history_len": 3, "scoring": "calibrated", "goal_prior": 150.0,
                          "answer_prior": 100.0}
"""The learning grid's policy (``configs/grid_train.toml`` plus ``configs/grid_lexical.toml``)."""
GENOME = "no_skill"
SIGMAS = (0.004, 0.01, 0.03, 0.1)
"""Default sigmas: the grid's ``sigma_min`` and ``sigma_0``, then 3x and 10x ``sigma_0``."""
SEED_BASE = 1000


@dataclass(frozen=True)
class Pick:
    """One step scored under one perturbation (``sigma`` 0: the centre)."""

    task_id: int
    index: int
    sigma: float
    seed: int
    sign: int
    pick: str
    agrees: bool
    reference_rank: int | None
    """1-based rank of the best candidate equivalent to the reference action; ``None`` when none is."""


def reference_rank(scores: Sequence[float], ok: Sequence[bool]) -> int | None:
    """1-based rank, by ``scores`` (higher first), of the best candidate flagged in ``ok`` (``None``: none
    is)."""
    best = [s for s, good in zip(scores, ok, strict=True) if good]
    if not best:
        return None
    top = max(best)
    return 1 + sum(1 for s in scores if s > top)


def score_steps(policy: Any, steps: Sequence[Any], check: Callable[[Any, str], bool], sigma: float, seed: int,
                sign: int) -> list[Pick]:
    """Every step ranked by ``policy`` as it stands (the caller perturbs the weights), teacher-forced."""
    from es_agent.agreement import equivalent
    from es_agent.decoding import best_index

    out = []
    for step in steps:
        policy.reset()
        policy.set_history(0, step.history)
        scored, scores = policy.ranked_step(step.obs, 0)
        ok = [equivalent(c, step, check) for c in scored.candidates]
        best = best_index(scores)
        out.append(Pick(step.task_id, step.index, sigma, seed, sign, scored.candidates[best], ok[best],
                        reference_rank(scores, ok)))
    return out


def summarize(picks: Sequence[Pick]) -> dict[str, Any]:
    """The per-sigma figures of the module docstring from the centre's picks (``sigma == 0``) and the
    perturbed ones; raises :class:`BenchmarkError` when the centre's picks are missing."""
    centre = {(p.task_id, p.index): p for p in picks if p.sigma == 0}
    if not centre:
        raise BenchmarkError("no centre picks (sigma 0) to compare the perturbations with")
    reachable = {k for k, p in centre.items() if p.reference_rank is not None}
    tasks: dict[int, list[tuple[int, int]]] = {}
    for key in centre:
        tasks.setdefault(key[0], []).append(key)
    centre_solved = {t for t, keys in tasks.items() if all(centre[k].agrees for k in keys)}
    out: dict[str, Any] = {
        "steps": len(centre), "reachable": len(reachable), "tasks": len(tasks),
        "centre": {"agree": sum(p.agrees for p in centre.values()), "tasks_solved": len(centre_solved),
                   "median_rank": _median([p.reference_rank for p in centre.values()])},
        "by_sigma": {}}
    wrong = [k for k in reachable if not centre[k].agrees]
    right = [k for k in centre if centre[k].agrees]
    for sigma in sorted({p.sigma for p in picks if p.sigma != 0}):
        at = [p for p in picks if p.sigma == sigma and (p.task_id, p.index) in centre]
        perts = sorted({(p.seed, p.sign) for p in at})
        by_pert = {pert: {(p.task_id, p.index): p for p in at if (p.seed, p.sign) == pert} for pert in perts}
        scored = [(k, row[k]) for row in by_pert.values() for k in centre if k in row]
        gained_pairs = [row[k].agrees for row in by_pert.values() for k in wrong if k in row]
        lost_pairs = [not row[k].agrees for row in by_pert.values() for k in right if k in row]
        solved = {pert: {t for t, keys in tasks.items() if all(k in row and row[k].agrees for k in keys)}
                  for pert, row in by_pert.items()}
        solved_by_all = set(tasks)
        for found in solved.values():
            solved_by_all &= found
        out["by_sigma"][f"{sigma:g}"] = {
            "perturbations": len(perts),
            "changed": _share([p.pick != centre[k].pick for k, p in scored]),
            "gained_per_perturbation": _share(gained_pairs),
            "gained_by_any": [sum(any(k in row and row[k].agrees for row in by_pert.values()) for k in wrong),
                              len(wrong)],
            "lost_per_perturbation": _share(lost_pairs),
            "agree_per_perturbation": _share([p.agrees for _, p in scored]),
            "tasks_gained": sorted({t for s in solved.values() for t in s} - centre_solved),
            "tasks_lost": sorted(centre_solved - solved_by_all) if solved else [],
            "median_rank": _median([p.reference_rank for _, p in scored]),
            "median_rank_centre_wrong": _median([row[k].reference_rank for row in by_pert.values()
                                                 for k in wrong if k in row]),
        }
    return out


def _share(flags: Sequence[bool]) -> list[int]:
    return [sum(flags), len(flags)]


def _median(values: Sequence[int | None]) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


def _cache_path(model_name: str, split: str, steps: Sequence[Any], cache_dir: Path) -> Path:
    from benchmarks.bench_agreement import _step_key

    digest = hashlib.sha256(json.dumps([POLICY, GENOME, [_step_key(s) for s in steps]],
                                       sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir / f"picks-{model_name}-{split}-{code_version()}-{digest}.jsonl"


def _read_cache(path: Path) -> list[Pick]:
    if not path.exists():
        return []
    picks = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                picks.append(Pick(**json.loads(line)))
            except (TypeError, ValueError) as exc:
                raise BenchmarkError(f"{path}:{n}: not a pick record ({exc}); delete the file to re-score") \
                    from exc
    return picks


def run(model_name: str, split: str, family: str, sigmas: Sequence[float], pairs: int,
        task_ids: Sequence[int] | None = None, first_steps: bool = False, cache_dir: Path = CACHE_DIR,
        loader: Callable[[str], tuple[Any, Any, str]] | None = None,
        log: Callable[[str], None] = print, report_only: bool = False) -> dict[str, Any]:
    """Score the centre and every perturbation (resuming from the cache) and summarize them;
    ``report_only``: no scoring, whatever the cache holds for these sigmas and at most ``pairs`` pairs."""
    from benchmarks.bench_agreement import answer_checker, load, record
    from es_agent.perturb import perturbed
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools
    from webarena_gym.embedded import default_tasks

    if pairs < 1:
        raise BenchmarkError(f"--pairs must be >= 1, got {pairs}")
    if any(s <= 0 for s in sigmas):
        raise BenchmarkError(f"sigmas must be > 0, got {list(sigmas)}")
    ids = list(task_ids) if task_ids else [t.task_id for t in default_tasks(split)
                                           if tuple(t.sites) == (family,)]
    if not ids:
        raise BenchmarkError(f"split {split!r} has no task on exactly the site {family!r}")
    steps, meta = record(split, ids)
    if first_steps:
        steps = [s for s in steps if s.index == 0]
    check = answer_checker(split, meta)
    path = _cache_path(model_name, split, steps, cache_dir)
    picks = _read_cache(path)
    done = {(p.sigma, p.seed, p.sign) for p in picks}
    todo = [(0.0, 0, 0)] + [(float(s), SEED_BASE + i, sign) for s in sigmas for i in range(pairs)
                            for sign in (1, -1)]
    todo = [] if report_only else [t for t in todo if t not in done]
    started = time.perf_counter()
    if todo:
        model, tok, dtype = (loader or load)(model_name)
        policy = LLMPolicy(model, tok, PromptPools.load().baseline(GENOME), PolicyConfig(**POLICY))
        path.parent.mkdir(parents=True, exist_ok=True)
        with torch_threads(1), path.open("a", encoding="utf-8") as out:
            for n, (sigma, seed, sign) in enumerate(todo, 1):
                if sigma == 0:
                    new = score_steps(policy, steps, check, 0.0, 0, 0)
                else:
                    with perturbed(model, seed, sign * sigma):
                        new = score_steps(policy, steps, check, sigma, seed, sign)
                for p in new:
                    out.write(json.dumps(asdict(p)) + "\n")
                out.flush()
                picks += new
                log(f"  sigma {sigma:g} seed {seed} sign {sign:+d}: {sum(p.agrees for p in new)}/{len(new)} "
                    f"agree ({n}/{len(todo)}, {time.perf_counter() - started:.0f} s)")
    else:
        from es_agent.hardware import choose_dtype

        dtype = str(choose_dtype("auto").value)
    wanted = {0.0, *map(float, sigmas)}
    kept = [p for p in picks if p.sigma in wanted and (p.sigma == 0 or p.seed < SEED_BASE + pairs)]
    return {"model": model_name, "dtype": dtype, "split": split, "family": family, "task_ids": ids,
            "policy": POLICY, "genome": GENOME, "sigmas": list(sigmas), "pairs": pairs,
            "first_steps": first_steps,
            "seconds": round(time.perf_counter() - started, 1), "cache": str(path), **summarize(kept),
            "per_step": per_step(steps, kept)}


def per_step(steps: Sequence[Any], picks: Sequence[Pick]) -> list[dict[str, Any]]:
    """Per recorded step: its reference action, the centre's reference rank, and per sigma the reference
    rank under each perturbation (``ranks``) and how many perturbations agree (``agree``)."""
    rows = []
    for step in steps:
        mine = [p for p in picks if (p.task_id, p.index) == (step.task_id, step.index)]
        centre = next((p for p in mine if p.sigma == 0), None)
        by_sigma: dict[str, dict[str, Any]] = {}
        for p in sorted((p for p in mine if p.sigma != 0), key=lambda p: (p.sigma, p.seed, -p.sign)):
            row = by_sigma.setdefault(f"{p.sigma:g}", {"ranks": [], "agree": 0})
            row["ranks"].append(p.reference_rank)
            row["agree"] += p.agrees
        rows.append({"task_id": step.task_id, "index": step.index, "reference": step.action,
                     "centre_rank": centre.reference_rank if centre else None,
                     "centre_agrees": centre.agrees if centre else None, "by_sigma": by_sigma})
    return rows


def report_md(result: dict[str, Any]) -> str:
    """The markdown report of :func:`run`'s result."""
    c = result["centre"]
    scope = "first steps" if result.get("first_steps") else "all steps"
    lines = [f"# Exploration reach: {result['model']} on {result['split']} / {result['family']} ({scope})",
             "",
             f"{result['command']}  ", f"{result['date']}, {result['machine']}, {result['dtype']}, "
             f"{result['seconds']:.0f} s of new scoring", "",
             f"{result['tasks']} tasks, {result['steps']} teacher-forced steps ({result['reachable']} "
             f"reachable: some candidate is the reference action). Centre: {c['agree']} steps agree, "
             f"{c['tasks_solved']} tasks solved teacher-forced, median reference rank {c['median_rank']}.",
             "",
             "| sigma | perturbations | pick changed | centre-wrong steps gained (per perturbation) | "
             "gained by any | centre-right steps lost | tasks gained | tasks lost | "
             "median rank (centre-wrong) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for sigma, row in result["by_sigma"].items():
        def frac(pair: list[int]) -> str:
            return f"{pair[0]}/{pair[1]} ({100 * pair[0] / pair[1]:.1f} %)" if pair[1] else "-"
        gained, lost = (", ".join(map(str, row[k])) or "-" for k in ("tasks_gained", "tasks_lost"))
        anyone = row["gained_by_any"]
        lines.append(f"| {sigma} | {row['perturbations']} | {frac(row['changed'])} | "
                     f"{frac(row['gained_per_perturbation'])} | {anyone[0]}/{anyone[1]} | "
                     f"{frac(row['lost_per_perturbation'])} | {gained} | {lost} | "
                     f"{row['median_rank_centre_wrong']} |")
    sigmas = list(result["by_sigma"])
    lines += ["", "Per step: the reference action's rank among the candidates (1 = picked) at the centre and "
              "under each perturbation (seeds in order, + before -).", "",
              "| task | step | reference | centre | " + " | ".join(f"sigma {s}" for s in sigmas) + " |",
              "|---|---|---|---|" + "---|" * len(sigmas)]
    for row in result.get("per_step", []):
        cells = [", ".join("-" if r is None else str(r) for r in row["by_sigma"].get(s, {}).get("ranks", []))
                 for s in sigmas]
        ref = str(row["reference"]).replace("|", "\\|")
        centre = "-" if row["centre_rank"] is None else str(row["centre_rank"])
        lines.append(f"| {row['task_id']} | {row['index']} | `{ref}` | {centre} | "
                     + " | ".join(cells) + " |")
    if result.get("notes"):
        lines += ["", result["notes"].rstrip()]
    return "\n".join(lines) + "\n"


def cli(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--split", default="tier1_train")
    parser.add_argument("--family", default="shopping")
    parser.add_argument("--task-ids", type=int, nargs="*", default=None, help="only these tasks")
    parser.add_argument("--sigmas", type=float, nargs="+", default=list(SIGMAS))
    parser.add_argument("--pairs", type=int, default=4, help="antithetic pairs per sigma")
    parser.add_argument("--first-steps", action="store_true",
                        help="only every task's first step (a task then counts as solved when it agrees)")
    parser.add_argument("--out", type=Path,
                        default=REPO_ROOT / "benchmarks" / "results" / "exploration_reach",
                        help="the report is written to OUT.{md,json}")
    parser.add_argument("--notes", type=Path, default=None, help="a markdown reading to put in the report")
    parser.add_argument("--report-only", action="store_true",
                        help="score nothing: report what the cache holds (at most --pairs pairs per sigma)")
    args = parser.parse_args(argv)
    try:
        result = run(args.model, args.split, args.family, args.sigmas, args.pairs, args.task_ids,
                     args.first_steps, report_only=args.report_only)
    except BenchmarkError as exc:
        print(f"exploration_reach: {exc}", file=sys.stderr)
        return 2
    result["command"] = "python -m benchmarks.exploration_reach " + " ".join(
        argv if argv is not None else sys.argv[1:])
    result["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result["machine"] = f"{platform.processor() or platform.machine()}, {platform.system()}"
    result["notes"] = args.notes.read_text(encoding="utf-8") if args.notes else ""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    args.out.with_suffix(".md").write_text(report_md(result), encoding="utf-8")
    print(report_md(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(cli())
