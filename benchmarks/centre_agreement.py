"""Teacher-forced agreement of a grid's trained centres with the held-out reference solutions.

Held-out success moves by whole tasks, and at tiers 2-3 it hardly moves at all, so it cannot say whether
training moved the policy toward the right actions on the steps before the one an episode fails on. This
scores, on every reference step of a setting's held-out tasks (its tier's ``test`` and ``test_unseen`` tasks),
teacher-forced as :mod:`es_agent.agreement` does:

- each finished run's centre: its weights (last snapshot plus the logged updates, rebuilt and checked against
  the run's checksum as ``esopt export`` does) with its most probable prompt genome;
- the setting's start: the base model with the baseline genome (``eval.baseline``),

each with the run's own policy configuration (scoring, priors, memory). Per step it records whether the pick
of constrained decoding is equivalent to the reference action (:func:`es_agent.agreement.equivalent`, answers
by the task's own check) and the step's reference credit (:func:`es_agent.reference_credit.step_credit`, the
soft margin of the best equivalent candidate over the best other, with the run's ``confidence_scale``). Each
task's value is the mean over its steps, and runs compare with the start paired on the same tasks, with a 95 %
bootstrap CI over seeds x tasks (:mod:`cotrain.grid_stats`). Every scored run is written to the output JSON at
once and never scored again, so an interrupted call continues where it stopped.

    python -m benchmarks.centre_agreement --grid credit=runs/grid_credit trajectory=runs/grid_bf16 \\
        --settings embedded_shopping_admin_t2 --arms weights both --out benchmarks/results/centre_agreement
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import BenchmarkError, machine_info, torch_threads
from benchmarks.heldout_by_generation import finished_runs
from cotrain.checkpoint import atomic_write_json, atomic_write_text
from cotrain.grid_stats import bootstrap_mean, paired_estimate

HELDOUT = ("test", "test_unseen")
FORMAT = "esopt-centre-agreement/1"


def parse_grids(items: Sequence[str]) -> dict[str, Path]:
    """``LABEL=DIR`` pairs (a bare ``DIR`` is labelled by its folder name); labels must differ."""
    grids: dict[str, Path] = {}
    for item in items:
        label, sep, folder = item.partition("=")
        label, path = (label, Path(folder)) if sep else (Path(item).name, Path(item))
        if not label or label in grids:
            raise BenchmarkError(f"--grid {item!r}: every grid needs its own non-empty label (LABEL=DIR)")
        if not path.is_dir():
            raise BenchmarkError(f"--grid {item!r}: {path} is not a directory")
        grids[label] = path
    return grids


def chosen_runs(grids: Mapping[str, Path], settings: Sequence[str] | None, arms: Sequence[str],
                seeds: Sequence[int] | None) -> list[tuple[str, Path, dict[str, Any]]]:
    """``(label, grid dir, result)`` of each finished trained run of ``arms`` whose run directory is there."""
    out = [(label, folder, result) for label, folder in grids.items()
           for result in finished_runs(folder, arms, settings) if seeds is None or result["seed"] in seeds]
    return sorted(out, key=lambda x: (x[2]["setting"], x[0], x[2]["arm"], x[2]["seed"]))


def heldout_steps(result: Mapping[str, Any]) -> tuple[list[Any], Any]:
    """The reference steps of the run's held-out tasks (recorded once through the real env, then cached) and
    an answer check that knows every one of them."""
    from benchmarks.bench_agreement import answer_checker, record

    steps: list[Any] = []
    checks = {}
    for part in HELDOUT:
        ids = [int(t) for t in result["tasks"][part]]
        if not ids:
            continue
        split = f"tier{result['tier']}_{part}"
        recorded, meta = record(split, ids)
        steps += recorded
        checks[split] = answer_checker(split, meta)
    if not steps:
        raise BenchmarkError(f"{result['key']}: no held-out reference step")

    def answer_ok(step: Any, answer: str) -> bool:
        return checks[step.split](step, answer)

    return steps, answer_ok


def score_policy(policy: Any, steps: Sequence[Any], answer_ok: Any, scale: float) -> list[dict[str, Any]]:
    """Per reference step: the pick, whether it agrees with the reference, and the step's credit."""
    from es_agent.agreement import equivalent
    from es_agent.decoding import best_index
    from es_agent.reference_credit import step_credit

    rows = []
    policy.reset()
    try:
        for step in steps:
            if step.index == 0:
                policy.reset()
            policy.set_history(0, step.history)
            scored, final = policy.ranked_step(step.obs, 0)
            pick = scored.candidates[best_index(final)]
            rows.append({"task_id": step.task_id, "index": step.index, "split": step.split,
                         "reference": step.action, "pick": pick, "agree": equivalent(pick, step, answer_ok),
                         "credit": step_credit(scored.candidates, final, step, answer_ok, scale)})
    finally:
        policy.reset()
    return rows


