"""Bytes exchanged between the driver and the workers per ES generation, against model size.

Method. ``AgentProblem`` with 2 Ray workers and its own accounting (``last_bytes_exchanged``: the pickled
bytes of everything sent to and from the actors in one evaluation: the update-log records they lack, the rows
of each piece, the per-task rewards, the workers' reports with checksums and timings). The models are real
and each worker builds its replica and evaluates every row with it (low-rank mode, rank 4, so a row costs one
short forward instead of a full-rank noise draw); the env is trivial: :class:`ToyTextEnv` below, a one-page
text env whose episode ends at the first action (``max_steps=1``), one task per generation.

For each model the workers start with a warm-up evaluation (which also ships the pickled Problem into each
new actor: reported once, as ``actor start``), then one generation per population size P in 8, 32, 128 in
steady state: ``push_update`` with the previous generation's update (P/2 seeds and coefficients: antithetic
pairs share a seed), then the evaluation of P rows. Models: the tests' tiny Qwen, the embedded SmolLM2-135M
and a Qwen2.5-0.5B-shaped model (bf16, random weights, saved to a temporary checkpoint the workers load).

Against: a dense EvoTorch problem, whose solutions are the parameter vectors themselves, ships at least
P x parameters x 4 bytes per generation (fp32 solutions to the workers; fitnesses back are negligible).
Goal: flat in model size (bytes of the 0.5B model / bytes of the tiny model within 5 % at every P).
``python -m benchmarks.bench_comm [--quick]``.
"""

from __future__ import annotations

import os
import random
import string
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from benchmarks.common import (
    REPO_ROOT,
    Figure,
    param_count,
    print_figures,
    rnd,
    run_as_script,
    skipped,
)

TOY_ID = "EsoptBenchToyText-v0"
CHARSET = string.printable + "\u2019\u2018\u201c\u201d"
PROMPT_IDS = (1, 0, 1)
"""Default pools: the ``concise`` system prompt, no skills, ``direct_short`` action format (short prompts)."""
FLAT_TOLERANCE = 0.05
NUM_WORKERS = 2


