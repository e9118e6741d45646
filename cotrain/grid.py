"""The learning grid runner: every setting x arm x seed of a grid file (:mod:`cotrain.grid_config`) as an
ordinary ``esopt train`` run directory, its centre scored on the setting's held-out tasks, its outcome written
to its own result file the moment it finishes.

    esopt grid --config configs/grid.toml --out runs/grid [--jobs 2] [--settings S ...] [--arms A ...]
               [--seeds K ...] [--max-runs N] [--budget-minutes M] [--report-only] [--merge DIR ...]

Layout of ``--out``::

    <setting>/start/result.json              the base model + baseline genome, scored (no run directory)
    <setting>/<arm>/seed<k>/run/             the run directory (``esopt resume --run-dir`` continues it)
    <setting>/<arm>/seed<k>/result.json      the run's outcome (written atomically when it is complete;
                                             then the run keeps only its final weight snapshot)
    <setting>/<arm>/seed<k>/grid.lock        held by the job working on it
    plan.json                                the grid as planned by the last invocation

A run with a result file is never run again; a run directory without one is resumed (an interrupted
invocation, or a crash, loses at most the generation in progress); a run whose lock another job holds is
skipped. ``--jobs N`` runs N child processes (one torch thread each) that take the pending runs in plan
order, each run by exactly one of them (the lock). The jobs stop with the invocation: an interrupted one
(Ctrl-C, or SIGINT to its pid alone) interrupts them and waits for them (:data:`JOB_STOP_GRACE_S`), and a
job whose invocation is gone (SIGTERM, SIGKILL) interrupts itself, so no job goes on training unwatched.
Another invocation, with other filters, completes the same grid; results of several ``--out`` directories
merge into one report (:mod:`cotrain.grid_report`).

Scoring: a trained run's centre (its final weights, sigma 0, most probable genome) and the ``start`` arm are
scored on the same held-out tasks (``test`` and ``test_unseen`` of the tier, restricted to the site family)
with the same env seed (``eval.env_seed``), per task.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotrain.checkpoint import atomic_write_json, read_json
from cotrain.errors import GridConfigError, GridError
from cotrain.grid_config import (
    HELDOUT_SPLITS,
    START_ARM,
    Budget,
    GridConfig,
    Setting,
    SettingTasks,
    check_budgets,
    planned_budget,
    reflection_generations,
    run_config,
    run_overrides,
    setting_tasks,
)

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.config import TrainConfig

RESULT_FORMAT = "esopt-grid-result/1"
"""Tag of a run's ``result.json``."""
RESULT_FILE = "result.json"
LOCK_FILE = "grid.lock"
_CHILD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
JOB_STOP_GRACE_S = 20.0
"""How long an interrupted job may take to stop (its generation in progress is dropped) before it is
killed; below ``esopt``'s own grace period, so the invocation never exits before its jobs."""
PARENT_POLL_S = 1.0
"""How often a job checks that the invocation that started it is still there."""


