"""The co-evolution search distribution: an implicit Gaussian over the weights times one categorical per
prompt slot.

The weight part is ``N(theta_t, sigma_t^2 I)``. Its centre ``theta_t`` lives in the workers' model replicas,
never here: the distribution holds the sigma schedule, the generation counter and a base seed, and emits
weight updates as ``(seed, coeff)`` lists (``theta += sum_j coeff_j * eps(seed_j)``, ``docs/CONTRACTS.md``).
The prompt part is one categorical per slot over that slot's variant pool.

Sampling yields the candidate rows of :mod:`es_agent.rows` (float64, ``(N, 3 + n_slots)``): noise seed, signed
sigma, env seed, prompt ids. Seeds come from an explicit generator, by default derived from
``(base_seed, generation)``, so a generation's population is reproducible from the checkpoint alone.
Antithetic pairs (adjacent rows, ``+sigma_t`` then ``-sigma_t`` on one seed) share their prompt ids, so a pair
isolates the weight direction; all rows of a generation share one env seed (common random numbers).

One set of shaped weights ``w`` (:mod:`cotrain.shaping`) drives both parts, each an online reward-weighted
mean. Let ``c = w - mean(w)`` (a no-op for centred ranks and z-scores):

* weights: ``theta += lr * sum_i (c_i / D) * sigma_i * eps(seed_i)``, ``sigma_i = s_i * sigma_t`` being the
  row's signed sigma (the DESIGN formula ``eta * sigma_t * sum_i w_i s_i eps_i`` with ``w_i = c_i / D``).
  With ``weight_normalisation="total_weight"`` (default) ``D = sum_i |c_i|``: the step is ``lr / 2`` times
  the difference between the weighted mean of the better-than-average candidates and that of the worse ones
  (``lr = 1`` on a single antithetic pair moves the centre onto its better member), whatever the population
  size and the scale of the weights. With ``"population"``, ``D = N`` (OpenAI-ES, "ES at scale"). Rows that
  share a seed merge into one coefficient (an antithetic pair: ``lr * sigma_t * (c_plus - c_minus) / D``);
  zero coefficients are dropped.
* prompts, per slot: ``p <- (1 - alpha) * p + alpha * share``, where ``share(v)`` is the fraction of the
  non-negative part of ``c`` held by the candidates that used variant ``v``: only better-than-average
  candidates vote, in proportion to their margin (with 0/1 rewards and ``raw`` shaping, this is the plain
  success-weighted share). Then every probability is lifted to at least ``prob_floor`` (the others rescaled),
  so no variant dies.

Anchored draws (``anchor_pairs = k``): the first ``k`` draws of a generation take the most probable genome
instead of a sampled one (the random stream is unchanged, so the other draws are what they would have been).
Every generation then scores the incumbent genome beside sampled challengers on the same tasks, and ``k`` of
its weight directions are scored under the genome the centre is evaluated with.

When all weights are zero (all rewards equal) neither part changes and the weight update is empty; the
generation counter still advances, so the next generation draws fresh seeds instead of re-evaluating the same
population.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from evotorch.distributions import Distribution

from cotrain.config import OMIT_WHEN_DEFAULT
from cotrain.distribution_config import CoEvolutionConfig, draws_per_generation
from cotrain.errors import DistributionError
from cotrain.schedule import cosine_sigma
from cotrain.shaping import ShapingConfig, as_reward_matrix, shape_fitness
from es_agent.rows import FIXED_COLUMNS, SEED_BOUND, check_rows
from es_agent.updates import WeightUpdate

SERIAL_FORMAT = "cotrain.CoEvolutionDistribution/1"
"""Tag of :meth:`CoEvolutionDistribution.to_dict` payloads."""

_CONFIG_FIELDS = tuple(f.name for f in fields(CoEvolutionConfig))
_OMITTED_AT_DEFAULT = {f.name: f.default for f in fields(CoEvolutionConfig)
                       if f.metadata.get(OMIT_WHEN_DEFAULT)}
"""Fields added after runs were logged: left out of :meth:`CoEvolutionDistribution.to_dict` at their default,
so the logs of earlier runs stay what they were."""


@dataclass(frozen=True)
class DistributionStep:
    """One update of the distribution (:meth:`CoEvolutionDistribution.step`)."""

    distribution: CoEvolutionDistribution
    """The next generation's distribution."""
    update: WeightUpdate
    """The weight update to apply to every replica (may be empty)."""
    shaped_weights: torch.Tensor
    """One shaped weight per candidate (float64), all 0 when the fitnesses tie."""
    empty_reason: str | None
    """Why :attr:`update` is empty (``None`` when it is not)."""


