"""Prompt-parameter co-evolution for LLM web agents: the search distribution, fitness shaping, the sigma
schedule, the EvoTorch searcher, prompt-pool evolution, run directories, evaluation, export and the ``esopt``
CLI.

``import cotrain`` is light: names resolve lazily on first use (no torch, no evotorch, no model), with
:func:`es_agent.lazy.lazy_exports`; the errors (:mod:`cotrain.errors`) are imported at once. Helpers of the
modules (fitness shaping's ``centered_ranks``, prompt evolution's ``recombine_lines``, ...) are imported from
their modules.

>>> from cotrain import load_config, train
>>> result = train(load_config("configs/smoke.toml"), "runs/smoke")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cotrain.errors import (
    CheckpointError,
    ConfigError,
    CotrainError,
    DistributionError,
    GridConfigError,
    GridError,
    GridStatsError,
    MetricsError,
    RunDirError,
    RunIntegrityError,
)
from es_agent.lazy import lazy_exports

_LAZY = {
    # distribution, shaping, schedule
    "CoEvolutionDistribution": "cotrain.distribution",
    "CoEvolutionConfig": "cotrain.distribution_config",
    "WeightUpdate": "es_agent.updates",
    "ShapingConfig": "cotrain.shaping",
    "shape_fitness": "cotrain.shaping",
    "cosine_sigma": "cotrain.schedule",
    # config
    "TrainConfig": "cotrain.config",
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
    "SearchProblem": "cotrain.protocols",
    "PromptEvolver": "cotrain.prompt_evolution",
    "PoolChange": "cotrain.prompt_evolution",
    "FailureReport": "cotrain.prompt_evolution",
    "ModelTextWriter": "cotrain.prompt_evolution",
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
    from cotrain.distribution import CoEvolutionDistribution
    from cotrain.distribution_config import CoEvolutionConfig
    from cotrain.evaluate import evaluate_run
    from cotrain.export import export_run
    from cotrain.prompt_evolution import FailureReport, ModelTextWriter, PoolChange, PromptEvolver
    from cotrain.protocols import SearchProblem
    from cotrain.schedule import cosine_sigma
    from cotrain.searcher import CoEvolutionES
    from cotrain.shaping import ShapingConfig, shape_fitness
    from cotrain.trainer import TrainResult, resume, train
    from es_agent.updates import WeightUpdate

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "CheckpointConfig",
    "CheckpointError",
    "CoEvolutionConfig",
    "CoEvolutionDistribution",
    "CoEvolutionES",
    "ConfigError",
    "CotrainError",
    "DistributionError",
    "ESConfig",
    "EnvConfig",
    "EvalConfig",
    "FailureReport",
    "GridConfigError",
    "GridError",
    "GridStatsError",
    "MetricsError",
    "ModelTextWriter",
    "PoolChange",
    "PromptEvolver",
    "PromptsConfig",
    "RunDir",
    "RunDirError",
    "RunIntegrityError",
    "RunState",
    "SearchProblem",
    "ShapingConfig",
    "TrainConfig",
    "TrainResult",
    "UIConfig",
    "WeightUpdate",
    "WorkersConfig",
    "config_from_dict",
    "cosine_sigma",
    "evaluate_run",
    "export_run",
    "load_config",
    "resume",
    "shape_fitness",
    "train",
]