@dataclass(frozen=True)
class GridRun:
    """One run of the grid: a setting, an arm and a seed (``None`` for ``start``)."""

    setting: Setting
    """Model x site family x tier."""
    arm: str
    """``start`` or a trained arm."""
    seed: int | None
    """``es.seed`` (``None``: the ``start`` arm, scored once per setting)."""
    overrides: tuple[str, ...]
    """Every ``--set`` override on the base config, in order."""
    tasks: SettingTasks
    """The setting's training and held-out tasks."""
    budget: Budget | None = None
    """Planned training budget (``None`` for ``start``)."""
    config_sha256: str | None = None
    """Digest of the run's resolved TrainConfig (:func:`config_digest`): a result made from another base
    config is not reused."""

    @property
    def key(self) -> str:
        """``<setting>/<arm>/seed<k>`` (``<setting>/start``): the run's folder under ``--out``."""
        tail = "" if self.seed is None else f"/seed{self.seed}"
        return f"{self.setting.name}/{self.arm}{tail}"

    def folder(self, out: Path) -> Path:
        """The run's folder."""
        return out / self.key

    def run_dir(self, out: Path) -> Path:
        """The run directory (trained arms)."""
        return self.folder(out) / "run"

    def result_path(self, out: Path) -> Path:
        """The result file."""
        return self.folder(out) / RESULT_FILE

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the plan and the child processes' queue)."""
        s = self.setting
        return {"model": s.model, "family": s.family, "tier": s.tier, "arm": self.arm, "seed": self.seed,
                "overrides": list(self.overrides), "tasks": self.tasks.to_dict(),
                "budget": self.budget.to_dict() if self.budget else None, "config_sha256": self.config_sha256}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GridRun:
        """Inverse of :meth:`to_dict`."""
        b = data["budget"]
        budget = None if b is None else Budget(b["train_episodes"], b["reflection_episodes"],
                                               b["eval_episodes"], b["max_steps"])
        tasks = SettingTasks(tuple(data["tasks"]["train"]),
                             {k: tuple(v) for k, v in data["tasks"]["heldout"].items()})
        return cls(Setting(data["model"], data["family"], int(data["tier"])), data["arm"], data["seed"],
                   tuple(data["overrides"]), tasks, budget, data.get("config_sha256"))


def config_digest(cfg: Any) -> str:
    """SHA-256 of a TrainConfig's JSON form (keys sorted)."""
    import hashlib

    return hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True).encode()).hexdigest()


def plan_grid(grid: GridConfig, *, settings: Sequence[str] | None = None, arms: Sequence[str] | None = None,
              seeds: Sequence[int] | None = None) -> list[GridRun]:
    """Every run of the grid that passes the filters (setting names, arm names, seeds; ``None``: all), in
    plan order (setting, then ``start``, then seed, then arm). The budgets of every trained arm are checked
    for every planned setting, whatever the arm and seed filters (GridConfigError when they differ); an
    unknown name in a filter is a GridConfigError."""
    names = {s.name: s for s in grid.settings}
    _check_filter("--settings", settings, names)
    _check_filter("--arms", arms, grid.arm_names)
    _check_filter("--seeds", seeds, grid.seeds)
    runs: list[GridRun] = []
    cache: dict[tuple[str, int], Any] = {}
    for setting in grid.settings:
        if settings is not None and setting.name not in settings:
            continue
        tasks = setting_tasks(grid, setting, cache)
        budgets: dict[tuple[str, int], Budget] = {}
        planned: list[GridRun] = []
        start = run_overrides(grid, setting, tasks, START_ARM, None)
        start_cfg = run_config(grid, start, f"setting {setting.name}, arm {START_ARM}")
        env_seed = start_cfg.eval.env_seed
        planned.append(GridRun(setting, START_ARM, None, start, tasks, None, config_digest(start_cfg)))
        for seed in grid.seeds:
            for arm in grid.arms:
                overrides = run_overrides(grid, setting, tasks, arm, seed)
                cfg = run_config(grid, overrides, f"arms.{arm}")
                if cfg.eval.env_seed != env_seed:
                    raise GridConfigError(f"arms.{arm}: eval.env_seed {cfg.eval.env_seed} differs from the "
                                          f"start's {env_seed}: every arm is scored with the same env seed")
                budgets[arm, seed] = planned_budget(cfg, len(tasks.all_heldout))
                planned.append(GridRun(setting, arm, seed, overrides, tasks, budgets[arm, seed],
                                       config_digest(cfg)))
        check_budgets(budgets, setting.name)
        runs += [r for r in planned if (arms is None or r.arm in arms)
                 and (seeds is None or r.seed is None or r.seed in seeds)]
    return runs


def _check_filter(flag: str, chosen: Sequence[Any] | None, known: Sequence[Any] | dict[str, Any]) -> None:
    if chosen is None:
        return
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise GridConfigError(f"{flag}: unknown {unknown} (known: {', '.join(map(str, known))})")