def project_to_floor(probs: torch.Tensor | Sequence[float], floor: float) -> torch.Tensor:
    """Renormalise ``probs`` and lift each entry to at least ``floor``, rescaling the others (sum stays 1)."""
    p = torch.as_tensor(probs, dtype=torch.float64).detach().cpu().clone().reshape(-1)
    k = p.numel()
    if k < 1 or not torch.isfinite(p).all() or (p < 0).any() or float(p.sum()) <= 0:
        raise DistributionError(
            f"probabilities must be finite, non-negative and not all zero, got {p.tolist()}"
        )
    if k * floor > 1 + 1e-12:
        raise DistributionError(f"prob_floor={floor} is infeasible for {k} variants (needs {k} * floor <= 1)")
    if k * floor >= 1 - 1e-12:
        return torch.full((k,), 1.0 / k, dtype=torch.float64)
    p = p / p.sum()
    pinned = torch.zeros(k, dtype=torch.bool)
    while True:
        free = ~pinned
        free_mass = 1.0 - floor * int(pinned.sum())
        # Entries pinned in a pass had q < floor, so the free ones always keep a positive mass.
        q = p[free] / p[free].sum() * free_mass
        low = q < floor
        if not low.any():
            out = torch.full((k,), float(floor), dtype=torch.float64)
            out[free] = q
            return out
        pinned[torch.nonzero(free).reshape(-1)[low]] = True


def baseline_prior_probs(pool_sizes: Sequence[int], baseline_ids: Sequence[int],
                         weight: float) -> list[torch.Tensor]:
    """Per slot ``weight * onehot(baseline_ids[slot]) + (1 - weight) * uniform`` (before the floor): the
    generation-0 categoricals that put mass on the baseline genome. ``weight = 0`` is exactly uniform."""
    sizes, ids = [int(k) for k in pool_sizes], [int(i) for i in baseline_ids]
    if len(ids) != len(sizes):
        raise DistributionError(f"baseline_ids {ids} name {len(ids)} slot(s), the pools have {len(sizes)}")
    bad = [(slot, i) for slot, (i, k) in enumerate(zip(ids, sizes, strict=True)) if not 0 <= i < k]
    if bad:
        raise DistributionError(f"baseline_ids {ids}: (slot, id) {bad} outside the pool sizes {sizes}")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 <= weight <= 1:
        raise DistributionError(f"baseline_prior must lie in [0, 1], got {weight!r}")
    probs = []
    for i, k in zip(ids, sizes, strict=True):
        p = torch.full((k,), (1.0 - weight) / k, dtype=torch.float64)
        p[i] += weight
        probs.append(p)
    return probs


def _resolve_generator(generator: Any) -> torch.Generator | None:
    if generator is None or isinstance(generator, torch.Generator):
        return generator
    # EvoTorch's convention: any object with a `generator` attribute (a Problem) stands for its generator.
    inner = getattr(generator, "generator", None)
    if isinstance(inner, torch.Generator):
        return inner
    raise TypeError(
        f"expected a torch.Generator or an object with a `generator` attribute, got {type(generator)}"
    )


