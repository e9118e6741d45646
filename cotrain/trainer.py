"""The short entry-script logic of a run: wire the problem, the searcher, the prompt evolver, the progress
display and the run directory, then loop over generations.

>>> from cotrain.config import load_config
>>> result = train(load_config("configs/smoke.toml"), "runs/smoke")
>>> result = resume("runs/smoke")          # continues from the last completed generation

Tasks: the training and held-out task ids are resolved once, when a run starts
(:func:`cotrain.tasks.resolve_tasks`), and recorded in ``run.json``; a resumed run reads them back.

Progress: the library prints nothing. ``progress`` (a :data:`ProgressFactory`, e.g. the ``esopt`` CLI's live
dashboard, :func:`cotrain.cli.make_logger`) is called once per session with the run's config and searcher and
returns the :class:`RunProgress` that hears about generations and rollouts.

Ray: ``workers.num_workers >= 2`` initialises Ray (a local one, or ``workers.address``) and evaluates on that
many actors; 0 or 1 evaluate in this process. With a remote cluster the run directory must be on a filesystem
the first worker shares (it writes the weight snapshots).

``"auto"`` settings (``agent.dtype``, ``workers.num_workers``) are chosen once, when a run starts
(:func:`cotrain.config.resolve_settings`), and recorded in ``run.json`` (``"resolved"``, with the reasons); a
resumed run uses the recorded ones, so its weights (and checksums) stay in the dtype the run started with.
Each generation's metrics carry ``seconds_generation``, the wall time of the searcher's step.

Start vs centre: a run that evaluates its centre (``eval.every > 0``) with ``eval.at_start`` (default) also
scores the start, before generation 1, on the same held-out tasks with the same env seed; it is generation 1's
``start_eval`` in ``metrics.jsonl``, so a resumed run never redoes it. :class:`TrainResult` carries it beside
the latest ``centre_eval`` (:func:`held_out_evals`), for the CLI's last line.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from cotrain.checkpoint import RunDir, initial_distribution, load_pools
from cotrain.config import TrainConfig, WorkersConfig, resolve_settings
from cotrain.errors import ConfigError
from cotrain.prompt_evolution import ModelTextWriter, PromptEvolver, ReplicaTrajectories
from cotrain.searcher import CoEvolutionES
from cotrain.tasks import TaskId, resolve_tasks, run_tasks
from es_agent import interrupt

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.checkpoint import RunState
    from es_agent.problem import AgentProblem


class RunProgress(Protocol):
    """What a training session tells its progress display (the CLI's dashboard,
    :class:`cotrain.ui.RichDashboardLogger`, has these methods)."""

    def start(self) -> None:
        """The session's first generation is about to start."""

    def on_generation_start(self, generation: int, rollouts_total: int) -> None:
        """Generation ``generation`` (1-based) starts, with ``rollouts_total`` rollouts to run."""

    def on_rollout_started(self, worker_id: Any) -> None:
        """A worker started a rollout (one candidate on one task)."""

    def on_rollout_done(self, worker_id: Any) -> None:
        """A worker finished a rollout."""

    def close(self) -> None:
        """The session ends (also after an error or an interrupt)."""


ProgressFactory = Callable[[TrainConfig, CoEvolutionES], RunProgress]
"""Builds a session's :class:`RunProgress` from the run's config and searcher (the searcher's ``log_hook``
carries every generation's status)."""


class _NoProgress:
    """The :class:`RunProgress` of a session without a display."""

    def start(self) -> None:
        """Nothing to show."""

    def on_generation_start(self, generation: int, rollouts_total: int) -> None:
        """Nothing to show."""

    def on_rollout_started(self, worker_id: Any) -> None:
        """Nothing to show."""

    def on_rollout_done(self, worker_id: Any) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""


