"""GPU path: ES / inference peak GPU memory and the batched low-rank population vs sequential members, on
randomly initialised Qwen2.5-0.5B / 1.5B / 7B built on the GPU itself (bf16); the same lockstep path on CPU.

Method.
- Models: Qwen2.5-0.5B (hidden 896, 24 layers, 14 heads / 2 KV heads, MLP 4864, vocab 151936, tied
  embeddings), 1.5B (1536, 28, 12 / 2, 8960, 151936, tied) and 7B (3584, 28, 28 / 4, 18944, vocab 152064,
  untied head), allocated directly on ``cuda:0`` in bf16 without transformers' init and filled in place
  (uniform, std 0.02; norms 1, biases 0). The tokenizer is the tests' tiny BPE (its ids fit any vocabulary):
  prompts are in its tokens, capped by the policy's 1,024-token budget.
- Episodes: a synthetic env of admin-grid pages (:func:`benchmarks.common.synthetic_observation`, about 3,000
  tokens of axtree truncated to the budget); every action leads to the next page, episodes are cut at
  ``steps`` actions (the same pages for every member, so every arm does the same work whatever it picks).
- Memory (CUDA only): ``torch.cuda.max_memory_allocated`` over each phase (peak reset after setup; weights
  included): inference = one member's episode at the centre (``LLMPolicy`` + ``run_episode``); ES lowrank /
  ES full = the same episode under ``perturbed(...)`` (rank 4 / full-rank with the exact-restore record on the
  device) then ``apply_update`` with 8 seeds; batched inference / batched ES = the lockstep population
  (:class:`es_agent.population.LockstepPopulation`) of K = 8 rows at scale 0 / at the members' scales.
  Goal: ES / inference <= 1.05 (sequential and batched).
- Throughput: candidate actions scored per second by K = 8 members on the same episodes: sequentially (each
  member ``run_episode`` under ``perturbed(seed, sigma, mode=...)``, low-rank rank 4 and full-rank), and in
  lockstep (all K members' steps in one batched prefill and one batched scoring forward). Wall seconds with
  CUDA synchronised on the GPU, process CPU seconds on the CPU (load-robust); arms alternated. Goal:
  batched / sequential low-rank >= 3x at K = 8.
- Noise on the device: whether seeded noise drawn on CUDA equals the CPU's (it does not: Philox vs mt19937,
  see ``es_agent.noise``), and the cost of the K = 8 members' low-rank factors drawn on the GPU vs on the CPU
  and copied over (what device-independent noise would cost).
- Forward level: K = 8 members each scoring T tokens in one batched forward vs K low-rank forwards (T = 32: a
  scoring forward, weight-bandwidth-bound; T = 1024: a prefill, compute-bound), without prompt building.
- CPU (no CUDA): the GPU figures are skipped with the reason; the full run measures the same lockstep vs
  sequential low-rank throughput with the embedded SmolLM2-135M (fp32, one thread, K = 4 members, one step
  each: a step costs seconds here) and the T = 32 forward ratio at K = 8, the quick run runs the
  whole GPU code path on the tiny Qwen on CPU as a check that it does not rot (its numbers in ``extra``).

On a GPU machine (one command, under 15 minutes on an H200; gymnasium is the only package it lacks): here,
``echo /.whl/ >> .git/info/exclude; python3 -m pip download --no-deps --only-binary=:all:
--python-version 3.12 --implementation cp --platform manylinux2014_x86_64 -d .whl gymnasium
farama-notifications``, then on the device ``python3 -m pip install -q --no-index --no-deps --target
/tmp/site .whl/*.whl && PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 python3 -m benchmarks.bench_gpu --json |
tee $OUT/bench_gpu.log`` with ``.whl`` carried.
``python -m benchmarks.bench_gpu [--quick]``.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.common import (
    GB,
    Figure,
    median,
    print_figures,
    random_init_,
    rnd,
    run_as_script,
    skipped,
    spread,
)

MEMORY_GOAL = 1.05
BATCH_GOAL = 3.0
K = 8
RANK = 4
SIGMA = 1e-3
BUDGET_ENV = "BENCH_GPU_BUDGET_S"
BUDGET_S = 600.0
"""Seconds after which no further model is started (the whole script must fit a 15-minute device lease);
``BENCH_GPU_BUDGET_S`` overrides it, so a shorter lease can still fit one command."""

_QWEN = dict(max_position_embeddings=32768, rope_theta=1_000_000.0, rms_norm_eps=1e-6)
QWEN25: dict[str, dict[str, Any]] = {
    "Qwen2.5-0.5B": dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True, **_QWEN),
    "Qwen2.5-1.5B": dict(hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, intermediate_size=8960, vocab_size=151936,
                         tie_word_embeddings=True, **_QWEN),
    "Qwen2.5-7B": dict(hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                       intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False, **_QWEN),
}
"""The real shapes of Qwen2.5's 0.5B, 1.5B and 7B models (their config.json files)."""
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=1024, tie_word_embeddings=True, **_QWEN)
"""The quick CPU check's model (the tests' tiny Qwen shape)."""


