"""One task, one LLM agent: load a model, pick a prompt genome, run one episode and print the trajectory.

    python examples/llm_agent_one_task.py --model embedded --genome no_skill --max-steps 5
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

import gymnasium as gym
import torch
from _args import parse_args

from es_agent import LLMPolicy, PromptPools, run_episode
from es_agent.specs import AgentSpec
from es_agent.worker import load_agent_model


@dataclass
class Args:
    """Flags of the one-task LLM agent."""

    model: str = field(default="embedded", metadata={"help": "embedded, tiny:<seed>, a dir or hub id"})
    """Model spec (``es_agent.AgentSpec.model``)."""
    genome: str = field(default="no_skill", metadata={"help": "baseline genome of the prompt pools"})
    """Named baseline genome of the prompt pools."""
    env_id: str = field(default="WebArenaLite-v0", metadata={"help": "Gymnasium env id"})
    """Gymnasium env id."""
    env_module: str = field(default="webarena_gym", metadata={"help": "module that registers the env"})
    """Module imported to register the env."""
    split: str | None = field(default="train", metadata={"help": "task split (none: all tasks)"})
    """Split of the env's tasks."""
    task: int | None = field(default=None, metadata={"help": "task id (none: the env draws one)"})
    """Task id."""
    max_steps: int = field(default=5, metadata={"help": "actions per episode"})
    """Actions per episode."""
    seed: int = field(default=0, metadata={"help": "env reset seed"})
    """Env reset seed."""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(Args, argv)
    torch.set_num_threads(1)  # fastest for small models on small CPUs (docs/DESIGN.md, Known pitfalls)
    model, tokenizer = load_agent_model(AgentSpec(model=args.model))
    genome = PromptPools.load().baseline(args.genome)
    policy = LLMPolicy(model, tokenizer, genome)
    importlib.import_module(args.env_module)
    env = gym.make(args.env_id, **({"split": args.split} if args.split else {}))
    try:
        options = {"task_id": args.task} if args.task is not None else None
        result = run_episode(env, policy, seed=args.seed, options=options, max_steps=args.max_steps)
    finally:
        env.close()
    print(f"task {result.task_id} with genome {genome.ids}")
    for step in result.trajectory:
        print(f"  {step.step + 1}. {step.action}" + (f"   -> {step.error}" if step.error else ""))
    print(f"reward {result.reward:g} after {result.steps} step(s) in {result.wall_seconds:.1f}s "
          f"(policy {result.policy_seconds:.1f}s, env {result.env_seconds:.1f}s)")


if __name__ == "__main__":
    main()
