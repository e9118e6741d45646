"""LLM web agents for evolution strategies: model loading, the prompt genome, the policy, the rollout loop,
the weight-perturbation engine and the EvoTorch problems.

``import es_agent`` is light: it imports no torch, no transformers, loads no model. Public names resolve
lazily on first use (:mod:`es_agent.lazy`); the errors (:mod:`es_agent.errors`) are imported at once. The
package sees environments only through the Gymnasium API (never ``webarena_gym``).

>>> from es_agent import load_model, PromptPools, LLMPolicy, run_episode
>>> model, tokenizer = load_model("embedded")
>>> policy = LLMPolicy(model, tokenizer, PromptPools.load().baseline("no_skill"))
>>> result = run_episode(env, policy, options={"task_id": 0})
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from es_agent.errors import (
    AgreementError,
    AxTreeError,
    CandidateRowError,
    CheckpointMismatchError,
    CorruptWeightsError,
    DeviceError,
    EpisodeInfrastructureError,
    EsAgentError,
    HardwareError,
    ModelNotFoundError,
    PerturbationError,
    PromptPoolError,
    ReplicaDivergenceError,
    ReplicaStateError,
    SpecError,
    TrajectoryMemoryError,
    WeightsStateError,
    WorkerLostError,
)
from es_agent.lazy import lazy_exports

_LAZY = {
    # models
    "load_model": "es_agent.models",
    "load_weights": "es_agent.models",
    "save_weights": "es_agent.models",
    "convert_gguf": "es_agent.models",
    "cache_root": "es_agent.models",
    "tiny_qwen": "es_agent.tiny",
    "tiny_tokenizer": "es_agent.tiny",
    # prompts
    "PromptGenome": "es_agent.prompts",
    "PromptPools": "es_agent.prompts",
    "PromptVariant": "es_agent.prompts",
    # policy and actions
    "LLMPolicy": "es_agent.policy",
    "PolicyConfig": "es_agent.policy",
    "CandidateConfig": "es_agent.actions_space",
    "build_candidates": "es_agent.actions_space",
    "extract_action": "es_agent.actions_space",
    "normalize_action": "es_agent.actions_space",
    # trajectory memory
    "TrajectoryMemory": "es_agent.memory",
    "Exemplar": "es_agent.memory",
    "ExemplarStep": "es_agent.memory",
    "exemplar_from_episode": "es_agent.memory",
    "load_memory": "es_agent.memory",
    "save_memory": "es_agent.memory",
    # rollout
    "run_episode": "es_agent.rollout",
    "EpisodeResult": "es_agent.rollout",
    "StepRecord": "es_agent.rollout",
    # perturbation engine
    "perturbed": "es_agent.perturb",
    "perturbed_batch": "es_agent.perturb",
    "apply_update": "es_agent.perturb",
    "weights_checksum": "es_agent.perturb",
    "select_parameters": "es_agent.perturb",
    # EvoTorch problems, their specs, rows and the update log's types
    "AgentProblem": "es_agent.problem",
    "DenseAgentProblem": "es_agent.dense",
    "AgentSpec": "es_agent.specs",
    "EnvSpec": "es_agent.specs",
    "CandidateRow": "es_agent.rows",
    "WeightUpdate": "es_agent.updates",
    "UpdateRecord": "es_agent.updates",
}

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.actions_space import CandidateConfig, build_candidates, extract_action, normalize_action
    from es_agent.dense import DenseAgentProblem
    from es_agent.memory import (
        Exemplar,
        ExemplarStep,
        TrajectoryMemory,
        exemplar_from_episode,
        load_memory,
        save_memory,
    )
    from es_agent.models import cache_root, convert_gguf, load_model, load_weights, save_weights
    from es_agent.perturb import apply_update, perturbed, perturbed_batch, select_parameters, weights_checksum
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.problem import AgentProblem
    from es_agent.prompts import PromptGenome, PromptPools, PromptVariant
    from es_agent.rollout import EpisodeResult, StepRecord, run_episode
    from es_agent.rows import CandidateRow
    from es_agent.specs import AgentSpec, EnvSpec
    from es_agent.tiny import tiny_qwen, tiny_tokenizer
    from es_agent.updates import UpdateRecord, WeightUpdate

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "AgentProblem",
    "AgentSpec",
    "AgreementError",
    "AxTreeError",
    "CandidateConfig",
    "CandidateRow",
    "CandidateRowError",
    "CheckpointMismatchError",
    "CorruptWeightsError",
    "DenseAgentProblem",
    "DeviceError",
    "EnvSpec",
    "EpisodeInfrastructureError",
    "EpisodeResult",
    "EsAgentError",
    "Exemplar",
    "ExemplarStep",
    "HardwareError",
    "LLMPolicy",
    "ModelNotFoundError",
    "PerturbationError",
    "PolicyConfig",
    "PromptGenome",
    "PromptPoolError",
    "PromptPools",
    "PromptVariant",
    "ReplicaDivergenceError",
    "ReplicaStateError",
    "SpecError",
    "StepRecord",
    "TrajectoryMemory",
    "TrajectoryMemoryError",
    "UpdateRecord",
    "WeightUpdate",
    "WeightsStateError",
    "WorkerLostError",
    "apply_update",
    "build_candidates",
    "cache_root",
    "convert_gguf",
    "exemplar_from_episode",
    "extract_action",
    "load_memory",
    "load_model",
    "load_weights",
    "normalize_action",
    "perturbed",
    "perturbed_batch",
    "run_episode",
    "save_memory",
    "save_weights",
    "select_parameters",
    "tiny_qwen",
    "tiny_tokenizer",
    "weights_checksum",
]
