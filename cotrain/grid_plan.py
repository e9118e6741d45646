"""What is left of a grid and how long it will take: its unfinished runs priced by the finished ones.

``esopt grid --plan`` runs nothing and writes nothing. Per setting and arm it prints the runs finished,
running (their lock held by a job) and to run, the planned episodes per run, the measured minutes per
finished run, and an estimate for the rest. An unfinished run costs the mean rates of the finished runs of its
setting and arm (else of its arm in any setting, else of every finished trained run): their training seconds
per planned episode times its planned episodes and the share of its generations not yet done (a run resumes
from its last generation), plus their held-out scoring seconds per held-out task times its held-out tasks
(scoring costs the same whatever the training budget; a result without ``seconds_train`` prices the whole run
per episode); a ``start`` run is priced per held-out task. Finished runs are read from ``--out`` and the
``--merge`` directories (each on its own: they may come from other grids), so a grid with another budget, or
an earlier grid on the same settings, prices this one's runs by the episode. The wall time is the longest of
``jobs`` queues filled longest run first.

The seconds are what the finished runs measured (training and held-out scoring), on whatever machine and
number of jobs ran them: an estimate for the same machine and jobs, not a promise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cotrain.errors import GridError
from cotrain.grid import GridRun, finished_result, lock_held
from cotrain.grid_config import START_ARM
from cotrain.grid_report import collect_results

FINISHED, RUNNING, TO_RUN = "finished", "running", "to run"


@dataclass(frozen=True)
class RunCost:
    """One planned run: where it stands and what it cost or will cost."""

    key: str
    setting: str
    arm: str
    status: str
    """``finished``, ``running`` (another process holds its lock) or ``to run``."""
    units: int
    """Planned episodes (a trained arm) or held-out tasks (``start``): what the run is priced by."""
    done: float
    """Share of the run's generations already done (1 when finished)."""
    seconds: float | None
    """Measured (finished) or estimated seconds left; ``None``: no finished run to price it by."""
    basis: str
    """Where ``seconds`` comes from."""


def run_units(run: GridRun) -> int:
    """What a planned run is priced by: its planned episodes, or its held-out tasks for ``start``."""
    return run.budget.episodes if run.budget is not None else len(run.tasks.all_heldout)