# --------------------------------------------------------------------------------------------- results


def read_result(path: Path) -> dict[str, Any] | None:
    """A run's result (``None`` when absent); a corrupt file is a GridError naming it."""
    if not path.is_file():
        return None
    data = read_json(path, GridError)
    if not isinstance(data, dict) or data.get("format") != RESULT_FORMAT:
        raise GridError(f"{path} is not a grid result (format {RESULT_FORMAT!r})")
    return data


def finished_result(run: GridRun, out: Path) -> dict[str, Any] | None:
    """The run's result when it has one made with the planned overrides; one made with other overrides is a
    GridError (another grid wrote this directory: use another ``--out``)."""
    path = run.result_path(out)
    result = read_result(path)
    if result is not None and result.get("overrides") != list(run.overrides):
        raise GridError(f"{path} was made with other overrides than the grid plans now ({run.key}); the grid "
                        "file changed: use another --out, or remove the result to run it again")
    recorded = None if result is None else result.get("config_sha256")
    if recorded is not None and run.config_sha256 is not None and recorded != run.config_sha256:
        raise GridError(f"{path} was made from another base config than the grid plans now ({run.key}): "
                        f"{recorded[:12]} against {run.config_sha256[:12]}; use another --out, or remove the "
                        "result to run it again")
    return result


@contextlib.contextmanager
def run_lock(folder: Path, owner: str = "") -> Iterator[bool]:
    """Hold ``folder``'s grid lock for the block (non-blocking): yields whether it was taken. The holder's
    ``owner`` (its job queue and pid) is written into the lock file for :func:`lock_owner`."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(owner)
            handle.flush()
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_held(folder: Path) -> bool:
    """Whether a process holds ``folder``'s grid lock now; only looks (takes nothing, writes nothing)."""
    if not (folder / LOCK_FILE).is_file():
        return False
    with open(folder / LOCK_FILE) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def lock_owner(folder: Path) -> str:
    """The ``owner`` its last holder wrote into ``folder``'s grid lock ("" when none is recorded)."""
    try:
        return (folder / LOCK_FILE).read_text().strip()
    except FileNotFoundError:
        return ""


def train_command(base: Path, run: GridRun, out: Path) -> str:
    """The ``esopt train`` command line equivalent to the run."""
    parts = ["esopt", "train", "--config", str(base), "--run-dir", str(run.run_dir(out))]
    for item in run.overrides:
        parts += ["--set", item]
    return shlex.join(parts)


