"""Wrappers that the registration of ``WebArenaLite-v0`` applies."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs


class EvaluateOnTruncation(gym.Wrapper, RecordConstructorArgs):
    """Give a truncated episode the evaluator's score.

    ``gym.make`` applies ``TimeLimit`` outside the env, so the env cannot know where it is cut off. This
    wrapper sits outside the ``TimeLimit``: on a step that is truncated but neither terminated nor already
    scored, it asks the env to score the episode (``env.unwrapped.end_episode("max_steps")``) and returns that
    score as the step's reward, with the evaluator's details in ``info["eval"]``.
    """

    def __init__(self, env: gym.Env) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and info.get("episode_end") is None:
            reward, details = self.env.unwrapped.end_episode("max_steps")
            info = {**info, "episode_end": "max_steps", "eval": details}
        return obs, reward, terminated, truncated, info
