"""Seed-derived Gaussian noise: a pure function of ``(seed, tensor index)``, generated chunk by chunk in fp32.

Definition. The noise of tensor ``index`` under ``seed`` is a flat fp32 vector of the tensor's ``numel``,
cut into chunks of :data:`CHUNK_SIZE` elements. Chunk ``c`` holds the values of one ``normal_`` call over a
contiguous fp32 tensor of the chunk's length, drawn from a ``torch.Generator`` on the parameter's device
seeded with :func:`chunk_seed` ``(seed, index, c)`` (splitmix64 mixing, never ``seed + index``). So every
chunk can be generated on its own, memory stays bounded, and another process computes the same values.

Speed. On CPU a chunk is filled in :data:`CPU_BLOCK` sub-blocks that continue the same generator: torch fills
uniforms sequentially and transforms them 16 at a time, so this gives exactly the values of one call over the
chunk (``tests/es_agent/test_noise.py`` checks it) while the block stays in L2 cache and can be used at once.
``benchmarks/bench_noise.py`` compares this with ``torch.randn``, a counter-based hash written in torch ops
and numpy's generators; mt19937 into a reused cache-sized buffer was the fastest on these CPUs.

Reproducibility. Values depend on ``(seed, index, numel)``, on the device type (CPU draws with mt19937, CUDA
with Philox) and on torch's RNG code: identical across processes and machines with the same torch build and
device type, not between a CPU and a GPU replica. CPU mt19937 uses the low 32 bits of a seed, so two of the
millions of chunks drawn in a large run can coincide (probability about ``n_chunks**2 / 2**33``): harmless for
ES, but it is not 64-bit independence.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch

from es_agent.errors import PerturbationError

CHUNK_SIZE = 1 << 20
"""Elements per independently seeded chunk (part of the noise definition: changing it changes the noise)."""

CPU_BLOCK = 1 << 16
"""Elements filled per ``normal_`` call on CPU (a speed knob only: the values do not depend on it)."""

_VECTOR_MIN = 16
"""torch's CPU ``normal_`` takes its vectorised path from 16 elements; a sub-block never goes below it."""

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_C1 = 0xBF58476D1CE4E5B9
_C2 = 0x94D049BB133111EB


