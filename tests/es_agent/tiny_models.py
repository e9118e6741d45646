"""The bare tiny model of the es_agent weight-level tests (noise, perturbation, low-rank, updates), in one
place: a randomly initialised Qwen2 causal LM without a tokenizer. Tests that need a tokenizer too use
``es_agent.tiny.tiny_qwen`` (or the session fixture ``tiny`` of this folder's conftest)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

TINY_NET_CONFIG: dict[str, Any] = dict(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
    vocab_size=256, max_position_embeddings=128)
"""``Qwen2Config`` fields of :func:`tiny_net` (about 45k parameters)."""


def tiny_net(seed: int = 0, dtype: torch.dtype = torch.float32, **overrides: Any) -> Qwen2ForCausalLM:
    """A fresh tiny Qwen2 in eval mode (a test may change its weights). ``overrides`` replace
    :data:`TINY_NET_CONFIG` fields. Seeds torch's global RNG with ``seed`` before initialising, so the weights
    depend only on ``seed``."""
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(**{**TINY_NET_CONFIG, **overrides})).to(dtype).eval()
