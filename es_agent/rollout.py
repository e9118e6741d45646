"""The one rollout loop: a policy acting in a Gymnasium env with the text observation of CONTRACTS.md until
the episode ends. Training, evaluation, examples and tests all use :func:`run_episode`.

Agent mistakes (unparseable or failing actions) are part of the episode and are recorded; exceptions raised by
the environment (a crashed browser, an evaluator that cannot score) propagate and are never turned into a
reward of 0, which would silently corrupt ES fitness.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym


@runtime_checkable
class Policy(Protocol):
    """What :func:`run_episode` needs from a policy (``LLMPolicy`` or any scripted one)."""

    def reset(self) -> None:
        """Forget the previous episode."""
        ...

    def act(self, obs: Mapping[str, Any]) -> str:
        """The next action text."""
        ...


@dataclass(frozen=True)
class StepRecord:
    """One step of a trajectory, kept small (no full page text)."""

    step: int
    """Step number, from 0."""
    url: str
    """URL of the page the action was chosen on."""
    obs_digest: str
    """Short hash of that page's axtree (same page, same digest)."""
    obs_head: str
    """The first lines of that axtree (at most 200 characters)."""
    action: str
    """The action sent to the env."""
    error: str
    """The ``last_action_error`` the env reported after the action (empty when it succeeded)."""
    reward: float
    """Reward of the step."""
    parse_failed: bool = False
    """Whether the policy could not produce a well-formed action (free decoding)."""
    margin: float | None = field(default=None, compare=False)
    """How far the chosen action's score was ahead of the runner-up's (constrained ``score`` decoding, the
    final scores with every prior); ``None`` when the policy reports none (one candidate, free or greedy
    decoding). Not part of a record's equality: it carries the float rounding of the forward pass (batched
    and per-row scoring agree on the action, not on the last bits of the margin)."""


@dataclass
class EpisodeResult:
    """Everything one episode produced."""

    task_id: Any
    """The task of the episode (from ``info["task_id"]`` or ``options["task_id"]``), ``None`` if unknown."""
    reward: float
    """Sum of step rewards (WebArena: the evaluator's score at the end, 0 before)."""
    steps: int
    """Actions taken."""
    terminated: bool
    """The env ended the episode (``stop`` or WebArena's early-stop rules)."""
    truncated: bool
    """Cut off: by the env's time limit, or by ``max_steps`` here."""
    trajectory: list[StepRecord] = field(default_factory=list)
    """One record per step."""
    errors: list[str] = field(default_factory=list)
    """``last_action_error`` messages and policy parse failures, prefixed with their step."""
    info: dict[str, Any] = field(default_factory=dict)
    """The ``info`` of the final step (of ``reset`` when no step was taken)."""
    wall_seconds: float = 0.0
    """Wall time of the whole episode."""
    policy_seconds: float = 0.0
    """Time spent choosing actions."""
    env_seconds: float = 0.0
    """Time spent in ``reset`` and ``step``."""

    @property
    def success(self) -> bool:
        """Whether the task was solved (reward of at least 1)."""
        return self.reward >= 1.0

    @property
    def confidence(self) -> float:
        """The mean :attr:`StepRecord.margin` over the steps that have one (0.0 when none has): how
        decisively the policy took this trajectory. Fitness shaping can break reward ties with it
        (:attr:`cotrain.shaping.ShapingConfig.confidence_tiebreak`)."""
        margins = [r.margin for r in self.trajectory if r.margin is not None]
        return sum(margins) / len(margins) if margins else 0.0


def run_episode(
    env: gym.Env,
    policy: Policy,
    *,
    seed: int | None = None,
    options: Mapping[str, Any] | None = None,
    max_steps: int | None = None,
) -> EpisodeResult:
    """Run one episode of ``policy`` in ``env`` and return what happened.

    ``seed`` and ``options`` go to ``env.reset`` (e.g. ``options={"task_id": 3}``). ``max_steps`` cuts the
    episode off after that many actions (``truncated=True``), on top of the env's own time limit. Exceptions
    from the env or the policy propagate.
    """
    if max_steps is not None and max_steps < 0:
        raise ValueError(f"max_steps must be >= 0, got {max_steps}")
    started = time.perf_counter()
    policy.reset()
    env_seconds = policy_seconds = 0.0
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed, options=dict(options) if options is not None else None)
    env_seconds += time.perf_counter() - t0
    task_id = info.get("task_id", (options or {}).get("task_id"))
    result = EpisodeResult(task_id=task_id, reward=0.0, steps=0, terminated=False, truncated=False,
                           info=dict(info))
    while max_steps is None or result.steps < max_steps:
        t0 = time.perf_counter()
        action = policy.act(obs)
        policy_seconds += time.perf_counter() - t0
        parse_failed, margin = step_info(policy)
        t0 = time.perf_counter()
        next_obs, reward, terminated, truncated, info = env.step(action)
        env_seconds += time.perf_counter() - t0
        error = str(next_obs.get("last_action_error") or "")
        step = result.steps
        result.trajectory.append(StepRecord(
            step=step, url=str(obs.get("url", "")), obs_digest=_digest(str(obs.get("axtree", ""))),
            obs_head=_head(str(obs.get("axtree", ""))), action=action, error=error, reward=float(reward),
            parse_failed=parse_failed, margin=margin))
        if parse_failed:
            result.errors.append(f"step {step}: policy parse failure: {action[:200]!r}")
        if error:
            result.errors.append(f"step {step}: {error}")
        result.reward += float(reward)
        result.steps += 1
        result.terminated, result.truncated, result.info = bool(terminated), bool(truncated), dict(info)
        obs = next_obs
        if terminated or truncated:
            break
    else:
        result.truncated = True
    result.wall_seconds = time.perf_counter() - started
    result.policy_seconds, result.env_seconds = policy_seconds, env_seconds
    if result.task_id is None:
        result.task_id = result.info.get("task_id")
    return result


def step_info(policy: Policy) -> tuple[bool, float | None]:
    """What the policy's ``last_info`` says of its last action: whether it failed to parse, and its margin
    (``None`` when it reports none)."""
    info = _last_info(policy)
    margin = info.get("margin")
    return bool(info.get("parse_failed", False)), None if margin is None else float(margin)


def _last_info(policy: Policy) -> Mapping[str, Any]:
    info = getattr(policy, "last_info", None)
    if isinstance(info, Mapping):
        slot = info.get(0, info)
        return slot if isinstance(slot, Mapping) else {}
    return {}


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "replace")).hexdigest()[:12]


def _head(text: str, lines: int = 3, chars: int = 200) -> str:
    return "\n".join(text.splitlines()[:lines])[:chars]
