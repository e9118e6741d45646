"""Peak resident memory of ES training vs inference-only rollouts vs a backpropagation baseline.

Method. Every measurement runs in its own Python process (:func:`benchmarks.common.run_isolated`), with one
torch thread, on fp32 CPU weights. After the setup (imports, model load, prompt genome) the process resets its
resident-set high-water mark and runs one workload; the figure is ``VmHWM`` at its end (the phase's peak RSS,
model weights included, transient peaks of model loading excluded). All workloads replay the same recorded
trajectory: ``steps`` observations of a synthetic admin-grid page (about 3,000 tokens of accessibility tree,
truncated by the policy to its 1,024-token prompt budget: about 980 prompt tokens per step) and the actions
taken there.

- inference: ``LLMPolicy.act`` on each observation (prefill with the system-message KV cache, then
  tree-attention scoring of the candidate actions), exactly what a rollout does per step, repeated once per
  population member (the same acts as the ES workloads, so allocator growth over many acts cancels out);
- ES full / ES lowrank: one generation of a worker: for each of ``members`` population members,
  ``perturbed(model, seed, sigma)`` (``full``: in place, exact restore by subtraction plus a record;
  ``lowrank``: rank-4 noise in the forward), the same inference, restore; then ``apply_update`` with the
  members' seeds;
- backprop: what a gradient RL trainer does with the same trajectory: for each step a forward with grad over
  prompt + action tokens (logits only at the action positions), REINFORCE loss ``-reward * sum log p(action
  tokens)``, backward (gradients accumulated over the steps), then one ``torch.optim.AdamW`` step over all
  parameters. No gradient checkpointing.

Models: the embedded SmolLM2-135M (fp32, and bf16 once: the restore is exact in both) and a
Qwen2.5-0.5B-shaped model (494M parameters, fp32, random weights; the embedded tokenizer). Memory does not
grow with the number of members or steps after the first (buffers are reused), so a short trajectory and two
members stand for a whole generation. Goal: ES / inference <= 1.10.
``python -m benchmarks.bench_memory [--quick]``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.common import (
    GB,
    Figure,
    PhaseRSS,
    median,
    print_figures,
    recorded_trajectory,
    rnd,
    run_as_script,
    run_isolated,
    skipped,
    spread,
)

KINDS = ("inference", "es_full", "es_lowrank", "backprop")
BLOCKS = "model.layers.*"
"""Selection of the ``es_full_blocks`` variant: the transformer blocks only (no embeddings, no final norm)."""
GOAL = 1.10
_SHORT = {"float32": "fp32", "bfloat16": "bf16"}
RANK = 4
SIGMA = 1e-3


def workload(model: str, kind: str, steps: int, members: int, device: str = "cpu",
             dtype: str = "float32") -> dict[str, Any]:
    """Child-process side: set up ``model``, then measure the peak RSS of one ``kind`` workload (and the peak
    of allocated accelerator memory when ``device`` is a CUDA device)."""
    import torch

    from benchmarks.common import load_bench_model, param_count, weight_bytes
    from es_agent.perturb import apply_update, perturbed
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.prompts import PromptPools

    torch.set_num_threads(1)
    cuda = torch.device(device).type == "cuda"
    net, tok = load_bench_model(model, getattr(torch, dtype), device)
    genome = PromptPools.load().baseline("no_skill")
    policy = LLMPolicy(net, tok, genome, PolicyConfig())
    trajectory = recorded_trajectory(steps)
    seeds = [1000 + i for i in range(members)]
    scales = [SIGMA * (-1) ** i for i in range(members)]
    prompt_tokens: list[int] = []

    def rollout() -> None:
        policy.reset()
        for obs, _ in trajectory:
            policy.act(obs)
            prompt_tokens.append(int(policy.last_info[0]["prompt_tokens"]))

    rss = PhaseRSS()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        cuda_start = torch.cuda.memory_allocated()
    if kind == "backprop":
        prompts = [tok(policy.render(obs), add_special_tokens=False)["input_ids"] for obs, _ in trajectory]
        suffix = genome.action_format.action_prefix
        actions = [tok(suffix + action + "<|im_end|>", add_special_tokens=False)["input_ids"]
                   for _, action in trajectory]
        net.train()
        rss.start()
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-5)
        for ids, act in zip(prompts, actions, strict=True):
            seq = torch.tensor([list(ids) + list(act)], device=device)
            logits = net(input_ids=seq, logits_to_keep=len(act) + 1).logits[0, :-1]
            target = torch.tensor(act, device=device)[:, None]
            logp = torch.log_softmax(logits.float(), dim=-1).gather(1, target).sum()
            loss = -1.0 * logp  # reward 1 for the trajectory
            loss.backward()
            prompt_tokens.append(len(ids))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    else:
        rss.start()
        if kind == "inference":
            for _ in range(members):  # the same acts as a generation of `members`, unperturbed
                rollout()
        elif kind in ("es_full", "es_lowrank", "es_full_blocks"):
            mode = "lowrank" if kind == "es_lowrank" else "full"
            rank = None if mode == "full" else RANK
            params = BLOCKS if kind == "es_full_blocks" else None
            for seed, scale in zip(seeds, scales, strict=True):
                with perturbed(net, seed, scale, mode=mode, rank=rank, params=params):
                    rollout()
            apply_update(net, seeds, [0.1 * s for s in scales], mode=mode, rank=rank, params=params)
        else:
            raise ValueError(f"unknown workload {kind!r}; expected one of {KINDS}")
    out = rss.stop()
    if cuda:
        torch.cuda.synchronize()
        out.update(cuda_peak_bytes=torch.cuda.max_memory_allocated(), cuda_start_bytes=cuda_start)
    from es_agent.perturb import select_parameters

    selected = select_parameters(net, BLOCKS if kind == "es_full_blocks" else None)
    out.update(model=model, kind=kind, params=param_count(net), weight_bytes=weight_bytes(net),
               selected_bytes=sum(sp.param.numel() * sp.param.element_size() for sp in selected),
               prompt_tokens=prompt_tokens, steps=steps, members=members)
    return out


def _ratio_figures(model: str, dtype: str, runs: dict[str, list[dict[str, Any]]]) -> list[Figure]:
    """Figures of one model and dtype from its runs (``kind -> [result per repetition]``)."""
    peaks = {k: [r["peak_bytes"] for r in v] for k, v in runs.items()}
    first = runs["inference"][0]
    tokens = [t for r in runs["inference"] for t in r["prompt_tokens"]]
    tag = f"{model}, {first['params'] / 1e6:.0f}M {_SHORT[dtype]}"
    figures = []
    for kind in (*KINDS, "es_full_blocks"):
        if kind not in runs:
            continue
        figures.append(Figure(
            f"peak RSS, {kind.replace('_', ' ')} [{tag}]", rnd(median(peaks[kind]) / GB), "GB",
            spread=spread([p / GB for p in peaks[kind]]),
            extra={"lifetime_ru_maxrss_gb": rnd(max(r["ru_maxrss_bytes"] for r in runs[kind]) / GB),
                   "rss_method": runs[kind][0]["rss_method"],
                   "phase_seconds": [r["phase_seconds"] for r in runs[kind]]}))
    figures[0].note = (f"prompt tokens per step {min(tokens)}-{max(tokens)}; trajectory of {first['steps']} "
                       f"step(s), {runs['es_full'][0]['members']} ES member(s)")
    inference = peaks["inference"]
    for kind, label in (("es_full", "ES full"), ("es_lowrank", "ES lowrank"), ("es_full_blocks",
                        "ES full, blocks only"), ("backprop", "backprop")):
        if kind not in peaks:
            continue
        n = min(len(peaks[kind]), len(inference))
        ratios = [peaks[kind][i] / inference[i] for i in range(n)]
        has_goal = kind in ("es_full", "es_lowrank")
        fig = Figure(f"{label} / inference peak RSS [{tag}]", rnd(median(ratios)), "x",
                     f"<= {GOAL:.2f}" if has_goal else None, median(ratios) <= GOAL if has_goal else None,
                     spread(ratios))
        if kind.startswith("es_full"):
            weights = runs[kind][0]["selected_bytes"]
            over = [(peaks[kind][i] - inference[i]) / weights for i in range(n)]
            fig.extra = {"selected_weights_gb": rnd(weights / GB),
                         "extra_over_selected_weights": rnd(median(over))}
            fig.note = (f"the extra memory is {median(over):.3f}x the selected weights "
                        f"({weights / GB:.2f} GB; a master copy would be 1x): the exact-restore record plus "
                        "block buffers")
            if kind == "es_full_blocks":
                fig.note = f"perturbing {BLOCKS} only (no embeddings): " + fig.note
        figures.append(fig)
    return figures


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the measurements (two child processes at a time) and return the figures (also printed)."""
    # (model, dtype, steps, members, repetitions of the four workloads, extra variants)
    plan: list[tuple[str, str, int, int, int, tuple[str, ...]]] = [
        ("embedded", "float32", 1, 1, 1, ()) if quick
        else ("embedded", "float32", 2, 2, 2, ("es_full_blocks",))]
    if not quick:
        plan.append(("embedded", "bfloat16", 2, 2, 1, ()))
        plan.append(("qwen0.5b", "float32", 1, 2, 1, ()))
    jobs = [(model, dtype, kind, steps, members) for model, dtype, steps, members, reps, variants in plan
            for rep in range(reps) for kind in KINDS + (variants if rep == 0 else ())]
    jobs.sort(key=lambda job: job[2] == "backprop" and job[0] == "qwen0.5b")  # the biggest one last
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [(job, pool.submit(run_isolated, "benchmarks.bench_memory:workload",
                                     {"model": job[0], "dtype": job[1], "kind": job[2], "steps": job[3],
                                      "members": job[4]}))
                   for job in jobs]
        results: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
        for (model, dtype, kind, *_), future in futures:
            results.setdefault((model, dtype), {}).setdefault(kind, []).append(future.result())
    figures: list[Figure] = []
    for model, dtype, *_ in plan:
        figures += _ratio_figures(model, dtype, results[(model, dtype)])
    if quick:
        figures.append(skipped("peak RSS ratios [qwen0.5b; embedded bf16]", "quick mode: these run in the "
                               "full suite only", "x", f"<= {GOAL:.2f}"))
    out = [f.to_dict() for f in figures]
    print_figures(f"bench_memory (quick={quick}, {time.perf_counter() - started:.0f} s)", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__, "embedded model only, one repetition")
