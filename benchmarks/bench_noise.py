"""Noise generation, perturb/restore, update and checksum costs of the ES perturbation engine.

Side by side in one run, repeated and interleaved (median and spread = max - min over the repetitions):
M normals/s of the engine's generator (torch.Generator ``normal_`` into a reused cache-sized block) against
``torch.randn`` and the rejected alternatives (per-chunk ``torch.randn``, a counter-based splitmix64 hash plus
Box-Muller written in torch ops, numpy's SFC64), then seconds per full perturb+restore, per streamed update
with 8 seeds and per checksum on a set of tensors shaped like SmolLM2-135M (hidden 576, MLP 1536, 30 layers,
vocab 49152, 9 heads / 3 KV heads of 64, tied embeddings: 134.5M parameters).

Runs with ``torch.set_num_threads(1)`` (one worker per core, as the design has it). ``python -m
benchmarks.bench_noise [--quick]``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.common import run_as_script
from es_agent.noise import CHUNK_SIZE, NoiseStream, block_bounds, block_capacity
from es_agent.perturb import apply_update, perturbed, perturbed_batch, weights_checksum

DESIGN_RANDN_DRAW_S = 2.3
"""DESIGN.md's figure for one torch.randn draw of 135M parameters on these CPUs."""

_M64 = (1 << 64) - 1


def _s64(v: int) -> int:
    v &= _M64
    return v - (1 << 64) if v >= 1 << 63 else v


# --------------------------------------------------------------------------------------------- generators

def gen_engine(n: int, seed: int) -> float:
    """The engine's path: blocks of one tensor's noise filled into a reused buffer; returns a checksum."""
    buf = torch.empty(block_capacity("cpu"))
    stream = NoiseStream(seed, 0, "cpu")
    for start, stop in block_bounds(n, "cpu"):
        stream.fill(buf[:stop - start], start)
    return float(buf[0])


def gen_randn_whole(n: int, seed: int) -> float:
    return float(torch.randn(n, generator=torch.Generator().manual_seed(seed))[0])


def gen_randn_chunks(n: int, seed: int) -> float:
    buf = torch.empty(CHUNK_SIZE)
    gen = torch.Generator()
    for c0 in range(0, n, CHUNK_SIZE):
        gen.manual_seed(seed * 100003 + c0)
        torch.randn(min(CHUNK_SIZE, n - c0), generator=gen, out=buf[:min(CHUNK_SIZE, n - c0)])
    return float(buf[0])


class CounterGenerator:
    """Counter-based normals in torch ops: splitmix64 of int64 counters, two 24-bit uniforms, Box-Muller."""

    G, C1, C2 = _s64(0x9E3779B97F4A7C15), _s64(0xBF58476D1CE4E5B9), _s64(0x94D049BB133111EB)

    def __init__(self, block: int = 1 << 16) -> None:
        self.block = block
        self.base = torch.arange(block, dtype=torch.int64) * self.G
        self.x, self.t = torch.empty(block, dtype=torch.int64), torch.empty(block, dtype=torch.int64)
        self.u1, self.u2 = torch.empty(block), torch.empty(block)

    def fill(self, key: int, out: torch.Tensor) -> torch.Tensor:
        """``out`` (even length <= 2 * block) gets normals for counters ``0 .. len/2``."""
        n = out.numel() // 2
        x, t, u1, u2 = self.x[:n], self.t[:n], self.u1[:n], self.u2[:n]
        torch.add(self.base[:n], _s64(key), out=x)
        for shift, mult in ((30, self.C1), (27, self.C2), (31, None)):
            torch.bitwise_right_shift(x, shift, out=t)
            t.bitwise_and_((1 << (64 - shift)) - 1)
            x.bitwise_xor_(t)
            if mult is not None:
                x.mul_(mult)
        torch.bitwise_right_shift(x, 40, out=t)
        t.bitwise_and_(0xFFFFFF)
        x.bitwise_and_(0xFFFFFF)
        u1.copy_(t)
        u2.copy_(x)
        u1.add_(0.5).log_().sub_(24 * math.log(2)).mul_(-2.0).sqrt_()
        u2.mul_(2 * math.pi / 2**24)
        torch.cos(u2, out=out[:n]).mul_(u1)
        torch.sin(u2, out=out[n:2 * n]).mul_(u1)
        return out


def gen_counter(n: int, seed: int) -> float:
    counter = CounterGenerator()
    buf = torch.empty(2 * counter.block)
    for start in range(0, n, 2 * counter.block):
        key = seed * 0x9E3779B97F4A7C15 + start // 2 * counter.G
        counter.fill(key, buf[:min(2 * counter.block, n - start)])
    return float(buf[0])


