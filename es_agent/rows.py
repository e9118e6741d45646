"""The compact candidate rows that travel between the optimizer and the rollout workers.

A candidate is a handful of numbers, never model-sized: the noise seed of its weight perturbation, its signed
sigma (antithetic pairs share a seed and differ in sign), the env seed of the generation's task batch (common
random numbers: every candidate of a generation gets the same one), and one variant id per prompt slot.
Rows are stored as float64 so that seeds up to 2**53 stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

MAX_EXACT_SEED = 2**53
"""Seeds are stored in float64 rows; integers up to this bound are represented exactly."""

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
            if not 0 <= int(value) < MAX_EXACT_SEED:
                raise ValueError(f"{name}={value} outside [0, 2**53): it would not survive a float64 row")
        if any(int(i) < 0 for i in self.prompt_ids):
            raise ValueError(f"prompt_ids must be non-negative, got {self.prompt_ids}")


def encode_rows(rows: Sequence[CandidateRow]) -> torch.Tensor:
    """Pack candidates into a ``(len(rows), 3 + n_slots)`` float64 tensor."""
    if not rows:
        raise ValueError("encode_rows needs at least one row")
    n_slots = len(rows[0].prompt_ids)
    if any(len(r.prompt_ids) != n_slots for r in rows):
        raise ValueError("all rows must have the same number of prompt slots")
    data = [[float(r.noise_seed), float(r.sigma), float(r.env_seed), *map(float, r.prompt_ids)] for r in rows]
    return torch.tensor(data, dtype=torch.float64)


def decode_row(values: torch.Tensor | Sequence[float]) -> CandidateRow:
    """Unpack one row produced by :func:`encode_rows`."""
    vals = values.tolist() if isinstance(values, torch.Tensor) else list(values)
    if len(vals) < FIXED_COLUMNS:
        raise ValueError(f"a candidate row needs at least {FIXED_COLUMNS} columns, got {len(vals)}")
    seed, sigma, env_seed, *prompt = vals
    for name, v in (("noise_seed", seed), ("env_seed", env_seed), *(("prompt id", p) for p in prompt)):
        if float(v) != int(v):
            raise ValueError(f"{name} {v} in a candidate row is not an integer")
    return CandidateRow(int(seed), float(sigma), int(env_seed), tuple(int(p) for p in prompt))


def decode_rows(values: torch.Tensor) -> list[CandidateRow]:
    """Unpack a 2-D tensor of rows."""
    if values.ndim != 2:
        raise ValueError(f"expected a 2-D tensor of rows, got shape {tuple(values.shape)}")
    return [decode_row(v) for v in values]
