"""Stock EvoTorch PGPE on a dense parameter subset of the agent (``es_agent.dense.DenseAgentProblem``): the
solution vector is the selected parameters themselves (by default the final norm's weight), so any EvoTorch
searcher (PGPE, SNES, CEM, CMA-ES) tunes it, with EvoTorch's own loggers.

    python examples/pgpe_dense.py --model embedded --generations 5 --popsize 4
"""

from __future__ import annotations

from dataclasses import dataclass, field

from _args import parse_args
from evotorch.algorithms import PGPE
from evotorch.logging import StdOutLogger

from es_agent.dense import DenseAgentProblem
from es_agent.specs import AgentSpec, EnvSpec


@dataclass
class Args:
    """Flags of the dense PGPE example."""

    model: str = field(default="embedded", metadata={"help": "model spec"})
    """Model spec."""
    params: str = field(default="model.norm.weight", metadata={"help": "comma-separated parameter globs"})
    """Parameters that form the solution vector."""
    env_id: str = field(default="WebArenaLite-v0", metadata={"help": "Gymnasium env id"})
    """Gymnasium env id."""
    env_module: str = field(default="webarena_gym", metadata={"help": "module that registers the env"})
    """Module imported (in every worker) to register the env."""
    tasks: str = field(default="148,154", metadata={"help": "comma-separated task ids of the batch"})
    """Task ids every candidate runs."""
    max_steps: int = field(default=3, metadata={"help": "actions per episode"})
    """Actions per episode."""
    popsize: int = field(default=4, metadata={"help": "PGPE population (even)"})
    """PGPE population size."""
    generations: int = field(default=5, metadata={"help": "PGPE generations"})
    """Generations."""
    stdev_init: float = field(default=0.02, metadata={"help": "initial PGPE standard deviation"})
    """Initial search standard deviation."""
    seed: int = field(default=0, metadata={"help": "seed of the problem's generator"})
    """Seed of the problem's generator."""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(Args, argv)
    tasks = [int(t) for t in args.tasks.split(",")]
    agent = AgentSpec(model=args.model, params=tuple(args.params.split(",")))
    env = EnvSpec(env_id=args.env_id, module=args.env_module, max_steps=args.max_steps)
    problem = DenseAgentProblem(agent, env, task_ids=tasks, max_batch_tasks=len(tasks), seed=args.seed)
    problem.set_task_batch(tasks)
    searcher = PGPE(problem, popsize=args.popsize, center_learning_rate=0.05, stdev_learning_rate=0.1,
                    stdev_init=args.stdev_init, center_init=problem.initial_solution())
    StdOutLogger(searcher)
    try:
        searcher.run(args.generations)
    finally:
        problem.close()
    mean = float(searcher.status["mean_eval"])
    print(f"done: {searcher.step_count} generation(s), last mean reward {mean:.3f}")


if __name__ == "__main__":
    main()