def score_run(folder: Path, result: Mapping[str, Any], *, start: bool) -> dict[str, Any]:
    """Score the run's centre (or, ``start``, the base model with the baseline genome, built from the run's
    configuration) on its setting's held-out reference steps."""
    from cotrain.checkpoint import RunDir
    from cotrain.export import centre_model
    from es_agent.policy import LLMPolicy

    run = RunDir.open(folder / result["run_dir"])
    state = run.load_state()
    if start:
        state = dataclasses.replace(state, snapshot=None, snapshot_generation=0, pending=[], checksum=None)
        genome = state.pools.baseline(run.config.eval.baseline)
    else:
        genome = state.pools.from_indices(state.distribution.most_probable_prompt_ids())
    steps, answer_ok = heldout_steps(result)
    started = time.perf_counter()
    model, tokenizer, checksum = centre_model(run, state)
    policy = LLMPolicy(model, tokenizer, genome, run.config.agent.policy_config())
    rows = score_policy(policy, steps, answer_ok, run.config.es.shaping.confidence_scale)
    return {"setting": result["setting"], "arm": "start" if start else result["arm"],
            "seed": None if start else result["seed"], "generation": 0 if start else state.generation,
            "genome": dict(genome.ids), "checksum": checksum, "built_from": result["key"],
            "seconds": round(time.perf_counter() - started, 1), "steps": rows}


def per_task(steps: Sequence[Mapping[str, Any]], field: str) -> dict[str, float]:
    """The mean of ``field`` over each task's steps, by task id."""
    sums: dict[str, list[float]] = {}
    for s in steps:
        sums.setdefault(str(s["task_id"]), []).append(float(s[field]))
    return {t: sum(v) / len(v) for t, v in sums.items()}