def execute_run(grid_base: Path, run: GridRun, out: Path,
                log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or resume) one run, score it, write its result file; returns the result. The caller holds
    the run's lock."""
    from cotrain.config import load_config

    folder = run.folder(out)
    tasks = run.tasks
    heldout = list(tasks.all_heldout)
    cfg = load_config(grid_base, run.overrides)
    started = time.perf_counter()
    result: dict[str, Any] = {
        "format": RESULT_FORMAT, "key": run.key, "setting": run.setting.name, "model": run.setting.model,
        "family": run.setting.family, "tier": run.setting.tier, "arm": run.arm, "seed": run.seed,
        "overrides": list(run.overrides), "base_config": str(grid_base), "env_seed": cfg.eval.env_seed,
        "config_sha256": config_digest(cfg),
        "tasks": {split: list(tasks.heldout[split]) for split in HELDOUT_SPLITS},
        "train_tasks": list(tasks.train)}
    if run.arm == START_ARM:
        from cotrain.evaluate import evaluate_start

        log(f"{run.key}: scoring the start on {len(heldout)} held-out task(s)")
        scored = evaluate_start(cfg, heldout)
        result.update(genome=scored.get("genome"), generation=0, curve=[], budget_planned=None,
                      budget_actual=None, seconds_train=0.0, dtype=scored["dtype"],
                      dtype_reason=scored["dtype_reason"])
    else:
        from cotrain.evaluate import evaluate_run

        check_start_dtype(run, cfg, out)
        seconds_train = _train_or_resume(cfg, run, out, log)
        log(f"{run.key}: scoring the centre on {len(heldout)} held-out task(s)")
        report = evaluate_run(run.run_dir(out), tasks=heldout, split="heldout", baseline=False, write=False)
        scored = report["centre"]
        result.update(genome=scored.get("genome"), generation=scored.get("generation"),
                      run_dir=str(run.run_dir(out).relative_to(out)),
                      command=train_command(grid_base, run, out),
                      **run_summary(run.run_dir(out)),
                      budget_planned=run.budget.to_dict() if run.budget else None,
                      seconds_train=seconds_train)
    rewards = {str(t): float(v) for t, v in scored["rewards"].items()}
    result["rewards"] = rewards
    result["success"] = {split: _success(rewards, tasks.heldout[split]) for split in HELDOUT_SPLITS}
    result["success"]["heldout"] = _success(rewards, heldout)
    result["seconds"] = time.perf_counter() - started
    result["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    atomic_write_json(folder / RESULT_FILE, result)
    if run.arm != START_ARM:  # the result is safe: earlier snapshots only cost disk (about 0.5 GB each)
        _prune(run.run_dir(out), run.key, log)
    log(f"{run.key}: held-out success {result['success']['heldout']:.3f} "
        f"(test {result['success']['test']:.3f}, test_unseen {result['success']['test_unseen']:.3f})")
    return result


def _prune(run_dir: Path, key: str, log: Callable[[str], None]) -> None:
    from cotrain.checkpoint import prune_run

    pruned, freed = prune_run(run_dir)
    if pruned:
        log(f"{key}: pruned the snapshots of generation(s) {pruned} ({freed / 2**20:.0f} MiB; the centre "
            f"of any generation is still rebuilt from the update log)")


def check_start_dtype(run: GridRun, cfg: TrainConfig, out: Path) -> None:
    """A trained run is paired with its setting's ``start``, so both must run in one weight dtype: when the
    start's result records one and this machine would train ``run`` in another (``agent.dtype = "auto"`` on a
    CPU with and one without native bf16), a GridError says how to continue matched. A run directory that
    already exists keeps the dtype it recorded when it started, and a start without a recorded dtype (results
    written before 2026-12-04) is not checked."""
    from cotrain.checkpoint import RunDir
    from cotrain.config import resolve_settings
    from es_agent.hardware import AUTO_DTYPE_ENV

    start = read_result(replace(run, arm=START_ARM, seed=None).result_path(out))  # the setting's start
    if start is None or "dtype" not in start:
        return
    if (run.run_dir(out) / "run.json").is_file():
        recorded = RunDir.open(run.run_dir(out)).resolved
        here = (recorded.dtype, recorded.dtype_reason) if recorded is not None else None
    else:
        resolved = resolve_settings(cfg)
        here = (resolved.dtype, resolved.dtype_reason)
    if here is not None and here[0] != start["dtype"]:
        raise GridError(f"{run.key} would train in {here[0]} ({here[1]}), but its setting's start was scored "
                        f"in {start['dtype']} ({start.get('dtype_reason', 'no reason recorded')}); a paired "
                        f"comparison needs one dtype: set {AUTO_DTYPE_ENV}={start['dtype']} for this grid, "
                        "or use another --out")


def _success(rewards: dict[str, float], tasks: Sequence[int | str]) -> float:
    values = [rewards[str(t)] >= 1.0 for t in tasks]
    return sum(values) / len(values) if values else 0.0


class _GenerationLines:
    """A run's progress as one line per generation (the grid's jobs show no dashboard)."""

    def __init__(self, key: str, total: int, log: Callable[[str], None]) -> None:
        self.key, self.total, self.log = key, total, log
        self.started = time.perf_counter()

    def start(self) -> None:
        """Nothing to show yet."""

    def on_generation_start(self, generation: int, rollouts_total: int) -> None:
        """One line: the generation, its rollouts and the session's minutes so far."""
        minutes = (time.perf_counter() - self.started) / 60
        self.log(f"{self.key}: generation {generation}/{self.total} ({rollouts_total} rollouts; "
                 f"{minutes:.1f} min in this session)")

    def on_rollout_started(self, worker_id: Any) -> None:
        """Not shown."""

    def on_rollout_done(self, worker_id: Any) -> None:
        """Not shown."""

    def close(self) -> None:
        """Nothing to close."""


def _train_or_resume(cfg: Any, run: GridRun, out: Path, log: Callable[[str], None]) -> float:
    """Train a new run directory, or resume an unfinished one (after checking it holds the planned config);
    seconds spent."""
    from cotrain.trainer import resume, train

    run_dir = run.run_dir(out)
    started = time.perf_counter()

    def progress(c: Any, _: Any) -> _GenerationLines:
        return _GenerationLines(run.key, c.es.generations, log)

    if (run_dir / "run.json").is_file():
        recorded = read_json(run_dir / "config.json", GridError)
        if recorded != json.loads(json.dumps(cfg.to_dict())):
            raise GridError(f"{run_dir}: its config.json is not the config the grid plans for {run.key} "
                            "(the grid file changed); use another --out or remove the run directory")
        log(f"{run.key}: resuming {run_dir}")
        result = resume(run_dir, ui="off", progress=progress)
    else:
        log(f"{run.key}: training {run_dir}")
        result = train(cfg, run_dir, progress=progress)
    if not result.finished:
        raise GridError(f"{run_dir}: the run stopped after {result.generation} generation(s) unfinished")
    return time.perf_counter() - started


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What a finished run's result records from its directory, opened and its metrics read once:
    ``curve`` (:func:`training_curve`), ``updates`` (:func:`update_summary`), ``budget_actual``
    (:func:`actual_budget`) and, where ``run.json`` has them, ``dtype`` and ``dtype_reason``."""
    from cotrain.checkpoint import RunDir

    run = RunDir.open(run_dir)
    metrics = run.metrics()
    summary: dict[str, Any] = {"curve": training_curve(metrics), "updates": update_summary(metrics),
                               "budget_actual": actual_budget(run.config, metrics)}
    resolved = run.resolved
    if resolved is not None:
        summary.update(dtype=resolved.dtype, dtype_reason=resolved.dtype_reason)
    return summary


def training_curve(metrics: Sequence[Mapping[str, Any]]) -> list[float]:
    """Population training success per generation (a run's ``metrics.jsonl``)."""
    return [float(m["success_rate"]) for m in metrics]


def update_summary(metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How many of a finished run's weight updates were empty, and why (``update_empty`` and
    ``update_empty_reason`` of its metrics): all rewards tied, weights not evolved, coefficients cancelled;
    and, where the metrics record ``rewards_tied``, how many non-empty ones came from the confidence tie-break
    alone (``tiebreak_only``: every reward tied; ``None`` for metrics written before the key existed)."""
    reasons: dict[str, int] = {}
    for m in metrics:
        if m.get("update_empty"):
            reason = str(m.get("update_empty_reason", "unknown"))
            reasons[reason] = reasons.get(reason, 0) + 1
    recorded = bool(metrics) and all("rewards_tied" in m for m in metrics)
    tiebreak = sum(1 for m in metrics if m.get("rewards_tied") and not m.get("update_empty"))
    return {"generations": len(metrics), "empty": sum(reasons.values()), "empty_reasons": reasons,
            "tiebreak_only": tiebreak if recorded else None}


def actual_budget(cfg: TrainConfig, metrics: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The episodes a finished run used, read from its metrics: rollouts of every generation, the centre
    episodes of its reflective mutations (one per task the generation's evolver reflected on: the tasks some
    candidate failed, at most ``prompts.reflect_tasks``, in the generations its seeded draw chose) and centre
    evaluations. ``steps`` is the env steps when the metrics count them (``env_steps``), else ``None``;
    ``credit_steps`` the reference steps scored teacher-forced for ``es.shaping.reference_credit`` (0 without
    it, and in metrics from before it)."""
    from cotrain.prompt_evolution import FailureReport

    chosen = set(reflection_generations(cfg))
    train = sum(int(m.get("rollouts_done", 0)) for m in metrics)
    reflect = sum(len(FailureReport(int(m["iter"]), dict(m.get("per_task_success", {})))
                      .hardest(cfg.prompts.reflect_tasks)) for m in metrics if m["iter"] in chosen)
    evals = sum(int(m["centre_eval"].get("n_tasks", 0)) for m in metrics if isinstance(m.get("centre_eval"),
                                                                                          dict))
    steps = [m.get("env_steps") for m in metrics]
    counted = all(isinstance(s, int) for s in steps) and bool(steps)
    return {"episodes": train + reflect + evals, "train_episodes": train, "reflection_episodes": reflect,
            "eval_episodes": evals, "steps": sum(int(s) for s in steps if isinstance(s, int)) if counted
            else None, "credit_steps": sum(int(m.get("credit_steps", 0)) for m in metrics),
            "generations": len(metrics)}


# --------------------------------------------------------------------------------------------- scheduling


@dataclass
class GridOutcome:
    """What an invocation of the runner did."""

    planned: int
    """Runs in the (filtered) plan."""
    already: int
    """Runs that had a result before this invocation."""
    finished: list[str] = field(default_factory=list)
    """Runs that finished in this invocation (keys)."""
    pending: list[str] = field(default_factory=list)
    """Runs still without a result (keys)."""
    failed: dict[str, str] = field(default_factory=dict)
    """Runs whose job failed in this invocation: key -> the error's last line."""
    held_elsewhere: list[str] = field(default_factory=list)
    """Pending runs whose lock another process holds (another ``esopt grid`` on the same directory, or the
    jobs of one that was killed and still run): skipped here, not failed."""


def run_grid(grid: GridConfig, out: str | Path, *, jobs: int = 1, settings: Sequence[str] | None = None,
             arms: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
             max_runs: int | None = None, budget_minutes: float | None = None,
             log: Callable[[str], None] = print) -> GridOutcome:
    """Run the pending runs of the (filtered) grid in ``jobs`` child processes; ``max_runs`` starts at most
    that many, ``budget_minutes`` starts none after that many minutes (runs in progress finish)."""
    if jobs < 1:
        raise GridConfigError(f"--jobs: must be >= 1, got {jobs}")
    out = Path(out)
    plan = plan_grid(grid, settings=settings, arms=arms, seeds=seeds)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "plan.json", {"grid": str(grid.path), "base": str(grid.base),
                                          "runs": [r.to_dict() for r in plan]})
    todo = [r for r in plan if finished_result(r, out) is None]
    already = len(plan) - len(todo)
    if max_runs is not None:
        todo = todo[:max_runs]
    log(f"grid: {len(plan)} run(s) planned, {already} already finished, {len(todo)} to run with "
        f"{jobs} job(s)")
    outcome = GridOutcome(len(plan), already)
    if todo:
        deadline = time.time() + budget_minutes * 60 if budget_minutes is not None else None
        queue = out / ".queues" / f"{os.getpid()}-{time.time_ns()}.json"
        queue.parent.mkdir(exist_ok=True)
        atomic_write_json(queue, {"base": str(grid.base), "out": str(out.resolve()), "deadline": deadline,
                                  "runs": [r.to_dict() for r in todo]})
        children: list[subprocess.Popen[bytes]] = []
        try:
            command = [sys.executable, "-m", "cotrain.grid", str(queue), str(os.getpid())]
            for _ in range(min(jobs, len(todo))):
                children.append(subprocess.Popen(command, env={**os.environ, **_CHILD_ENV}))
            for child in children:
                child.wait()
        except BaseException:  # Ctrl-C (or an error) here: the jobs stop too, never left training unwatched
            stop_jobs(children)
            raise
        finally:
            queue.unlink(missing_ok=True)
        for r in todo:
            failure = r.folder(out) / "error.txt"
            if finished_result(r, out) is not None:
                outcome.finished.append(r.key)
            elif failure.is_file():
                outcome.failed[r.key] = failure.read_text().strip().splitlines()[-1:][0]
    outcome.pending = [r.key for r in plan if finished_result(r, out) is None]
    for r in plan:
        if r.key in outcome.pending and r.key not in outcome.failed and lock_held(r.folder(out)):
            outcome.held_elsewhere.append(r.key)
    return outcome


def stop_jobs(children: Sequence[subprocess.Popen[bytes]], grace: float = JOB_STOP_GRACE_S) -> None:
    """Interrupt the jobs still running (SIGINT: each keeps its run's last completed generation) and wait for
    them; one still running after ``grace`` seconds is killed (a run directory stays resumable)."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace
    for child in children:
        try:
            child.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def watch_parent(parent: int, poll: float = PARENT_POLL_S,
                 grace: float = JOB_STOP_GRACE_S) -> threading.Thread:
    """Start a daemon thread that interrupts this process (SIGINT) once ``parent`` is no longer its parent
    (the invocation died without stopping its jobs: SIGTERM, SIGKILL), and ends it ``grace`` seconds later if
    the interrupt was lost."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        print(f"grid job {os.getpid()}: the grid process {parent} is gone; stopping", flush=True)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(grace)
        os._exit(130)

    thread = threading.Thread(target=watch, name="grid-parent-watch", daemon=True)
    thread.start()
    return thread


def _on_sigint(signum: int, frame: Any) -> None:
    """A job's SIGINT: note the interrupt (a browser killed by the same signal is the interrupt, not a failed
    run) and raise KeyboardInterrupt, once: a terminal's Ctrl-C reaches the job twice (directly and forwarded
    by the invocation), and the second must not break the first one's cleanup."""
    from es_agent import interrupt

    if interrupt.requested():
        return
    interrupt.request()
    signal.default_int_handler(signum, frame)


def work_queue(queue: Path) -> int:
    """A child job: run the queue's runs in order, each one whose lock it takes and that has no result;
    returns 1 when one of its runs failed (its error is in the run's ``error.txt``), else 0."""
    import torch

    from es_agent import interrupt

    torch.set_num_threads(1)
    spec = read_json(queue, GridError)
    out, base, deadline = Path(spec["out"]), Path(spec["base"]), spec["deadline"]
    status = 0
    me = f"{queue.name} pid {os.getpid()}"
    for data in spec["runs"]:
        if deadline is not None and time.time() > deadline:
            print(f"grid job {os.getpid()}: the time budget is spent; stopping", flush=True)
            break
        run = GridRun.from_dict(data)
        with run_lock(run.folder(out), owner=me) as mine:
            if not mine:
                holder = lock_owner(run.folder(out))
                if not holder.startswith(f"{queue.name} "):  # a sibling job of this grid took it: the plan
                    print(f"{run.key}: another process holds its lock ({run.folder(out) / LOCK_FILE}"
                          f"{': ' + holder if holder else ''}): skipped here", flush=True)
                continue
            if finished_result(run, out) is not None:
                continue
            error = run.folder(out) / "error.txt"
            error.unlink(missing_ok=True)
            try:
                execute_run(base, run, out, log=lambda line: print(line, flush=True))
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # recorded for the parent and the next invocation; the job goes on
                import traceback

                interrupt.raise_if_requested(exc)  # a failure caused by the interrupt is the interrupt

                error.write_text(traceback.format_exc() + f"\n{type(exc).__name__}: {exc}\n")
                print(f"{run.key}: FAILED: {type(exc).__name__}: {exc}", flush=True)
                status = 1
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _on_sigint)
    if len(sys.argv) > 2:
        watch_parent(int(sys.argv[2]))
    try:
        raise SystemExit(work_queue(Path(sys.argv[1])))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