@dataclass
class TrainResult:
    """What a training session left behind."""

    run_dir: Path
    """The run directory."""
    generation: int
    """Completed generations."""
    finished: bool
    """Whether the run reached its last generation."""
    checksum: str | None
    """Weight checksum of the centre when a snapshot of the last generation was written."""
    status: dict[str, Any] | None
    """The last generation's status (``None`` if no generation ran in this session)."""
    seconds: float
    """Wall time of the session."""
    start_eval: dict[str, Any] | None = None
    """The start's held-out evaluation (generation 1's ``start_eval``), when the run made one."""
    centre_eval: dict[str, Any] | None = None
    """The latest held-out evaluation of the centre (``centre_eval`` with its ``generation``), if any."""


# ------------------------------------------------------------------------------------------ building a run


def ensure_ray(workers: WorkersConfig) -> None:
    """Start (or connect to) Ray when the run uses actors; a no-op in process or when Ray is up."""
    if workers.num_actors is None:
        return
    import ray

    if ray.is_initialized():
        return
    if workers.address:
        ray.init(address=workers.address, include_dashboard=False)
    else:
        ray.init(num_cpus=workers.num_cpus or workers.worker_count, include_dashboard=False)


def build_problem(cfg: TrainConfig, state: RunState, task_ids: Sequence[TaskId]) -> AgentProblem:
    """The ``AgentProblem`` of a run at ``state`` (snapshot as base, pending updates pushed)."""
    from es_agent.problem import AgentProblem

    agent = dataclasses.replace(cfg.agent, prompt_pools=state.pools.to_dict(),
                                snapshot=str(state.snapshot) if state.snapshot is not None else None)
    shaping = cfg.es.shaping
    problem = AgentProblem(agent, cfg.env.spec_for(), max_batch_tasks=cfg.env.tasks_per_generation,
                           task_ids=list(dict.fromkeys(task_ids)), num_actors=cfg.workers.num_actors,
                           rows_per_piece=cfg.workers.rows_per_piece, seed=cfg.es.seed,
                           credit_scale=shaping.confidence_scale if shaping.reference_credit else None)
    for generation, update in state.pending:
        problem.push_update(generation, update)
    return problem


def build_evolver(cfg: TrainConfig, problem: AgentProblem) -> tuple[PromptEvolver, ReplicaTrajectories]:
    """The prompt evolver: reflection by ``prompts.mutation_model`` or the policy model at the centre."""
    unknown = sorted(set(cfg.prompts.mutable_slots) - set(problem.pools.slot_names))
    if unknown:
        raise ConfigError(f"prompts.mutable_slots: no slot(s) {unknown} in the pools "
                          f"(slots: {list(problem.pools.slot_names)})")
    trajectories = ReplicaTrajectories(problem)
    load: Callable[[], tuple[Any, Any]] = trajectories.model_and_tokenizer
    if cfg.prompts.mutation_model:
        load = _cached_model(cfg.prompts.mutation_model, cfg.agent.dtype)
    writer = ModelTextWriter(load, cfg.prompts.max_new_tokens)
    evolver = PromptEvolver(cfg.prompts, seed=cfg.es.seed, writer=writer, trajectories=trajectories)
    return evolver, trajectories


def _cached_model(spec: str, dtype: str) -> Callable[[], tuple[Any, Any]]:
    cache: list[tuple[Any, Any]] = []

    def load() -> tuple[Any, Any]:
        if not cache:
            from es_agent.specs import AgentSpec
            from es_agent.worker import load_agent_model

            cache.append(load_agent_model(AgentSpec(model=spec, dtype=dtype, torch_threads=None)))
        return cache[0]

    return load


# ------------------------------------------------------------------------------------------ runs


