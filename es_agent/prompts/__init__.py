"""Prompt genome: named slots (system prompt, skills, action format), each a pool of text variants kept in
data files (``pools/*.json``); a genome picks one variant per slot and renders with the observation."""

from __future__ import annotations

from es_agent.prompts.genome import (
    ACTION_STYLES,
    REQUIRED_SLOTS,
    PromptGenome,
    PromptPools,
    PromptVariant,
)
from es_agent.prompts.render import (
    HistoryEntry,
    format_history,
    observation_values,
    render_messages,
    render_observation,
)

__all__ = [
    "ACTION_STYLES",
    "REQUIRED_SLOTS",
    "HistoryEntry",
    "PromptGenome",
    "PromptPools",
    "PromptVariant",
    "format_history",
    "observation_values",
    "render_messages",
    "render_observation",
]
