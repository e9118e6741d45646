"""Share of an ES generation's time spent in noise generation, perturbation, restore and update vs rollouts,
and the update's extra memory.

Method (time). One process, one torch thread (one worker per core), fp32 CPU weights. Each repetition
measures, interleaved so that load drifts hit every part alike, the CPU seconds of:

- one policy step: ``LLMPolicy.act`` on a synthetic admin-grid observation (about 980 prompt tokens, the
  system message's KV cache reused as within an episode), plain and inside a ``lowrank`` perturbation (the
  rank-4 noise costs extra matmuls in every forward: that difference counts as ES overhead);
- full mode: drawing the noise of every tensor alone, entering ``perturbed`` (noise + in-place add), leaving
  it (exact restore: the noise regenerated and subtracted, plus the record's few elements);
- lowrank mode: entering (factor generation, forward hooks) and leaving ``perturbed``;
- ``apply_update`` with the seeds of a population of 8 in antithetic pairs (4 distinct seeds), in each mode.

A generation of one worker is then composed from these parts for a fixed rollout workload: population P = 8,
each member running 4 tasks x 5 policy steps (``tasks_per_generation`` default, median length of the bundled
reference solutions) = 20 policy steps; the 0.5B model is too slow on 2 cores for real rollouts, so this
workload of N policy forward passes stands for them in both models.
``share = (P * (perturb + restore + N * extra forward cost) + update) / (that + P * N * step)``.
CPU seconds of a single-threaded process equal its wall seconds on an idle core and are not inflated by other
processes' load (wall-based shares are in ``extra``). Goals (embedded model, P = 8): full < 5 %, lowrank
< 1 %. ``extra`` also gives the policy steps per member at which the goal would be met (break-even).

Method (real demo generations). The figure the issue's goal names: ES overhead share of a demo-config
generation, with real rollouts. Two arms in one process, generation by generation interleaved: the demo
config (``configs/demo.toml``, its dtype resolved as a run resolves it, one in-process worker, population 4,
2 tasks per generation, at most 3 steps, prompt mutation and centre evaluations off) driven by the real
``CoEvolutionES`` and ``AgentProblem``, whose worker replica is built with ``overlap=False`` (the old order:
perturb, episodes, restore, update, all in the worker's thread) or ``overlap=True`` (the weight work on a
background thread during the next row's first env reset, restores and updates deferred to it:
:mod:`es_agent.perturb_pipeline`). Both arms get the same seeds, hence the same rows, task batches and env
seeds; the benchmark checks that their weight checksums agree after every generation (same rewards, same
updates). Share = (``seconds_perturb`` + ``seconds_update`` of the generation's status: what the generation
waited for weight work, in the worker and the driver) / the wall time of ``searcher.step()``; the first
generation (models, browsers and sites built) is warm-up. Quick mode: the tiny random Qwen, 1 task x 1 step,
one measured generation (checks the code path, not the figure).

Method (memory). In a child process (embedded model), after one perturbation (so the weights are written,
as in a running worker), the peak RSS of ``apply_update`` with 8 seeds over the RSS
before it, against the largest tensor (design: one chunk-sized buffer, independent of model size and number of
seeds). ``python -m benchmarks.bench_overhead [--quick]``.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from typing import Any

from benchmarks.common import (
    MB,
    BenchmarkError,
    Figure,
    PhaseRSS,
    median,
    print_figures,
    rnd,
    run_as_script,
    run_isolated,
    skipped,
    spread,
    synthetic_observation,
    timed,
    torch_threads,
)

POPULATION = 8
LOWRANK_DEMO_RANK = 4
"""Rank of the low-rank arm of the demo-config share."""
STEPS_PER_MEMBER = 20
"""Policy steps per member in the composed generation: 4 tasks x 5 steps."""
RANK = 4
SIGMA = 1e-3
GOALS = {"full": 0.05, "lowrank": 0.01}
UPDATE_SEEDS = [11, 12, 13, 14]
UPDATE_COEFFS = [3e-4, -1e-4, 2e-4, -2e-4]
"""A population of 8 in antithetic pairs: 4 distinct seeds after merging."""


def _draw_noise(model: Any, seed: int) -> None:
    """Generate (and discard) the full-rank noise of every selected tensor, as ``perturbed`` does."""
    import torch

    from es_agent.noise import NoiseStream, block_bounds, block_capacity
    from es_agent.perturb import select_parameters

    buf = torch.empty(block_capacity("cpu"))
    for sp in select_parameters(model):
        stream = NoiseStream(seed, sp.index, "cpu")
        for start, stop in block_bounds(sp.param.numel(), "cpu"):
            stream.fill(buf[:stop - start], start)


def measure_parts(model_name: str, reps: int, update_reps: int) -> dict[str, list[tuple[float, float]]]:
    """``part -> [(wall s, CPU s) per repetition]`` for one model (in this process, one torch thread)."""
    from benchmarks.common import load_bench_model
    from es_agent.perturb import apply_update, perturbed
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools

    net, tok = load_bench_model(model_name)
    policy = LLMPolicy(net, tok, PromptPools.load().baseline("no_skill"), PolicyConfig())
    obs = synthetic_observation(7)
    parts: dict[str, list[tuple[float, float]]] = defaultdict(list)
    tokens: list[int] = []

    def add(name: str, fn: Any) -> None:
        wall, cpu, _ = timed(fn)
        parts[name].append((wall, cpu))

    def act() -> None:
        policy.act(obs)
        tokens.append(int(policy.last_info[0]["prompt_tokens"]))

    policy.act(obs)  # warm-up; computes the system-message KV cache reused by the timed steps
    with perturbed(net, 1, SIGMA):  # warm-up, as in a running worker
        pass
    for rep in range(reps):
        add("step", act)
        add("noise_full", lambda rep=rep: _draw_noise(net, 100 + rep))
        cm = perturbed(net, 100 + rep, SIGMA)
        add("perturb_full", cm.__enter__)
        add("restore_full", lambda cm=cm: cm.__exit__(None, None, None))
        cm = perturbed(net, 100 + rep, SIGMA, mode="lowrank", rank=RANK)
        add("perturb_lowrank", cm.__enter__)
        try:
            add("step_lowrank", act)
        finally:
            add("restore_lowrank", lambda cm=cm: cm.__exit__(None, None, None))
        if rep < update_reps:
            add("update_full", lambda: apply_update(net, UPDATE_SEEDS, UPDATE_COEFFS))
            add("update_lowrank", lambda: apply_update(net, UPDATE_SEEDS, UPDATE_COEFFS, mode="lowrank",
                                                       rank=RANK))
    parts["prompt_tokens"] = [(float(t), float(t)) for t in tokens]
    parts["params"] = [(float(sum(p.numel() for p in net.parameters())),) * 2]
    return parts


def _shares(parts: dict[str, list[tuple[float, float]]], mode: str, clock: int, steps: int = STEPS_PER_MEMBER,
            workers: int = 1) -> list[float]:
    """Overhead share per repetition (``clock`` 0: wall, 1: CPU) of one worker's generation."""
    members = POPULATION / workers
    update = median([t[clock] for t in parts[f"update_{mode}"]])
    out = []
    for i in range(len(parts["step"])):
        step = parts["step"][i][clock]
        per_member = parts[f"perturb_{mode}"][i][clock] + parts[f"restore_{mode}"][i][clock]
        if mode == "lowrank":
            per_member += steps * (parts["step_lowrank"][i][clock] - step)
        overhead = members * per_member + update
        out.append(overhead / (overhead + members * steps * step))
    return out


