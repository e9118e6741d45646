"""Rendering a genome, an observation and the action history into chat messages and prompt text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from es_agent.prompts.genome import OBSERVATION_FIELDS, PromptGenome

_PLACEHOLDER = re.compile(r"\{(" + "|".join(OBSERVATION_FIELDS) + r")\}")


@dataclass(frozen=True)
class HistoryEntry:
    """One past action of the episode and the error it caused (empty when it succeeded)."""

    action: str
    """The action text sent to the environment."""
    error: str = ""
    """The ``last_action_error`` the environment reported after it."""


def format_history(history: Sequence[HistoryEntry], last_k: int, *, max_chars: int = 160) -> str:
    """The last ``last_k`` actions, numbered from the episode start (``None`` when there are none)."""
    if not history or last_k <= 0:
        return "None"
    start = max(0, len(history) - last_k)
    lines = []
    for number, entry in enumerate(history[start:], start=start + 1):
        line = f"{number}. {_clip(entry.action, max_chars)}"
        if entry.error:
            line += f" (failed: {_clip(entry.error, max_chars)})"
        lines.append(line)
    return "\n".join(lines)


def render_observation(template: str, values: Mapping[str, str]) -> str:
    """Fill the ``{name}`` placeholders of the observation template (plain substitution: no format spec, no
    attribute access, so page text with braces is safe)."""
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), template)


def render_messages(genome: PromptGenome, user_text: str) -> list[dict[str, str]]:
    """The chat messages of one step: the genome's system message and the rendered observation."""
    return [{"role": "system", "content": genome.system_text()}, {"role": "user", "content": user_text}]


def observation_values(obs: Mapping[str, Any], axtree: str, history_text: str) -> dict[str, str]:
    """Placeholder values from an observation dict (CONTRACTS: axtree, url, goal, tabs, last_action_error)."""
    error = str(obs.get("last_action_error") or "").strip()
    return {
        "axtree": axtree,
        "url": str(obs.get("url", "")),
        "tabs": str(obs.get("tabs") or "None").strip() or "None",
        "goal": str(obs.get("goal", "")).strip(),
        "history": history_text,
        "error": error or "None",
    }


def _clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
