"""Seed-derived noise: definition, Gaussianity, independence across tensors and chunks, cross-process
determinism and bounded streaming."""

from __future__ import annotations

import hashlib
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from es_agent.noise import (
    CHUNK_SIZE,
    CPU_BLOCK,
    NoiseStream,
    PerturbationError,
    add_noise_,
    block_bounds,
    block_capacity,
    chunk_seed,
    derive_seed,
    merge_pairs,
    mix64,
    noise,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _reference_noise(seed: int, index: int, numel: int) -> torch.Tensor:
    """The definition, literally: one generator per chunk, one ``normal_`` call over the chunk."""
    parts = []
    for c0 in range(0, numel, CHUNK_SIZE):
        gen = torch.Generator().manual_seed(chunk_seed(seed, index, c0 // CHUNK_SIZE))
        parts.append(torch.empty(min(CHUNK_SIZE, numel - c0)).normal_(generator=gen))
    return torch.cat(parts)


def _corr(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


def test_mix64_is_splitmix64() -> None:
    # First output of the reference splitmix64 generator started from state 0.
    assert mix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF


def test_derived_seeds_are_mixed_not_summed() -> None:
    assert chunk_seed(1, 2, 0) != chunk_seed(2, 1, 0)
    assert derive_seed(5, 0) != derive_seed(4, 1)
    seeds = {chunk_seed(s, i, c) for s in range(8) for i in range(8) for c in range(4)}
    assert len(seeds) == 8 * 8 * 4
    # the low 32 bits (all that CPU mt19937 uses) are distinct too
    assert len({s & 0xFFFFFFFF for s in seeds}) == len(seeds)
    with pytest.raises(TypeError):
        derive_seed(1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("numel", [1, 5, 15, 16, 17, 1000, CPU_BLOCK - 1, CPU_BLOCK + 5, CPU_BLOCK + 16,
                                   3 * CPU_BLOCK + 100, CHUNK_SIZE, CHUNK_SIZE + 7,
                                   2 * CHUNK_SIZE + CPU_BLOCK + 3])
def test_blocked_fill_equals_definition(numel: int) -> None:
    assert torch.equal(noise(3, 7, numel), _reference_noise(3, 7, numel))


@pytest.mark.parametrize("numel", [1, 15, 17, CPU_BLOCK + 15, CPU_BLOCK + 16, CHUNK_SIZE + 3,
                                   3 * CHUNK_SIZE - 1])
def test_block_bounds_cover_exactly_within_chunks(numel: int) -> None:
    bounds = list(block_bounds(numel, "cpu"))
    assert bounds[0][0] == 0 and bounds[-1][1] == numel
    for (_, a1), (b0, _) in zip(bounds, bounds[1:], strict=False):
        assert a1 == b0
    for start, stop in bounds:
        assert start // CHUNK_SIZE == (stop - 1) // CHUNK_SIZE, "a block straddles a chunk"
        assert stop - start <= block_capacity("cpu")
        chunk_len = min(CHUNK_SIZE, numel - start // CHUNK_SIZE * CHUNK_SIZE)
        assert stop - start >= 16 or stop - start == chunk_len


def test_noise_is_standard_normal() -> None:
    n = 1 << 22
    z = noise(11, 0, n).double()
    mean, std = float(z.mean()), float(z.std())
    skew = float(((z - mean) ** 3).mean() / std**3)
    kurt = float(((z - mean) ** 4).mean() / std**4)
    # five standard errors: se(mean)=1/sqrt(n), se(std)~1/sqrt(2n), se(skew)~sqrt(6/n), se(kurt)~sqrt(24/n)
    assert abs(mean) < 5 / math.sqrt(n)
    assert abs(std - 1) < 5 / math.sqrt(2 * n)
    assert abs(skew) < 5 * math.sqrt(6 / n)
    assert abs(kurt - 3) < 5 * math.sqrt(24 / n)
    tail = float((z.abs() > 3).double().mean())  # P(|Z| > 3) = 0.0026998
    assert abs(tail - 0.0026998) < 5 * math.sqrt(0.0027 / n)


def test_same_shaped_tensors_get_uncorrelated_noise() -> None:
    n = 64 * 64
    bound = 5 / math.sqrt(n)  # |corr| of independent samples is ~N(0, 1/n)
    draws = [noise(seed, idx, (64, 64)) for seed in (0, 1) for idx in range(6)]
    for i in range(len(draws)):
        for j in range(i + 1, len(draws)):
            assert abs(_corr(draws[i], draws[j])) < bound
    # consecutive chunks of one tensor are independent streams too
    z = noise(0, 0, 2 * CHUNK_SIZE)
    assert abs(_corr(z[:CHUNK_SIZE], z[CHUNK_SIZE:])) < 5 / math.sqrt(CHUNK_SIZE)
    # ... and lagged values inside a chunk
    assert abs(_corr(z[:-1], z[1:])) < 5 / math.sqrt(z.numel())


def test_one_seed_for_every_tensor_would_correlate_them() -> None:
    """Contrast: seeding every tensor with the same seed (the anchors' bug) gives identical noise."""
    naive = [torch.randn(64, 64, generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert _corr(naive[0], naive[1]) == pytest.approx(1.0)
    assert abs(_corr(noise(7, 0, (64, 64)), noise(7, 1, (64, 64)))) < 5 / 64


def test_noise_is_identical_in_another_process() -> None:
    cases = [(0, 0, (64, 64)), (123456789, 3, (CHUNK_SIZE + 17,)), (2**53 - 1, 250, (7,))]
    here = [hashlib.sha1(noise(s, i, shape).numpy().tobytes()).hexdigest() for s, i, shape in cases]
    code = (
        "import hashlib\nfrom es_agent.noise import noise\n"
        f"for s, i, shape in {cases!r}:\n"
        "    print(hashlib.sha1(noise(s, i, shape).numpy().tobytes()).hexdigest())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.split() == here


def test_stream_refuses_out_of_order_fills() -> None:
    stream = NoiseStream(1, 0, "cpu")
    buf = torch.empty(CPU_BLOCK)
    stream.fill(buf, 0)
    with pytest.raises(PerturbationError, match="in order"):
        stream.fill(buf, 3 * CPU_BLOCK)
    stream.fill(buf, CHUNK_SIZE)  # a chunk start is always allowed
    with pytest.raises(PerturbationError, match="float32"):
        stream.fill(torch.empty(16, dtype=torch.float64), 0)


def test_merge_pairs_sums_repeated_seeds_and_drops_zeros() -> None:
    assert merge_pairs([3, 5, 3, 9], [1.0, 2.0, 0.5, 0.0]) == [(3, 1.5), (5, 2.0)]
    assert merge_pairs([4, 4], [0.25, -0.25]) == []
    with pytest.raises(PerturbationError, match="2 seeds but 1"):
        merge_pairs([1, 2], [1.0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_add_noise_matches_dense_sum(dtype: torch.dtype) -> None:
    numel = CHUNK_SIZE + 3 * CPU_BLOCK + 5
    theta = torch.randn(numel, generator=torch.Generator().manual_seed(0)).to(dtype)
    pairs = [(10, 0.5), (11, -0.25), (12, 1e-3)]
    work = torch.promote_types(dtype, torch.float32)
    dense = sum(c * noise(s, 4, numel) for s, c in pairs)
    expected = (theta.to(work) + dense.to(work)).to(dtype)
    got = add_noise_(theta.clone(), 4, pairs)
    tol = {torch.float32: 1e-6, torch.float64: 1e-6, torch.bfloat16: 1e-2}[dtype]
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)
    if dtype == torch.bfloat16:  # one rounding of the fp32 result: at most one bf16 ulp off the reference
        ulp = expected.float().abs().clamp_min(1e-30) * 2**-7
        assert bool(((got.float() - expected.float()).abs() <= ulp).all())