class ToyTextEnv(gym.Env):
    """One shop page as a WebArena-style text observation; the first action ends the episode with reward 1
    when it is ``stop [19.99]``."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        text = spaces.Text(max_length=4096, min_length=0, charset=CHARSET)
        self.observation_space = spaces.Dict({k: text for k in ("axtree", "url", "goal", "tabs",
                                                                "last_action_error")})
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=CHARSET)

    def _obs(self) -> dict[str, str]:
        tree = ("[1] RootWebArea 'Toy Shop' focused: True\n\t[2] heading 'Wireless Mouse'\n"
                "\t[3] StaticText '19.99'")
        return {"axtree": tree, "url": "http://toy.local/", "goal": "What is the price?",
                "tabs": "Tab 0 (current): Toy Shop", "last_action_error": ""}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, str], dict[str, Any]]:
        super().reset(seed=seed)
        return self._obs(), {"task_id": int((options or {}).get("task_id", 0))}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        reward = float(action.strip() == "stop [19.99]")
        return self._obs(), reward, True, False, {}


if TOY_ID not in gym.registry:
    gym.register(id=TOY_ID, entry_point=ToyTextEnv)


def ray_env() -> None:
    """Make ``benchmarks`` importable in Ray workers (they import this module to register the toy env)."""
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(REPO_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), *paths]))


def generation_rows(population: int, rng: random.Random) -> tuple[Any, list[int], list[float]]:
    """Rows of one generation (antithetic pairs) and the update it would produce (one seed per pair)."""
    from es_agent.rows import CandidateRow, encode_rows

    seeds = [rng.randrange(2**31) for _ in range(population // 2)]
    env_seed = rng.randrange(2**31)
    rows = [CandidateRow(s, sign * 1e-3, env_seed, PROMPT_IDS) for s in seeds for sign in (1, -1)]
    coeffs = [rng.uniform(-1e-3, 1e-3) for _ in seeds]
    return encode_rows(rows), seeds, coeffs


def measure_model(spec: dict[str, Any], populations: list[int]) -> dict[str, Any]:
    """``{"actor_start": bytes of the warm-up, "bytes": {P: bytes}, "seconds": {P: s}}`` for one model."""
    from es_agent.problem import AgentProblem
    from es_agent.specs import AgentSpec, EnvSpec
    from es_agent.updates import WeightUpdate

    agent = AgentSpec(mode="lowrank", rank=4, policy={"max_prompt_tokens": 256}, **spec)
    env = EnvSpec(env_id=TOY_ID, module="benchmarks.bench_comm", max_steps=1)
    problem = AgentProblem(agent, env, max_batch_tasks=1, num_actors=NUM_WORKERS, seed=0)
    rng = random.Random(0)
    out: dict[str, Any] = {"bytes": {}, "seconds": {}, "update_bytes": {}}
    try:
        problem.set_task_batch([0])
        rows, seeds, coeffs = generation_rows(2 * NUM_WORKERS, rng)
        problem.evaluate_rows(rows)
        out["actor_start"] = problem.last_bytes_exchanged
        generation = 1
        for population in populations:
            problem.push_update(generation, WeightUpdate(tuple(seeds), tuple(coeffs)))
            rows, seeds, coeffs = generation_rows(population, rng)
            started = time.perf_counter()
            problem.evaluate_rows(rows)
            out["seconds"][population] = round(time.perf_counter() - started, 2)
            out["bytes"][population] = problem.last_bytes_exchanged
            out["checksums_agree"] = problem.checksums_agree
            generation += 1
    finally:
        problem.close()
    return out


def _save_qwen(folder: Path) -> int:
    """Save the bf16 0.5B-shaped model and the embedded tokenizer to ``folder``; returns its parameters."""
    import torch

    from benchmarks.common import qwen_05b

    model, tok = qwen_05b(torch.bfloat16)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return param_count(model)


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the benchmark and return the figures (also printed)."""
    import ray

    from benchmarks.common import load_bench_model

    started = time.perf_counter()
    populations = [8] if quick else [8, 32, 128]
    models = ["tiny", "embedded"] if quick else ["tiny", "embedded", "qwen0.5b"]
    results: dict[str, dict[str, Any]] = {}
    params: dict[str, int] = {}
    ray_env()
    ray.init(num_cpus=NUM_WORKERS, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory(prefix="esopt-bench-qwen-") as folder:
            for name in models:
                if name == "qwen0.5b":
                    params[name] = _save_qwen(Path(folder))
                    spec: dict[str, Any] = {"model": folder, "dtype": "bfloat16"}
                else:
                    params[name] = param_count(load_bench_model(name)[0])
                    spec = {"model": "tiny:0" if name == "tiny" else "embedded"}
                results[name] = measure_model(spec, populations)
    finally:
        ray.shutdown()
    figures: list[Figure] = []
    for name in models:
        res = results[name]
        tag = f"{name}, {params[name] / 1e6:.2f}M params" if params[name] < 1e7 else \
            f"{name}, {params[name] / 1e6:.0f}M params"
        for population in populations:
            ours = res["bytes"][population]
            dense = population * params[name] * 4
            figures.append(Figure(
                f"bytes per generation, P={population} [{tag}]", rnd(ours / 1024), "KiB", None, None, None,
                f"dense EvoTorch: {dense / 1024**2:,.0f} MiB ({dense / ours:,.0f}x more)",
                extra={"bytes": ours, "bytes_per_candidate": rnd(ours / population),
                       "dense_evotorch_bytes": dense, "generation_seconds": res["seconds"][population],
                       "checksums_agree": res["checksums_agree"]}))
        figures.append(Figure(f"bytes at actor start (pickled Problem into {NUM_WORKERS} actors) [{tag}]",
                              rnd(res["actor_start"] / 1024), "KiB",
                              note="once per actor, not per generation",
                              extra={"bytes": res["actor_start"]}))
    smallest, largest = models[0], models[-1]
    for population in populations:
        ratio = results[largest]["bytes"][population] / results[smallest]["bytes"][population]
        figures.append(Figure(
            f"bytes per generation {largest} / {smallest}, P={population}", rnd(ratio), "x",
            f"within {FLAT_TOLERANCE:.0%} of 1 (flat in model size)", abs(ratio - 1) <= FLAT_TOLERANCE,
            note=f"{params[largest] / params[smallest]:,.0f}x the parameters"))
    if quick:
        figures.append(skipped("bytes per generation [qwen0.5b], P=32 and 128", "quick mode: the 0.5B model "
                               "and P = 32, 128 run in the full suite only", "KiB"))
    out = [f.to_dict() for f in figures]
    print_figures(f"bench_comm (quick={quick}, {time.perf_counter() - started:.0f} s)", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__, "tiny and embedded models, P = 8 only")
