"""Run the agent (one episode, or a short co-evolution run) against a real WebArena deployment.

Nothing here can reach such a deployment from this repository's machines, so this script is documentation
that runs: ``--check`` validates the setup and says what is missing.

Setup (WebArena's own conventions):

1. Deploy the WebArena sites (see the WebArena repository's environment_docker instructions) and export their
   base URLs, without trailing slashes, as plain or ``WA_``-prefixed variables::

       export SHOPPING=http://host:7770  SHOPPING_ADMIN=http://host:7780/admin  REDDIT=http://host:9999
       export GITLAB=http://host:8023  MAP=http://host:3000  WIKIPEDIA=http://host:8888  HOMEPAGE=http://host:4399

2. Create the login storage states with WebArena's ``browser_env/auto_login.py`` and pass their folder as
   ``--auth-dir`` (tasks name them ``./.auth/<sites>_state.json``).
3. Pass the task file: ``--task-file test_webarena_lite.raw.json`` (WebArena-Lite) or ``test.raw.json``.

    python examples/real_webarena.py --check --task-file test_webarena_lite.raw.json --auth-dir .auth
    python examples/real_webarena.py --mode episode --task 0 --model embedded ...
    python examples/real_webarena.py --mode train --train-tasks 0,1,2,3 --eval-tasks 4,5 --run-dir runs/real
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from _args import parse_args

SITE_VARIABLES = ("SHOPPING", "SHOPPING_ADMIN", "REDDIT", "GITLAB", "MAP", "WIKIPEDIA", "HOMEPAGE")


@dataclass
class Args:
    """Flags of the real-WebArena example."""

    task_file: str = field(default="test_webarena_lite.raw.json", metadata={"help": "WebArena task JSON"})
    """WebArena task file."""
    auth_dir: str = field(default=".auth", metadata={"help": "folder of the login storage states"})
    """Folder of the storage-state files made by WebArena's auto_login.py."""
    mode: str = field(default="episode", metadata={"help": "episode or train"})
    """``episode``: one LLM episode; ``train``: a short co-evolution run."""
    check: bool = field(default=False, metadata={"help": "only validate the setup"})
    """Validate the setup and exit."""
    model: str = field(default="embedded", metadata={"help": "model spec"})
    """Model spec."""
    task: int = field(default=0, metadata={"help": "task id of --mode episode"})
    """Task of the single episode."""
    train_tasks: str = field(default="0,1,2,3", metadata={"help": "comma-separated training task ids"})
    """Training tasks of ``--mode train``."""
    eval_tasks: str = field(default="4,5", metadata={"help": "comma-separated held-out task ids"})
    """Held-out tasks of ``--mode train``."""
    generations: int = field(default=3, metadata={"help": "generations of --mode train"})
    """Generations."""
    max_steps: int = field(default=10, metadata={"help": "actions per episode"})
    """Actions per episode."""
    run_dir: str = field(default="runs/real-webarena", metadata={"help": "run directory of --mode train"})
    """Run directory."""


def check_setup(args: Args) -> list[str]:
    """Problems with the setup (empty when it looks usable): site variables the tasks need, the task file."""
    from webarena_gym import TaskConfigError, load_tasks

    problems = []
    try:
        tasks = load_tasks(args.task_file)
    except (TaskConfigError, OSError) as exc:
        return [f"task file {args.task_file!r}: {exc}"]
    needed = sorted({site.upper() for task in tasks for site in task.sites})
    for name in needed:
        if name in SITE_VARIABLES and not (os.environ.get(name) or os.environ.get(f"WA_{name}")):
            problems.append(f"set {name} (or WA_{name}) to the base URL of the {name.lower()} site")
    if not Path(args.auth_dir).is_dir():
        problems.append(f"no storage-state folder {args.auth_dir!r}: run WebArena's auto_login.py first")
    return problems


def env_kwargs(args: Args) -> dict[str, object]:
    """``gym.make`` arguments of the real deployment (sites come from the environment variables)."""
    return {"task_file": str(Path(args.task_file).resolve()), "auth_dir": str(Path(args.auth_dir).resolve()),
            "eval_rules": "webarena_lite"}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(Args, argv)
    problems = check_setup(args)
    if problems:
        print("real WebArena setup is incomplete:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 2
    if args.check:
        print(f"setup looks complete: {args.task_file} with storage states in {args.auth_dir}")
        return 0
    if args.mode == "episode":
        import gymnasium as gym

        import webarena_gym  # noqa: F401  (registers WebArenaLite-v0)
        from es_agent import LLMPolicy, PromptPools, run_episode
        from es_agent.specs import AgentSpec
        from es_agent.worker import load_agent_model

        model, tokenizer = load_agent_model(AgentSpec(model=args.model))
        policy = LLMPolicy(model, tokenizer, PromptPools.load().baseline("no_skill"))
        env = gym.make("WebArenaLite-v0", **env_kwargs(args))
        try:
            result = run_episode(env, policy, options={"task_id": args.task}, max_steps=args.max_steps)
        finally:
            env.close()
        print(f"task {result.task_id}: reward {result.reward:g} after {result.steps} step(s)")
        return 0
    from cotrain.cli import Dashboard
    from cotrain.config import config_from_dict
    from cotrain.trainer import train

    cfg = config_from_dict({
        "name": "real-webarena", "agent": {"model": args.model},
        "env": {"kwargs": env_kwargs(args), "split": None, "worker_split": None,
                "train_tasks": [int(t) for t in args.train_tasks.split(",")], "tasks_per_generation": 2,
                "max_steps": args.max_steps},
        "es": {"population": 4, "generations": args.generations},
        "eval": {"every": args.generations, "tasks": [int(t) for t in args.eval_tasks.split(",")]},
    })
    dashboard = Dashboard()  # the live dashboard of esopt train, then learning_curve.png
    try:
        print(train(cfg, args.run_dir, progress=dashboard))
    finally:
        dashboard.plot(args.run_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
