"""Trained grid centres on fresh held-out tasks: does a gain hold on tasks the runs were never scored on?

A grid scores each run's centre on its setting's held-out tasks (13 for shop admin tier 1), too few to tell
a gain from the luck of the task draw. This scores the centres of finished grid runs, and the start (the base
model with the baseline genome), on the setting's tasks of the fresh held-out splits (``tier1_fresh_test``,
``tier1_fresh_test_unseen``: made after the grids ran, never trained on) with the run's env seed, and reports
the success with a 95 % bootstrap CI over seeds x tasks, paired against the start, per split and per
template. Every scored run goes to its own file under ``--cache`` at once, so two processes can share the
work (disjoint ``--seeds``, one of them with ``--start``) and an interrupted call continues where it stopped;
``--report-only`` writes the report of what the cache holds.

    python -m benchmarks.fresh_heldout --grid runs/grid_long --setting embedded_shopping_admin_t1 \\
        --arms weights --seeds 0 1 2 3 4 --start --cache runs/fresh_heldout
    python -m benchmarks.fresh_heldout --cache runs/fresh_heldout --report-only \\
        --out benchmarks/results/fresh_heldout
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.compare_grids import collect
from cotrain.checkpoint import atomic_write_json, atomic_write_text
from cotrain.grid_report import format_percent, format_points, machine_info
from cotrain.grid_stats import bootstrap_mean, paired_estimate

FRESH = {"test": "tier1_fresh_test", "test_unseen": "tier1_fresh_test_unseen"}
"""The fresh held-out split of each held-out kind."""
QUESTION = (
    "Written before any centre was scored on the fresh tasks (6 December 2026): on the shop-admin tasks of "
    "the fresh tier-1 splits (19 fresh_test + 6 fresh_test_unseen), do the 10 `weights` centres of "
    "`grid_long` (144 episodes, seeds 0-9) beat the start, paired over seeds x tasks with the 95 % CI above "
    "0? Secondary, with no claim attached: `grid_long` `both` (seeds 0-3) and the 72-episode `weights` "
    "centres of `grid_anchor` whose run directories were kept (seeds 6-9). Expected from the grids: gains "
    "only on best-selling (2 fresh tasks) and cancel-order (1), maybe the sales totals (6); nothing on "
    "the customer e-mail and phone templates (16), which the start solves or never solves."
)


def fresh_tasks(family: str) -> dict[str, list[int]]:
    """The task ids of ``family`` (a site, e.g. ``shopping_admin``) in each fresh held-out split."""
    from webarena_gym.embedded import default_tasks

    out = {kind: [int(t.task_id) for t in default_tasks(split) if t.sites == (family,)]
           for kind, split in FRESH.items()}
    if not any(out.values()):
        raise SystemExit(f"no fresh held-out task of site {family!r}")
    return out


def cache_path(cache: Path, label: str, key: str) -> Path:
    """The cache file of run ``key`` of grid ``label`` (``start`` runs: ``<cache>/start/<setting>.json``)."""
    return cache / label / key / "fresh.json"


def score_run(grid: Path, result: Mapping[str, Any], tasks: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """Per-task rewards of a finished run's last centre on ``tasks``."""
    from cotrain.evaluate import evaluate_run

    ids = [t for kind in FRESH for t in tasks[kind]]
    report = evaluate_run(grid / result["run_dir"], tasks=ids, split="tier1_fresh", baseline=False,
                          write=False)
    return {str(t): float(v) for t, v in report["centre"]["rewards"].items()}


def score_start(grid: Path, result: Mapping[str, Any],
                tasks: Mapping[str, Sequence[int]]) -> dict[str, float]:
    """Per-task rewards of the start of the run's setting (its config's base model and baseline genome)."""
    from cotrain.checkpoint import RunDir
    from cotrain.evaluate import evaluate_start

    ids = [t for kind in FRESH for t in tasks[kind]]
    scored = evaluate_start(RunDir.open(grid / result["run_dir"]).config, ids)
    return {str(t): float(v) for t, v in scored["rewards"].items()}


