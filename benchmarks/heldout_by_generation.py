"""Held-out success of a grid's trained centres at earlier generations: when did a gain appear?

A grid run scores only its last centre. This scores the centre each finished run had after the given
generations (``esopt eval --generation``: its last snapshot at or before it plus the logged updates) on the
same held-out tasks with the same env seed, and puts it beside the final score: which tasks each run had
already solved (or lost) by then. Every scored (run, generation) is written to the output JSON at once and
never scored again, so an interrupted call continues where it stopped.

    python -m benchmarks.heldout_by_generation --grid runs/grid_anchor --arms weights both \\
        --generations 8 --out benchmarks/results/heldout_by_generation
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.compare_grids import collect
from cotrain.checkpoint import atomic_write_json, atomic_write_text


def finished_runs(grid: Path, arms: Sequence[str], settings: Sequence[str] | None) -> list[dict[str, Any]]:
    """The finished trained runs of ``arms`` under a grid directory whose run directory is there."""
    return [result for result in collect(grid).values()
            if result["arm"] in arms and "run_dir" in result
            and (not settings or result["setting"] in settings)
            and (grid / result["run_dir"] / "run.json").is_file()]


def score(grid: Path, result: Mapping[str, Any], generation: int) -> dict[str, float]:
    """Per-task rewards of the run's centre after ``generation`` on its held-out tasks."""
    from cotrain.evaluate import evaluate_run

    tasks = [t for split in ("test", "test_unseen") for t in result["tasks"][split]]
    report = evaluate_run(grid / result["run_dir"], tasks=tasks, split="heldout", baseline=False,
                          write=False, generation=generation)
    return {str(t): float(v) for t, v in report["centre"]["rewards"].items()}


def table(results: Sequence[Mapping[str, Any]], scored: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: per run and generation, the tasks solved, and what changed up to the final centre."""
    lines = ["| run | generation | held-out solved | tasks solved | gained by the end | lost by the end |",
             "| --- | --- | --- | --- | --- | --- |"]
    for result in results:
        final = {t for t, v in result["rewards"].items() if v >= 1.0}
        rows = sorted((int(g), r) for g, r in scored.get(result["key"], {}).items())
        for generation, rewards in [*rows, (int(result["generation"]), result["rewards"])]:
            solved = {t for t, v in rewards.items() if v >= 1.0}
            lines.append(f"| {result['key']} | {generation} | {len(solved)} / {len(rewards)} | "
                         f"{', '.join(sorted(solved)) or '-'} | {', '.join(sorted(final - solved)) or '-'} | "
                         f"{', '.join(sorted(solved - final)) or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", required=True, type=Path, help="grid directory (esopt grid --out)")
    parser.add_argument("--arms", nargs="+", default=["weights", "both"])
    parser.add_argument("--settings", nargs="+")
    parser.add_argument("--generations", nargs="+", type=int, required=True)
    parser.add_argument("--out", required=True, type=Path, help="prefix of the .json and .md written")
    args = parser.parse_args(argv)
    results = finished_runs(args.grid, args.arms, args.settings)
    if not results:
        raise SystemExit(f"{args.grid}: no finished {'/'.join(args.arms)} run with its run directory")
    path = args.out.with_suffix(".json")
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {"scored": {}}
    for result in results:
        done = data["scored"].setdefault(result["key"], {})
        for generation in args.generations:
            if str(generation) in done or generation >= int(result["generation"]):
                continue
            started = time.perf_counter()
            rewards = done[str(generation)] = score(args.grid, result, generation)
            solved = sum(v >= 1.0 for v in rewards.values())
            print(f"{result['key']}: generation {generation}: {solved} / {len(rewards)} held out "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
            data.update(grid=str(args.grid), date=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            atomic_write_json(path, data)
    text = (f"# Held-out success by generation\n\n- Grid: `{args.grid}`; written {data.get('date', '-')}\n"
            "- Each centre is scored on its run's held-out tasks (test + test_unseen) with the grid's env "
            "seed; the last row of a run is its grid result.\n\n" + table(results, data["scored"]))
    atomic_write_text(args.out.with_suffix(".md"), text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