def gen_numpy(n: int, seed: int) -> float:
    rng = np.random.Generator(np.random.SFC64(seed))
    buf = np.empty(CHUNK_SIZE, dtype=np.float32)
    for c0 in range(0, n, CHUNK_SIZE):
        rng.standard_normal(min(CHUNK_SIZE, n - c0), dtype=np.float32, out=buf[:min(CHUNK_SIZE, n - c0)])
    return float(buf[0])


def gaussian_quality(z: torch.Tensor) -> dict[str, float]:
    z = z.double()
    m, s = float(z.mean()), float(z.std())
    return {"mean": m, "var": s * s, "kurtosis": float(((z - m) ** 4).mean() / s**4)}


# ---------------------------------------------------------------------------------------------- the model

class SmolShapes(nn.Module):
    """Randomly filled tensors in the shapes of SmolLM2-135M (tied embeddings), built without init costs."""

    def __init__(self, dtype: torch.dtype, layers: int = 30) -> None:
        super().__init__()
        h, inter, kv = 576, 1536, 3 * 64
        with torch.device("meta"):
            self.embed = nn.Embedding(49152, h)
            self.layers = nn.ModuleList()
            for _ in range(layers):
                block = nn.Module()
                block.q, block.o = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
                block.k, block.v = nn.Linear(h, kv, bias=False), nn.Linear(h, kv, bias=False)
                block.gate, block.up = nn.Linear(h, inter, bias=False), nn.Linear(h, inter, bias=False)
                block.down = nn.Linear(inter, h, bias=False)
                block.norm1, block.norm2 = nn.LayerNorm(h, bias=False), nn.LayerNorm(h, bias=False)
                self.layers.append(block)
            self.norm = nn.LayerNorm(h, bias=False)
            self.lm_head = nn.Linear(h, 49152, bias=False)
        self.to_empty(device="cpu")
        self.lm_head.weight = self.embed.weight
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in self.parameters():
                p.normal_(0.0, 0.02, generator=gen)
        self.to(dtype)


# ---------------------------------------------------------------------------------------------- harness

def _times(fn: Callable[[], Any], reps: int) -> tuple[list[float], list[float]]:
    """Wall-clock and process CPU seconds of ``reps`` calls (CPU time is what load from other processes on
    the machine does not inflate; with one torch thread it is the work done)."""
    wall, cpu = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def _figure(name: str, timed: tuple[list[float], list[float]], unit: str, goal: str,
            limit: float | None) -> dict[str, Any]:
    """A figure from timings: value = median wall seconds, ``cpu_value`` = median CPU seconds; ``met`` when
    the CPU median is within ``limit`` (None: a reference figure)."""
    wall, cpu = timed
    return {"name": name, "value": round(statistics.median(wall), 4), "unit": unit, "goal": goal,
            "met": None if limit is None else statistics.median(cpu) <= limit,
            "spread": round(max(wall) - min(wall), 4), "cpu_value": round(statistics.median(cpu), 4)}


