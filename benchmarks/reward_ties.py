"""How often a grid's training carried a reward signal at all.

Per setting and arm, the generations in which every candidate got the same rewards on every task of its
batch (:func:`cotrain.searcher.rewards_tied`): there the rewards rank nobody, and a non-empty update came from
the confidence tie-break alone (``es.shaping.confidence_tiebreak``). Read from the run directories' update
logs (``update_log.jsonl``, checked by :class:`cotrain.checkpoint.RunDir`), so it covers runs made before the
metrics recorded ``rewards_tied``. A grid directory whose runs kept only their ``result.json`` (the committed
``benchmarks/results/*_runs``) has nothing to read: a run without a run directory is listed as missing.

    python -m benchmarks.reward_ties runs/grid_recipe runs/grid_6h --out benchmarks/results/reward_ties
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from cotrain.checkpoint import RunDir
from cotrain.grid import RESULT_FILE, read_result
from cotrain.searcher import rewards_tied


@dataclass(frozen=True)
class TieCount:
    """One setting and arm of one grid directory: its generations, and those whose rewards all tied."""

    grid: str
    setting: str
    arm: str
    runs: int
    generations: int
    tied: int
    missing: int
    """Finished runs (a ``result.json``) without a run directory to read."""

    @property
    def share(self) -> float | None:
        return self.tied / self.generations if self.generations else None


def count_ties(folder: Path) -> list[TieCount]:
    """The :class:`TieCount` of every trained setting and arm with a finished run under grid ``folder``."""
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted(folder.glob(f"*/*/seed*/{RESULT_FILE}")):
        result = read_result(path)
        assert result is not None
        entry = found.setdefault((str(result["setting"]), str(result["arm"])), [0, 0, 0, 0])
        run_dir = path.parent / "run"
        if not (run_dir / "run.json").is_file():
            entry[3] += 1
            continue
        records = RunDir.open(run_dir).records()
        entry[0] += 1
        entry[1] += len(records)
        entry[2] += sum(rewards_tied(torch.tensor(r["rewards"], dtype=torch.float64)) for r in records)
    return [TieCount(folder.name, setting, arm, *counts) for (setting, arm), counts in found.items()]


def format_table(counts: Sequence[TieCount]) -> str:
    """A markdown table, one row per grid, setting and arm."""
    lines = ["| grid | setting | arm | runs read | generations | every reward tied | runs without a run "
             "directory |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for c in counts:
        share = "-" if c.share is None else f"{c.tied} ({100 * c.share:.0f} %)"
        lines.append(f"| {c.grid} | {c.setting} | {c.arm} | {c.runs} | {c.generations} | {share} "
                     f"| {c.missing} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reward_ties",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("grids", nargs="+", type=Path, help="grid directories (esopt grid --out)")
    parser.add_argument("--out", type=Path, help="write <out>.md and <out>.json")
    args = parser.parse_args(argv)
    counts = [c for folder in args.grids for c in count_ties(folder)]
    table = format_table(counts)
    print(table)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        command = "python -m benchmarks.reward_ties " + " ".join(map(str, args.grids))
        args.out.with_suffix(".md").write_text(
            f"# Generations whose rewards all tied\n\n`{command}`\n\n{table}\n", encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(
            {"command": command, "counts": [asdict(c) for c in counts]}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