def random_qwen(shape: dict[str, Any], device: str, dtype: Any, seed: int = 0) -> Any:
    """A randomly filled Qwen2 causal LM of ``shape``, allocated on ``device`` in ``dtype`` (no host copy)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers < 5
        from transformers.modeling_utils import no_init_weights

    from es_agent.tiny import tiny_tokenizer

    tok = tiny_tokenizer()
    config = Qwen2Config(**shape, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         bos_token_id=None)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device), no_init_weights():
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    gen = torch.Generator(device=device).manual_seed(seed)
    random_init_(model, gen)
    model.eval()
    return model, tok


class SyntheticPages:
    """A Gymnasium-style env of synthetic admin-grid pages: every action leads to the next page; truncated
    after ``steps`` actions, reward 0 (the work per step does not depend on the choices)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self._n = self._seed = 0

    def _obs(self) -> dict[str, str]:
        from benchmarks.common import synthetic_observation

        return synthetic_observation(self._seed * 1000 + self._n)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None,
              ) -> tuple[dict[str, str], dict[str, Any]]:
        self._seed, self._n = int(seed or 0), 0
        return self._obs(), {"task_id": (options or {}).get("task_id", 0)}

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool, dict[str, Any]]:
        self._n += 1
        return self._obs(), 0.0, False, self._n >= self.steps, {}

    def close(self) -> None:
        """Nothing to release."""


def _sync(device: str) -> None:
    import torch

    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _arms(model: Any, tok: Any, device: str, k: int, steps: int) -> dict[str, Any]:
    """The measured workloads of one model: ``name -> fn() -> candidates scored``."""
    from es_agent.perturb import apply_update, perturbed
    from es_agent.policy import LLMPolicy, PolicyConfig
    from es_agent.population import LockstepPopulation, Member
    from es_agent.prompts import PromptPools
    from es_agent.rollout import run_episode

    genome = PromptPools.load().baseline("no_skill")
    config = PolicyConfig()
    seeds = [500 + i for i in range(k)]
    scales = [SIGMA * (-1) ** i for i in range(k)]
    envs = [SyntheticPages(steps) for _ in range(k)]
    lockstep = LockstepPopulation(model, tok, config, rank=RANK)

    def episode(policy: LLMPolicy) -> int:
        run_episode(envs[0], policy, seed=1, options={"task_id": 0})
        return int(policy.stats["candidates"])

    def sequential(mode: str, members: int) -> int:
        total = 0
        for seed, scale in zip(seeds[:members], scales[:members], strict=True):
            with perturbed(model, seed, scale, mode=mode, rank=RANK if mode == "lowrank" else None):  # type: ignore[arg-type]
                total += episode(LLMPolicy(model, tok, genome, config))
        _sync(device)
        return total

    def batched(members_scales: list[float]) -> int:
        members = [Member(genome, s, c) for s, c in zip(seeds, members_scales, strict=True)]
        before = lockstep.candidates
        lockstep.run(envs, members, reset_seeds=[1] * k, options=[{"task_id": 0}] * k)
        _sync(device)
        return lockstep.candidates - before

    def es(mode: str) -> int:
        n = sequential(mode, 1)
        apply_update(model, seeds, [0.1 * s for s in scales], mode=mode,  # type: ignore[arg-type]
                     rank=RANK if mode == "lowrank" else None)
        return n

    return {
        "inference": lambda: episode(LLMPolicy(model, tok, genome, config)),
        "es_lowrank": lambda: es("lowrank"),
        "es_full": lambda: es("full"),
        "batched_inference": lambda: batched([0.0] * k),
        "batched_es": lambda: batched(scales),
        "sequential_lowrank": lambda: sequential("lowrank", k),
        "sequential_full": lambda: sequential("full", k),
        "batched": lambda: batched(scales),
    }


MEMORY_KINDS = ("inference", "es_lowrank", "es_full", "batched_inference", "batched_es")
SPEED_KINDS = ("sequential_full", "sequential_lowrank", "batched")


