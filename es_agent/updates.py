"""The one type of a weight update and the records of the update log that moves every replica's centre.

A weight update is a list of ``(seed, coeff)`` pairs: ``theta += sum_j coeffs[j] * eps(seeds[j])``
(:class:`WeightUpdate`). The search distribution emits one per generation, the problem logs it as an
:class:`UpdateRecord` (with its position in the log and its generation), checkpoints store it, and every
replica applies it. Prompt-pool replacements travel in the same log as ``pools`` records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from es_agent.errors import SpecError
from es_agent.rows import SEED_BOUND


@dataclass(frozen=True)
class WeightUpdate:
    """One weight update: ``theta += sum_j coeffs[j] * eps(seeds[j])`` (empty: no change)."""

    seeds: tuple[int, ...] = ()
    """Noise seeds, each at most once, in order of first appearance in the rows."""
    coeffs: tuple[float, ...] = ()
    """Coefficient of each seed's noise (already includes the learning rate and sigma)."""

    def __post_init__(self) -> None:
        if len(self.seeds) != len(self.coeffs):
            raise SpecError(f"a weight update needs one coeff per seed, got {len(self.seeds)} seeds and "
                            f"{len(self.coeffs)} coeffs")
        bad = [s for s in self.seeds
               if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < SEED_BOUND]
        if bad:
            raise SpecError(f"update seeds must be ints in [0, SEED_BOUND = 2**31), got {bad[:3]}")
        if not all(isinstance(c, int | float) and not isinstance(c, bool) and math.isfinite(c)
                   for c in self.coeffs):
            raise SpecError(f"update coefficients must be finite numbers, got {list(self.coeffs)[:3]}...")
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "coeffs", tuple(float(c) for c in self.coeffs))

    def __len__(self) -> int:
        return len(self.seeds)

    @property
    def is_empty(self) -> bool:
        """True when the update changes nothing."""
        return not self.seeds

    def to_dict(self) -> dict[str, list]:
        """JSON form: ``{"seeds": [...], "coeffs": [...]}``."""
        return {"seeds": list(self.seeds), "coeffs": list(self.coeffs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WeightUpdate:
        """Inverse of :meth:`to_dict`; anything else is a :class:`~es_agent.errors.SpecError`."""
        if not isinstance(data, Mapping) or set(data) != {"seeds", "coeffs"}:
            raise SpecError(f"a weight update is {{'seeds': [...], 'coeffs': [...]}}, got {data!r}")
        seeds, coeffs = data["seeds"], data["coeffs"]
        if not isinstance(seeds, list | tuple) or not isinstance(coeffs, list | tuple):
            raise SpecError(f"a weight update's seeds and coeffs must be lists, got {data!r}")
        return cls(tuple(seeds), tuple(coeffs))


@dataclass(frozen=True)
class UpdateRecord:
    """One entry of the update log: a weight update, or new prompt pools (exactly one of the two)."""

    index: int
    """Absolute position in the run's update log (0 for the first record of the run)."""
    generation: int
    """Generation that produced the record."""
    weights: WeightUpdate | None = None
    """The weight update of a ``weights`` record."""
    pools: Mapping[str, Any] | None = None
    """The new pools of a ``pools`` record, in their JSON form (``PromptPools.to_dict()``)."""

    def __post_init__(self) -> None:
        for name in ("index", "generation"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise SpecError(f"UpdateRecord.{name} must be an int >= 0, got {value!r}")
        if (self.weights is None) == (self.pools is None):
            raise SpecError("an update record carries either a weight update or pools, exactly one of them")
        if self.weights is not None and not isinstance(self.weights, WeightUpdate):
            raise SpecError(f"UpdateRecord.weights must be a WeightUpdate, got {type(self.weights).__name__}")

    @property
    def kind(self) -> Literal["weights", "pools"]:
        """``weights``: ``theta += sum_i coeffs[i] * eps(seeds[i])``; ``pools``: the prompt pools are
        replaced."""
        return "weights" if self.weights is not None else "pools"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (one line of a worker's update log): ``index``, ``generation``, ``kind`` and either
        ``seeds``/``coeffs`` or ``pools``."""
        out: dict[str, Any] = {"index": self.index, "generation": self.generation, "kind": self.kind}
        if self.weights is not None:
            out.update(self.weights.to_dict())
        else:
            out["pools"] = dict(self.pools or {})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> UpdateRecord:
        """Inverse of :meth:`to_dict`."""
        data = dict(data)
        kind = data.pop("kind", None)
        index, generation = data.pop("index", None), data.pop("generation", None)
        if kind == "weights":
            return cls(cast(int, index), cast(int, generation), weights=WeightUpdate.from_dict(data))
        if kind == "pools" and set(data) == {"pools"}:
            return cls(cast(int, index), cast(int, generation), pools=data["pools"])
        raise SpecError(f"an update record is a 'weights' record (seeds, coeffs) or a 'pools' record, got "
                        f"kind={kind!r} with keys {sorted(data)}")
