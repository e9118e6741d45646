"""The task ids a run trains and evaluates on: explicit ids, WebArena templates (``intent_template_id``) or
whole splits of the env, resolved once when a run starts (:func:`resolve_tasks`) and recorded in ``run.json``;
a resumed run reads them back (:func:`run_tasks`) instead of resolving again, so it draws its task batches
from exactly the same ids.

>>> from cotrain.config import load_config
>>> resolve_tasks(load_config("configs/smoke.toml")).train   # the train tasks of templates 501 and 503
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cotrain.checkpoint import RunDir
from cotrain.config import EnvConfig, EvalConfig, TrainConfig
from cotrain.errors import ConfigError, RunDirError

TaskId = int | str
"""A task id of the env's task set (WebArena: integers)."""


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


def _listed_tasks(env: EnvConfig, split: str | None, context: str) -> tuple[Any, Any]:
    """The env's ``tasks`` and ``task_ids`` attributes (each ``None`` when absent), built once with
    ``split=`` and closed; an env that cannot be built is a ConfigError starting with ``context``."""
    spec = env.spec_for(split)
    try:
        instance = spec.make()
    except Exception as exc:  # any construction failure is reported as the configuration problem it is
        raise ConfigError(f"{context}cannot build {spec.env_id!r} with split={split!r}: "
                          f"{type(exc).__name__}: {exc}") from exc
    try:
        inner = instance.unwrapped
        return getattr(inner, "tasks", None), getattr(inner, "task_ids", None)
    finally:
        instance.close()


def _env_tasks(env: EnvConfig, split: str | None) -> list[tuple[TaskId, Any]]:
    """``(task id, intent_template_id or None)`` of every task of ``split`` in the env (built once with
    ``split=``, read from its ``tasks[*]`` or ``task_ids``, closed); an env that cannot be built is a
    ConfigError."""
    tasks, ids = _listed_tasks(env, split, "env.split / eval.split: ")
    if tasks is not None:
        return [(t.task_id, getattr(t, "intent_template_id", None)) for t in tasks]
    if ids is None:
        raise ConfigError(f"env: {env.spec.env_id!r} lists no tasks (no `task_ids` or `tasks` attribute); "
                          "set env.train_tasks and eval.tasks explicitly")
    return [(t, None) for t in ids]


def discover_tasks(env: EnvConfig, split: str | None) -> tuple[TaskId, ...]:
    """Task ids of ``split`` in the env (its ``tasks[*].task_id`` or ``task_ids``); an unknown split or an env
    that cannot be built is a ConfigError."""
    ids = tuple(t for t, _ in _env_tasks(env, split))
    if not ids:
        raise ConfigError(f"split {split!r} of {env.spec.env_id!r} has no tasks")
    return ids


def template_task_ids(env: EnvConfig, split: str | None, templates: Sequence[int],
                      key: str) -> tuple[TaskId, ...]:
    """Ids of the tasks of ``split`` made from ``templates`` (WebArena ``intent_template_id``s): templates in
    the order given, ids ascending within one. ``key`` (``env.train_templates``) names the setting in errors:
    an env whose tasks carry no template ids, an unknown template, or one without a task in ``split``."""
    tasks = _env_tasks(env, split)
    if tasks and all(template is None for _, template in tasks):
        raise ConfigError(f"{key}: the tasks of {env.spec.env_id!r} carry no intent_template_id; list task "
                          "ids instead (env.train_tasks / eval.tasks)")
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
            instance = env.spec_for().make()
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


def split_site_tasks(env: EnvConfig, split: str) -> dict[tuple[str, str], tuple[TaskId, ...]]:
    """The tasks of ``split`` (a split or a group of splits, e.g. ``tier1``: its train, test and test_unseen
    splits), by ``(split of the task, site family)``: ids ascending, for the tasks on exactly one site
    (``sites == (family,)``; the site families of the learning grid: ``shopping``, ``shopping_admin``,
    ``reddit``). The env is built once. An env whose tasks carry no ``sites`` and ``extras["split"]`` is a
    ConfigError."""
    spec = env.spec_for(split)
    tasks, _ = _listed_tasks(env, split, "")
    if tasks is None:
        raise ConfigError(f"{spec.env_id!r} lists no tasks with sites (no `tasks` attribute)")
    table: dict[tuple[str, str], list[TaskId]] = {}
    for task in tasks:
        sites = tuple(getattr(task, "sites", ()))
        split_of = getattr(task, "extras", {}).get("split")
        if split_of is None:
            raise ConfigError(f"task {task.task_id!r} of {spec.env_id!r} names no split (extras['split'])")
        if len(sites) == 1:
            table.setdefault((str(split_of), sites[0]), []).append(task.task_id)
    return {key: tuple(sorted(ids, key=_id_order)) for key, ids in table.items()}