def measure(name: str, model: Any, tok: Any, device: str, dtype: str, k: int, steps: int,
            reps: int) -> list[Figure]:
    """Memory (CUDA) and throughput figures of one model."""
    import torch

    cuda = torch.device(device).type == "cuda"
    arms = _arms(model, tok, device, k, steps)
    tag = f"{name} {dtype} on {device}, K={k}, {steps} steps"
    figures: list[Figure] = []
    if cuda:
        arms["batched"]()  # warm-up (kernels, allocator)
    if cuda:
        peaks: dict[str, int] = {}
        for kind in MEMORY_KINDS:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            arms[kind]()
            torch.cuda.synchronize()
            peaks[kind] = torch.cuda.max_memory_allocated()
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        for kind in MEMORY_KINDS:
            figures.append(Figure(f"GPU peak allocated, {kind.replace('_', ' ')} [{tag}]",
                                  rnd(peaks[kind] / GB), "GB", extra={"weights_gb": rnd(weights / GB)}))
        for es_kind, base in (("es_lowrank", "inference"), ("es_full", "inference"),
                              ("batched_es", "batched_inference")):
            ratio = peaks[es_kind] / peaks[base]
            figures.append(Figure(f"{es_kind.replace('_', ' ')} / {base.replace('_', ' ')} GPU peak [{tag}]",
                                  rnd(ratio), "x", f"<= {MEMORY_GOAL:.2f}", ratio <= MEMORY_GOAL,
                                  {"n": 1}))
    rates: dict[str, list[float]] = {kind: [] for kind in SPEED_KINDS}
    for _ in range(reps):
        for kind in SPEED_KINDS:
            _sync(device)
            started, cpu_started = time.perf_counter(), time.process_time()
            n = arms[kind]()
            seconds = time.perf_counter() - started if cuda else time.process_time() - cpu_started
            rates[kind].append(n / seconds)
    for kind in SPEED_KINDS:
        figures.append(Figure(f"{kind.replace('_', ' ')} candidates/s [{tag}]", rnd(median(rates[kind]), 3),
                              "candidates/s", spread=spread(rates[kind], 3)))
    for base, goal in (("sequential_lowrank", cuda), ("sequential_full", False)):  # the goal is a GPU one
        ratio = [b / s for b, s in zip(rates["batched"], rates[base], strict=True)]
        figures.append(Figure(
            f"batched population / {base.replace('_', ' ')} [{tag}]", rnd(median(ratio), 3), "x",
            f">= {BATCH_GOAL:g}" if goal else None, median(ratio) >= BATCH_GOAL if goal else None,
            spread(ratio, 3), "wall seconds, CUDA synchronised" if cuda else "CPU seconds, one thread"))
    return figures


def forward_figures(name: str, model: Any, device: str, dtype: str, k: int, lengths: list[int],
                    reps: int) -> list[Figure]:
    """Forward level: K members each scoring T tokens, in ONE batched forward (``perturbed_batch``) vs K
    forwards under ``perturbed(..., mode="lowrank")``. T = 32 stands for a candidate-scoring forward after the
    cached prompt (weight-bandwidth-bound: batching pays), T = 1024 for a prefill (compute-bound: it does
    not)."""
    import torch

    from es_agent.perturb import perturbed, perturbed_batch

    seeds = [700 + i for i in range(k)]
    scales = [SIGMA * (-1) ** i for i in range(k)]
    cuda = torch.device(device).type == "cuda"

    def run(ids: torch.Tensor) -> None:
        with torch.inference_mode():
            model(input_ids=ids, logits_to_keep=1)
        _sync(device)

    def sequential(ids: torch.Tensor) -> None:
        for seed, scale in zip(seeds, scales, strict=True):
            with perturbed(model, seed, scale, mode="lowrank", rank=RANK):
                run(ids)

    def batched(ids: torch.Tensor) -> None:
        with perturbed_batch(model, seeds, scales, rank=RANK):
            run(ids.repeat(k, 1))

    figures = []
    for length in lengths:
        ids = torch.randint(0, 1000, (1, length), device=device)
        batched(ids)  # warm-up
        ratios = []
        for _ in range(reps):
            times = []
            for fn in (sequential, batched):
                _sync(device)
                started, cpu_started = time.perf_counter(), time.process_time()
                fn(ids)
                times.append(time.perf_counter() - started if cuda else time.process_time() - cpu_started)
            ratios.append(times[0] / times[1])
        tag = f"{name} {dtype} on {device}, K={k}"
        figures.append(Figure(f"batched / sequential low-rank forward, T={length} [{tag}]",
                              rnd(median(ratios), 3), "x", spread=spread(ratios, 3),
                              note="forward level (no prompt building, no env): the batched path's ceiling"))
    return figures


