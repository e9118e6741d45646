"""Prompt-parameter co-evolution for LLM web agents: the search distribution, fitness shaping, the sigma
schedule, the EvoTorch searcher, prompt-pool evolution, run directories, evaluation, export and the ``esopt``
CLI.

``import cotrain`` is light: names resolve lazily on first use (no torch, no evotorch, no model).

>>> from cotrain import load_config, train
>>> result = train(load_config("configs/smoke.toml"), "runs/smoke")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from cotrain.errors import CheckpointError, ConfigError, CotrainError, RunDirError

_LAZY = {
    # distribution, shaping, schedule
    "CoEvolutionDistribution": "cotrain.distribution",
    "CoEvolutionConfig": "cotrain.distribution",
    "WeightUpdate": "es_agent.updates",
    "ShapingConfig": "cotrain.shaping",
    "shape_fitness": "cotrain.shaping",
    "candidate_fitness": "cotrain.shaping",
    "centered_ranks": "cotrain.shaping",
    "cosine_sigma": "cotrain.schedule",
    # config
    "TrainConfig": "cotrain.config",
    "AgentConfig": "cotrain.config",
    "EnvConfig": "cotrain.config",
    "ESConfig": "cotrain.config",
    "PromptsConfig": "cotrain.config",
    "WorkersConfig": "cotrain.config",
    "CheckpointConfig": "cotrain.config",
    "EvalConfig": "cotrain.config",
    "UIConfig": "cotrain.config",
    "load_config": "cotrain.config",
    "config_from_dict": "cotrain.config",
    # searcher and prompt evolution
    "CoEvolutionES": "cotrain.searcher",
    "draw_task_batch": "cotrain.searcher",
    "PromptEvolver": "cotrain.prompt_evolution",
    "PoolChange": "cotrain.prompt_evolution",
    "FailureReport": "cotrain.prompt_evolution",
    "ModelTextWriter": "cotrain.prompt_evolution",
    "recombine_lines": "cotrain.prompt_evolution",
    "check_variant_text": "cotrain.prompt_evolution",
    # run directories, training, evaluation, export
    "RunDir": "cotrain.checkpoint",
    "RunState": "cotrain.checkpoint",
    "train": "cotrain.trainer",
    "resume": "cotrain.trainer",
    "TrainResult": "cotrain.trainer",
    "evaluate_run": "cotrain.evaluate",
    "export_run": "cotrain.export",
}

if TYPE_CHECKING:  # pragma: no cover
    from cotrain.checkpoint import RunDir, RunState
    from cotrain.config import (
        AgentConfig,
        CheckpointConfig,
        EnvConfig,
        ESConfig,
        EvalConfig,
        PromptsConfig,
        TrainConfig,
        UIConfig,
        WorkersConfig,
        config_from_dict,
        load_config,
    )
    from cotrain.distribution import CoEvolutionConfig, CoEvolutionDistribution
    from cotrain.evaluate import evaluate_run
    from cotrain.export import export_run
    from cotrain.prompt_evolution import (
        FailureReport,
        ModelTextWriter,
        PoolChange,
        PromptEvolver,
        check_variant_text,
        recombine_lines,
    )
    from cotrain.schedule import cosine_sigma
    from cotrain.searcher import CoEvolutionES, draw_task_batch
    from cotrain.shaping import ShapingConfig, candidate_fitness, centered_ranks, shape_fitness
    from cotrain.trainer import TrainResult, resume, train
    from es_agent.updates import WeightUpdate


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cotrain' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AgentConfig",
    "CheckpointConfig",
    "CheckpointError",
    "CoEvolutionConfig",
    "CoEvolutionDistribution",
    "CoEvolutionES",
    "ConfigError",
    "CotrainError",
    "ESConfig",
    "EnvConfig",
    "EvalConfig",
    "FailureReport",
    "ModelTextWriter",
    "PoolChange",
    "PromptEvolver",
    "PromptsConfig",
    "RunDir",
    "RunDirError",
    "RunState",
    "ShapingConfig",
    "TrainConfig",
    "TrainResult",
    "UIConfig",
    "WeightUpdate",
    "WorkersConfig",
    "candidate_fitness",
    "centered_ranks",
    "check_variant_text",
    "config_from_dict",
    "cosine_sigma",
    "draw_task_batch",
    "evaluate_run",
    "export_run",
    "load_config",
    "recombine_lines",
    "resume",
    "shape_fitness",
    "train",
]