def check_models(cfg: TrainConfig) -> None:
    """Cheap checks, before anything is built or written, that the run's models exist locally and its device
    is usable here (ConfigError naming ``agent.model``, ``prompts.mutation_model`` or ``agent.device``): no
    weight is read. With a remote Ray cluster (``workers.address``) the device is the workers' business."""
    from es_agent.errors import EsAgentError
    from es_agent.models import check_device, check_model_spec

    models = (("agent.model", cfg.agent.model), ("prompts.mutation_model", cfg.prompts.mutation_model))
    for key, spec in models:
        if spec:
            try:
                check_model_spec(spec)
            except EsAgentError as exc:
                raise ConfigError(f"{key}: {exc}") from None
    if not cfg.workers.address:
        try:
            check_device(cfg.agent.device)
        except EsAgentError as exc:
            raise ConfigError(f"agent.device: {exc}") from None


def train(cfg: TrainConfig, run_dir: str | Path, *, progress: ProgressFactory | None = None,
          stop_after: int | None = None) -> TrainResult:
    """Start a new run in ``run_dir`` (absent or empty), its progress shown by ``progress`` (default:
    nothing). ``stop_after`` stops after that many generations without the final snapshot, as if the process
    had been killed (for tests and resume drills).

    The pools, the tasks, the models and the device are checked before the directory is made, and a start
    that fails before its first generation is logged removes what it wrote: a failed ``train`` never leaves a
    directory that ``train`` refuses and ``resume`` cannot use."""
    pools = load_pools(cfg.prompts.pools)
    initial_distribution(cfg, pools)  # the prompt prior's baseline genome exists in the pools
    tasks = resolve_tasks(cfg)  # before the directory exists: a bad template leaves nothing behind
    check_models(cfg)
    settings = resolve_settings(cfg)  # after check_models: the device exists
    run = RunDir.create(run_dir, cfg, pools)
    try:
        run.record_tasks(tasks.to_dict())
        run.record_resolved(settings)
        return run_generations(run, progress=progress, stop_after=stop_after)
    except Exception:
        if run.generation == 0 and not (run.path / "update_log.jsonl").exists():
            run.discard()  # nothing was logged: a failed start leaves nothing behind (else resume it)
        raise
    finally:
        run.release()


def resume(run_dir: str | Path, *, progress: ProgressFactory | None = None, stop_after: int | None = None,
           ui: str | None = None) -> TrainResult:
    """Continue a run from its last completed generation (last snapshot + replay of the log after it);
    ``ui`` (auto, on, off) overrides the run's ``ui.mode`` for this session (what ``progress`` reads)."""
    run = RunDir.open(run_dir)
    if ui is not None:
        if ui not in ("auto", "on", "off"):
            raise ConfigError(f"ui.mode: expected 'auto', 'on' or 'off', got {ui!r}")
        mode = cast(Literal["auto", "on", "off"], ui)
        run.config = dataclasses.replace(run.config, ui=dataclasses.replace(run.config.ui, mode=mode))
    try:
        run.reopen_for_resume()
        if not run.finished:
            check_models(run.config)
        return run_generations(run, progress=progress, stop_after=stop_after)
    finally:
        run.release()


