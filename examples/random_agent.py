"""A random agent: each step picks uniformly among the valid candidate actions of the page (the same
candidates constrained decoding offers the LLM), through the one rollout loop ``es_agent.run_episode``.

    python examples/random_agent.py --episodes 3 --max-steps 5
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from _args import parse_args

from es_agent import build_candidates, run_episode


@dataclass
class Args:
    """Flags of the random agent."""

    env_id: str = field(default="WebArenaLite-v0", metadata={"help": "Gymnasium env id"})
    """Gymnasium env id."""
    env_module: str = field(default="webarena_gym", metadata={"help": "module that registers the env"})
    """Module imported to register the env."""
    split: str | None = field(default="train", metadata={"help": "task split (none: all tasks)"})
    """Split of the env's tasks."""
    episodes: int = field(default=3, metadata={"help": "episodes to run"})
    """Episodes to run."""
    max_steps: int = field(default=5, metadata={"help": "actions per episode"})
    """Actions per episode."""
    seed: int = field(default=0, metadata={"help": "seed of the action choices and env resets"})
    """Seed of the action choices and the env resets."""


class RandomPolicy:
    """Uniform over the candidate actions of each observation (seeded)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def reset(self) -> None:
        """Nothing to forget."""

    def act(self, obs: Mapping[str, Any]) -> str:
        return self.rng.choice(build_candidates(str(obs["axtree"]), str(obs["goal"])))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(Args, argv)
    importlib.import_module(args.env_module)
    env = gym.make(args.env_id, **({"split": args.split} if args.split else {}))
    policy = RandomPolicy(args.seed)
    try:
        successes = 0
        for episode in range(args.episodes):
            result = run_episode(env, policy, seed=args.seed + episode, max_steps=args.max_steps)
            successes += result.success
            actions = " | ".join(step.action for step in result.trajectory)
            print(f"episode {episode}: task {result.task_id} reward {result.reward:g} "
                  f"in {result.steps} step(s): {actions}")
        print(f"success rate {successes / args.episodes:.2f} over {args.episodes} episode(s)")
    finally:
        env.close()


if __name__ == "__main__":
    main()