def result_units(result: Mapping[str, Any]) -> int:
    """The same measure for a finished run, from its result file."""
    try:
        planned = result.get("budget_planned")
        if planned:
            return int(planned["episodes"])
        return sum(len(ids) for ids in result["tasks"].values())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise GridError(f"the result of run {result.get('key', '?')} has no usable planned budget or "
                        f"held-out tasks ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class Rate:
    """What one finished run cost per unit: training seconds per planned episode and held-out scoring seconds
    per held-out task (a ``start`` run only scores)."""

    per_episode: float
    per_heldout_task: float


def result_rate(result: Mapping[str, Any]) -> Rate | None:
    """A finished run's :class:`Rate` (``None`` when it has no seconds or no units to divide them by)."""
    units = result_units(result)
    if units <= 0 or "seconds" not in result:
        return None
    seconds = float(result["seconds"])
    if result.get("arm") == START_ARM:
        return Rate(0.0, seconds / units)
    train = result.get("seconds_train")
    tasks = sum(len(ids) for ids in (result.get("tasks") or {}).values())
    if not train or tasks <= 0:  # an older result: the whole run per episode
        return Rate(seconds / units, 0.0)
    return Rate(float(train) / units, max(0.0, seconds - float(train)) / tasks)


def rates(results: Sequence[Mapping[str, Any]]) -> dict[tuple[str, ...], list[Rate]]:
    """The :class:`Rate` of every finished run, under ``(setting, arm)``, ``(arm,)`` and, for trained arms,
    ``("trained",)``."""
    out: dict[tuple[str, ...], list[Rate]] = {}
    for result in results:
        rate = result_rate(result)
        if rate is None:
            continue
        arm = str(result["arm"])
        keys = [(str(result["setting"]), arm), (arm,)] + ([("trained",)] if arm != START_ARM else [])
        for key in keys:
            out.setdefault(key, []).append(rate)
    return out


def _progress(run: GridRun, out: Path) -> float:
    """Share of a trained run's generations its run directory has done (0 without one)."""
    from cotrain.checkpoint import RunDir

    path = run.run_dir(out)
    if run.budget is None or not (path / "run.json").is_file():
        return 0.0
    run_dir = RunDir.open(path)  # a corrupt one is a RunDirError naming its file, as the job would raise
    return min(1.0, run_dir.generation / max(1, run_dir.config.es.generations))


def price_runs(plan: Sequence[GridRun], out: Path, others: Sequence[Path] = ()) -> list[RunCost]:
    """Every planned run's status and cost: finished runs as measured, the others estimated from the finished
    runs under ``out`` and ``others`` (see the module docstring)."""
    known: dict[tuple[str, str], Mapping[str, Any]] = {}  # a run copied into two directories counts once
    for folder in (out, *others):
        if folder.is_dir() or folder != out:  # --out may not exist yet; a missing --merge is an error
            for key, found in collect_results([folder]).items():
                known.setdefault((key, str(found.get("config_sha256") or found["overrides"])), found)
    per_unit = rates(list(known.values()))
    costs = []
    for run in plan:
        units = run_units(run)
        result = finished_result(run, out) if out.is_dir() else None
        if result is not None:
            costs.append(RunCost(run.key, run.setting.name, run.arm, FINISHED, units, 1.0,
                                 float(result["seconds"]), "measured"))
            continue
        status = RUNNING if lock_held(run.folder(out)) else TO_RUN
        done = _progress(run, out)
        seconds: float | None = None
        basis = "no finished run to price it by"
        lookups: list[tuple[tuple[str, ...], str]] = [
            ((run.setting.name, run.arm), f"{run.arm} runs of {run.setting.name}"),
            ((run.arm,), f"{run.arm} runs of other settings")]
        if run.arm != START_ARM:
            lookups.append((("trained",), "trained runs of other arms"))
        for pool, what in lookups:
            samples = per_unit.get(pool)
            if samples:
                episodes = run.budget.episodes if run.budget is not None else 0
                per_episode = sum(r.per_episode for r in samples) / len(samples)
                per_task = sum(r.per_heldout_task for r in samples) / len(samples)
                seconds = per_episode * episodes * (1.0 - done) + per_task * len(run.tasks.all_heldout)
                basis = f"{len(samples)} finished {what}"
                break
        costs.append(RunCost(run.key, run.setting.name, run.arm, status, units, done, seconds, basis))
    return costs


def wall_seconds(seconds: Sequence[float], jobs: int) -> float:
    """The longest of ``jobs`` queues when each run goes, longest first, to the least loaded one."""
    queues = [0.0] * max(1, jobs)
    for s in sorted(seconds, reverse=True):
        queues[queues.index(min(queues))] += s
    return max(queues)


def format_plan(costs: Sequence[RunCost], jobs: int) -> str:
    """The table ``esopt grid --plan`` prints and its totals."""
    rows = [("setting", "arm", "finished", "running", "to run", "per run", "min/run measured",
             "min left", "priced by")]
    groups: dict[tuple[str, str], list[RunCost]] = {}
    for cost in costs:
        groups.setdefault((cost.setting, cost.arm), []).append(cost)
    for (setting, arm), group in groups.items():
        finished = [c for c in group if c.status == FINISHED]
        left = [c for c in group if c.status != FINISHED]
        unpriced = [c for c in left if c.seconds is None]
        per_run = (f"{sum(c.seconds or 0.0 for c in finished) / len(finished) / 60:.1f}" if finished
                   else "-")
        minutes = "-" if not left else (f"{sum(c.seconds or 0.0 for c in left) / 60:.0f}"
                                        + (f" (+{len(unpriced)} unpriced)" if unpriced else ""))
        basis = sorted({c.basis for c in left})
        rows.append((setting, arm, str(len(finished)), str(sum(c.status == RUNNING for c in group)),
                     str(sum(c.status == TO_RUN for c in group)),
                     "/".join(sorted({str(c.units) for c in group})) + (" tasks" if arm == START_ARM
                                                                         else " episodes"),
                     per_run, minutes, "; ".join(basis) if basis else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    measured = sum(c.seconds or 0.0 for c in costs if c.status == FINISHED)
    pending = [c for c in costs if c.status != FINISHED]
    priced = [c.seconds for c in pending if c.seconds is not None]
    no_price = [c.key for c in pending if c.seconds is None]
    lines.append(f"compute: {measured / 3600:.1f} h measured in {len(costs) - len(pending)} finished run(s); "
                 f"about {sum(priced) / 3600:.1f} h left in {len(priced)} run(s)"
                 + (f", and {len(no_price)} run(s) with nothing to price them by ({', '.join(no_price)})"
                    if no_price else ""))
    lines.append(f"wall time left on {jobs} job(s): about {wall_seconds(priced, jobs) / 3600:.1f} h "
                 "(running runs counted from their last finished generation; seconds as the finished runs "
                 "measured them, on their machine and jobs)")
    return "\n".join(lines)