def _break_even(parts: dict[str, list[tuple[float, float]]], mode: str, goal: float) -> int | None:
    """Smallest policy steps per member at which the median CPU share falls below ``goal``."""
    for steps in range(1, 10_001):
        if median(_shares(parts, mode, 1, steps)) < goal:
            return steps
    return None


def _figures(model_name: str, parts: dict[str, list[tuple[float, float]]]) -> list[Figure]:
    params = parts["params"][0][0]
    tag = f"{model_name}, {params / 1e6:.0f}M fp32, P={POPULATION}, {STEPS_PER_MEMBER} steps/member"
    comp = {name: rnd(median([t[1] for t in vals])) for name, vals in parts.items()
            if name not in ("params", "prompt_tokens")}
    tokens = [t[0] for t in parts["prompt_tokens"]]
    figures = []
    for mode in ("full", "lowrank"):
        cpu = _shares(parts, mode, 1)
        goal = GOALS[mode] if model_name == "embedded" else None
        fig = Figure(f"ES overhead share of a generation, {mode} [{tag}]", rnd(100 * median(cpu), 3), "%",
                     f"< {100 * goal:g} %" if goal else None, (median(cpu) < goal) if goal else None,
                     spread([100 * s for s in cpu], 3))
        fig.extra = {
            "cpu_seconds_per_part": {k: v for k, v in comp.items() if k == "step" or k.endswith(mode)
                                     or (mode == "full" and k == "noise_full")},
            "share_wall_clock_pct": rnd(100 * median(_shares(parts, mode, 0)), 3),
            "share_with_2_workers_pct": rnd(100 * median(_shares(parts, mode, 1, workers=2)), 3),
            "break_even_steps_per_member": _break_even(parts, mode, goal or GOALS[mode]),
            "prompt_tokens_per_step": rnd(median(tokens)),
        }
        per_member = comp[f"perturb_{mode}"] + comp[f"restore_{mode}"]
        if mode == "full":
            noise = comp["noise_full"]
            fig.note = (f"per member {per_member:.2f} s perturb+restore ({noise:.2f} s of it drawing noise, "
                        f"{comp['restore_full']:.2f} s restore), update {comp['update_full']:.2f} s, vs "
                        f"{comp['step']:.2f} s per policy step")
        else:
            slower = comp["step_lowrank"] - comp["step"]
            fig.note = (f"per member {per_member:.3f} s enter+exit, {slower:+.3f} s per policy step for the "
                        f"rank-{RANK} matmuls, update {comp['update_lowrank']:.2f} s, vs "
                        f"{comp['step']:.2f} s per policy step")
        figures.append(fig)
    return figures