def bench_generators(reps: int, n: int) -> list[dict[str, Any]]:
    gens = {"engine: torch.Generator normal_, blocks of 2^16 in a reused buffer": gen_engine,
            "torch.randn, whole tensor": gen_randn_whole,
            "torch.randn, per 2^20 chunk into a reused buffer": gen_randn_chunks,
            "counter-based splitmix64 + Box-Muller in torch ops": gen_counter,
            "numpy SFC64 standard_normal float32": gen_numpy}
    wall: dict[str, list[float]] = {k: [] for k in gens}
    cpu: dict[str, list[float]] = {k: [] for k in gens}
    for fn in gens.values():
        fn(1 << 18, 0)  # warm up
    for r in range(reps):  # interleaved, so drifts in machine load hit every candidate alike
        for name, fn in gens.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn(n, r + 1)
            wall[name].append(n / (time.perf_counter() - t0) / 1e6)
            cpu[name].append(n / max(time.process_time() - c0, 1e-9) / 1e6)
    base = statistics.median(cpu["torch.randn, whole tensor"])
    figures = []
    for name in gens:
        engine = name.startswith("engine")
        figures.append({
            "name": f"normals/s [{name}]", "value": round(statistics.median(wall[name]), 1), "unit": "M/s",
            "goal": ">= torch.randn whole tensor (CPU time)" if engine else "reference",
            "met": statistics.median(cpu[name]) >= base if engine else None,
            "spread": round(max(wall[name]) - min(wall[name]), 1),
            "cpu_value": round(statistics.median(cpu[name]), 1)})
    from es_agent.noise import noise

    q = gaussian_quality(noise(1, 0, 1 << 22))
    cq = gaussian_quality(CounterGenerator().fill(12345, torch.empty(1 << 17)))
    figures.append({"name": "engine noise kurtosis (4M draws)", "value": round(q["kurtosis"], 4), "unit": "",
                    "goal": "3 +- 0.012 (5 s.e.)", "met": abs(q["kurtosis"] - 3) < 0.012, "spread": None,
                    "cpu_value": None})
    figures.append({"name": "engine noise mean / var (4M draws)", "value": round(q["mean"], 5), "unit": "",
                    "goal": f"|mean| < 0.0025, var {q['var']:.4f} ~ 1",
                    "met": abs(q["mean"]) < 0.0025 and abs(q["var"] - 1) < 0.0035,
                    "spread": None, "cpu_value": None})
    figures.append({"name": "counter-based noise kurtosis (128K draws)", "value": round(cq["kurtosis"], 4),
                    "unit": "", "goal": "3 +- 0.07", "met": abs(cq["kurtosis"] - 3) < 0.07, "spread": None,
                    "cpu_value": None})
    return figures


def bench_model(reps: int) -> list[dict[str, Any]]:
    figures = []
    seeds, coeffs = list(range(100, 108)), [1e-4 * (-1) ** i for i in range(8)]
    for dtype in (torch.float32, torch.bfloat16):
        model = SmolShapes(dtype)
        tag = f"{str(dtype).removeprefix('torch.')}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M"
        with perturbed(model, 0, 0.01):  # warm-up: first-touch page faults are not part of the figure
            pass

        def cycle(model: nn.Module = model) -> None:
            with perturbed(model, 1, 0.01):
                pass

        def update(model: nn.Module = model, mode: str = "full", rank: int | None = None) -> None:
            apply_update(model, seeds, coeffs, mode=mode, rank=rank)  # type: ignore[arg-type]

        one_draw, eight_draws = DESIGN_RANDN_DRAW_S, 8 * DESIGN_RANDN_DRAW_S
        figures.append(_figure(f"full perturb+restore [{tag}]", _times(cycle, reps), "s",
                               f"<= {one_draw} s (one torch.randn draw, DESIGN)", one_draw))
        figures.append(_figure(f"apply_update full, 8 seeds [{tag}]", _times(update, max(1, reps // 2)), "s",
                               f"<= {eight_draws:.1f} s (8 torch.randn draws)", eight_draws))
        checksum = _times(lambda m=model: weights_checksum(m), reps)
        figures.append(_figure(f"weights_checksum sha1 [{tag}]", checksum, "s", "<= 1 s", 1.0))
        if dtype == torch.float32:
            draw = _times(lambda m=model: [torch.randn(p.shape) for p in m.parameters()], reps)
            figures.append(_figure(f"torch.randn draw of every tensor (reference) [{tag}]", draw, "s",
                                   "reference", None))

            def batch_entry(model: nn.Module = model) -> None:
                with perturbed_batch(model, list(range(8)), [0.01] * 8, rank=4):
                    pass

            figures.append(_figure(f"lowrank perturbed_batch enter+exit, K=8, r=4 [{tag}]",
                                   _times(batch_entry, reps), "s", "<= 0.5 s", 0.5))
            figures.append(_figure(f"apply_update lowrank r=4, 8 seeds [{tag}]",
                                   _times(lambda m=model: update(m, "lowrank", 4), reps), "s", "<= 1 s", 1.0))
        del model
    return figures


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the benchmark (single-threaded torch) and return the figures (also printed)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        reps = 3 if quick else 7
        figures = bench_generators(reps, 1 << 22 if quick else 1 << 24)
        figures += bench_model(2 if quick else 5)
    finally:
        torch.set_num_threads(threads)
    print(f"bench_noise (torch {torch.__version__}, torch.set_num_threads(1), quick={quick})")
    for f in figures:
        extra = "" if f["spread"] is None else f" (spread {f['spread']}, CPU time {f['cpu_value']})"
        print(f"  {f['name']}: {f['value']} {f['unit']}{extra}  goal {f['goal']}  met={f['met']}")
    return figures


if __name__ == "__main__":
    run_as_script(main, __doc__, "fewer repetitions and smaller draws")