def _as_int(value: int, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {value!r} ({type(value).__name__})") from None


def mix64(value: int) -> int:
    """The splitmix64 finaliser: a bijective avalanche mix of a 64-bit integer."""
    z = value & _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


def derive_seed(seed: int, *words: int) -> int:
    """A 64-bit seed derived from ``seed`` and ``words`` by chained splitmix64 mixing (order matters)."""
    h = mix64(_as_int(seed, "seed") + _GOLDEN)
    for w in words:
        h = mix64(((h + _GOLDEN) & _M64) ^ (_as_int(w, "seed word") & _M64))
    return h


def chunk_seed(seed: int, index: int, chunk: int) -> int:
    """Seed of chunk ``chunk`` of the noise of tensor ``index`` under ``seed``."""
    return derive_seed(seed, index, chunk)


def block_bounds(numel: int, device: torch.device | str) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of the blocks in which noise of ``numel`` elements is filled on ``device``.

    Blocks never straddle a chunk. On CPU they are :data:`CPU_BLOCK` long (a short tail is merged into the
    block before it, so no block but a whole chunk has fewer than 16 elements); elsewhere one block per chunk.
    """
    block = CPU_BLOCK if torch.device(device).type == "cpu" else CHUNK_SIZE
    for c0 in range(0, numel, CHUNK_SIZE):
        c1 = min(c0 + CHUNK_SIZE, numel)
        start = c0
        while start < c1:
            stop = min(start + block, c1)
            if c1 - stop < _VECTOR_MIN:
                stop = c1
            yield start, stop
            start = stop


def block_capacity(device: torch.device | str) -> int:
    """The largest block :func:`block_bounds` yields on ``device`` (the size of a fill buffer)."""
    return CPU_BLOCK + _VECTOR_MIN if torch.device(device).type == "cpu" else CHUNK_SIZE


class NoiseStream:
    """Sequential reader of the noise of one tensor: fill its blocks in :func:`block_bounds` order."""

    def __init__(self, seed: int, index: int, device: torch.device | str) -> None:
        self.seed = _as_int(seed, "seed")
        self.index = _as_int(index, "tensor index")
        self.device = torch.device(device)
        self._gen = torch.Generator(device=self.device)
        self._next = -1

    def fill(self, out: torch.Tensor, start: int) -> torch.Tensor:
        """Write the noise values ``[start, start + out.numel())`` into the fp32 tensor ``out`` and return it.

        ``start`` must begin a chunk or continue where the previous fill stopped.
        """
        if out.dtype != torch.float32 or not out.is_contiguous():
            raise PerturbationError(f"noise fills a contiguous float32 tensor, got {out.dtype} "
                                    f"(contiguous={out.is_contiguous()})")
        if start % CHUNK_SIZE == 0:
            self._gen.manual_seed(chunk_seed(self.seed, self.index, start // CHUNK_SIZE))
        elif start != self._next:
            raise PerturbationError(f"noise blocks must be filled in order: expected start {self._next} "
                                    f"or a chunk start, got {start}")
        out.normal_(generator=self._gen)
        self._next = start + out.numel()
        return out


def noise(seed: int, index: int, shape: Sequence[int] | torch.Size | int,
          device: torch.device | str = "cpu") -> torch.Tensor:
    """The whole fp32 noise tensor of tensor ``index`` under ``seed`` (materialised: for small tensors,
    low-rank factors and reference computations; the streaming paths never call it for a full tensor)."""
    size = torch.Size([shape]) if isinstance(shape, int) else torch.Size(shape)
    out = torch.empty(size, dtype=torch.float32, device=device)
    flat = out.view(-1)
    stream = NoiseStream(seed, index, out.device)
    for start, stop in block_bounds(flat.numel(), out.device):
        stream.fill(flat[start:stop], start)
    return out


def merge_pairs(seeds: Sequence[int], coeffs: Sequence[float]) -> list[tuple[int, float]]:
    """``(seed, coeff)`` pairs with the coefficients of a repeated seed summed (antithetic pairs share one
    noise draw) and zero coefficients dropped, in order of first appearance."""
    if len(seeds) != len(coeffs):
        raise PerturbationError(f"got {len(seeds)} seeds but {len(coeffs)} coefficients")
    merged: dict[int, float] = {}
    for s, c in zip(seeds, coeffs, strict=True):
        key = _as_int(s, "seed")
        merged[key] = merged.get(key, 0.0) + float(c)
    return [(s, c) for s, c in merged.items() if c != 0.0]


def add_noise_(flat: torch.Tensor, index: int, pairs: Sequence[tuple[int, float]]) -> torch.Tensor:
    """In place, ``flat = flat + sum_i c_i * eps(seed_i, index)`` for ``pairs = [(seed_i, c_i)]``.

    Streams block by block and seed by seed; the sum and the addition run in fp32 (fp64 for fp64 tensors)
    and are cast to ``flat``'s dtype once per element. Extra memory: two fill buffers of
    :func:`block_capacity` elements, whatever the tensor size or number of seeds. ``flat`` must be a
    contiguous 1-D view of the tensor (the element order defines the noise).
    """
    for start, stop, acc in _noise_blocks(flat, index, pairs):
        _add_block(flat[start:stop], acc)
    return flat


@dataclass
class NoiseUndo:
    """What undoing :func:`add_noise_undoable_` needs besides the seeds: the elements that subtracting the
    noise again would not bring back bit for bit (fp rounding): their positions in the tensor and original
    values, in one contiguous pair of tensors (few long-lived allocations), plus whole blocks kept as they
    were where most of a block would be listed (``(start, values)``)."""

    positions: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int32))
    values: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    dense: list[tuple[int, torch.Tensor]] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        """Bytes held (positions and values)."""
        return self.positions.nbytes + self.values.nbytes + sum(v.nbytes for _, v in self.dense)


_DENSE_FRACTION = 0.25
"""A block with more mismatches than this share keeps all its original values (positions would cost more)."""


def add_noise_undoable_(flat: torch.Tensor, index: int, pairs: Sequence[tuple[int, float]]) -> NoiseUndo:
    """:func:`add_noise_`, plus the record that makes :func:`undo_noise_` restore ``flat`` bit for bit.

    Undoing subtracts the regenerated noise again; for the few elements where that does not give back the
    original bits (rounding: about 3 % of fp32 weights at sigma 0.01, 6 % in bf16), the original values are
    kept. The check runs here, with the very operations :func:`undo_noise_` will run, so the restore is exact
    by construction. Memory: the record (a few percent of the tensor) instead of a copy of it, plus three
    block buffers. If the addition is interrupted, the blocks done so far are undone before re-raising.
    """
    dense: list[tuple[int, torch.Tensor]] = []
    record = _Record(flat, torch.int32 if flat.numel() < 2**31 else torch.int64)
    done = 0
    try:
        original = torch.empty(min(block_capacity(flat.device), flat.numel()), dtype=flat.dtype,
                               device=flat.device)
        restored = torch.empty_like(original)
        bits = _BITS.get(flat.dtype)
        if bits is None:
            raise PerturbationError(f"exact undo needs a 16, 32 or 64-bit float dtype, got {flat.dtype}")
        for start, stop, acc in _noise_blocks(flat, index, pairs):
            dst, orig, back = flat[start:stop], original[:stop - start], restored[:stop - start]
            orig.copy_(dst)
            try:
                _add_block(dst, acc, keep_acc=True)
                _subtract_block(dst, acc, out=back)
                wrong = back.view(bits) != orig.view(bits)
                n_wrong = int(wrong.sum())
                if n_wrong > _DENSE_FRACTION * (stop - start):
                    dense.append((start, orig.clone()))
                elif n_wrong:
                    local = wrong.nonzero().squeeze(1)
                    kept = orig[local]
                    record.append(local.add_(start), kept)
            except BaseException:
                dst.copy_(orig)
                raise
            done = stop
    except BaseException:
        if done:
            undo_noise_(flat[:done], index, pairs, record.finish(dense))
        raise
    return record.finish(dense)


class _Record:
    """Positions and values of an undo record, appended block by block into buffers that grow by doubling (a
    handful of allocations per tensor: many small ones fragment the heap and inflate resident memory)."""

    def __init__(self, flat: torch.Tensor, index_dtype: torch.dtype) -> None:
        self.positions = torch.empty(0, dtype=index_dtype, device=flat.device)
        self.values = torch.empty(0, dtype=flat.dtype, device=flat.device)
        self.n = 0

    def append(self, positions: torch.Tensor, values: torch.Tensor) -> None:
        k = positions.numel()
        if self.n + k > self.positions.numel():
            capacity = max(2 * self.positions.numel(), self.n + k, 1 << 16)
            self.positions = _grown(self.positions, capacity, self.n)
            self.values = _grown(self.values, capacity, self.n)
        self.positions[self.n:self.n + k].copy_(positions)
        self.values[self.n:self.n + k].copy_(values)
        self.n += k

    def finish(self, dense: list[tuple[int, torch.Tensor]]) -> NoiseUndo:
        """The record, trimmed to its length (one copy when the buffers were much larger)."""
        positions, values = self.positions[:self.n], self.values[:self.n]
        if self.n < self.positions.numel() // 2:
            positions, values = positions.clone(), values.clone()
        return NoiseUndo(positions, values, dense)


def _grown(buffer: torch.Tensor, capacity: int, keep: int) -> torch.Tensor:
    out = torch.empty(capacity, dtype=buffer.dtype, device=buffer.device)
    out[:keep].copy_(buffer[:keep])
    return out


def undo_noise_(flat: torch.Tensor, index: int, pairs: Sequence[tuple[int, float]], undo: NoiseUndo) -> None:
    """Restore ``flat`` (or its first blocks) to its bits before :func:`add_noise_undoable_` with the same
    ``index`` and ``pairs`` and that call's record."""
    for start, stop, acc in _noise_blocks(flat, index, pairs):
        dst = flat[start:stop]
        _subtract_block(dst, acc, out=dst)
    n = flat.numel()
    for start, values in undo.dense:
        if start < n:
            flat[start:start + values.numel()].copy_(values)
    if undo.positions.numel():
        flat.index_copy_(0, undo.positions.long(), undo.values)


_BITS = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
         torch.float64: torch.int64}
