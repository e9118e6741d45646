"""The compact candidate rows that travel between the optimizer and the rollout workers.

A candidate is a handful of numbers, never model-sized: the noise seed of its weight perturbation, its signed
sigma (antithetic pairs share a seed and differ in sign), the env seed of the generation's task batch (common
random numbers: every candidate of a generation gets the same one), and one variant id per prompt slot.
Rows are stored as float64; every seed lies in ``[0, SEED_BOUND)`` (``2**31``), so it is exact in a row and
valid for 32-bit seeders.

:func:`check_rows` is the one validator of rows against a problem's prompt pools (the problem, the workers and
the distribution's update all call it); it raises :class:`~es_agent.errors.CandidateRowError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from es_agent.errors import CandidateRowError

SEED_BOUND = 2**31
"""Every seed of the toolkit (noise seeds, env seeds, episode reset seeds, update seeds) lies in
``[0, SEED_BOUND)``: drawn there, checked there, exact in a float64 row and valid for 32-bit seeders."""

FIXED_COLUMNS = 3
"""Columns before the prompt ids: noise seed, signed sigma, env seed."""


@dataclass(frozen=True)
class CandidateRow:
    """One population member of a generation."""

    noise_seed: int
    """Seed of the weight perturbation ``eps(noise_seed)``."""
    sigma: float
    """Signed perturbation scale: the weights evaluated are ``theta + sigma * eps(noise_seed)``."""
    env_seed: int
    """Seed of the generation's task batch and env resets (shared by all candidates of a generation)."""
    prompt_ids: tuple[int, ...]
    """One variant index per prompt slot, in the slot order of the prompt pools."""

    def __post_init__(self) -> None:
        for name, value in (("noise_seed", self.noise_seed), ("env_seed", self.env_seed)):
            if not 0 <= int(value) < SEED_BOUND:
                raise CandidateRowError(f"{name}={value} outside [0, SEED_BOUND = 2**31)")
        if any(int(i) < 0 for i in self.prompt_ids):
            raise CandidateRowError(f"prompt_ids must be non-negative, got {self.prompt_ids}")


def encode_rows(rows: Sequence[CandidateRow]) -> torch.Tensor:
    """Pack candidates into a ``(len(rows), 3 + n_slots)`` float64 tensor."""
    if not rows:
        raise CandidateRowError("encode_rows needs at least one row")
    n_slots = len(rows[0].prompt_ids)
    if any(len(r.prompt_ids) != n_slots for r in rows):
        raise CandidateRowError("all rows must have the same number of prompt slots")
    data = [[float(r.noise_seed), float(r.sigma), float(r.env_seed), *map(float, r.prompt_ids)] for r in rows]
    return torch.tensor(data, dtype=torch.float64)


def decode_row(values: torch.Tensor | Sequence[float]) -> CandidateRow:
    """Unpack one row produced by :func:`encode_rows`."""
    vals = values.tolist() if isinstance(values, torch.Tensor) else list(values)
    if len(vals) < FIXED_COLUMNS:
        raise CandidateRowError(f"a candidate row needs at least {FIXED_COLUMNS} columns, got {len(vals)}")
    seed, sigma, env_seed, *prompt = vals
    for name, v in (("noise_seed", seed), ("env_seed", env_seed), *(("prompt id", p) for p in prompt)):
        if float(v) != int(v):
            raise CandidateRowError(f"{name} {v} in a candidate row is not an integer")
    return CandidateRow(int(seed), float(sigma), int(env_seed), tuple(int(p) for p in prompt))


def decode_rows(values: torch.Tensor) -> list[CandidateRow]:
    """Unpack a 2-D tensor of rows."""
    if values.ndim != 2:
        raise CandidateRowError(f"expected a 2-D tensor of rows, got shape {tuple(values.shape)}")
    return [decode_row(v) for v in values]


def check_rows(values: torch.Tensor | Sequence[Sequence[float]], pool_sizes: Sequence[int],
               slot_names: Sequence[str] | None = None) -> list[CandidateRow]:
    """Decode ``(N, 3 + n_slots)`` rows (``N >= 1``) and check them against the prompt pools: finite values,
    integral seeds in ``[0, SEED_BOUND)``, one prompt id per slot in ``[0, pool size)``. ``slot_names``
    (default ``slot 0``, ``slot 1``, ...) only name the slots in errors. Raises :class:`CandidateRowError`
    naming the row, the slot and the bad value."""
    names = list(slot_names) if slot_names is not None else [f"slot {i}" for i in range(len(pool_sizes))]
    if len(names) != len(pool_sizes):
        raise CandidateRowError(f"{len(pool_sizes)} pool sizes but {len(names)} slot names {names}")
    tensor = torch.as_tensor(values, dtype=torch.float64).detach().cpu()
    width = FIXED_COLUMNS + len(pool_sizes)
    if tensor.ndim != 2 or tensor.shape[1] != width or tensor.shape[0] < 1:
        got = tensor.shape[1] - FIXED_COLUMNS if tensor.ndim == 2 else None
        raise CandidateRowError(
            f"candidate rows must have shape (N >= 1, {width}): {FIXED_COLUMNS} fixed columns and "
            f"{len(pool_sizes)} prompt slots {names}; got shape {tuple(tensor.shape)}"
            + (f" ({got} prompt slot(s))" if got is not None else ""))
    rows = []
    for i, values_i in enumerate(tensor):
        if not torch.isfinite(values_i).all():
            raise CandidateRowError(f"row {i} has non-finite values: {values_i.tolist()}")
        try:
            row = decode_row(values_i)
        except CandidateRowError as exc:
            raise CandidateRowError(f"row {i}: {exc}") from None
        for slot, size, pid in zip(names, pool_sizes, row.prompt_ids, strict=True):
            if not 0 <= pid < size:
                raise CandidateRowError(f"row {i}: prompt id {pid} out of range for slot {slot!r} "
                                        f"(it has {size} variant(s): ids 0..{size - 1})")
        rows.append(row)
    return rows