def summarise(scored: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per setting, grid label and arm: agreement and credit (means over seeds x tasks, each task the mean of
    its steps) and their paired differences against the setting's start."""
    out = []
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for key, entry in scored.items():
        if entry["arm"] != "start":
            groups.setdefault((entry["setting"], key.split(":", 1)[0], entry["arm"]), []).append(entry)
    for (setting, label, arm), entries in sorted(groups.items()):
        start = scored.get(f"start:{setting}")
        if start is None:
            raise BenchmarkError(f"{setting}: the start is not scored")
        entries = sorted(entries, key=lambda e: e["seed"])
        tasks = sorted(per_task(start["steps"], "agree"), key=int)
        row: dict[str, Any] = {"setting": setting, "grid": label, "arm": arm,
                               "seeds": [e["seed"] for e in entries], "tasks": len(tasks),
                               "steps": len(start["steps"])}
        for field in ("agree", "credit"):
            base = per_task(start["steps"], field)
            runs = [per_task(e["steps"], field) for e in entries]
            if any(set(r) != set(base) for r in runs):
                raise BenchmarkError(f"{setting} {label} {arm}: runs scored on other tasks than the start")
            matrix = [[r[t] for t in tasks] for r in runs]
            row[field] = _est(bootstrap_mean(matrix))
            row[f"start_{field}"] = _est(bootstrap_mean([[base[t] for t in tasks]]))
            row[f"{field}_vs_start"] = _est(paired_estimate(matrix, [[base[t] for t in tasks]]))
        row["agree_steps"] = [sum(bool(s["agree"]) for s in e["steps"]) for e in entries]
        out.append(row)
    return out


def _est(e: Any) -> dict[str, float]:
    return {"mean": e.mean, "low": e.low, "high": e.high}


def _fmt(e: Mapping[str, float], scale: float = 100.0, sign: bool = False) -> str:
    f = "{:+.1f}" if sign else "{:.1f}"
    return f"{f.format(e['mean'] * scale)} [{f.format(e['low'] * scale)}, {f.format(e['high'] * scale)}]"


def render(rows: Sequence[Mapping[str, Any]], scored: Mapping[str, Mapping[str, Any]], command: str) -> str:
    """Markdown: per setting, grid and arm, agreement and credit against the start; then every scored run."""
    lines = ["# Held-out step agreement of trained centres", "", f"Command: `{command}`", "",
             "Teacher-forced on every reference step of the setting's held-out tasks (test + test_unseen); "
             "each task is the mean over its steps; means over seeds x tasks with a 95 % bootstrap CI; "
             "differences are paired with the start on the same tasks. Agreement in percent (points for "
             "differences); credit is the soft margin of the reference over the best other candidate, in "
             "[-1, 1], x 100.", "",
             "| setting | grid | arm | seeds | tasks / steps | start agreement | agreement | "
             "agreement vs start | steps agreeing per seed (start) | start credit | credit | "
             "credit vs start |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        start = scored[f"start:{r['setting']}"]
        lines.append(f"| {r['setting']} | {r['grid']} | {r['arm']} | {', '.join(map(str, r['seeds']))} | "
                     f"{r['tasks']} / {r['steps']} | {_fmt(r['start_agree'])} | {_fmt(r['agree'])} | "
                     f"{_fmt(r['agree_vs_start'], sign=True)} | {' / '.join(map(str, r['agree_steps']))} "
                     f"({sum(bool(s['agree']) for s in start['steps'])}) | "
                     f"{_fmt(r['start_credit'], sign=True)} | "
                     f"{_fmt(r['credit'], sign=True)} | {_fmt(r['credit_vs_start'], sign=True)} |")
    lines += ["", "| scored | generation | genome | steps agreeing | seconds |",
              "| --- | --- | --- | --- | --- |"]
    for key, e in sorted(scored.items()):
        genome = "/".join(e["genome"][k] for k in sorted(e["genome"]))
        lines.append(f"| {key} | {e['generation']} | {genome} | "
                     f"{sum(bool(s['agree']) for s in e['steps'])} / {len(e['steps'])} | {e['seconds']} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", nargs="+", required=True, help="LABEL=DIR: grid directories to score")
    parser.add_argument("--settings", nargs="+", help="only these settings")
    parser.add_argument("--arms", nargs="+", default=["weights", "both"], help="trained arms to score")
    parser.add_argument("--seeds", nargs="+", type=int, help="only these seeds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--out", default="benchmarks/results/centre_agreement", help="output prefix")
    args = parser.parse_args(argv)
    grids = parse_grids(args.grid)
    runs = chosen_runs(grids, args.settings, args.arms, args.seeds)
    if not runs:
        raise BenchmarkError("no finished trained run of those grids, settings, arms and seeds")
    out = Path(args.out)
    path = out.with_suffix(".json")
    empty: dict[str, Any] = {"format": FORMAT, "scored": {}}
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else empty
    if data.get("format") != FORMAT:
        raise BenchmarkError(f"{path}: not a {FORMAT} file")
    scored: dict[str, Any] = data["scored"]
    command = "python -m benchmarks.centre_agreement " + " ".join(argv if argv is not None else sys.argv[1:])
    with torch_threads(args.threads):
        for label, folder, result in runs:
            for key, start in ((f"start:{result['setting']}", True), (f"{label}:{result['key']}", False)):
                if key in scored:
                    continue
                print(f"scoring {key}", flush=True)
                scored[key] = score_run(folder, result, start=start)
                data.update(machine=machine_info()["cpu"],
                            date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
                atomic_write_json(path, data)
    rows = summarise(scored)
    data["summary"] = rows
    atomic_write_json(path, data)
    atomic_write_text(out.with_suffix(".md"), render(rows, scored, command))
    print(f"wrote {path} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