def hook_cost(reps: int, tokens: int = 650) -> Figure:
    """CPU seconds of one SmolLM2 layer's Linears on ``tokens`` positions: plain, plus the rank-4 delta as
    :mod:`es_agent.lowrank`'s hook computes it for one member (accumulated into the Linear's output in place:
    ``out.addmm_(x @ B, A^T)``), and as the earlier hook did (``out + bmm(bmm(x, B), A^T)``: a new
    output-sized tensor and an extra pass over it)."""
    import torch
    import torch.nn.functional as F

    shapes = [(576, 576), (576, 192), (576, 192), (576, 576), (576, 1536), (576, 1536), (1536, 576)]
    gen = torch.Generator().manual_seed(0)
    layers = [(torch.randn(1, tokens, i, generator=gen), torch.randn(o, i, generator=gen),
               torch.randn(1, i, RANK, generator=gen), torch.randn(1, o, RANK, generator=gen))
              for i, o in shapes]
    flat = [(x.view(-1, x.shape[-1]), w, b[0].contiguous(), a[0].T.contiguous()) for x, w, b, a in layers]

    def plain() -> None:
        for x, w, _, _ in layers:
            F.linear(x, w)

    def current() -> None:
        for x, w, b, a_t in flat:
            F.linear(x, w).addmm_(torch.mm(x, b), a_t)

    def previous() -> None:
        for x, w, b, a in layers:
            out = F.linear(x, w).reshape(1, -1, w.shape[0])
            out = out + torch.bmm(torch.bmm(x.reshape(1, -1, w.shape[1]), b), a.transpose(1, 2))

    times: dict[str, list[float]] = {"plain": [], "current": [], "previous": []}
    with torch.inference_mode():
        for fn in (plain, current, previous):
            fn()
        for _ in range(reps):
            for name, fn in (("plain", plain), ("current", current), ("previous", previous)):
                times[name].append(sum(timed(fn)[1] for _ in range(5)) / 5)
    cur = [c / p - 1 for c, p in zip(times["current"], times["plain"], strict=True)]
    old = [f / p - 1 for f, p in zip(times["previous"], times["plain"], strict=True)]
    return Figure(
        f"low-rank forward cost per layer, current hook [embedded Linear shapes, T={tokens}, rank {RANK}]",
        rnd(100 * median(cur), 3), "% over plain", None, None, spread([100 * c for c in cur], 3),
        f"the earlier out-of-place hook (out + bmm(bmm(x, B), A^T)) costs {100 * median(old):+.1f} %; what "
        "remains is one read-modify-write pass over the output (the rank-4 matmuls are ~1 % of the FLOPs)",
        extra={"previous_out_of_place_pct": rnd(100 * median(old), 3),
               "cpu_ms": {k: rnd(1000 * median(v)) for k, v in times.items()}})