def run_generations(run: RunDir, *, progress: ProgressFactory | None = None,
                    stop_after: int | None = None) -> TrainResult:
    """Run the remaining generations of ``run``, committing each one to its directory; ``progress`` builds
    the session's display once the searcher exists."""
    started = time.perf_counter()
    cfg = run.config
    total = cfg.es.generations
    if run.generation >= total and run.finished:
        return TrainResult(run.path, run.generation, True, _final_checksum(run), None, 0.0,
                           *held_out_evals(run.metrics()))
    if run.resolved is None:  # a run from before the settings were recorded: their values are concrete
        run.record_resolved(resolve_settings(cfg))
        cfg = run.config
    state = run.load_state()
    tasks = run_tasks(run)
    train_tasks, eval_tasks = tasks.train, tasks.eval
    ensure_ray(cfg.workers)
    problem = build_problem(cfg, state, [*train_tasks, *eval_tasks])
    evolver, trajectories = build_evolver(cfg, problem) if cfg.prompts.mutation else (None, None)
    searcher = CoEvolutionES(
        problem, state.distribution, popsize=cfg.es.population, train_tasks=train_tasks,
        tasks_per_generation=cfg.env.tasks_per_generation, seed=cfg.es.seed, shaping=cfg.es.shaping,
        prompt_evolver=evolver, eval_tasks=eval_tasks, eval_split=cfg.eval.split, eval_every=cfg.eval.every,
        eval_env_seed=cfg.eval.env_seed, eval_at_start=cfg.eval.at_start and cfg.eval.every > 0,
        start_generation=state.generation)
    logger: RunProgress = progress(cfg, searcher) if progress is not None else _NoProgress()
    rollouts = cfg.es.population * cfg.env.tasks_per_generation
    searcher.before_step_hook.append(lambda: logger.on_generation_start(searcher.step_count + 1, rollouts))
    problem.on_progress = _progress_bridge(logger)
    status: dict[str, Any] | None = None
    ran = 0
    try:
        logger.start()
        while searcher.step_count < total and (stop_after is None or ran < stop_after):
            interrupt.check()  # a Ctrl-C whose KeyboardInterrupt was lost inside the browser's event loop
            step_started = time.perf_counter()
            searcher.step()
            ran += 1
            gen = searcher.step_count
            status = {**dict(searcher.status), "seconds_generation": time.perf_counter() - step_started}
            assert searcher.last_record is not None
            run.commit(searcher.last_record, status, searcher.distribution, problem.pools,
                       log_end=problem.log_end)
            every = cfg.checkpoint.snapshot_every
            if gen == total or (every and gen % every == 0):
                snapshot(run, problem, gen)
        if searcher.step_count >= total:
            if not run.has_snapshot(total):  # a session killed between its last commit and snapshot
                snapshot(run, problem, total)
            run.mark_finished()
    finally:
        logger.close()
        if trajectories is not None:
            trajectories.close()
        problem.close()
    return TrainResult(run.path, run.generation, run.finished, _final_checksum(run), status,
                       time.perf_counter() - started, *held_out_evals(run.metrics()))


def held_out_evals(metrics: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(start, centre)`` from a run's metrics rows: the ``start_eval`` (generation 1's) and the latest
    ``centre_eval``, each with its ``generation`` (a centre evaluation logged before evaluations carried one
    gets its row's ``iter``); ``None`` for what the run did not evaluate."""
    start: dict[str, Any] | None = None
    centre: dict[str, Any] | None = None
    for row in metrics:
        if isinstance(row.get("start_eval"), dict):
            start = {"generation": 0, **row["start_eval"]}
        if isinstance(row.get("centre_eval"), dict):
            centre = {"generation": row.get("iter"), **row["centre_eval"]}
    return start, centre


def snapshot(run: RunDir, problem: AgentProblem, generation: int) -> Path:
    """Save the centre after ``generation`` into the run directory; with a local Ray or in process, rebase the
    problem on it, so workers built later load it instead of replaying the whole log."""
    def save(file: Path) -> str:
        return problem.save_centre(str(file))

    folder = run.write_snapshot(generation, save, run.config.agent.model)
    if not run.config.workers.address:
        problem.rebase(str(folder / "model.safetensors"))
    return folder


def _final_checksum(run: RunDir) -> str | None:
    final = run.manifest.get("checksum")
    if isinstance(final, dict) and final.get("generation") == run.generation:
        return final.get("value")
    return None


def _progress_bridge(logger: RunProgress) -> Callable[[dict[str, Any]], None]:
    """``AgentProblem.on_progress`` -> :class:`RunProgress` rollout events (one rollout = one candidate on one
    task; centre evaluations, which carry no candidate rows, are not counted)."""

    def on_progress(event: dict[str, Any]) -> None:
        rows = event.get("rows") or []
        if not rows:
            return
        worker = event.get("worker", 0)
        if event.get("event") == "started":
            logger.on_rollout_started(worker)
        elif event.get("event") == "done":
            for _ in range(len(rows) * max(1, len(event.get("tasks") or []))):
                logger.on_rollout_done(worker)

    return on_progress
