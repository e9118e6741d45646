"""How often a grid's training carried a reward signal at all.

Per setting and arm, the generations in which every candidate got the same rewards on every task of its
batch (:func:`cotrain.searcher.rewards_tied`): there the rewards rank nobody, and a non-empty update came from
the confidence tie-break alone (``es.shaping.confidence_tiebreak``). Read from the run directories' update
logs (``update_log.jsonl``, checked by :class:`cotrain.checkpoint.RunDir`), so it covers runs made before the
metrics recorded ``rewards_tied``. Beside it: the training episodes' success rate, the tied share that
independent episodes at that rate would give (real candidates, small perturbations of one centre, agree more
often than that), and the population that would give even independent episodes a 50 % chance of a reward
difference on a one-task generation, a lower bound on what the reward signal needs. A grid directory whose
runs kept only their ``result.json`` (the committed ``benchmarks/results/*_runs``) has nothing to read: a run
without a run directory is listed as missing.

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
    episodes: int = 0
    """Training episodes (candidate x task cells) of the generations read."""
    successes: int = 0
    """Those with reward 1 (the task solved)."""
    cells: int = 0
    """(generation, task) cells: one task of a generation's batch, every candidate's episode on it."""
    cells_all_solved: int = 0
    """Cells in which every candidate solved the task."""
    cells_mixed: int = 0
    """Cells whose candidates' rewards differ (the others: all solved, or all the same lower reward)."""
    expected_tied: float = 0.0
    """Generations expected to tie if every episode were an independent draw at :attr:`success_rate`."""

    @property
    def share(self) -> float | None:
        return self.tied / self.generations if self.generations else None

    @property
    def success_rate(self) -> float | None:
        """The training episodes' success rate, every candidate and generation pooled."""
        return self.successes / self.episodes if self.episodes else None

    @property
    def expected_share(self) -> float | None:
        """The tied share that independent episodes at :attr:`success_rate` would give."""
        return self.expected_tied / self.generations if self.generations else None


def tie_chance(p: float, population: int, tasks: int = 1) -> float:
    """Chance that ``population`` independent episodes on each of ``tasks`` tasks, each solved with chance
    ``p``, all tie on every task (all solve it or all fail it)."""
    return float((p ** population + (1.0 - p) ** population) ** tasks)


def population_for_signal(p: float, tasks: int = 1, chance: float = 0.5, limit: int = 100_000) -> int | None:
    """The smallest population (even: antithetic pairs) whose generations carry a reward difference with at
    least ``chance``, for independent episodes solved with chance ``p`` on ``tasks`` tasks per generation; a
    lower bound on real runs, whose near-identical candidates agree more often than independent draws.
    ``None`` where no population does (``p`` 0 or 1) or it exceeds ``limit``."""
    if not 0.0 < p < 1.0:
        return None
    n = 2
    while tie_chance(p, n, tasks) > 1.0 - chance:
        n += 2
        if n > limit:
            return None
    return n


def count_ties(folder: Path) -> list[TieCount]:
    """The :class:`TieCount` of every trained setting and arm with a finished run under grid ``folder``."""
    runs: dict[tuple[str, str], int] = {}
    missing: dict[tuple[str, str], int] = {}
    rewards: dict[tuple[str, str], list[torch.Tensor]] = {}
    for path in sorted(folder.glob(f"*/*/seed*/{RESULT_FILE}")):
        result = read_result(path)
        assert result is not None
        key = (str(result["setting"]), str(result["arm"]))
        runs.setdefault(key, 0)
        missing.setdefault(key, 0)
        rewards.setdefault(key, [])
        run_dir = path.parent / "run"
        if not (run_dir / "run.json").is_file():
            missing[key] += 1
            continue
        runs[key] += 1
        records = RunDir.open(run_dir).records()
        rewards[key] += [torch.tensor(r["rewards"], dtype=torch.float64) for r in records]
    return [_tally(folder.name, setting, arm, runs[(setting, arm)], missing[(setting, arm)], generations)
            for (setting, arm), generations in rewards.items()]


def _tally(grid: str, setting: str, arm: str, runs: int, missing: int,
           generations: Sequence[torch.Tensor]) -> TieCount:
    """One :class:`TieCount` from the reward matrices (candidates x tasks) of its generations."""
    episodes = sum(r.numel() for r in generations)
    successes = sum(int((r >= 1.0).sum()) for r in generations)
    matrices = [r for r in generations if r.dim() == 2]
    columns = [r[:, t] for r in matrices for t in range(r.shape[1])]
    p = successes / episodes if episodes else 0.0
    return TieCount(grid, setting, arm, runs, len(generations),
                    tied=sum(rewards_tied(r) for r in generations), missing=missing, episodes=episodes,
                    successes=successes, cells=len(columns),
                    cells_all_solved=sum(bool((c >= 1.0).all()) for c in columns),
                    cells_mixed=sum(not bool((c == c[0]).all()) for c in columns),
                    expected_tied=sum(tie_chance(p, r.shape[0], r.shape[1]) for r in matrices))


def format_table(counts: Sequence[TieCount]) -> str:
    """A markdown table, one row per grid, setting and arm."""
    lines = ["| grid | setting | arm | runs read | generations | every reward tied "
             "| task cells: all solved / mixed / all failed | training episodes "
             "solved | tied if episodes were independent | population for a 50 % chance of a reward "
             "difference (1 task, independent) | runs without a run directory |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in counts:
        share = "-" if c.share is None else f"{c.tied} ({100 * c.share:.0f} %)"
        rate = c.success_rate
        cells = (f"{c.cells_all_solved} / {c.cells_mixed} / {c.cells - c.cells_all_solved - c.cells_mixed}"
                 if c.cells else "-")
        solved = "-" if rate is None else f"{c.successes} / {c.episodes} ({100 * rate:.1f} %)"
        expected = "-" if c.expected_share is None else f"{100 * c.expected_share:.0f} %"
        if rate is None:
            population = "-"
        elif c.successes == 0:
            population = "none (nothing solved)"
        else:
            needed = population_for_signal(rate)
            population = str(needed) if needed else "-"
        lines.append(f"| {c.grid} | {c.setting} | {c.arm} | {c.runs} | {c.generations} | {share} "
                     f"| {cells} | {solved} "
                     f"| {expected} | {population} | {c.missing} |")
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
