"""Success rate of a run's centre (or of an export) on a split, beside a baseline on the same tasks.

The centre is the run's weights after its last completed generation (snapshot + replayed log) with the most
probable prompt genome, at sigma 0. The baseline is the base model (generation 0 weights) with the named
baseline genome of the pools (``eval.baseline``, by default ``no_skill``: the WebArena system prompt, no
skills). Both run every task of the split (or its first ``n_tasks``) with the same env seed, and the report is
written to ``eval_<split>.json`` in the run directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cotrain.checkpoint import (
    RunDir,
    RunState,
    atomic_write_json,
    initial_distribution,
    load_pools,
    read_json,
)
from cotrain.config import TrainConfig, resolve_settings, with_resolved
from cotrain.errors import CheckpointError, ConfigError, RunDirError
from cotrain.export import EXPORT_FORMAT
from cotrain.integrity import check_safetensors, verify_file_digest
from cotrain.tasks import TaskId, eval_task_ids
from cotrain.trainer import build_problem, check_models, ensure_ray
from es_agent.specs import check_task_ids


def evaluate_run(run_dir: str | Path, *, split: str | None = None, n_tasks: int | None = None,
                 export_dir: str | Path | None = None, baseline: bool = True, write: bool = True,
                 tasks: Sequence[TaskId] | None = None, generation: int | None = None) -> dict[str, Any]:
    """Evaluate the run's centre (or ``export_dir``, an ``esopt export`` output) and the baseline on a split
    (default ``eval.split``; ``n_tasks`` default ``eval.n_tasks``, 0 for all), or on explicit ``tasks`` (ids
    the workers' env holds; ``split`` then only labels the report). Unknown split: ConfigError.
    ``generation``: the centre after that completed generation instead of the last one (its weights and its
    most probable genome; written to ``eval_<split>_gen<generation>.json``)."""
    if generation is not None and export_dir is not None:
        raise ConfigError("evaluate either an export directory or a generation of the run, not both")
    run = RunDir.open(run_dir)
    cfg = run.config
    split = split or cfg.eval.split
    if tasks is None:
        tasks = eval_task_ids(cfg.env, cfg.eval, split, n_tasks)
    else:
        tasks = check_task_ids(tasks, what="evaluation tasks")
    state = run.load_state(generation)
    check_models(cfg)
    ensure_ray(cfg.workers)
    if export_dir is not None:
        centre = _evaluate_export(run, state, Path(export_dir), tasks)
    else:
        ids = state.distribution.most_probable_prompt_ids()
        centre = _score(run, state, tasks, ids)
        centre.update(source="centre", generation=state.generation, genome=_genome_ids(state, ids))
    report: dict[str, Any] = {"split": split, "tasks": list(tasks), "env_seed": cfg.eval.env_seed,
                              "centre": centre}
    if baseline:
        from es_agent.errors import PromptPoolError

        try:
            genome = state.pools.baseline(cfg.eval.baseline)
        except PromptPoolError as exc:
            raise ConfigError(f"eval.baseline: {exc}") from None
        base = dataclasses.replace(state, snapshot=None, snapshot_generation=0, pending=[])
        scored = _score(run, base, tasks, genome.indices)
        scored.update(source="base model", name=cfg.eval.baseline, genome=genome.ids)
        report["baseline"] = scored
    if write:
        name = f"eval_{split}.json" if generation is None else f"eval_{split}_gen{generation}.json"
        atomic_write_json(run.path / name, report)
    return report


def evaluate_start(cfg: TrainConfig, tasks: Sequence[TaskId]) -> dict[str, Any]:
    """The starting point of every run of ``cfg`` (the base model with the baseline genome
    ``eval.baseline``, sigma 0) on ``tasks`` with ``eval.env_seed``, without a run directory: what
    :func:`evaluate_run` reports as ``"baseline"``, plus the ``dtype`` it ran in and its ``dtype_reason``.
    ``"auto"`` settings are resolved on this machine."""
    from es_agent.errors import PromptPoolError

    tasks = check_task_ids(tasks, what="evaluation tasks")
    check_models(cfg)
    resolved = resolve_settings(cfg)
    cfg = with_resolved(cfg, resolved)
    pools = load_pools(cfg.prompts.pools)
    try:
        genome = pools.baseline(cfg.eval.baseline)
    except PromptPoolError as exc:
        raise ConfigError(f"eval.baseline: {exc}") from None
    ensure_ray(cfg.workers)
    state = RunState(0, initial_distribution(cfg, pools), pools, None, 0, [], None)
    scored = _score(cfg, state, tasks, genome.indices)
    scored.update(source="base model", name=cfg.eval.baseline, genome=genome.ids, dtype=resolved.dtype,
                  dtype_reason=resolved.dtype_reason)
    return scored


def format_report(report: Mapping[str, Any]) -> str:
    """A few plain lines for the terminal."""
    lines = [f"split {report['split']}: {len(report['tasks'])} task(s), env seed {report['env_seed']}"]
    for key in ("centre", "baseline"):
        if key in report:
            r = report[key]
            label = r.get("name", r.get("source", key))
            lines.append(f"  {key:<8} ({label}): success {r['success_rate']:.3f}  "
                         f"reward {r['reward_mean']:.3f}  genome {r.get('genome')}")
    return "\n".join(lines)


def _score(run: RunDir | TrainConfig, state: RunState, tasks: Sequence[TaskId],
           prompt_ids: Sequence[int]) -> dict[str, Any]:
    cfg = run.config if isinstance(run, RunDir) else run
    problem = build_problem(cfg, state, tasks)
    try:
        rewards = problem.evaluate_centre(tasks, prompt_ids, env_seed=cfg.eval.env_seed)
    finally:
        problem.close()
    return summarise_rewards(tasks, rewards)


def summarise_rewards(tasks: Sequence[TaskId], rewards: Mapping[TaskId, float]) -> dict[str, Any]:
    """Success rate (reward 1), mean reward and per-task rewards of ``tasks`` (keys may be ids or strings)."""
    rewards = {str(t): v for t, v in rewards.items()}
    values = [float(rewards[str(t)]) for t in tasks]
    return {"success_rate": sum(v >= 1.0 for v in values) / len(values),
            "reward_mean": sum(values) / len(values),
            "rewards": {str(t): v for t, v in zip(tasks, values, strict=True)}}


def _genome_ids(state: RunState, ids: Sequence[int]) -> dict[str, str]:
    return {slot: state.pools.slots[slot][i].id for slot, i in zip(state.pools.slot_names, ids, strict=True)}


def _evaluate_export(run: RunDir, state: RunState, export_dir: Path,
                     tasks: Sequence[TaskId]) -> dict[str, Any]:
    from es_agent.problem import AgentProblem

    best = _check_export(export_dir)
    pools = read_json(export_dir / "prompt_pools.json", RunDirError)
    cfg = run.config
    agent = dataclasses.replace(cfg.agent, model=str(export_dir), prompt_pools=pools)
    problem = AgentProblem(agent, cfg.env.spec_for(), max_batch_tasks=len(tasks), task_ids=list(tasks),
                           num_actors=cfg.workers.num_actors, seed=cfg.es.seed)
    try:
        rewards = problem.evaluate_centre(tasks, best["prompt_ids"], env_seed=cfg.eval.env_seed)
    finally:
        problem.close()
    out = summarise_rewards(tasks, rewards)
    out.update(source=f"export {export_dir}", generation=best.get("generation"), genome=best.get("genome"))
    return out


def _check_export(export_dir: Path) -> dict[str, Any]:
    """The ``best_prompt.json`` of an ``esopt export`` directory, after checking its provenance file and its
    weights (against the recorded SHA-256, or at least as a readable safetensors file)."""
    manifest_path = export_dir / "esopt_export.json"
    manifest = read_json(manifest_path, RunDirError)
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        raise RunDirError(f"{manifest_path} is not an esopt export manifest (expected format "
                          f"{EXPORT_FORMAT!r})")
    weights = export_dir / "model.safetensors"
    shards = sorted(export_dir.glob("model-*-of-*.safetensors"))
    if not weights.exists() and shards:  # a large model saved in shards: each must be readable
        for shard in shards:
            check_safetensors(shard, "exported weights")
    elif weights.is_symlink() or not weights.is_file():
        raise CheckpointError(f"missing exported weights {weights} (a plain file)")
    elif isinstance(manifest.get("sha256"), str):
        verify_file_digest(weights, manifest["sha256"], manifest_path, "exported weights")
    else:
        check_safetensors(weights, "exported weights")
    best_path = export_dir / "best_prompt.json"
    best = read_json(best_path, RunDirError)
    ids = best.get("prompt_ids") if isinstance(best, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise RunDirError(f"corrupt file {best_path}: 'prompt_ids' must be a list of integers, got {ids!r}")
    return best
