"""Wrappers that the registration of ``WebArenaLite-v0`` applies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym
from gymnasium.utils import RecordConstructorArgs
from gymnasium.wrappers import PassiveEnvChecker

if TYPE_CHECKING:
    from webarena_gym.env import WebArenaLiteEnv


class EvaluateOnTruncation(gym.Wrapper, RecordConstructorArgs):
    """Give a truncated episode the evaluator's score, and keep a failed ``reset`` from breaking the stack.

    ``gym.make`` applies ``TimeLimit`` outside the env, so the env cannot know where it is cut off. This
    wrapper sits outside the ``TimeLimit``: on a step that is truncated but neither terminated nor already
    scored, it asks the env to score the episode (``env.unwrapped.end_episode("max_steps")``) and adds that
    score to the step's reward (0, or the env's ``progress_reward`` bonus), with the evaluator's details in
    ``info["eval"]``.

    As the outermost wrapper it also checks ``reset``'s arguments (``env.unwrapped.check_reset_arguments``)
    before any inner wrapper sees the call: Gymnasium's ``PassiveEnvChecker`` marks its one reset check as
    done before calling the env, so a first ``reset`` that raised left it without the data its first
    ``step`` check reads (``TypeError: cannot unpack non-iterable NoneType object``). A reset that still
    fails further in (a site that is down) re-arms that check, so the next ``reset`` is checked again.
    """

    def __init__(self, env: gym.Env) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[Any, dict[str, Any]]:
        cast("WebArenaLiteEnv", self.env.unwrapped).check_reset_arguments(seed=seed, options=options)
        try:
            return self.env.reset(seed=seed, options=options)
        except Exception:
            _rearm_reset_check(self.env)
            raise

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if truncated and not terminated and info.get("episode_end") is None:
            score, details = cast("WebArenaLiteEnv", self.env.unwrapped).end_episode("max_steps")
            reward = float(reward) + score  # the step's own reward: a progress_reward bonus, else 0
            info = {**info, "episode_end": "max_steps", "eval": details}
        return obs, float(reward), terminated, truncated, info


class RecordObservations(gym.Wrapper):
    """Keep the observations of the current episode: ``observations[0]`` is the reset's, then one per step
    (shallow copies), so a replayed trajectory can be scored offline against the observation each action
    was taken on."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observations: list[dict[str, Any]] = []

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self.observations = [dict(obs)]
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.observations.append(dict(obs))
        return obs, reward, terminated, truncated, info


def _rearm_reset_check(env: gym.Env) -> None:
    """Let the ``PassiveEnvChecker`` below check the next ``reset`` when its one checked reset raised."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, PassiveEnvChecker) and env.checked_reset and not env.checked_step:
            env.checked_reset = False
        env = env.env