def run_scoring(grid: Path, setting: str, arms: Sequence[str], seeds: Sequence[int] | None, start: bool,
                cache: Path) -> None:
    """Score the start (with ``start``) and every finished run of ``arms`` (and ``seeds``) of ``setting``
    that the cache lacks, writing each at once."""
    runs = [r for r in collect(grid).values()
            if r["setting"] == setting and r["arm"] in arms and "run_dir" in r
            and (seeds is None or r["seed"] in seeds) and (grid / r["run_dir"] / "run.json").is_file()]
    if not runs:
        raise SystemExit(f"{grid}: no finished {'/'.join(arms)} run of {setting} with its run directory")
    runs.sort(key=lambda r: (r["arm"], int(r["seed"])))
    tasks = fresh_tasks(str(runs[0]["family"]))
    jobs: list[tuple[Path, Mapping[str, Any], bool]] = []
    if start:
        jobs.append((cache / "start" / setting / "fresh.json", runs[0], True))
    jobs += [(cache_path(cache, grid.name, str(r["key"])), r, False) for r in runs]
    for path, result, is_start in jobs:
        if path.is_file():
            continue
        started = time.perf_counter()
        rewards = score_start(grid, result, tasks) if is_start else score_run(grid, result, tasks)
        seconds = time.perf_counter() - started
        entry = {"grid": "start" if is_start else grid.name, "setting": setting,
                 "arm": "start" if is_start else result["arm"], "seed": None if is_start else result["seed"],
                 "key": f"{setting}/start" if is_start else result["key"], "tasks": tasks, "rewards": rewards,
                 "env_seed": result.get("env_seed"), "seconds": seconds,
                 "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, entry)
        solved = sum(v >= 1.0 for v in rewards.values())
        print(f"{entry['grid']} {entry['key']}: {solved} / {len(rewards)} fresh held out ({seconds:.0f} s)",
              flush=True)


def load_cache(cache: Path) -> list[dict[str, Any]]:
    """Every scored entry under the cache."""
    return [json.loads(p.read_text()) for p in sorted(cache.rglob("fresh.json"))]


def _matrix(entries: Sequence[Mapping[str, Any]], ids: Sequence[int]) -> np.ndarray:
    return np.asarray([[float(e["rewards"][str(t)] >= 1.0) for t in ids] for e in entries])


def build(entries: Sequence[Mapping[str, Any]], n_boot: int = 10_000) -> dict[str, Any]:
    """Per setting: the start, and per (grid, arm) the seeds' success and the paired difference to the
    start, per fresh split and both together; per template the solved cells."""
    from webarena_gym.embedded import default_tasks

    template = {int(t.task_id): int(t.intent_template_id or 0)
                for split in FRESH.values() for t in default_tasks(split)}
    settings: dict[str, Any] = {}
    for setting in sorted({e["setting"] for e in entries}):
        start = [e for e in entries if e["setting"] == setting and e["arm"] == "start"]
        if not start:
            raise SystemExit(f"{setting}: the start is not scored yet (run with --start)")
        tasks = start[0]["tasks"]
        kinds = {**{k: list(v) for k, v in tasks.items()}, "heldout": [t for k in FRESH for t in tasks[k]]}
        groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for e in entries:
            if e["setting"] == setting and e["arm"] != "start":
                if e["tasks"] != tasks:
                    raise SystemExit(f"{e['grid']} {e['key']}: scored on other fresh tasks than the start")
                groups.setdefault((e["grid"], e["arm"]), []).append(e)
        rows = []
        for (grid, arm), runs in sorted(groups.items()):
            runs = sorted(runs, key=lambda e: int(e["seed"]))
            row: dict[str, Any] = {"grid": grid, "arm": arm, "seeds": [e["seed"] for e in runs],
                                   "solved": [sum(v >= 1.0 for v in e["rewards"].values()) for e in runs],
                                   "splits": {}}
            for kind, ids in kinds.items():
                if not ids:
                    continue
                m, s = _matrix(runs, ids), _matrix(start, ids)
                row["splits"][kind] = {"mean": bootstrap_mean(m, n_boot=n_boot).to_dict(),
                                       "vs_start": paired_estimate(m, s, n_boot=n_boot).to_dict()}
            rows.append(row)
        per_template = []
        for tid in sorted({template[t] for t in kinds["heldout"]}):
            ids = [t for t in kinds["heldout"] if template[t] == tid]
            per_template.append({
                "template": tid, "tasks": len(ids), "start": int(_matrix(start, ids).sum()),
                "arms": {f"{r['grid']}/{r['arm']}": [int(_matrix(groups[(r["grid"], r["arm"])], ids).sum()),
                                                    len(ids) * len(r["seeds"])] for r in rows}})
        between = []
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                shared = sorted(set(a["seeds"]) & set(b["seeds"]))
                if len(shared) < 2:
                    continue
                ma, mb = (_matrix(sorted((e for e in groups[(r["grid"], r["arm"])] if e["seed"] in shared),
                                         key=lambda e: int(e["seed"])), kinds["heldout"]) for r in (a, b))
                diff = paired_estimate(ma, mb, n_boot=n_boot).to_dict()
                between.append({"a": f"{a['grid']}/{a['arm']}", "b": f"{b['grid']}/{b['arm']}",
                                "seeds": shared, "a_minus_b": diff})
        settings[setting] = {"tasks": tasks, "start_solved": int(_matrix(start, kinds["heldout"]).sum()),
                             "rows": rows, "between": between, "per_template": per_template}
    dates = sorted(str(e["date"]) for e in entries)
    seconds = [float(e["seconds"]) for e in entries]
    return {"question": QUESTION, "settings": settings, "scored_from": dates[0], "scored_to": dates[-1],
            "seconds_per_centre": [min(seconds), max(seconds)]}


def render(report: Mapping[str, Any], command: str) -> str:
    """The Markdown report."""
    m, low_high = report["machine"], report["seconds_per_centre"]
    lines = ["# Trained centres on fresh held-out tasks", "", f"- Question: {report['question']}",
             f"- Command: `{command}`; written {report['date']}",
             f"- Scored {report['scored_from']} to {report['scored_to']} on {m.get('cpu', '?')}, "
             f"{m.get('cpu_count', '?')} cores, {low_high[0]:.0f}-{low_high[1]:.0f} s per centre",
             "- Success = reward 1; mean over seeds x tasks with a 95 % bootstrap CI (seeds and tasks "
             "resampled), in percent; differences paired against the start on the same tasks, in points.", ""]
    for setting, s in report["settings"].items():
        n = {k: len(v) for k, v in s["tasks"].items()}
        lines += [f"## {setting}", "",
                  f"Fresh tasks: {n['test']} `tier1_fresh_test` + {n['test_unseen']} "
                  f"`tier1_fresh_test_unseen`; the start solves {s['start_solved']}.", "",
                  "| grid | arm | seeds | solved per seed | fresh test | fresh test_unseen | both "
                  "| vs start (test) | vs start (test_unseen) | vs start (both) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in s["rows"]:
            sp = r["splits"]

            def cell(kind: str, what: str, sp: Mapping[str, Any] = sp) -> str:
                if kind not in sp:
                    return "-"
                return (format_percent if what == "mean" else format_points)(sp[kind][what])

            lines.append(f"| {r['grid']} | {r['arm']} | {', '.join(map(str, r['seeds']))} | "
                         f"{' / '.join(map(str, r['solved']))} of {sum(n.values())} | "
                         f"{cell('test', 'mean')} | "
                         f"{cell('test_unseen', 'mean')} | {cell('heldout', 'mean')} | "
                         f"{cell('test', 'vs_start')} | {cell('test_unseen', 'vs_start')} | "
                         f"{cell('heldout', 'vs_start')} |")
        if s["between"]:
            lines += ["", "Between rows, paired on the seeds they share (both fresh splits), in points.", "",
                      "| a | b | seeds | a - b |", "| --- | --- | --- | --- |"]
            lines += [f"| {d['a']} | {d['b']} | {', '.join(map(str, d['seeds']))} | "
                      f"{format_points(d['a_minus_b'])} |" for d in s["between"]]
        names = [f"{r['grid']}/{r['arm']}" for r in s["rows"]]
        lines += ["", "Per template: solved (seed, task) cells of all cells.", "",
                  f"| template | tasks | start | {' | '.join(names)} |",
                  f"| --- | --- | --- | {' | '.join('---' for _ in names)} |"]
        for t in s["per_template"]:
            cells = " | ".join(f"{t['arms'][name][0]} / {t['arms'][name][1]}" for name in names)
            lines.append(f"| {t['template']} | {t['tasks']} | {t['start']} / {t['tasks']} | {cells} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    import shlex
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=Path, help="grid directory (esopt grid --out) whose runs to score")
    parser.add_argument("--setting", help="the setting to score (e.g. embedded_shopping_admin_t1)")
    parser.add_argument("--arms", nargs="+", default=["weights"])
    parser.add_argument("--seeds", nargs="+", type=int, help="only these seeds")
    parser.add_argument("--start", action="store_true", help="also score the setting's start")
    parser.add_argument("--cache", required=True, type=Path, help="directory of the scored runs (resumable)")
    parser.add_argument("--report-only", action="store_true", help="score nothing; write the report")
    parser.add_argument("--out", type=Path, help="prefix of the .md and .json report written")
    args = parser.parse_args(argv)
    if not args.report_only:
        if args.grid is None or args.setting is None:
            parser.error("--grid and --setting are needed unless --report-only")
        run_scoring(args.grid, args.setting, args.arms, args.seeds, args.start, args.cache)
    if args.out is not None:
        report = build(load_cache(args.cache))
        report.update(date=time.strftime("%Y-%m-%dT%H:%M:%S%z"), machine=machine_info())
        command = "python -m benchmarks.fresh_heldout " + shlex.join(sys.argv[1:] if argv is None else argv)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out.with_suffix(".json"), {**report, "command": command})
        atomic_write_text(args.out.with_suffix(".md"), render(report, command))
        print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