def noise_figures(device: str, shape: dict[str, Any], k: int) -> list[Figure]:
    """Whether CUDA noise equals CPU noise, and the members' low-rank factors drawn on the GPU vs on the CPU
    and copied (the cost of device-independent noise), for one model shape."""
    import torch

    from es_agent.noise import noise

    gpu = noise(7, 3, 1 << 20, device)
    cpu = noise(7, 3, 1 << 20, "cpu")
    equal = bool(torch.equal(gpu.cpu(), cpu))
    h, inter, layers = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv = h // shape["num_attention_heads"] * shape["num_key_value_heads"]
    sizes = [(h, h), (kv, h), (kv, h), (h, h), (inter, h), (inter, h), (h, inter)] * layers
    numel = sum((o + i) * RANK for o, i in sizes)

    def draw(where: str) -> float:
        torch.cuda.synchronize()
        started = time.perf_counter()
        for member in range(k):
            for index, (o, i) in enumerate(sizes):
                noise(member, index, (o + i) * RANK, where).to(device, non_blocking=True)
        torch.cuda.synchronize()
        return time.perf_counter() - started

    on_gpu, on_cpu = draw(device), draw("cpu")
    return [
        Figure("seeded noise on CUDA equals CPU noise [1M elements]", float(equal), "bool",
               note="0: CUDA draws with Philox, the CPU with mt19937 (es_agent.noise): a replica on the "
                    "other device type replays a different update log"),
        Figure(f"low-rank factors of K={k} members, drawn on the GPU [{numel / 1e6:.1f}M elements each]",
               rnd(on_gpu), "s", spread={"n": 1}),
        Figure(f"low-rank factors of K={k} members, drawn on the CPU and copied [{numel / 1e6:.1f}M elements "
               "each]", rnd(on_cpu), "s", spread={"n": 1}),
    ]


def budget_seconds() -> float:
    """The time budget: ``BENCH_GPU_BUDGET_S`` when set (a positive number of seconds), else ``BUDGET_S``."""
    import os

    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{BUDGET_ENV}={raw!r}: expected a positive number of seconds")
    return value


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the GPU figures (or record them as skipped, with the CPU lockstep figures) and return them."""
    import torch

    from benchmarks.common import torch_threads

    started = time.perf_counter()
    budget_s = budget_seconds()
    figures: list[Figure] = []
    if torch.cuda.is_available():
        device = "cuda"
        models = ["Qwen2.5-0.5B"] if quick else list(QWEN25)
        figures += noise_figures(device, QWEN25[models[-1]], K)
        for name in models:
            if time.perf_counter() - started > budget_s:
                figures.append(skipped(f"batched population / sequential lowrank [{name} bf16 on cuda]",
                                       f"time budget of {budget_s:.0f} s spent", "x", f">= {BATCH_GOAL:g}"))
                continue
            model, tok = random_qwen(QWEN25[name], device, torch.bfloat16)
            done = len(figures)
            figures += measure(name, model, tok, device, "bfloat16", K, 2 if quick else 3, 1 if quick else 2)
            figures += forward_figures(name, model, device, "bfloat16", K, [32, 1024], 1 if quick else 3)
            # Printed as soon as measured: a lease that ends mid-run still returns the models done so far.
            print_figures(f"bench_gpu {name} ({time.perf_counter() - started:.0f} s)",
                          [f.to_dict() for f in figures[done:]])
            del model
            torch.cuda.empty_cache()
        for fig in figures:
            fig.extra.setdefault("device", torch.cuda.get_device_name(0))
    else:
        reason = "no CUDA device (torch.cuda.is_available() is False)"
        check: dict[str, Any] = {}
        with torch_threads(1):
            if quick:  # the GPU code path on the tiny Qwen, on CPU: it must not rot
                model, tok = random_qwen(TINY, "cpu", torch.float32)
                for f in measure("tiny Qwen", model, tok, "cpu", "float32", 4, 2, 1) + forward_figures(
                        "tiny Qwen", model, "cpu", "float32", 4, [32], 1):
                    check[f.name] = f.value
            else:  # the lockstep path against sequential members with the embedded model
                from es_agent.models import load_model

                model, tok = load_model("embedded", dtype=torch.float32)
                figures += measure("SmolLM2-135M", model, tok, "cpu", "float32", 4, 1, 1)
                figures += forward_figures("SmolLM2-135M", model, "cpu", "float32", K, [32], 2)
        extra = {"cpu_quick_check": check} if check else {}
        figures += [
            Figure("ES lowrank / inference GPU peak [Qwen2.5 bf16 on cuda]", None, "x",
                   f"<= {MEMORY_GOAL:.2f}", skipped=reason, extra=extra),
            Figure(f"batched population / sequential lowrank [Qwen2.5 bf16 on cuda, K={K}]", None, "x",
                   f">= {BATCH_GOAL:g}", skipped=reason),
        ]
    out = [f.to_dict() for f in figures]
    print_figures(f"bench_gpu (quick={quick}, {time.perf_counter() - started:.0f} s)", out)
    return out


if __name__ == "__main__":
    run_as_script(main, __doc__, "the 0.5B model only, one repetition (CPU: the tiny Qwen code-path check)")