class CoEvolutionDistribution(Distribution):
    """Implicit ``N(theta_t, sigma_t^2 I)`` over weights times one categorical per prompt slot.

    Build one with :meth:`create`; EvoTorch's constructor form ``CoEvolutionDistribution(parameters)`` is what
    :meth:`modified_copy` and :meth:`to` use. Updates return new objects. Samples are candidate rows
    (``es_agent.rows``), so ``solution_length = 3 + n_slots`` and the dtype is always float64.
    """

    MANDATORY_PARAMETERS = {"sigma_0", "prompt_probs", "base_seed"}
    OPTIONAL_PARAMETERS = {name for name in _CONFIG_FIELDS if name != "sigma_0"} | {"generation"}
    PARAMETER_NDIMS: dict[str, int] = {}

    def __init__(
        self,
        parameters: dict,
        *,
        solution_length: int | None = None,
        dtype: Any = None,
        device: Any = None,
    ) -> None:
        unknown = set(parameters) - self.MANDATORY_PARAMETERS - self.OPTIONAL_PARAMETERS
        missing = self.MANDATORY_PARAMETERS - set(parameters)
        if unknown or missing:
            raise DistributionError(
                f"CoEvolutionDistribution parameters: unknown {sorted(unknown)}, missing {sorted(missing)};"
                f" mandatory {sorted(self.MANDATORY_PARAMETERS)}, optional {sorted(self.OPTIONAL_PARAMETERS)}"
            )
        if dtype is not None and _torch_dtype(dtype) != torch.float64:
            raise DistributionError(
                f"candidate rows are float64 (exact seeds); dtype {dtype} is not supported"
            )
        config = CoEvolutionConfig(
            **{name: _plain(parameters[name]) for name in _CONFIG_FIELDS if name in parameters}
        )
        generation = _non_negative_int("generation", parameters.get("generation", 0))
        base_seed = _non_negative_int("base_seed", parameters["base_seed"])
        probs = self._checked_probs(parameters["prompt_probs"], config.prob_floor)
        if device is None:
            device = probs[0].device if probs else torch.device("cpu")
        n_columns = FIXED_COLUMNS + len(probs)
        if solution_length is not None and int(solution_length) != n_columns:
            raise DistributionError(
                f"solution_length={solution_length} but {len(probs)} slots need {n_columns} columns"
            )
        normalised = {
            **asdict(config),
            "generation": generation,
            "base_seed": base_seed,
            "prompt_probs": probs,
        }
        super().__init__(solution_length=n_columns, parameters=normalised, dtype=torch.float64, device=device)

    @staticmethod
    def _checked_probs(raw: Any, floor: float) -> tuple[torch.Tensor, ...]:
        out = []
        for slot, values in enumerate(raw):
            p = torch.as_tensor(values, dtype=torch.float64).detach().clone()
            if p.ndim != 1 or p.numel() < 1:
                raise DistributionError(
                    f"prompt_probs[{slot}] must be a non-empty 1-D vector, got shape {tuple(p.shape)}"
                )
            if not torch.isfinite(p).all() or (p < 0).any() or abs(float(p.sum()) - 1.0) > 1e-6:
                raise DistributionError(
                    f"prompt_probs[{slot}] must be a probability vector, got {p.tolist()}"
                )
            if float(p.min()) < floor or abs(float(p.sum()) - 1.0) > 1e-12:
                p = project_to_floor(p, floor).to(p.device)
            out.append(p)
        return tuple(out)

    # ----- construction -------------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        pool_sizes: Sequence[int],
        *,
        base_seed: int,
        config: CoEvolutionConfig | None = None,
        initial_probs: Sequence[Sequence[float]] | None = None,
        baseline_ids: Sequence[int] | None = None,
    ) -> CoEvolutionDistribution:
        """A generation-0 distribution over ``len(pool_sizes)`` slots: ``initial_probs`` when given, else
        the baseline prior (:func:`baseline_prior_probs` with ``config.baseline_prior``) around
        ``baseline_ids`` (the baseline genome's variant index per slot) when given, else uniform."""
        config = config or CoEvolutionConfig()
        sizes = [int(k) for k in pool_sizes]
        if any(k < 1 for k in sizes):
            raise DistributionError(f"every prompt pool needs at least one variant, got sizes {sizes}")
        if initial_probs is not None and baseline_ids is not None:
            raise DistributionError("give initial_probs or baseline_ids, not both")
        if baseline_ids is not None:
            probs = baseline_prior_probs(sizes, baseline_ids, config.baseline_prior)
        elif initial_probs is None:
            probs = [torch.full((k,), 1.0 / k, dtype=torch.float64) for k in sizes]
        else:
            probs = [torch.as_tensor(p, dtype=torch.float64) for p in initial_probs]
            if [p.numel() for p in probs] != sizes:
                raise DistributionError(
                    f"initial_probs sizes {[p.numel() for p in probs]} != pool_sizes {sizes}"
                )
        probs = [project_to_floor(p, config.prob_floor) for p in probs]
        return cls({**asdict(config), "prompt_probs": tuple(probs), "base_seed": base_seed, "generation": 0})

    # ----- state --------------------------------------------------------------------------------------------

    @property
    def config(self) -> CoEvolutionConfig:
        """The hyperparameters, as a typed config."""
        return CoEvolutionConfig(**{name: self.parameters[name] for name in _CONFIG_FIELDS})

    @property
    def generation(self) -> int:
        """Number of updates so far (0-based index of the generation the next sample belongs to)."""
        return int(self.parameters["generation"])

    @property
    def base_seed(self) -> int:
        """Root of every seed the distribution draws."""
        return int(self.parameters["base_seed"])

    @property
    def prompt_probs(self) -> tuple[torch.Tensor, ...]:
        """One probability vector per prompt slot (copies)."""
        return tuple(p.clone() for p in self.parameters["prompt_probs"])

    @property
    def n_slots(self) -> int:
        """Number of prompt slots."""
        return len(self.parameters["prompt_probs"])

    @property
    def pool_sizes(self) -> tuple[int, ...]:
        """Number of variants in each slot's pool."""
        return tuple(int(p.numel()) for p in self.parameters["prompt_probs"])

    def sigma_at(self, generation: int) -> float:
        """The cosine schedule's sigma at ``generation``."""
        p = self.parameters
        return cosine_sigma(int(generation), p["total_generations"], p["sigma_0"], p["sigma_min"])

    @property
    def sigma(self) -> float:
        """The |sigma| the rows of the current generation carry (0 when weights are not evolved)."""
        return self.sigma_at(self.generation) if self.parameters["evolve_weights"] else 0.0

    def most_probable_prompt_ids(self) -> tuple[int, ...]:
        """Per slot, the variant of highest probability (lowest index among ties)."""
        return tuple(int(torch.argmax(p.cpu())) for p in self.parameters["prompt_probs"])

    def generation_seed(self, generation: int | None = None) -> int:
        """Seed of the sampling generator of ``generation`` (default: the current one), from the base seed."""
        gen = self.generation if generation is None else _non_negative_int("generation", generation)
        state = np.random.SeedSequence([self.base_seed, gen]).generate_state(2, dtype=np.uint32)
        return (int(state[0]) << 32 | int(state[1])) % 2**63

    def make_generator(self, generation: int | None = None) -> torch.Generator:
        """A fresh CPU generator seeded with :meth:`generation_seed`."""
        return torch.Generator().manual_seed(self.generation_seed(generation))

    # ----- sampling -----------------------------------------------------------------------------------------

    def sample_rows(self, num: int, generator: Any = None) -> torch.Tensor:
        """``num`` candidate rows, float64 ``(num, 3 + n_slots)`` (:meth:`sample_into` a new tensor).

        ``generator`` defaults to :meth:`make_generator` (reproducible from the checkpoint); a torch generator
        or an object with a ``generator`` attribute (EvoTorch's convention) may be given instead.
        """
        rows = torch.empty((int(num), self.solution_length), dtype=torch.float64, device=self.device)
        self.sample_into(rows, generator)
        return rows

    def sample_into(self, out: torch.Tensor, generator: Any = None) -> int:
        """Write ``len(out)`` candidate rows into ``out`` (float64 ``(N, 3 + n_slots)``, e.g. a population's
        ``batch.access_values()``) and return the generation's env seed, the first draw of the generator
        (written into every row's env-seed column: common random numbers). ``generator`` as in
        :meth:`sample_rows`."""
        if out.ndim != 2 or tuple(out.shape[1:]) != (self.solution_length,) or out.dtype != torch.float64:
            raise DistributionError(f"rows go into a float64 (N, {self.solution_length}) tensor, got "
                                    f"{out.dtype} {tuple(out.shape)}")
        num = int(out.shape[0])
        p = self.parameters
        paired = p["evolve_weights"] and p["antithetic"]
        if num < 1 or (paired and num % 2):
            raise DistributionError(
                f"population size must be >= 1{' and even (antithetic pairs)' if paired else ''}, got {num}"
            )
        gen = _resolve_generator(generator) or self.make_generator()
        env_seed = int(torch.randint(0, SEED_BOUND, (1,), generator=gen))
        n_draws = draws_per_generation(num, antithetic=p["antithetic"], evolve_weights=p["evolve_weights"])
        if p["evolve_weights"]:
            seeds = torch.randint(0, SEED_BOUND, (n_draws,), generator=gen, dtype=torch.int64)
            signs = torch.ones(n_draws, dtype=torch.float64)
        else:
            seeds = torch.zeros(n_draws, dtype=torch.int64)
            signs = torch.zeros(n_draws, dtype=torch.float64)
        if p["evolve_prompts"]:
            ids = [
                torch.multinomial(q.cpu(), n_draws, replacement=True, generator=gen)
                for q in p["prompt_probs"]
            ]
        else:
            ids = [torch.full((n_draws,), i, dtype=torch.int64) for i in self.most_probable_prompt_ids()]
        anchors = int(p.get("anchor_pairs", 0)) if p["evolve_prompts"] else 0
        if anchors:
            if anchors >= n_draws:
                raise DistributionError(
                    f"anchor_pairs={anchors} leaves no sampled genome among the {n_draws} draws of a "
                    f"population of {num}: anchor fewer draws or grow the population")
            for slot_ids, best in zip(ids, self.most_probable_prompt_ids(), strict=True):
                slot_ids[:anchors] = best
        if paired:
            seeds = seeds.repeat_interleave(2)
            signs = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(n_draws)
            ids = [i.repeat_interleave(2) for i in ids]
        rows = torch.empty((num, self.solution_length), dtype=torch.float64)
        rows[:, 0] = seeds.to(torch.float64)
        rows[:, 1] = signs * self.sigma
        rows[:, 2] = float(env_seed)
        for slot, slot_ids in enumerate(ids):
            rows[:, FIXED_COLUMNS + slot] = slot_ids.to(torch.float64)
        out[:] = rows.to(out.device)
        return env_seed

    def _fill(self, out: torch.Tensor, *, generator: Any = None) -> None:
        self.sample_into(out, generator)

    @classmethod
    def functional_sample(cls, num_solutions: int, parameters: dict) -> torch.Tensor:
        """Sample rows from a parameter dict without keeping the distribution (EvoTorch's functional API)."""
        return cls(parameters).sample_rows(num_solutions)

    # ----- update -------------------------------------------------------------------------------------------

    def update(
        self,
        rows: torch.Tensor,
        rewards: torch.Tensor | Sequence[Sequence[float]],
        shaping: ShapingConfig | None = None,
        confidences: torch.Tensor | Sequence[Sequence[float]] | None = None,
        credits: torch.Tensor | Sequence[Sequence[float]] | None = None,
    ) -> tuple[CoEvolutionDistribution, WeightUpdate]:
        """Shape ``rewards`` ``(n, n_tasks)`` of the sampled ``rows`` and return the next distribution and the
        weight update (empty when all rewards are equal or weights are not evolved). ``confidences``: the
        episodes' confidences, which ``shaping.confidence_tiebreak`` needs; ``credits``: their reference
        credits, which ``shaping.reference_credit`` needs (:mod:`cotrain.shaping`)."""
        step = self.step(rows, rewards, shaping, confidences, credits)
        return step.distribution, step.update

    def step(
        self,
        rows: torch.Tensor,
        rewards: torch.Tensor | Sequence[Sequence[float]],
        shaping: ShapingConfig | None = None,
        confidences: torch.Tensor | Sequence[Sequence[float]] | None = None,
        credits: torch.Tensor | Sequence[Sequence[float]] | None = None,
    ) -> DistributionStep:
        """:meth:`update` with what it was computed from: the shaped weights, and why the weight update is
        empty when it is (:class:`DistributionStep`)."""
        shaping = shaping or ShapingConfig()
        matrix = as_reward_matrix(rewards)
        if matrix.shape[0] != rows.shape[0]:
            raise DistributionError(f"{rows.shape[0]} rows but rewards for {matrix.shape[0]} candidates")
        weights = shape_fitness(matrix, shaping, confidences, credits)
        gradients = self._compute_gradients(rows, weights, shaping.method)
        update = self.weight_update_from(gradients)
        reason = None
        if update.is_empty:
            if not self.parameters["evolve_weights"]:
                reason = "weights are not evolved (evolve_weights = false)"
            elif not bool((weights != 0).any()):
                extra = [name for name, on in (("confidences", shaping.confidence_tiebreak),
                                               ("reference credits", shaping.reference_credit)) if on]
                reason = ("every candidate's fitness ties: the shaped weights are all 0 (no signal)"
                          if not extra else
                          f"every candidate's fitness ties, {' and '.join(extra)} included: the shaped "
                          f"weights are all 0")
            else:
                reason = "the coefficients of every seed cancel out"
        return DistributionStep(self.update_parameters(gradients), update, weights, reason)

    def _split_rows(self, rows: torch.Tensor) -> tuple[list[int], torch.Tensor, torch.Tensor]:
        """Seeds, signed sigmas and prompt ids of rows checked by :func:`es_agent.rows.check_rows`."""
        checked = check_rows(rows, self.pool_sizes)
        seeds = [r.noise_seed for r in checked]
        sigmas = torch.tensor([r.sigma for r in checked], dtype=torch.float64)
        ids = torch.tensor([r.prompt_ids for r in checked], dtype=torch.int64)
        ids = ids.reshape(len(checked), self.n_slots)
        return seeds, sigmas, ids

    def _compute_gradients(
        self, samples: torch.Tensor, weights: torch.Tensor, ranking_used: str | None
    ) -> dict:
        """The update directions of both parts from rows ``samples`` and shaped ``weights`` (higher = better).

        Returns ``weight_seeds`` (int64) and ``weight_coeffs`` (float64, the final coefficients: learning rate
        and sigma included; empty when there is nothing to apply) and ``prompt_shares`` (per slot, each
        variant's share of the non-negative part of the centred weights; ``()`` when prompts do not move).
        """
        seeds, signed_sigmas, ids = self._split_rows(samples)
        w = torch.as_tensor(weights, dtype=torch.float64).detach().cpu().reshape(-1)
        if w.numel() != len(seeds):
            raise DistributionError(f"{len(seeds)} rows but {w.numel()} weights")
        if not torch.isfinite(w).all():
            raise DistributionError("weights contain NaN or inf")
        p = self.parameters
        coeff_by_seed: dict[int, float] = {}
        centred = w - w.mean()
        denom = (
            float(centred.abs().sum()) if p["weight_normalisation"] == "total_weight" else float(w.numel())
        )
        if p["evolve_weights"] and denom > 0 and bool((centred != 0).any()):
            per_row = p["learning_rate"] * signed_sigmas * centred / denom
            for seed, coeff in zip(seeds, per_row.tolist(), strict=True):
                coeff_by_seed[seed] = coeff_by_seed.get(seed, 0.0) + coeff
        kept = [(s, c) for s, c in coeff_by_seed.items() if c != 0.0]
        shares: tuple[torch.Tensor, ...] = ()
        positive = centred.clamp(min=0.0)
        if p["evolve_prompts"] and self.n_slots and float(positive.sum()) > 0:
            mass = positive / positive.sum()
            shares = tuple(
                torch.zeros(size, dtype=torch.float64).index_add_(0, ids[:, slot], mass)
                for slot, size in enumerate(self.pool_sizes)
            )
        return {
            "weight_seeds": torch.tensor([s for s, _ in kept], dtype=torch.int64),
            "weight_coeffs": torch.tensor([c for _, c in kept], dtype=torch.float64),
            "prompt_shares": shares,
        }

    @staticmethod
    def weight_update_from(gradients: dict) -> WeightUpdate:
        """The ``(seed, coeff)`` list held in a :meth:`_compute_gradients` result."""
        seeds = tuple(int(s) for s in gradients["weight_seeds"].tolist())
        return WeightUpdate(seeds, tuple(float(c) for c in gradients["weight_coeffs"].tolist()))

    def update_parameters(
        self, gradients: dict, *, learning_rates: dict | None = None, optimizers: dict | None = None
    ) -> CoEvolutionDistribution:
        """The next generation's distribution: categoricals mixed towards ``prompt_shares`` (at the rate
        ``learning_rates["prompt_probs"]``, default ``prompt_learning_rate``), floor applied, generation + 1.
        The weight part lives in the workers: apply ``weight_update_from(gradients)`` there."""
        if optimizers:
            raise DistributionError(
                "CoEvolutionDistribution takes no optimizers: its weight step is a (seed, coeff) list"
            )
        alpha = float((learning_rates or {}).get("prompt_probs", self.parameters["prompt_learning_rate"]))
        if not 0 <= alpha <= 1:
            raise DistributionError(f"prompt learning rate must lie in [0, 1], got {alpha}")
        probs = self.parameters["prompt_probs"]
        shares = gradients.get("prompt_shares", ())
        if shares:
            if len(shares) != len(probs):
                raise DistributionError(f"{len(shares)} prompt shares for {len(probs)} slots")
            floor = self.parameters["prob_floor"]
            probs = tuple(
                project_to_floor((1 - alpha) * q.cpu() + alpha * s.cpu(), floor).to(q.device)
                for q, s in zip(probs, shares, strict=True)
            )
        return self.modified_copy(prompt_probs=probs, generation=self.generation + 1)

    # ----- pool changes -------------------------------------------------------------------------------------

    def with_added_variant(self, slot: int, mass: float) -> CoEvolutionDistribution:
        """A copy whose ``slot`` pool gains a last variant of probability ``mass`` (others times 1 - mass)."""
        probs = list(self.parameters["prompt_probs"])
        slot = self._checked_slot(slot)
        if not 0 < mass < 1:
            raise DistributionError(f"mass of a new variant must lie in (0, 1), got {mass}")
        old = probs[slot].cpu()
        grown = torch.cat([(1 - mass) * old, torch.tensor([float(mass)], dtype=torch.float64)])
        probs[slot] = project_to_floor(grown, self.parameters["prob_floor"]).to(probs[slot].device)
        return self.modified_copy(prompt_probs=tuple(probs))

    def with_removed_variant(self, slot: int, idx: int) -> CoEvolutionDistribution:
        """A copy without variant ``idx`` of ``slot`` (later ids shift down by one), renormalised."""
        probs = list(self.parameters["prompt_probs"])
        slot = self._checked_slot(slot)
        size = probs[slot].numel()
        if size < 2:
            raise DistributionError(f"slot {slot} has a single variant: a pool cannot become empty")
        if not 0 <= idx < size:
            raise DistributionError(f"variant {idx} out of range for slot {slot} (size {size})")
        if not self.parameters["evolve_prompts"] and idx == self.most_probable_prompt_ids()[slot]:
            raise DistributionError(
                f"prompts are frozen (evolve_prompts=False): variant {idx} of slot {slot} is in use"
            )
        kept = torch.cat([probs[slot][:idx], probs[slot][idx + 1 :]]).cpu()
        probs[slot] = project_to_floor(kept, self.parameters["prob_floor"]).to(probs[slot].device)
        return self.modified_copy(prompt_probs=tuple(probs))

    def _checked_slot(self, slot: int) -> int:
        if not 0 <= int(slot) < self.n_slots:
            raise DistributionError(f"slot {slot} out of range: the distribution has {self.n_slots} slots")
        return int(slot)

    # ----- checkpoints --------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe state (plain numbers, lists and strings; floats round-trip exactly through ``json``)."""
        p = self.parameters
        params: dict[str, Any] = {name: p[name] for name in _CONFIG_FIELDS
                                  if name not in _OMITTED_AT_DEFAULT or p[name] != _OMITTED_AT_DEFAULT[name]}
        params.update(
            generation=self.generation,
            base_seed=self.base_seed,
            prompt_probs=[q.cpu().tolist() for q in p["prompt_probs"]],
        )
        return {"format": SERIAL_FORMAT, "parameters": params}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CoEvolutionDistribution:
        """Inverse of :meth:`to_dict`."""
        if data.get("format") != SERIAL_FORMAT:
            raise DistributionError(f"expected format {SERIAL_FORMAT!r}, got {data.get('format')!r}")
        return cls(dict(data["parameters"]))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(generation={self.generation}, sigma={self.sigma:.3g},"
            f" pool_sizes={self.pool_sizes}, base_seed={self.base_seed})"
        )


def _plain(value: Any) -> Any:
    """A 0-d tensor or numpy scalar as a Python number; anything else unchanged."""
    if isinstance(value, (torch.Tensor, np.generic)):
        return value.item()
    return value


def _non_negative_int(name: str, value: Any) -> int:
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise DistributionError(f"{name} must be an int in [0, 2**63), got {value!r}")
    return value


def _torch_dtype(dtype: Any) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (float, "float64", "double", np.float64):
        return torch.float64
    raise DistributionError(f"candidate rows are float64 (exact seeds); dtype {dtype!r} is not supported")
