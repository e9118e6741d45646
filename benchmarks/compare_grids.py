"""Matched ablation of two grids: the same runs (setting, arm, seed) with one change between them.

Two grid directories made from grid files that differ in one override (for example
``configs/grid_tiebreak.toml`` against ``configs/grid_memory.toml``: the confidence tie-break on and off) hold
runs with the same keys, the same training and held-out tasks and the same env seed. This pairs them run by
run and reports, per setting and arm, the held-out success of each grid and the paired difference ``a - b``
with a 95 % bootstrap CI over seeds x tasks (:func:`cotrain.grid_stats.paired_estimate`), and each paired
run's minutes (its whole process, as its result recorded them: a speed change shows run by run). Only seeds
both grids finished are paired (``--seeds``: only those of a chosen subset); a run whose held-out tasks
differ between the grids is an error naming it.

    python -m benchmarks.compare_grids --a runs/grid_tiebreak --b runs/grid_memory \\
        --labels tiebreak memory --out benchmarks/results/grid_tiebreak_vs_memory
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cotrain.errors import GridError
from cotrain.grid import RESULT_FILE, read_result
from cotrain.grid_report import format_percent, format_points, outcome_matrix
from cotrain.grid_stats import bootstrap_mean, paired_estimate

ARM_ORDER = ("start", "prompts", "weights", "both")


def collect(folder: Path, seeds: Sequence[int] | None = None) -> dict[str, dict[str, Any]]:
    """Every finished run under a grid directory, by its key (``<setting>/<arm>[/seed<k>]``); with ``seeds``,
    only the trained runs of those seeds (and the unseeded ``start`` runs)."""
    out = {}
    for path in sorted(folder.rglob(RESULT_FILE)):
        result = read_result(path)
        if result is not None and (seeds is None or result["seed"] is None or result["seed"] in seeds):
            out[str(result["key"])] = result
    return out


def compare(a: Mapping[str, Mapping[str, Any]], b: Mapping[str, Mapping[str, Any]],
            n_boot: int = 10_000) -> list[dict[str, Any]]:
    """Per setting and arm with runs in both: seeds paired, success of each and the paired ``a - b``."""
    groups: dict[tuple[str, str], list[str]] = {}
    for key in sorted(set(a) & set(b)):
        if a[key]["tasks"] != b[key]["tasks"] or a[key].get("env_seed") != b[key].get("env_seed"):
            raise GridError(f"{key}: the two grids scored different held-out tasks or env seeds; not a "
                            f"matched pair")
        groups.setdefault((str(a[key]["setting"]), str(a[key]["arm"])), []).append(key)
    rows = []
    for (setting, arm), keys in sorted(groups.items(), key=lambda kv: (kv[0][0], _arm_rank(kv[0][1]))):
        keys = sorted(keys, key=lambda k: -1 if a[k]["seed"] is None else int(a[k]["seed"]))
        ma = outcome_matrix([a[k] for k in keys], "heldout")
        mb = outcome_matrix([b[k] for k in keys], "heldout")
        diff = paired_estimate(ma, mb, n_boot=n_boot)
        rows.append({"setting": setting, "arm": arm, "seeds": [a[k]["seed"] for k in keys],
                     "n_tasks": int(ma.shape[1]),
                     "a": _est(bootstrap_mean(ma, n_boot=n_boot)),
                     "b": _est(bootstrap_mean(mb, n_boot=n_boot)),
                     "a_solved": [int(r.sum()) for r in ma], "b_solved": [int(r.sum()) for r in mb],
                     "a_minus_b": _est(diff),
                     "a_minutes": [_minutes(a[k]) for k in keys],
                     "b_minutes": [_minutes(b[k]) for k in keys]})
    return rows


def render(rows: Sequence[Mapping[str, Any]], labels: Sequence[str], command: str) -> str:
    """The Markdown table."""
    la, lb = labels
    lines = [f"# Matched ablation: `{la}` against `{lb}`", "", f"Command: `{command}`", "",
             "Held-out success (test + test_unseen) of the same runs (setting, arm, seed) in the two grids, "
             "and the paired difference over seeds x tasks with a 95 % bootstrap CI, in points.", "",
             f"| setting | arm | seeds | tasks solved per seed, {la} | tasks solved per seed, {lb} | {la} "
             f"| {lb} | {la} - {lb} (points) | minutes per run, {la} | minutes per run, {lb} |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        seeds = ", ".join("-" if s is None else str(s) for s in r["seeds"])
        lines.append(f"| {r['setting']} | {r['arm']} | {seeds} | {' / '.join(map(str, r['a_solved']))} of "
                     f"{r['n_tasks']} | {' / '.join(map(str, r['b_solved']))} of {r['n_tasks']} | "
                     f"{format_percent(r['a'])} | {format_percent(r['b'])} | "
                     f"{format_points(r['a_minus_b'])} | {_shown_minutes(r.get('a_minutes'))} | "
                     f"{_shown_minutes(r.get('b_minutes'))} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", type=Path, required=True, help="grid directory with the change")
    parser.add_argument("--b", type=Path, required=True, help="grid directory without it")
    parser.add_argument("--labels", nargs=2, default=("a", "b"), help="names of the two grids")
    parser.add_argument("--seeds", nargs="+", type=int,
                        help="pair only the runs of these seeds (e.g. a pre-registered subset)")
    parser.add_argument("--out", type=Path, help="write OUT.md and OUT.json (else print the table)")
    args = parser.parse_args(argv)
    for folder in (args.a, args.b):
        if not folder.is_dir():
            parser.error(f"{folder} is not a directory")
    command = "python -m benchmarks.compare_grids " + shlex.join(sys.argv[1:] if argv is None else argv)
    rows = compare(collect(args.a, args.seeds), collect(args.b, args.seeds))
    text = render(rows, args.labels, command.strip())
    if args.out is None:
        print(text, end="")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text)
    report = {"labels": list(args.labels), "command": command.strip(), "rows": rows}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out.with_suffix('.md')} and {args.out.with_suffix('.json')}")
    return 0


def _minutes(result: Mapping[str, Any]) -> float | None:
    """A run's whole process in minutes (model load, training, held-out scoring); ``None`` when unrecorded."""
    seconds = result.get("seconds")
    return None if seconds is None else float(seconds) / 60


def _shown_minutes(values: Sequence[float | None] | None) -> str:
    return " / ".join("-" if v is None else f"{v:.1f}" for v in values or []) or "-"


def _arm_rank(arm: str) -> int:
    return ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER)


def _est(e: Any) -> dict[str, Any]:
    return dict(e.to_dict())


if __name__ == "__main__":
    raise SystemExit(main())