"""Integer views for bitwise comparison (``-0.0`` and ``0.0`` differ, NaN equals itself)."""


def _noise_blocks(flat: torch.Tensor, index: int, pairs: Sequence[tuple[int, float]],
                  ) -> Iterator[tuple[int, int, torch.Tensor]]:
    """``(start, stop, acc)`` per block of ``flat``: ``acc = sum_i c_i * eps_i`` over the block, in the work
    dtype (fp32, fp64 for fp64 tensors), in a buffer reused by the next block."""
    if flat.ndim != 1 or not flat.is_contiguous():
        raise PerturbationError(f"add_noise_ needs a contiguous 1-D tensor, got shape {tuple(flat.shape)}")
    if not pairs or flat.numel() == 0:
        return
    device = flat.device
    work_dtype = torch.promote_types(flat.dtype, torch.float32)
    cap = min(block_capacity(device), flat.numel())
    eps_buf = torch.empty(cap, dtype=torch.float32, device=device)
    acc_buf = torch.empty(cap, dtype=work_dtype, device=device)
    streams = [(NoiseStream(s, index, device), float(c)) for s, c in pairs]
    in_place = work_dtype == flat.dtype
    for start, stop in block_bounds(flat.numel(), device):
        n = stop - start
        eps, acc = eps_buf[:n], acc_buf[:n]
        for k, (stream, c) in enumerate(streams):
            stream.fill(eps, start)
            if len(streams) == 1 and in_place:
                acc = eps.mul_(c)
            elif k == 0:
                torch.mul(eps, c, out=acc)
            else:
                acc.add_(eps.mul_(c))
        yield start, stop, acc


def _add_block(dst: torch.Tensor, acc: torch.Tensor, *, keep_acc: bool = False) -> None:
    """``dst += acc`` with one rounding to ``dst``'s dtype (``acc`` is overwritten unless ``keep_acc``; the
    result is the same bits either way)."""
    if acc.dtype == dst.dtype:  # fp32/fp64 weights: add straight into them (same single rounding)
        dst.add_(acc)
    elif keep_acc:
        dst.copy_(torch.add(acc, dst))
    else:
        dst.copy_(acc.add_(dst))


def _subtract_block(dst: torch.Tensor, acc: torch.Tensor, *, out: torch.Tensor) -> None:
    """``out = dst - acc`` with one rounding to ``dst``'s dtype; ``acc`` is left as it is (``out`` may be
    ``dst``)."""
    if acc.dtype == dst.dtype:
        torch.sub(dst, acc, out=out)
    else:
        out.copy_(torch.sub(dst.to(acc.dtype), acc))
