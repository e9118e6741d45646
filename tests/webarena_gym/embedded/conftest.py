"""Fixtures for the embedded-world tests: envs on the default world (embedded sites + bundled task set)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import pytest

import webarena_gym


@pytest.fixture(scope="module")
def make_world_env(chromium_path: str) -> Iterator[Callable[..., gym.Env]]:
    """``make_world_env(**kwargs)``: a default-world env (``gym.make`` without a task file); every env made
    is closed when the module's tests are done."""
    made: list[gym.Env] = []

    def make(**kwargs: Any) -> gym.Env:
        env = gym.make(webarena_gym.ENV_ID, browser={"executable_path": chromium_path}, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()


@pytest.fixture(scope="module")
def world_env(make_world_env: Callable[..., gym.Env]) -> gym.Env:
    """One default-world env over every split of the bundled task set, shared by a module's tests."""
    return make_world_env(split="all")
