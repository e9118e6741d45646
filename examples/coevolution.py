"""The full prompt-parameter co-evolution run, as ``esopt train`` does it, with a short budget from flags:
config -> run directory -> problem + searcher + prompt evolver + dashboard -> learning curve.

    python examples/coevolution.py --run-dir runs/example --generations 3 --population 4
"""

from __future__ import annotations

from dataclasses import dataclass, field

from _args import parse_args

from cotrain.cli import Dashboard
from cotrain.config import config_from_dict
from cotrain.trainer import train


@dataclass
class Args:
    """Flags of the co-evolution example (a small run; configs/demo.toml is the full demo)."""

    run_dir: str = field(default="runs/example", metadata={"help": "new run directory"})
    """New (absent or empty) run directory."""
    model: str = field(default="embedded", metadata={"help": "model spec"})
    """Model spec."""
    env_id: str = field(default="WebArenaLite-v0", metadata={"help": "Gymnasium env id"})
    """Gymnasium env id."""
    env_module: str = field(default="webarena_gym", metadata={"help": "module that registers the env"})
    """Module imported (in every worker) to register the env."""
    split: str = field(default="train", metadata={"help": "training split"})
    """Training split."""
    eval_split: str = field(default="test", metadata={"help": "held-out split of the centre evaluations"})
    """Held-out split."""
    generations: int = field(default=3, metadata={"help": "generations"})
    """Generations."""
    population: int = field(default=4, metadata={"help": "candidates per generation (even)"})
    """Candidates per generation."""
    tasks_per_generation: int = field(default=2, metadata={"help": "tasks per generation"})
    """Tasks per generation."""
    max_steps: int = field(default=3, metadata={"help": "actions per episode"})
    """Actions per episode."""
    sigma: float = field(default=0.002, metadata={"help": "initial perturbation scale"})
    """Initial perturbation scale."""
    mutation: bool = field(default=True, metadata={"help": "grow the prompt pools"})
    """Grow the prompt pools during the run."""
    workers: int = field(default=0, metadata={"help": "Ray workers (0: in process)"})
    """Ray workers."""
    ui: str = field(default="auto", metadata={"help": "auto, on or off"})
    """Progress display."""
    seed: int = field(default=0, metadata={"help": "root seed"})
    """Root seed."""


def main(argv: list[str] | None = None) -> None:
    args = parse_args(Args, argv)
    cfg = config_from_dict({
        "name": "coevolution-example",
        "agent": {"model": args.model},
        "env": {"env_id": args.env_id, "module": args.env_module, "split": args.split,
                "tasks_per_generation": args.tasks_per_generation, "max_steps": args.max_steps},
        "es": {"population": args.population, "generations": args.generations, "seed": args.seed,
               "sigma_0": args.sigma, "sigma_min": args.sigma / 4},
        "prompts": {"mutation": args.mutation},
        "workers": {"num_workers": args.workers},
        "checkpoint": {"snapshot_every": 0},
        "eval": {"every": args.generations, "split": args.eval_split, "n_tasks": 2},
        "ui": {"mode": args.ui},
    })
    dashboard = Dashboard()  # the live dashboard of esopt train, then learning_curve.png (ui.plot)
    try:
        result = train(cfg, args.run_dir, progress=dashboard)
    finally:
        dashboard.plot(args.run_dir)
    print(f"{result.generation} generation(s) in {result.seconds:.1f}s; run directory {result.run_dir}")


if __name__ == "__main__":
    main()
