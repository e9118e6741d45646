"""Accelerator section: the memory and throughput figures in bf16 on a CUDA GPU (skipped elsewhere).

Method. Only when ``torch.cuda.is_available()``; otherwise every figure is recorded as skipped, with the
reason. Memory: the workloads of :mod:`benchmarks.bench_memory` (inference, ES generation in full and lowrank
mode, backprop with AdamW), each in its own process, with the model in bf16 on ``cuda:0``; the figure is
``torch.cuda.max_memory_allocated`` over the workload (peak since a reset after setup), with the host's peak
RSS alongside (full mode keeps only a small exact-restore record, on the device). Models:
the embedded SmolLM2-135M and the Qwen2.5-0.5B-shaped model. Goal: ES / inference <= 1.10 in GPU memory.
Throughput: agent steps/s of the embedded model (:func:`benchmarks.bench_throughput.agent_steps`, synthetic
admin-grid observations, wall seconds) and batched low-rank vs sequential full-rank candidates/s at K = 8
(:func:`benchmarks.bench_throughput.batched_vs_sequential`, both models). ``python -m benchmarks.bench_gpu``.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import (
    GB,
    Figure,
    print_figures,
    recorded_trajectory,
    rnd,
    run_as_script,
    run_isolated,
    skipped,
)

GOAL = 1.10
KINDS = ("inference", "es_full", "es_lowrank", "backprop")


def _memory(model: str, steps: int, members: int) -> list[Figure]:
    runs = {kind: run_isolated("benchmarks.bench_memory:workload",
                               {"model": model, "kind": kind, "steps": steps, "members": members,
                                "device": "cuda", "dtype": "bfloat16"})
            for kind in KINDS}
    tag = f"{model}, {runs['inference']['params'] / 1e6:.0f}M bf16 on cuda"
    figures = [Figure(f"GPU peak allocated, {kind.replace('_', ' ')} [{tag}]",
                      rnd(runs[kind]["cuda_peak_bytes"] / GB), "GB",
                      extra={"host_peak_rss_gb": rnd(runs[kind]["peak_bytes"] / GB)}) for kind in KINDS]
    base = runs["inference"]
    for kind in KINDS[1:]:
        ratio = runs[kind]["cuda_peak_bytes"] / base["cuda_peak_bytes"]
        host = runs[kind]["peak_bytes"] / base["peak_bytes"]
        has_goal = kind != "backprop"
        figures.append(Figure(f"{kind.replace('_', ' ')} / inference GPU peak [{tag}]", rnd(ratio), "x",
                              f"<= {GOAL:.2f}" if has_goal else None, ratio <= GOAL if has_goal else None,
                              {"n": 1}, f"host peak RSS ratio {host:.2f}",
                              extra={"host_rss_ratio": rnd(host)}))
    return figures


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the accelerator figures (or record them as skipped) and return them (also printed)."""
    import torch

    started = time.perf_counter()
    if not torch.cuda.is_available():
        reason = "no CUDA device (torch.cuda.is_available() is False)"
        figures = [skipped("GPU peak memory, ES / inference [bf16]", reason, "x", f"<= {GOAL:.2f}"),
                   skipped("agent steps/s on GPU [embedded bf16]", reason, "steps/s"),
                   skipped("batched low-rank / sequential full-rank on GPU [bf16, K=8]", reason, "x", ">= 3")]
    else:
        from benchmarks.bench_throughput import agent_steps, batched_vs_sequential

        figures = []
        for model in ("embedded",) if quick else ("embedded", "qwen0.5b"):
            figures += _memory(model, 1 if quick else 2, 2)
        episodes = [[obs for obs, _ in recorded_trajectory(3, seed=s)] for s in range(2)]
        figures += agent_steps(episodes, 1 if quick else 3, "synthetic admin-grid pages", device="cuda",
                               dtype="bfloat16")
        for model in ("embedded",) if quick else ("embedded", "qwen0.5b"):
            figures += batched_vs_sequential([32] if quick else [32, 256, 1024], 1 if quick else 3,
                                             model_name=model, device="cuda", dtype="bfloat16")
        for fig in figures:
            fig.extra.setdefault("device", torch.cuda.get_device_name(0))
    out = [f.to_dict() for f in figures]
    print_figures(f"bench_gpu (quick={quick}, {time.perf_counter() - started:.0f} s)", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__, "embedded model only, one repetition")