def update_memory(model: str) -> dict[str, Any]:
    """Child-process side: extra peak RSS of ``apply_update`` with 8 seeds, in each mode."""
    import torch

    from benchmarks.common import load_bench_model
    from es_agent.lowrank import linear_targets
    from es_agent.noise import CHUNK_SIZE, block_capacity
    from es_agent.perturb import apply_update, perturbed, select_parameters

    torch.set_num_threads(1)
    net, _ = load_bench_model(model)
    with perturbed(net, 1, SIGMA):  # writes every weight once (a worker's steady state)
        pass
    selected = select_parameters(net)
    seeds, coeffs = list(range(20, 28)), [1e-4 * (i + 1) * (-1) ** i for i in range(8)]
    out: dict[str, Any] = {"largest_tensor_bytes": max(sp.param.numel() * sp.param.element_size()
                                                       for sp in selected)}
    targets = linear_targets(net, selected)
    widest = max(t.module.in_features + t.module.out_features for t in targets)
    out["bound_full_bytes"] = 2 * block_capacity("cpu") * 4
    out["bound_lowrank_bytes"] = CHUNK_SIZE * 4 + (len(seeds) + 1) * RANK * widest * 4
    for mode in ("full", "lowrank"):
        rss = PhaseRSS()
        rss.start()
        apply_update(net, seeds, coeffs, mode=mode, rank=RANK if mode == "lowrank" else None)
        phase = rss.stop()
        out[f"extra_{mode}_bytes"] = max(0, phase["peak_bytes"] - phase["start_bytes"])
        out["rss_method"] = phase["rss_method"]
    return out


def demo_generations(quick: bool) -> dict[str, Any]:
    """Per-generation timings of the demo config in process, old (``overlap=False``) vs new weight work,
    interleaved generation by generation (see the module docstring)."""
    from cotrain.checkpoint import initial_distribution, load_pools
    from cotrain.config import load_config, resolve_settings, with_resolved
    from cotrain.searcher import CoEvolutionES
    from cotrain.tasks import resolve_tasks
    from es_agent.problem import AgentProblem
    from es_agent.worker import Replica

    overrides = ["workers.num_workers=1", "prompts.mutation=false", "eval.every=0", "ui.mode=off"]
    if quick:
        overrides += ["agent.model=tiny:0", "env.max_steps=1", "env.tasks_per_generation=1"]
    cfg = load_config("configs/demo.toml", overrides)
    cfg = with_resolved(cfg, resolve_settings(cfg))
    if cfg.workers.num_actors is not None:
        raise BenchmarkError(f"expected an in-process worker, got num_actors={cfg.workers.num_actors}")
    pools = load_pools(cfg.prompts.pools)
    train_tasks = resolve_tasks(cfg).train
    arms: dict[str, Any] = {}
    lowrank_agent = dataclasses.replace(cfg.agent, mode="lowrank", rank=LOWRANK_DEMO_RANK)
    for name, overlap, agent_cfg in (("old", False, cfg.agent), ("new", True, cfg.agent),
                                     ("lowrank", True, lowrank_agent)):
        agent = dataclasses.replace(agent_cfg, prompt_pools=pools.to_dict())
        problem = AgentProblem(agent, cfg.env.spec_for(), max_batch_tasks=cfg.env.tasks_per_generation,
                               task_ids=list(train_tasks), num_actors=None, rows_per_piece=1,
                               seed=cfg.es.seed)
        problem._replica = Replica(agent, problem.env_spec, problem.pools, problem.log_end, overlap=overlap)
        searcher = CoEvolutionES(problem, initial_distribution(cfg, pools), popsize=cfg.es.population,
                                 train_tasks=train_tasks, tasks_per_generation=cfg.env.tasks_per_generation,
                                 seed=cfg.es.seed, shaping=cfg.es.shaping)
        arms[name] = {"problem": problem, "searcher": searcher, "gens": []}
    out: dict[str, Any] = {"dtype": cfg.agent.dtype, "model": cfg.agent.model,
                           "population": cfg.es.population, "tasks": cfg.env.tasks_per_generation,
                           "max_steps": cfg.env.spec.max_steps,
                           "checksums_agree": True}
    try:
        for _ in range(1 + (1 if quick else 3)):
            sums = []
            for name, arm in arms.items():
                started = time.perf_counter()
                arm["searcher"].step()
                wall = time.perf_counter() - started
                status = arm["searcher"].status
                arm["gens"].append({"wall": wall, **{k: float(status[k]) for k in (
                    "seconds_rollout", "seconds_perturb", "seconds_update")}})
                if name != "lowrank":  # the low-rank arm searches another space: its weights differ
                    sums.append(arm["problem"].local_replica.checksum())
            out["checksums_agree"] = out["checksums_agree"] and len(set(sums)) == 1
    finally:
        for arm in arms.values():
            arm["problem"].close()
    out["arms"] = {name: arm["gens"] for name, arm in arms.items()}
    return out


