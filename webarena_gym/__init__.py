"""WebArena-Lite as a Gymnasium environment on a real Chromium.

``import webarena_gym`` registers ``WebArenaLite-v0`` and does nothing heavy: no browser, no server, no model.

>>> import gymnasium as gym, webarena_gym
>>> env = gym.make("WebArenaLite-v0", task_file="test_webarena_lite.raw.json", sites={"shopping": "http://..."})
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymnasium.envs.registration import WrapperSpec, register, registry

from webarena_gym.errors import (
    ActionError,
    ActionParseError,
    ActionTimeoutError,
    BrowserError,
    EvaluatorError,
    HelperCallError,
    LoginError,
    ReferenceSolutionError,
    ResetArgumentError,
    SiteConfigError,
    SiteStartError,
    TaskConfigError,
    WebArenaGymError,
)
from webarena_gym.lazy import lazy_exports

ENV_ID = "WebArenaLite-v0"
DEFAULT_MAX_EPISODE_STEPS = 30

if ENV_ID not in registry:
    register(
        id=ENV_ID,
        entry_point="webarena_gym.env:WebArenaLiteEnv",
        max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        disable_env_checker=False,
        # Outside the TimeLimit: scores the truncated step (see webarena_gym.wrappers).
        additional_wrappers=(
            WrapperSpec("EvaluateOnTruncation", "webarena_gym.wrappers:EvaluateOnTruncation", {}),
        ),
    )

_LAZY = {
    "WebArenaLiteEnv": "webarena_gym.env",
    "load_tasks": "webarena_gym.tasks",
    "TaskConfig": "webarena_gym.tasks",
    "SiteURLs": "webarena_gym.tasks",
    "build_evaluator": "webarena_gym.evaluators",
    "parse_action": "webarena_gym.actions",
    "replay_reference": "webarena_gym.reference",
}

if TYPE_CHECKING:  # pragma: no cover
    from webarena_gym.actions import parse_action
    from webarena_gym.env import WebArenaLiteEnv
    from webarena_gym.evaluators import build_evaluator
    from webarena_gym.reference import replay_reference
    from webarena_gym.tasks import SiteURLs, TaskConfig, load_tasks


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "DEFAULT_MAX_EPISODE_STEPS",
    "ENV_ID",
    "ActionError",
    "ActionParseError",
    "ActionTimeoutError",
    "BrowserError",
    "EvaluatorError",
    "HelperCallError",
    "LoginError",
    "ReferenceSolutionError",
    "ResetArgumentError",
    "SiteConfigError",
    "SiteStartError",
    "TaskConfigError",
    "WebArenaGymError",
    "WebArenaLiteEnv",
    "load_tasks",
    "TaskConfig",
    "SiteURLs",
    "build_evaluator",
    "parse_action",
    "replay_reference",
]
