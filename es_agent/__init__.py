"""LLM web agents for evolution strategies: model loading, the prompt genome, the policy, the rollout loop and
the weight-perturbation engine.

``import es_agent`` is light: it imports no torch, no transformers, loads no model. Public names resolve
lazily on first use. The package sees environments only through the Gymnasium API (never ``webarena_gym``).

>>> from es_agent import load_model, PromptPools, LLMPolicy, run_episode
>>> model, tokenizer = load_model("embedded")
>>> policy = LLMPolicy(model, tokenizer, PromptPools.load().baseline("no_skill"))
>>> result = run_episode(env, policy, options={"task_id": 0})
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from es_agent.errors import (
    CheckpointMismatchError,
    CorruptWeightsError,
    DeviceError,
    EsAgentError,
    ModelNotFoundError,
    PromptPoolError,
)

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
    # EvoTorch problems and their specs
    "AgentProblem": "es_agent.problem",
    "ReplicaDivergenceError": "es_agent.problem",
    "WorkerLostError": "es_agent.problem",
    "DenseAgentProblem": "es_agent.dense",
    "AgentSpec": "es_agent.specs",
    "EnvSpec": "es_agent.specs",
    "UpdateRecord": "es_agent.updates",
    "SpecError": "es_agent.specs",
    "CandidateRowError": "es_agent.worker",
    "EpisodeInfrastructureError": "es_agent.worker",
}

if TYPE_CHECKING:  # pragma: no cover
    from es_agent.actions_space import CandidateConfig, build_candidates, extract_action, normalize_action
    from es_agent.models import cache_root, convert_gguf, load_model, load_weights, save_weights
    from es_agent.perturb import apply_update, perturbed, perturbed_batch, select_parameters, weights_checksum
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptGenome, PromptPools, PromptVariant
    from es_agent.rollout import EpisodeResult, StepRecord, run_episode
    from es_agent.tiny import tiny_qwen, tiny_tokenizer


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'es_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CandidateConfig",
    "CheckpointMismatchError",
    "CorruptWeightsError",
    "DeviceError",
    "EpisodeResult",
    "EsAgentError",
    "LLMPolicy",
    "ModelNotFoundError",
    "PolicyConfig",
    "PromptGenome",
    "PromptPoolError",
    "PromptPools",
    "PromptVariant",
    "StepRecord",
    "apply_update",
    "build_candidates",
    "cache_root",
    "convert_gguf",
    "extract_action",
    "load_model",
    "load_weights",
    "normalize_action",
    "perturbed",
    "perturbed_batch",
    "run_episode",
    "save_weights",
    "select_parameters",
    "tiny_qwen",
    "tiny_tokenizer",
    "weights_checksum",
]
