"""The short entry-script logic of a run: wire the problem, the searcher, the prompt evolver, the loggers and
the run directory, then loop over generations.

>>> from cotrain.config import load_config
>>> result = train(load_config("configs/smoke.toml"), "runs/smoke")
>>> result = resume("runs/smoke")          # continues from the last completed generation

Tasks: the training and held-out task ids (explicit ids, WebArena templates, or whole splits) are resolved
once, when a run starts (:func:`resolve_tasks`), and recorded in ``run.json``; a resumed run reads them back
instead of resolving again, so it draws its task batches from exactly the same ids.

Ray: ``workers.num_workers >= 2`` initialises Ray (a local one, or ``workers.address``) and evaluates on that
many actors; 0 or 1 evaluate in this process. With a remote cluster the run directory must be on a filesystem
the first worker shares (it writes the weight snapshots).

``"auto"`` settings (``agent.dtype``, ``workers.num_workers``) are chosen once, when a run starts
(:func:`cotrain.config.resolve_settings`), and recorded in ``run.json`` (``"resolved"``, with the reasons); a
resumed run uses the recorded ones, so its weights (and checksums) stay in the dtype the run started with.
Each generation's metrics carry ``seconds_generation``, the wall time of the searcher's step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cotrain.checkpoint import RunDir, load_pools
from cotrain.config import EnvConfig, EvalConfig, TrainConfig, WorkersConfig, resolve_settings
from cotrain.errors import ConfigError, RunDirError
from cotrain.prompt_evolution import ModelTextWriter, PromptEvolver, ReplicaTrajectories
from cotrain.searcher import CoEvolutionES

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from cotrain.checkpoint import RunState
    from cotrain.ui import RichDashboardLogger
    from es_agent.problem import AgentProblem

TaskId = int | str


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


# ------------------------------------------------------------------------------------------ tasks and Ray


@dataclass(frozen=True)
class RunTasks:
    """The task ids a run trains and evaluates on, resolved once at its start (:func:`resolve_tasks`) and
    recorded in ``run.json`` (``"tasks"``), so that a resumed run uses exactly the same ids."""

    train: tuple[TaskId, ...]
    """Training tasks, in the order task batches are drawn from."""
    eval: tuple[TaskId, ...]
    """Held-out tasks of the centre evaluations during training (empty when ``eval.every`` is 0)."""

    def to_dict(self) -> dict[str, list[TaskId]]:
        """JSON form (``run.json``'s ``"tasks"``)."""
        return {"train": list(self.train), "eval": list(self.eval)}

    @classmethod
    def from_dict(cls, data: Any) -> RunTasks:
        """From :meth:`to_dict`'s form; anything else is a RunDirError."""
        ok = isinstance(data, dict) and all(
            isinstance(data.get(k), list) and all(isinstance(t, int | str) and not isinstance(t, bool)
                                                  for t in data[k]) for k in ("train", "eval"))
        if not ok or not data["train"]:
            raise RunDirError("run.json: 'tasks' must be {'train': [ids...], 'eval': [ids...]}, "
                              f"got {data!r}")
        return cls(tuple(data["train"]), tuple(data["eval"]))


def _env_tasks(env: EnvConfig, split: str | None) -> list[tuple[TaskId, Any]]:
    """``(task id, intent_template_id or None)`` of every task of ``split`` in the env (built once with
    ``split=``, read from its ``tasks[*]`` or ``task_ids``, closed); an env that cannot be built is a
    ConfigError."""
    spec = env.spec(split=split)
    try:
        instance = spec.make()
    except Exception as exc:  # any construction failure is reported as the configuration problem it is
        raise ConfigError(f"env.split / eval.split: cannot build {env.env_id!r} with split={split!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    try:
        inner = instance.unwrapped
        tasks = getattr(inner, "tasks", None)
        if tasks is not None:
            return [(t.task_id, getattr(t, "intent_template_id", None)) for t in tasks]
        ids = getattr(inner, "task_ids", None)
    finally:
        instance.close()
    if ids is None:
        raise ConfigError(f"env: {env.env_id!r} lists no tasks (no `task_ids` or `tasks` attribute); set "
                          "env.train_tasks and eval.tasks explicitly")
    return [(t, None) for t in ids]


def discover_tasks(env: EnvConfig, split: str | None) -> tuple[TaskId, ...]:
    """Task ids of ``split`` in the env (its ``tasks[*].task_id`` or ``task_ids``); an unknown split or an env
    that cannot be built is a ConfigError."""
    ids = tuple(t for t, _ in _env_tasks(env, split))
    if not ids:
        raise ConfigError(f"split {split!r} of {env.env_id!r} has no tasks")
    return ids


def template_task_ids(env: EnvConfig, split: str | None, templates: Sequence[int],
                      key: str) -> tuple[TaskId, ...]:
    """Ids of the tasks of ``split`` made from ``templates`` (WebArena ``intent_template_id``s): templates in
    the order given, ids ascending within one. ``key`` (``env.train_templates``) names the setting in errors:
    an env whose tasks carry no template ids, an unknown template, or one without a task in ``split``."""
    tasks = _env_tasks(env, split)
    if tasks and all(template is None for _, template in tasks):
        raise ConfigError(f"{key}: the tasks of {env.env_id!r} carry no intent_template_id; list task ids "
                          "instead (env.train_tasks / eval.tasks)")
    by_template: dict[Any, list[TaskId]] = {}
    for task_id, template in tasks:
        by_template.setdefault(template, []).append(task_id)
    missing = [t for t in templates if t not in by_template]
    if missing:
        present = sorted(k for k in by_template if k is not None)
        raise ConfigError(f"{key}: {_describe_missing(env, split, missing, present)}")
    return tuple(task for t in templates for task in sorted(by_template[t], key=_id_order))


def _describe_missing(env: EnvConfig, split: str | None, missing: Sequence[int],
                      present: Sequence[int]) -> str:
    """Which missing templates exist in other splits (read from the workers' env, which holds every task)."""
    elsewhere: dict[Any, set[str]] = {}
    if env.worker_split != split:
        try:
            spec = env.spec()
            instance = spec.make()
        except Exception:  # the message below is still right, only less precise
            instance = None
        if instance is not None:
            try:
                for t in getattr(instance.unwrapped, "tasks", None) or ():
                    split_of = getattr(t, "extras", {}).get("split")
                    elsewhere.setdefault(getattr(t, "intent_template_id", None), set()).add(str(split_of))
            finally:
                instance.close()
    parts = []
    for t in missing:
        if t in elsewhere:
            parts.append(f"template {t} has no task in split {split!r} (its tasks are in split(s) "
                         f"{sorted(elsewhere[t])})")
        else:
            parts.append(f"unknown template {t}")
    return "; ".join(parts) + f" (templates of split {split!r}: {', '.join(map(str, present)) or 'none'})"


def _id_order(task: TaskId) -> tuple[bool, Any]:
    return isinstance(task, str), task


def train_task_ids(env: EnvConfig) -> tuple[TaskId, ...]:
    """The training tasks: ``env.train_tasks``, the tasks of ``env.train_templates`` or every task of
    ``env.split``."""
    if env.train_tasks is not None:
        return tuple(env.train_tasks)
    if env.train_templates is not None:
        tasks = template_task_ids(env, env.split, env.train_templates, "env.train_templates")
        if len(tasks) < env.tasks_per_generation:
            raise ConfigError(f"env.train_templates: {len(tasks)} task(s) in split {env.split!r}, fewer than "
                              f"env.tasks_per_generation={env.tasks_per_generation}")
        return tasks
    return discover_tasks(env, env.split)


def eval_task_ids(env: EnvConfig, ev: EvalConfig, split: str | None = None,
                  n_tasks: int | None = None) -> tuple[TaskId, ...]:
    """Held-out tasks: ``eval.tasks`` or the tasks of ``eval.templates`` (when no other split is asked for),
    else every task of the split by id; then the first ``n_tasks`` (0: all)."""
    split = split or ev.split
    if ev.tasks is not None and split == ev.split:
        tasks: Sequence[TaskId] = ev.tasks
    elif ev.templates is not None and split == ev.split:
        tasks = template_task_ids(env, split, ev.templates, "eval.templates")
    else:
        tasks = sorted(discover_tasks(env, split), key=_id_order)
    n = ev.n_tasks if n_tasks is None else n_tasks
    return tuple(tasks[:n] if n else tasks)


def resolve_tasks(cfg: TrainConfig) -> RunTasks:
    """The one place a run's task ids are resolved (explicit ids, templates or whole splits), at its start."""
    return RunTasks(train_task_ids(cfg.env), eval_task_ids(cfg.env, cfg.eval) if cfg.eval.every else ())


def run_tasks(run: RunDir) -> RunTasks:
    """The run's task ids: those recorded in ``run.json`` (by :func:`train`), else (a run directory from
    before the ids were recorded) resolved now and recorded."""
    recorded = run.manifest.get("tasks")
    if recorded is not None:
        return RunTasks.from_dict(recorded)
    tasks = resolve_tasks(run.config)
    run.record_tasks(tasks.to_dict())
    return tasks


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

    agent = cfg.agent.spec(prompt_pools=state.pools.to_dict(),
                           snapshot=str(state.snapshot) if state.snapshot is not None else None)
    problem = AgentProblem(agent, cfg.env.spec(), max_batch_tasks=cfg.env.tasks_per_generation,
                           task_ids=list(dict.fromkeys(task_ids)), num_actors=cfg.workers.num_actors,
                           rows_per_piece=cfg.workers.rows_per_piece, seed=cfg.es.seed)
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


def make_logger(cfg: TrainConfig, searcher: CoEvolutionES | None, console: Console | None = None,
                ) -> RichDashboardLogger:
    """The dashboard (``ui.mode``: auto, on, off) attached to ``searcher``'s ``log_hook``."""
    from cotrain.ui import RichDashboardLogger

    force = {"auto": None, "on": True, "off": False}[cfg.ui.mode]
    return RichDashboardLogger(searcher, run_name=cfg.name, total_generations=cfg.es.generations,
                               console=console, force_terminal=None if console is not None else force)


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


def train(cfg: TrainConfig, run_dir: str | Path, *, console: Console | None = None,
          stop_after: int | None = None) -> TrainResult:
    """Start a new run in ``run_dir`` (absent or empty). ``stop_after`` stops after that many generations
    without the final snapshot, as if the process had been killed (for tests and resume drills).

    The pools, the tasks, the models and the device are checked before the directory is made, and a start
    that fails before its first generation is logged removes what it wrote: a failed ``train`` never leaves a
    directory that ``train`` refuses and ``resume`` cannot use."""
    pools = load_pools(cfg.prompts.pools)
    tasks = resolve_tasks(cfg)  # before the directory exists: a bad template leaves nothing behind
    check_models(cfg)
    settings = resolve_settings(cfg)  # after check_models: the device exists
    run = RunDir.create(run_dir, cfg, pools)
    try:
        run.record_tasks(tasks.to_dict())
        run.record_resolved(settings)
        return run_generations(run, console=console, stop_after=stop_after)
    except Exception:
        if run.generation == 0 and not (run.path / "update_log.jsonl").exists():
            run.discard()  # nothing was logged: a failed start leaves nothing behind (else resume it)
        raise
    finally:
        run.release()


def resume(run_dir: str | Path, *, console: Console | None = None, stop_after: int | None = None,
           ui: str | None = None) -> TrainResult:
    """Continue a run from its last completed generation (last snapshot + replay of the log after it);
    ``ui`` (auto, on, off) overrides the run's ``ui.mode`` for this session."""
    import dataclasses

    run = RunDir.open(run_dir)
    if ui is not None:
        if ui not in ("auto", "on", "off"):
            raise ConfigError(f"ui.mode: expected 'auto', 'on' or 'off', got {ui!r}")
        run.config = dataclasses.replace(run.config, ui=dataclasses.replace(run.config.ui, mode=ui))
    try:
        run.reopen_for_resume()
        if not run.finished:
            check_models(run.config)
        return run_generations(run, console=console, stop_after=stop_after)
    finally:
        run.release()


def run_generations(run: RunDir, *, console: Console | None = None,
                    stop_after: int | None = None) -> TrainResult:
    """Run the remaining generations of ``run``, committing each one to its directory."""
    started = time.perf_counter()
    cfg = run.config
    total = cfg.es.generations
    if run.generation >= total and run.finished:
        return TrainResult(run.path, run.generation, True, _final_checksum(run), None, 0.0)
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
        eval_env_seed=cfg.eval.env_seed, start_generation=state.generation)
    logger = make_logger(cfg, searcher, console)
    rollouts = cfg.es.population * cfg.env.tasks_per_generation
    searcher.before_step_hook.append(lambda: logger.on_generation_start(searcher.step_count + 1, rollouts))
    problem.on_progress = _progress_bridge(logger)
    status: dict[str, Any] | None = None
    ran = 0
    try:
        logger.start()
        while searcher.step_count < total and (stop_after is None or ran < stop_after):
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
        if cfg.ui.plot and run.metrics():
            from cotrain.ui import plot_learning_curve

            plot_learning_curve(run.path / "metrics.jsonl", run.path / "learning_curve.png", title=cfg.name)
    return TrainResult(run.path, run.generation, run.finished, _final_checksum(run), status,
                       time.perf_counter() - started)


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


def _progress_bridge(logger: RichDashboardLogger) -> Callable[[dict[str, Any]], None]:
    """``AgentProblem.on_progress`` -> dashboard rollout events (one rollout = one candidate on one task;
    centre evaluations, which carry no candidate rows, are not counted)."""

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