def demo_figures(data: dict[str, Any]) -> list[Figure]:
    """The share figure (new, with the goal) and the old arm beside it, from :func:`demo_generations`."""
    tag = (f"{data['model']} {data['dtype']}, P={data['population']}, {data['tasks']} tasks x <= "
           f"{data['max_steps']} steps, in process")
    shares, parts = {}, {}
    for name, gens in data["arms"].items():
        measured = gens[1:]
        shares[name] = [(g["seconds_perturb"] + g["seconds_update"]) / g["wall"] for g in measured]
        parts[name] = {k: rnd(sum(g[k] for g in measured) / len(measured), 3)
                       for k in ("wall", "seconds_rollout", "seconds_perturb", "seconds_update")}
    old, new = median(shares["old"]), median(shares["new"])
    same = data["checksums_agree"]
    walls = [n["wall"] / o["wall"] for n, o in zip(data["arms"]["new"][1:], data["arms"]["old"][1:],
                                                    strict=True)]
    new_fig = Figure(
        f"ES overhead share of a demo-config generation, overlapped weight work [{tag}]",
        rnd(100 * new, 3), "%", "< 5 %", new < 0.05 and same, spread([100 * x for x in shares["new"]], 3),
        f"old order {100 * old:.1f} % in the same run; per generation "
        f"{parts['new']['seconds_perturb']:.2f} s waited for weights + "
        f"{parts['new']['seconds_update']:.2f} s update vs "
        f"{parts['old']['seconds_perturb']:.2f} + {parts['old']['seconds_update']:.2f} s; "
        f"generation wall new/old {median(walls):.3f}; weight "
        f"checksums {'agree' if same else 'DIFFER'} after every generation",
        extra={"seconds_per_generation": parts, "wall_new_over_old": rnd(median(walls), 3),
               "checksums_agree": same, "generations_measured": len(shares["new"])})
    old_fig = Figure(f"ES overhead share of a demo-config generation, old order [{tag}]", rnd(100 * old, 3),
                     "%", None, None, spread([100 * x for x in shares["old"]], 3),
                     "perturb, episodes, restore and update in the worker's thread (overlap=False)")
    figures = [new_fig, old_fig]
    if "lowrank" in shares:
        low = median(shares["lowrank"])
        figures.append(Figure(
            f"ES overhead share of a demo-config generation, low-rank members "
            f"(r={LOWRANK_DEMO_RANK}) [{tag}]",
            rnd(100 * low, 3), "%", None, None, spread([100 * x for x in shares["lowrank"]], 3),
            f"the same config with agent.mode = \"lowrank\", overlapped weight work; waited "
            f"{parts['lowrank']['seconds_perturb']:.2f} s + "
            f"{parts['lowrank']['seconds_update']:.2f} s update "
            f"per generation; excludes the extra matmuls inside each forward (in seconds_rollout)",
            extra={"seconds_per_generation": parts["lowrank"]}))
    return figures


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the benchmark and return the figures (also printed)."""
    started = time.perf_counter()
    figures: list[Figure] = []
    with torch_threads(1):
        figures += demo_figures(demo_generations(quick))
    plan = [("embedded", 1, 1)] if quick else [("embedded", 3, 2), ("qwen0.5b", 2, 1)]
    with torch_threads(1):
        for model_name, reps, update_reps in plan:
            figures += _figures(model_name, measure_parts(model_name, reps, update_reps))
        figures.append(hook_cost(2 if quick else 5))
    if quick:
        figures.append(skipped("ES overhead share [qwen0.5b]", "quick mode: the 0.5B model runs in the full "
                               "suite only", "%"))
    mem = run_isolated("benchmarks.bench_overhead:update_memory", {"model": "embedded"})
    largest = mem["largest_tensor_bytes"]
    for mode in ("full", "lowrank"):
        extra = mem[f"extra_{mode}_bytes"]
        bound = mem[f"bound_{mode}_bytes"]
        figures.append(Figure(
            f"apply_update extra peak RSS / largest tensor, {mode}, 8 seeds [embedded]",
            rnd(extra / largest, 3), "x", "<= 1 (about one tensor at most)", extra <= largest, None,
            f"{extra / MB:.1f} MB extra vs largest tensor {largest / MB:.0f} MB; design bound "
            f"{bound / MB:.2f} MB (page-granular RSS, one measurement)",
            extra={"extra_mb": rnd(extra / MB), "largest_tensor_mb": rnd(largest / MB),
                   "design_bound_mb": rnd(bound / MB), "rss_method": mem["rss_method"]}))
    out = [f.to_dict() for f in figures]
    print_figures(f"bench_overhead (quick={quick}, {time.perf_counter() - started:.0f} s)", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__, "embedded model only, one repetition")
